"""Initial states of the chains, from ``init=`` (``edward_lite.model.init_values``).

Drawn starts whose log density -- or, for kernels with gradients, whose
gradient -- is not finite are redrawn, up to ``max_tries`` times; given ones
are checked.  (A finite density with a NaN gradient, e.g. ``sqrt`` of a
density that underflows to 0, would give the first leapfrog NaN and lose the
whole run; Stan rejects such starts too.)
"""

import numpy as np
import tensorflow as tf

from edward_lite.checks import nonfinite
from edward_lite.model.init_values import PartialInit, complete, latent_of_column, parse_init

__all__ = ["initial_state"]


def initial_state(program, init, chains, seed, radius, max_tries):
  """Initial unconstrained states ``[C, D]`` with finite log density (and
  gradient, for kernels with gradients)."""
  target = program.target
  u = parse_init(target, init, chains)
  partial = u if isinstance(u, PartialInit) else None
  given = not isinstance(u, (str, PartialInit))
  if given:  # user values: checked, never redrawn
    bad = ~np.isfinite(program.log_prob(tf.constant(u)).numpy())
    no_gradient = _nonfinite_gradient(program, u, bad)
    max_tries = 1
  else:
    mode = partial.mode if partial else u
    radius = tf.constant(radius, target.dtype)
    for attempt in range(max_tries):
      draw, lp = (t.numpy() for t in program.draw_initial(mode, chains, seed, radius,
                                                           tf.constant(attempt)))
      if partial:  # the given latents at their values, the others drawn
        draw = complete(target, partial, draw)
        lp = program.log_prob(tf.constant(draw)).numpy()
      if attempt == 0:
        u, bad = draw, ~np.isfinite(lp)
      else:
        u, bad = np.where(redo[:, None], draw, u), redo & ~np.isfinite(lp)
      no_gradient = _nonfinite_gradient(program, u, bad)
      redo = bad | no_gradient
      if not redo.any():
        break
  if not bad.any() and not no_gradient.any():
    return u
  tried = "at the given init values" if given else f"after {max_tries} tries"
  if not bad.any():
    chain = int(np.argmax(no_gradient))
    raise ValueError(
        f"{int(no_gradient.sum())} of {chains} chains have a finite initial log density but a "
        f"non-finite gradient {tried} (chain {chain}: the gradient of "
        f"{_nonfinite_columns(program, u[chain])}): a term of the density underflows or is "
        "not differentiable there (sqrt or log of 0). Start elsewhere with init=, or compute "
        "the term in log space.")
  # Which term is not finite, and why (shared with ed.vi.fit's diagnosis).
  reason = nonfinite.explain(target, u[bad], "initial points")
  raise ValueError(
      f"{int(bad.sum())} of {chains} chains have a non-finite initial log density {tried}"
      + (f": {reason[0].lower()}{reason[1:]}" if reason else ".")
      + " Check the model's support and data, or pass init= values inside the support.")


def _nonfinite_gradient(program, u, skip):
  """``[C]`` bool: the chains not in ``skip`` whose gradient at ``u`` is not
  finite (all False for kernels without gradients)."""
  if not program.kernel.has_gradients or skip.all():
    return np.zeros(len(u), bool)
  _, grad = program.value_and_gradient(tf.constant(u))
  return ~skip & ~np.all(np.isfinite(grad.numpy()), axis=1)


def _nonfinite_columns(program, u):
  """The latents whose gradient coordinates at one chain's ``u`` are not finite."""
  _, grad = program.value_and_gradient(tf.constant(u[None]))
  columns = np.flatnonzero(~np.isfinite(grad.numpy()[0]))
  return ", ".join(sorted({f"'{latent_of_column(program.target, c)}'" for c in columns}))
