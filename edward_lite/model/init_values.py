"""The ``init=`` argument of ``ed.mcmc.sample`` and ``ed.vi.fit``, parsed once.

``init`` is ``"uniform"`` (uniform on ``[-init_radius, init_radius]`` in the
unconstrained space, as Stan), ``"prior"`` (prior draws), a dict of
constrained values by latent name (for a latent ``x_noncentred`` of
``ed.reparameterize``, the value of the original ``x`` may be given
instead), or (for MCMC) an array ``[chains, D]`` of
unconstrained states.  A dict may name some of the latents (as NumPyro's
``init_to_value`` and Stan's partial inits): the others start by the
uniform rule (``PartialInit``, ``complete``).  Drawing is the caller's: MCMC
draws one start per chain and redraws non-finite ones, VI one location.
"""

import hashlib
from typing import Dict, NamedTuple

import numpy as np
import tensorflow as tf

from edward_lite.model.interpreter import Mode
from edward_lite.checks.continuous_support import support_text

__all__ = ["parse_init", "check_init", "describe_init", "latent_of_column", "PartialInit", "complete"]

MODES = ("uniform", "prior")


class PartialInit(NamedTuple):
  """A dict ``init=`` naming some latents: their constrained values, each
  ``[C, *shape]``; the others are drawn by ``mode``."""
  values: Dict[str, np.ndarray]
  mode: str = "uniform"


def parse_init(target, init, chains, allow_array=True, modes=MODES):
  """Checks ``init`` against ``target``.

  Args:
    target: the model's ``Target``.
    init: the user's ``init=``.
    chains: ``C``, the number of starting points wanted.
    allow_array: whether an unconstrained ``[C, D]`` array is accepted.
    modes: the strings accepted (``ed.vi.fit`` adds ``"auto"``).

  Returns:
    The mode (one of ``modes``), to be drawn by the caller; the
    given starting points, unconstrained ``[C, D]`` NumPy in the target's
    dtype (every value finite); or, for a dict naming some latents only, a
    ``PartialInit`` (``complete`` makes starting points of it).

  Raises:
    ValueError (NotImplementedError for ``"prior"`` with a flat prior), one
    sentence naming the latent and what was expected.
  """
  dtype = target.dtype.as_numpy_dtype
  if isinstance(init, str):
    if init not in modes:
      array = f" or an array [chains, {target.dim}]" if allow_array else ""
      raise ValueError(f"init must be {', '.join(repr(m) for m in modes)}, a dict of "
                       f"constrained values{array}; got {init!r}.")
    flat = [n for n, i in target.latents.items() if i.distribution == "ImproperUniform"]
    if init == "prior" and flat:
      raise NotImplementedError(f"init='prior' cannot draw {flat}: an improper flat prior "
                                "(ed.Flat) has no draws; use init='uniform' or give init= values.")
    return init
  if isinstance(init, dict):
    return _from_values(target, init, chains, dtype)
  if not allow_array:
    raise TypeError(f"init must be a string or a dict; got {type(init).__name__}.")
  u = np.asarray(init, dtype)
  if u.shape != (chains, target.dim):
    raise ValueError(f"An init array must have shape [chains, D] = [{chains}, {target.dim}]; "
                     f"got {list(u.shape)}.")
  if not np.all(np.isfinite(u)):
    chain, column = (int(i) for i in np.argwhere(~np.isfinite(u))[0])
    raise ValueError(f"The init array holds {int(np.sum(~np.isfinite(u)))} NaN or infinite "
                     f"value(s), the first for chain {chain}, latent "
                     f"'{latent_of_column(target, column)}'.")
  return u


def check_init(target, init, chains):
  """Raises the errors ``parse_init`` and, for values given for some
  latents, their support check would raise, without drawing anything (the
  other latents at unconstrained 0, inside any support): run before a
  sampler's compile, so an error in ``init=`` does not wait for it."""
  u = parse_init(target, init, chains)
  if isinstance(u, PartialInit):
    complete(target, u, np.zeros((chains, target.dim), target.dtype.as_numpy_dtype))


def _from_values(target, init, chains, dtype):
  """Unconstrained ``[C, D]`` from a dict of constrained values (each of
  the latent's shape, or ``[C]`` + it).  A latent ``x_noncentred`` of
  ``ed.reparameterize`` may be given by its original name ``x``
  (``_originals``), mapped once the other latents' values are known."""
  originals = _originals(target)
  both = [x for x in init if x in originals and originals[x] in init]
  if both:
    raise ValueError(f"init names both '{both[0]}' and '{originals[both[0]]}', the same "
                     f"latent in its original and its non-centred coordinates; give one.")
  unknown = [k for k in init if k not in target.names and k not in originals]
  if unknown:
    also = (f" (or, for {list(originals.values())}, their original names "
            f"{list(originals)})" if originals else "")
    raise ValueError(f"init names {unknown} are not latent variables; the latents are "
                     f"{list(target.names)}{also}.")
  by_latent = {n: x for x, n in originals.items() if x in init}  # latent -> name given
  values = {}
  for name, info in target.latents.items():
    key = by_latent.get(name, name)
    if key not in init:
      continue
    try:
      value = np.asarray(init[key], dtype)
    except (TypeError, ValueError) as e:
      raise ValueError(f"init value for '{key}' is not a number or an array of numbers: "
                       f"{init[key]!r}.") from e
    try:
      values[key] = np.broadcast_to(value, (chains,) + tuple(info.shape)).copy()
    except ValueError as e:
      raise ValueError(f"init value for '{key}' has shape {value.shape}; expected "
                       f"{info.shape.as_list()} or [{chains}] + that.") from e
  if len(values) < len(target.names):
    return PartialInit(values)
  return _unconstrained(target, _to_latents(target, values), chains, dtype)


