"""Initial states of the chains, from ``init=`` (``edward_lite.model.init_values``).

Drawn starts whose log density -- or, for kernels with gradients, whose
gradient -- is not finite are redrawn, up to ``max_tries`` times; given ones
are checked.  (A finite density with a NaN gradient, e.g. ``sqrt`` of a
density that underflows to 0, would give the first leapfrog NaN and lose the
whole run; Stan rejects such starts too.)
"""

import numpy as np
import tensorflow as tf

from edward_lite.analysis.diagnostics import superchain_ids
from edward_lite.model import nonfinite
from edward_lite.model.init_values import PartialInit, complete, latent_of_column, parse_init

__all__ = ["initial_state"]


def initial_state(program, init, chains, seed, radius, max_tries, superchains=0):
  """Initial unconstrained states ``[C, D]`` with finite log density (and
  gradient, for kernels with gradients).  With ``superchains`` ``K >= 2``
  drawn starts are shared: every chain of superchain ``k``
  (``diagnostics.superchain_ids``) starts where its first chain does."""
  target = program.target
  u = parse_init(target, init, chains)
  partial = u if isinstance(u, PartialInit) else None
  given = not isinstance(u, (str, PartialInit))
  if given:  # user values: checked, never redrawn
    bad, no_gradient = _nonfinite(program, u)
    max_tries = 1
  else:
    mode = partial.mode if partial else u
    radius = tf.constant(radius, target.dtype)
    for attempt in range(max_tries):
      draw = program.draw_initial(mode, chains, seed, radius, tf.constant(attempt)).numpy()
      if partial:  # the given latents at their values, the others drawn
        draw = complete(target, partial, draw)
      bad_draw, no_gradient_draw = _nonfinite(program, draw)
      if attempt == 0:
        u, bad, no_gradient = draw, bad_draw, no_gradient_draw
      else:
        u = np.where(redo[:, None], draw, u)
        bad, no_gradient = redo & bad_draw, redo & no_gradient_draw
      redo = bad | no_gradient
      if not redo.any():
        break
    if superchains >= 2:
      ids = superchain_ids(chains, superchains)
      first = np.searchsorted(ids, ids)  # each chain's superchain's first chain
      u, bad, no_gradient = u[first], bad[first], no_gradient[first]
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


def _nonfinite(program, u):
  """``[C]`` bools at ``u [C, D]``: the chains whose log density is not
  finite, and those whose density is finite but whose gradient is not (all
  False for kernels without gradients).  For kernels with gradients one
  call of the compiled value and gradient, the function the sampler's first
  metric reads too, so the density is traced once for both."""
  if not program.kernel.has_gradients:
    return ~np.isfinite(program.log_prob(tf.constant(u)).numpy()), np.zeros(len(u), bool)
  lp, grad = (t.numpy() for t in program.value_and_gradient(tf.constant(u)))
  bad = ~np.isfinite(lp)
  return bad, ~bad & ~np.all(np.isfinite(grad), axis=1)


def _nonfinite_columns(program, u):
  """The latents whose gradient coordinates at one chain's ``u`` are not finite."""
  _, grad = program.value_and_gradient(tf.constant(u[None]))
  columns = np.flatnonzero(~np.isfinite(grad.numpy()[0]))
  return ", ".join(sorted({f"'{latent_of_column(program.target, c)}'" for c in columns}))
