"""A run that cannot have sampled stops with an error instead of returning.

Two signs, read after the last chunk, that no draw left the chains' starting
neighbourhood:

* the step size sampling used is not finite, or has collapsed to the
  floating type's underflow (``<= UNDERFLOW * tiny``): warmup shrank it
  because every step it tried was rejected, until a step no longer changes
  the state;
* every sampling transition of every chain diverged (at least
  ``MIN_TRANSITIONS`` of them).

Either way the density is not finite (or its gradient is not) next to where
the chains are.  The error names the latents to blame: each latent's
coordinates of one chain's state are moved by ``DELTA`` (relative, at least
absolute ``DELTA``) alone, and a latent whose move makes the density
non-finite is named, with the term and the reason ``model.nonfinite`` finds
at that point.
"""

import numpy as np
import tensorflow as tf

from edward_lite.model import nonfinite
from edward_lite.model.init_values import latent_of_column

__all__ = ["check_run", "SamplingFailedError"]

UNDERFLOW = 1e3  # a step size within this factor of the dtype's smallest normal has collapsed
DELTA = 1e-3
MIN_TRANSITIONS = 10  # fewer divergent transitions are weak evidence: a hard start, a short run


class SamplingFailedError(RuntimeError):
  """No transition of the run could leave where the chains were."""


def check_run(program, state, step_size, sampling_totals, transitions):
  """Raises ``SamplingFailedError`` when the run's step size collapsed or
  every sampling transition diverged (see the module docstring).

  Args:
    program: the run's ``compiled.Program``.
    state: the final ``ChunkState`` (``u [C, D]``).
    step_size: ``[1 or C]`` the step sizes sampling used.
    sampling_totals: per-chain sums of the sampling transitions (``diverging``), or None.
    transitions: sampling transitions per chain.
  """
  tiny = np.finfo(step_size.dtype).tiny
  collapsed = ~np.isfinite(step_size) | (step_size <= UNDERFLOW * tiny)
  diverged = (sampling_totals is not None and transitions >= MIN_TRANSITIONS and
              np.all(sampling_totals["diverging"] >= transitions))
  if not collapsed.any() and not diverged:
    return
  what = (f"every one of its {transitions} sampling transitions diverged in every chain"
          if diverged else
          f"{_whose(collapsed)} collapsed to {float(np.min(step_size)):.3g} during warmup "
          "(every larger step was rejected), so the draws repeat the chains' states")
  raise SamplingFailedError(f"Sampling failed: {what}. {_blame(program, state.u.numpy())} "
                            "Check that the density is finite (and differentiable) around "
                            "the posterior's bulk, or start elsewhere with init=.")


def _whose(collapsed):
  if collapsed.size == 1:
    return "the step size the chains share"
  return f"the step size of {int(collapsed.sum())} of {collapsed.size} chains"


def _blame(program, u):
  """A sentence naming the latents whose own small move from chain 0's state
  ``u [C, D]`` makes the log density non-finite, and why."""
  target, point = program.target, u[0]
  step = DELTA * np.maximum(1., np.abs(point))
  moved = point[None] + np.diag(step).astype(point.dtype)  # [D, D]: one coordinate each
  lp = program.log_prob(tf.constant(moved)).numpy()
  bad = ~np.isfinite(lp)
  if not bad.any():
    return ("The log density is finite next to the chains' states; its gradient or the "
            "trajectories between are not.")
  names = sorted({latent_of_column(target, c) for c in np.flatnonzero(bad)})
  reason = nonfinite.explain(target, moved[bad], "states one latent's small move away")
  return (f"Moving {', '.join(repr(n) for n in names)} alone from a chain's state makes the "
          "log density non-finite" + (f": {reason[0].lower()}{reason[1:]}" if reason else "."))