def _originals(target):
  """Original name -> latent, for the values the program can map to its
  latents (``ed.reparameterize``'s ``x -> x_noncentred``); {} for others."""
  names = getattr(target.program, "original_names", None)
  return names(target.names) if names is not None else {}


def _to_latents(target, values):
  """``values`` (constrained ``[C, *shape]``, some by an original name)
  by latent name: the program maps the original names' values."""
  if all(n in target.names for n in values):
    return values
  return target.program.latent_values(target, values)


def complete(target, partial, u):
  """Starting points ``[C, D]`` from a ``PartialInit`` and draws ``u [C, D]``
  by its mode: the given latents at their values, the others at ``u``'s."""
  drawn = target.constrain(target.unflatten(tf.constant(u)))
  by_original = {n for x, n in _originals(target).items() if x in partial.values}
  values = dict(partial.values)
  values.update({n: np.asarray(drawn[n]) for n in target.names
                 if n not in values and n not in by_original})
  return _unconstrained(target, _to_latents(target, values), u.shape[0],
                        target.dtype.as_numpy_dtype)


def _unconstrained(target, values, chains, dtype):
  """Unconstrained ``[C, D]`` from constrained values ``[C, *shape]`` of
  every latent, each checked to lie inside its support."""
  # A value outside the support maps to a non-finite point, or (a simplex
  # not summing to 1, a matrix with the wrong diagonal) to a finite one
  # whose image is another value: the round trip finds both.
  def round_trip(x):
    u = target.run(x, Mode.CONSTRAINED).unconstrained
    # New tensors: TFP's bijectors cache inverse/forward pairs by tensor.
    return u, target.run({n: tf.identity(v) for n, v in u.items()}).constrained

  unconstrained, back = tf.vectorized_map(
      round_trip, target.layout.as_dict(values, constrained=True))
  rtol = 1e-3 if dtype == np.float32 else 1e-7
  outside = {}
  for name, value in values.items():
    u, x = np.asarray(unconstrained[name]), np.asarray(back[name])
    if _elementwise(target.latents[name]):
      infinite = ~np.isfinite(u)
    else:  # a vector or matrix per chain: all of a chain's entries
      infinite = ~np.isfinite(u.reshape(chains, -1)).all(axis=1)
      infinite = infinite.reshape((chains,) + (1,) * (value.ndim - 1))
    outside[name] = infinite | ~np.isclose(x, value, rtol=rtol, atol=rtol * 1e-3)
  bad = [n for n in target.names if outside[n].any()]
  if bad:
    raise ValueError(f"init values for {bad} are outside the support of their distributions "
                     f"(a start must lie strictly inside it): "
                     f"{_outside(target.latents[bad[0]], values[bad[0]], outside[bad[0]])}.")
  return target.flatten(unconstrained).numpy()


def _outside(info, value, outside):
  """Words for a latent whose constrained ``value`` ``[C, ...]`` is outside
  its support where ``outside`` (same shape) is true: the first such value
  (a whole vector or matrix for a simplex or a matrix), and the support
  expected."""
  expects = f"its {info.distribution} distribution expects {support_text(info.bijector)}"
  if _elementwise(info):  # the first value outside
    return f"'{info.name}' is {value[outside][0]:g} where {expects}"
  chain = int(np.argwhere(outside)[0][0])  # a simplex, a matrix: the first chain's
  shown = " ".join(np.array2string(value[chain], threshold=8, precision=4, separator=", ",
                                   max_line_width=10**6).split())
  return f"'{info.name}' is {shown} where {expects}"


def _elementwise(info):
  """Whether the latent's bijector maps each entry on its own."""
  return info.bijector.forward_min_event_ndims == 0


def describe_init(init):
  """A JSON-able record of ``init`` (checkpoint settings)."""
  if isinstance(init, str):
    return init
  if isinstance(init, dict):
    return {k: np.asarray(v).tolist() for k, v in init.items()}
  return hashlib.sha1(np.ascontiguousarray(init).tobytes()).hexdigest()


def latent_of_column(target, column):
  """The latent whose unconstrained coordinates hold flat column ``column``."""
  for name, info in target.latents.items():
    column -= info.unconstrained_shape.num_elements()
    if column < 0:
      return name
  return "?"
