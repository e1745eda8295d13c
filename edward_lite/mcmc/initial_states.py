"""Initial states of the chains, from ``init=`` (``edward_lite.model.init_values``).

Drawn starts whose log density is not finite are redrawn, up to
``max_tries`` times; given ones are checked.
"""

import numpy as np
import tensorflow as tf

from edward_lite.checks import nonfinite
from edward_lite.model.init_values import parse_init

__all__ = ["initial_state"]


def initial_state(program, init, chains, seed, radius, max_tries):
  """Initial unconstrained states ``[C, D]`` with finite log density."""
  target = program.target
  u = parse_init(target, init, chains)
  if not isinstance(u, str):  # user values: checked, never redrawn
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
