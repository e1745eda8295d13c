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
anyway.  A chain in a minor mode moves there normally and is left alone,
unless, from ``schedule.MIN_WARMUP`` on, the mode is one of negligible mass
(``far_below``): its log density so far below the other chains' that no
mode of comparable mass could be there; it continues from a healthy chain's
state too.

The window's moments of a moved chain are replaced by its donor's before
the metric is estimated, so its draws and gradients from where it was stuck
do not enter the shared metric.
"""

import numpy as np
import tensorflow as tf

from edward_lite.analysis.chains import FAR_BELOW
from edward_lite.mcmc import adaptation
from edward_lite.mcmc.metric import to_z

__all__ = ["stuck_chains", "far_below", "log_volumes", "move_chains", "STUCK_ACCEPT"]

STUCK_ACCEPT = 0.05  # a chain accepting less than this in a window may be stuck


def stuck_chains(window, n, moments=None):
  """Chains stuck in a window of ``n`` iterations, from its per-chain sums
  (``accept_prob``, ``log_prob``, ``log_prob_sq``): ``[C]`` bool.  With
  ``moments`` (the window's per-chain Welford moments of the draws, given
  from ``schedule.MIN_WARMUP`` on), chains in a mode of negligible mass count
  too (``far_below``)."""
  accept = window["accept_prob"] / n
  lp = window["log_prob"] / n
  healthy = np.isfinite(lp) & (accept >= STUCK_ACCEPT)
  if not healthy.any():
    return np.zeros_like(healthy)
  low = ~np.isfinite(lp) | (lp < lp[healthy].min())
  stuck = (accept < STUCK_ACCEPT) & low
  if moments is not None:
    stuck |= far_below(window, n, log_volumes(moments), np.shape(moments.mean)[-1])
  return stuck


def log_volumes(moments):
  """``[C]``: half the sum of the log variances of each chain's draws in the
  window (``moments``: a ``WelfordState`` or ``DenseWelfordState``), the log
  of the volume a chain's draws spread over, up to a constant."""
  m2 = np.asarray(moments.m2, np.float64)  # float32's 1e-300 is 0: log(0) warned
  var = m2 / max(float(np.asarray(moments.count)) - 1., 1.)
  return 0.5 * np.sum(np.log(np.maximum(var, 1e-300)), axis=1)


def far_below(window, n, log_volume, dim):
  """Chains of a window in a mode of negligible mass: their mass, as the
  mean log density plus the log volume their draws spread over
  (``log_volumes``), lies below the median chain's by more than
  ``FAR_BELOW`` median within-chain sds of the log density and more than
  ``dim * log(10)``, the volume term's allowance for a chain that has not yet
  spread over its mode.  A wider region (a funnel's mouth) has a lower log
  density but a larger volume and is left alone; a chain in Lotka-Volterra's
  minor mode on the lynx and hare data (45 nats below the bulk, log-density
  sd 2, dimension 8, where a chain stayed through a whole warmup and into
  sampling) is not.  ``[C]`` bool; needs 3 or more chains."""
  lp = window["log_prob"] / n
  if lp.shape[0] < 3 or not np.all(np.isfinite(lp)):
    return np.zeros(lp.shape, bool)
  with np.errstate(invalid="ignore"):
    sd = np.sqrt(np.maximum(window["log_prob_sq"] / n - lp ** 2, 0.))
  mass = lp + log_volume
  gap = max(FAR_BELOW * float(np.median(sd)), dim * np.log(10.))
  return mass < np.median(mass) - gap


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
                        moments=_moved(state.moments, source),
                        previous=_moved(state.previous, source))


def _moved(moments, source):
  """``MetricMoments`` with chain ``c``'s taken from chain ``source[c]``.  A
  dense state keeps the chains' outer products summed only: their sum is
  rescaled so that its diagonal is the moved chains' summed variances (its
  correlations stay those of all the window's draws)."""
  def one(state):
    mean, m2 = tf.gather(state.mean, source), tf.gather(state.m2, source)
    if not isinstance(state, adaptation.DenseWelfordState):
      return state._replace(mean=mean, m2=m2)
    ratio = tf.sqrt(tf.math.divide_no_nan(tf.reduce_sum(m2, 0), tf.reduce_sum(state.m2, 0)))
    return state._replace(mean=mean, m2=m2,
                          scatter=state.scatter * ratio[:, None] * ratio[None, :])

  return adaptation.MetricMoments(one(moments.draws), one(moments.grads))
