"""Initial states of the chains: parsed from ``init=``, drawn, checked.

``init`` is ``"uniform"`` (uniform on ``[-radius, radius]`` in the
unconstrained space, as Stan), ``"prior"`` (prior draws), a dict of
constrained values by latent name (broadcast over chains) or an array
``[chains, D]`` of unconstrained states.  Drawn starts whose log density is
not finite are redrawn, up to ``max_tries`` times; given ones are checked.
"""

import hashlib

import numpy as np
import tensorflow as tf

from edward_lite import nonfinite

__all__ = ["initial_state", "describe_init"]


def _latent_of_column(target, column):
  """The latent whose unconstrained coordinates hold flat column ``column``."""
  for name, info in target.latents.items():
    column -= info.unconstrained_shape.num_elements()
    if column < 0:
      return name
  return "?"


def describe_init(init):
  if isinstance(init, str):
    return init
  if isinstance(init, dict):
    return {k: np.asarray(v).tolist() for k, v in init.items()}
  return hashlib.sha1(np.ascontiguousarray(init).tobytes()).hexdigest()


def initial_state(program, init, chains, seed, radius, max_tries):
  """Initial unconstrained states ``[C, D]`` with finite log density."""
  target = program.target
  dtype = target.dtype.as_numpy_dtype
  if isinstance(init, str):
    if init not in ("uniform", "prior"):
      raise ValueError(f"init must be 'uniform', 'prior', a dict of constrained values or an "
                       f"array [chains, {target.dim}]; got {init!r}.")
    flat = [n for n, i in target.latents.items() if i.distribution == "ImproperUniform"]
    if init == "prior" and flat:
      raise NotImplementedError(f"init='prior' cannot draw {flat}: an improper flat prior "
                                "(ed.Flat) has no draws; use init='uniform' or give init= values.")
    u = None
  elif isinstance(init, dict):
    unknown = [k for k in init if k not in target.names]
    if unknown:
      raise ValueError(f"init names {unknown} are not latent variables; the latents are "
                       f"{list(target.names)}.")
    values = {}
    for name, info in target.latents.items():
      if name not in init:
        raise ValueError(f"init is missing latent variable '{name}'.")
      try:
        value = np.asarray(init[name], dtype)
      except (TypeError, ValueError) as e:
        raise ValueError(f"init value for '{name}' is not a number or an array of numbers: "
                         f"{init[name]!r}.") from e
      try:
        values[name] = np.broadcast_to(value, (chains,) + tuple(info.shape)).copy()
      except ValueError as e:
        raise ValueError(f"init value for '{name}' has shape {value.shape}; expected "
                         f"{info.shape.as_list()} or [{chains}] + that.") from e
    u = target.flatten(target.unconstrain(values)).numpy()
    if not np.all(np.isfinite(u)):
      bad = [n for n, v in target.unconstrain(values).items() if not np.all(np.isfinite(v))]
      raise ValueError(f"init values for {bad} are outside the support of their distributions.")
  else:
    u = np.asarray(init, dtype)
    if u.shape != (chains, target.dim):
      raise ValueError(f"An init array must have shape [chains, D] = [{chains}, {target.dim}]; "
                       f"got {list(u.shape)}.")
    if not np.all(np.isfinite(u)):
      chain, column = (int(i) for i in np.argwhere(~np.isfinite(u))[0])
      raise ValueError(f"The init array holds {int(np.sum(~np.isfinite(u)))} NaN or infinite "
                       f"value(s), the first for chain {chain}, latent "
                       f"'{_latent_of_column(target, column)}'.")
  if u is not None:  # user values: checked, never redrawn
    bad = ~np.isfinite(program.log_prob(tf.constant(u)).numpy())
    max_tries = 1
  else:
    radius = tf.constant(radius, target.dtype)
    for attempt in range(max_tries):
      draw, lp = (t.numpy() for t in program.draw_initial(init, chains, seed, radius,
                                                           tf.constant(attempt)))
      u = draw if attempt == 0 else np.where(bad[:, None], draw, u)
      bad = ~np.isfinite(lp) if attempt == 0 else bad & ~np.isfinite(lp)
      if not bad.any():
        break
  if not bad.any():
    return u
  # Which term is not finite, and why (shared with ed.vi.fit's diagnosis).
  reason = nonfinite.explain(getattr(target, "base", target), u[bad], "initial points")
  tried = "at the given init values" if max_tries == 1 and not isinstance(init, str) else (
      f"after {max_tries} tries")
  raise ValueError(
      f"{int(bad.sum())} of {chains} chains have a non-finite initial log density {tried}"
      + (f": {reason[0].lower()}{reason[1:]}" if reason else ".")
      + " Check the model's support and data, or pass init= values inside the support.")
