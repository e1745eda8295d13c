"""Warmup moves a stuck chain to another chain's state.

A chain started where the density is extremely steep (an ARMA model's
``|theta| > 1``, whose errors grow like ``theta^T``; a scale near 0) can
reject every proposal: its log density may even overflow to ``-inf`` in
float32, where no step size helps.  Stan's per-chain adaptation sometimes
walks such a chain out over many iterations; a sampler whose chains share a
metric cannot.  With several chains there is a better answer: at a warmup
window's end, a chain that accepted almost nothing in the window
(``STUCK_ACCEPT``) and whose log density is below every healthy chain's, or
not finite, continues from the state (and per-chain step size) of a healthy
chain picked at random.  Warmup draws are discarded, so this changes only
where the chain starts its sampling, which must be in the typical set
anyway.  A chain in a minor mode moves there normally and is left alone.

The window's moments of a moved chain are replaced by its donor's before
the metric is estimated, so its draws and gradients from where it was stuck
do not enter the shared metric.
"""

import numpy as np
import tensorflow as tf

from edward_lite.mcmc.metric import to_z

__all__ = ["stuck_chains", "move_chains", "STUCK_ACCEPT"]

STUCK_ACCEPT = 0.05  # a chain accepting less than this in a window may be stuck


def stuck_chains(window, n):
  """Chains stuck in a window of ``n`` iterations, from its per-chain sums
  (``accept_prob``, ``log_prob``): ``[C]`` bool."""
  accept = window["accept_prob"] / n
  lp = window["log_prob"] / n
  healthy = np.isfinite(lp) & (accept >= STUCK_ACCEPT)
  if not healthy.any():
    return np.zeros_like(healthy)
  low = ~np.isfinite(lp) | (lp < lp[healthy].min())
  return (accept < STUCK_ACCEPT) & low


def move_chains(state, stuck, seed, step):
  """``state`` with each ``stuck`` chain at a healthy chain's state: its
  position, per-chain step size and metric, and the moments of this window
  and the previous one.  The donors are drawn from ``seed`` and ``step``
  (reproducible, also when a run resumes)."""
  chains = len(stuck)
  rng = np.random.default_rng([int(x) for x in np.asarray(seed).reshape(-1)] + [step])
  source = np.arange(chains)
  source[stuck] = rng.choice(np.flatnonzero(~stuck), size=int(stuck.sum()))

  def per_chain(x):
    return tf.gather(x, source) if x.shape.rank and x.shape[0] == chains else x

  metric = state.metric._replace(scale=per_chain(state.metric.scale))
  u = per_chain(state.u)
  return state._replace(u=u, z=to_z(u, metric), metric=metric,
                        dual_avg=tf.nest.map_structure(per_chain, state.dual_avg),
                        moments=tf.nest.map_structure(per_chain, state.moments),
                        previous=tf.nest.map_structure(per_chain, state.previous))
