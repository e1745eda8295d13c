"""Warmup adaptation: dual-averaging step size, windowed diagonal metric.

All state is explicit and made of Tensors, so it flows through the compiled
sampling loop and into checkpoints.

Dual averaging (Nesterov 2009; Hoffman & Gelman 2014, as in Stan).  With
target acceptance ``delta`` and observed acceptance ``a_t`` at iteration t:

    h_t   = (1 - 1/(t + t0)) h_{t-1} + (delta - a_t) / (t + t0)
    x_t   = mu - sqrt(t) / gamma * h_t              (x = log step size)
    xbar_t = t^-kappa x_t + (1 - t^-kappa) xbar_{t-1}

with ``mu = log(10 eps_0)``; after warmup the step size is ``exp(xbar)``.

Metric: Stan's windowed adaptation (the windows: ``schedule.py``).  After
an initial fast window (step size only), the variance of the unconstrained
draws is estimated in doubling slow windows (Welford per chain, pooled
across chains by default), regularized towards 1e-3 as
``n/(n+5) var + 1e-3 * 5/(n+5)``, and becomes the inverse mass matrix; the step size is re-adapted after each window and in a final
fast window.  A dense metric (``adapt_metric="dense"``) estimates the full
covariance ``S`` the same way and preconditions with its Cholesky factor.
Its moments keep per chain only the means and variances (``[C, D]``), and
the sum over chains of the outer-product increments once (``[D, D]``): the
covariance pools the chains exactly, as the variances do, in ``O(D^2)``
memory instead of ``O(C D^2)``.

Step sizes are per chain, one pooled, or (the sampler's default) per chain
in the initial fast window and shared by the bulk of the chains from the
first slow window to the end of warmup (``step_size_update``).
"""

import collections

import numpy as np
import tensorflow as tf

__all__ = ["DualAveragingState", "dual_averaging_init", "dual_averaging_update",
           "WelfordState", "DenseWelfordState", "SUMMED", "welford_init", "welford_update",
           "welford_variance", "welford_covariance", "MetricMoments", "metric_moments_init",
           "metric_moments_update", "pool_flags", "bulk_chains", "order_statistic_index", "step_size_update", "power_mean"]

DualAveragingState = collections.namedtuple(
    "DualAveragingState", ["log_step", "log_step_bar", "h_bar", "t", "mu", "deficit"])

GAMMA, T0, KAPPA = 0.05, 10.0, 0.75


def dual_averaging_init(step_size):
  """Starts (or restarts) dual averaging at ``step_size`` (any shape)."""
  log_step = tf.math.log(tf.convert_to_tensor(step_size))
  zeros = tf.zeros_like(log_step)
  return DualAveragingState(log_step, log_step, zeros, zeros,
                            log_step + np.log(10.).astype(log_step.dtype.as_numpy_dtype), zeros)


def dual_averaging_update(state, accept_prob, target_accept):
  """One dual-averaging step given the acceptance statistic (same shape)."""
  accept_prob = tf.cast(accept_prob, state.h_bar.dtype)
  accept_prob = tf.where(tf.math.is_finite(accept_prob), accept_prob, 0.)
  t = state.t + 1.
  eta = 1. / (t + T0)
  h_bar = (1. - eta) * state.h_bar + eta * (target_accept - accept_prob)
  log_step = state.mu - tf.sqrt(t) / GAMMA * h_bar
  weight = tf.pow(t, -KAPPA)
  log_step_bar = weight * log_step + (1. - weight) * state.log_step_bar
  return DualAveragingState(log_step, log_step_bar, h_bar, t, state.mu, state.deficit)


WelfordState = collections.namedtuple("WelfordState", ["count", "mean", "m2"])
# The chain axis of each field of per-chain moments (None: one for all chains).
WELFORD_CHAIN_AXES = WelfordState(count=None, mean=0, m2=0)

# Per-chain means and sums of squared deviations, as ``WelfordState``, and
# ``scatter [D, D]``: the sum over chains of each chain's sum of
# ``(x - mean_old)(x - mean_new)^T``.  One array for all chains: chain groups
# add the blocks' (``SUMMED``).
DenseWelfordState = collections.namedtuple("DenseWelfordState",
                                           ["count", "mean", "m2", "scatter"])
SUMMED = "summed"  # a chain axis: not per chain, the sum over the chains' blocks
DENSE_WELFORD_CHAIN_AXES = DenseWelfordState(count=None, mean=0, m2=0, scatter=SUMMED)


def welford_init(shape, dtype, dense=False):
  """Running mean ``[C, D]`` and sum of squared deviations ``[C, D]`` per
  chain; with ``dense`` also the chains' summed outer products ``[D, D]``."""
  zeros = tf.zeros(shape, dtype)
  if dense:
    return DenseWelfordState(tf.zeros([], dtype), zeros, zeros,
                             tf.zeros([shape[-1], shape[-1]], dtype))
  return WelfordState(tf.zeros([], dtype), zeros, zeros)


def welford_update(state, x):
  """Adds one draw per chain ``x[C, D]``."""
  count = state.count + 1.
  delta = x - state.mean
  mean = state.mean + delta / count
  after = x - mean
  m2 = state.m2 + delta * after
  if isinstance(state, DenseWelfordState):  # sum_c (x_c - mean_old_c)(x_c - mean_new_c)^T
    return DenseWelfordState(count, mean, m2,
                             state.scatter + tf.matmul(delta, after, transpose_a=True))
  return WelfordState(count, mean, m2)


def welford_chain_axes(state):
  """The chain axes of a ``WelfordState`` or ``DenseWelfordState``."""
  return DENSE_WELFORD_CHAIN_AXES if isinstance(state, DenseWelfordState) else WELFORD_CHAIN_AXES


class MetricMoments(collections.namedtuple("MetricMoments", ["draws", "grads"])):
  """A window's Welford moments of the unconstrained draws ``u`` and of the
  log density's gradients in ``u`` (``grads`` is not updated by kernels
  without gradients): ``WelfordState``s, or ``DenseWelfordState``s for a
  low-rank or dense metric."""

  def chain_axes(self):
    return MetricMoments(welford_chain_axes(self.draws), welford_chain_axes(self.grads))


def metric_moments_init(chains, dim, dtype, dense):
  """Empty moments of both (with ``dense``, ``DenseWelfordState``s)."""
  return MetricMoments(welford_init([chains, dim], dtype, dense),
                       welford_init([chains, dim], dtype, dense))


def metric_moments_update(moments, u, grad):
  """Adds one draw ``u [C, D]`` and its gradient ``grad [C, D]`` (None:
  the draws only) per chain."""
  grads = moments.grads if grad is None else welford_update(moments.grads, grad)
  return MetricMoments(welford_update(moments.draws, u), grads)


def welford_covariance(state):
  """Covariance ``[D, D]`` of all ``C n`` draws of a ``DenseWelfordState``
  (chains pooled exactly), regularized as Stan's dense metric:
  ``n/(n+5) S + 1e-3 5/(n+5) I``."""
  n = state.count
  chains = tf.cast(tf.shape(state.mean)[0], n.dtype)
  dev = state.mean - tf.reduce_mean(state.mean, axis=0, keepdims=True)
  m2 = state.scatter + n * tf.matmul(dev, dev, transpose_a=True)
  total = n * chains
  cov = m2 / tf.maximum(total - 1., 1.)
  eye = tf.eye(tf.shape(cov)[0], dtype=cov.dtype)
  return (total / (total + 5.)) * cov + 1e-3 * (5. / (total + 5.)) * eye


def welford_variance(state, pooled=True, regularize=True):
  """Variance estimate ``[1, D]`` (pooled over chains) or ``[C, D]``.

  Pooled: the variance of all ``C * n`` draws, combining the chains' means
  and sums of squares exactly (Chan et al. 1979).
  """
  n = state.count
  if pooled:
    chains = tf.cast(tf.shape(state.mean)[0], n.dtype)
    grand = tf.reduce_mean(state.mean, axis=0, keepdims=True)
    m2 = (tf.reduce_sum(state.m2, axis=0, keepdims=True) +
          n * tf.reduce_sum(tf.square(state.mean - grand), axis=0, keepdims=True))
    total = n * chains
    var = m2 / tf.maximum(total - 1., 1.)
  else:
    total = n
    var = state.m2 / tf.maximum(n - 1., 1.)
  if regularize:
    var = (total / (total + 5.)) * var + 1e-3 * (5. / (total + 5.))
  return var


BULK_TOLERANCE, DEFICIT_RATE, ACCEPT_FLOOR, ACCEPT_POWER = 0.25, 0.1, 0.05, -1.


def bulk_chains(deficit, tolerance=BULK_TOLERANCE):
  """``(bulk [C, 1] bool, median chain index)`` from each chain's recent
  acceptance deficit ``[C, 1]``: the bulk is the chains whose deficit is
  within ``tolerance`` of the median chain's.  A chain outside it rejects
  far more proposals than the others at the shared step size (typically
  one started where the density is very steep)."""
  d = deficit[:, 0]
  median_chain = order_statistic_index(d, (tf.shape(d)[0] - 1) // 2)
  return (d <= tf.gather(d, median_chain) + tolerance)[:, None], median_chain


_SORT_KEY_TYPES = {tf.float32: tf.int32, tf.float64: tf.int64}


def order_statistic_index(x, rank):
  """The index of the element at position ``rank`` of ``x`` ``[C]`` sorted
  by value, equal values by index: ``tf.argsort(x)[rank]`` (whose ties are
  in index order) without the sort, which XLA on CPU makes costly at every
  warmup transition (RESULTS section 22).

  Each float is mapped to an integer key with the same order (its bits, with
  the magnitude bits of negatives flipped), and the key of the ``rank``-th
  element is found by bisection over the integers: at most ``b`` steps (the
  key's bits) of one count ``#{c : key_c <= mid}`` each, so ``O(b C)``.
  Among the chains with that key, the one at the remaining rank in index
  order is taken.  NaN sorts above +inf.
  """
  key_type = _SORT_KEY_TYPES.get(x.dtype)
  if key_type is None:
    return tf.argsort(x)[rank]
  x = tf.where(tf.equal(x, 0.), tf.zeros_like(x), x)  # -0.0 ties with 0.0, as in argsort
  key = tf.bitcast(x, key_type)
  key = tf.where(key < 0, tf.bitwise.bitwise_xor(key, key_type.max), key)
  rank = tf.cast(rank, tf.int32)

  def count_at_most(k):
    return tf.reduce_sum(tf.cast(key <= k, tf.int32))

  def bisect(low, high):  # count_at_most(high) > rank >= count_at_most(low - 1)
    mid = (tf.bitwise.right_shift(low, 1) + tf.bitwise.right_shift(high, 1) +
           tf.bitwise.bitwise_and(tf.bitwise.bitwise_and(low, high), 1))  # no overflow
    above = count_at_most(mid) > rank
    return tf.where(above, low, mid + 1), tf.where(above, mid, high)

  _, high = tf.while_loop(lambda low, high: low < high, bisect,
                          (tf.reduce_min(key), tf.reduce_max(key)),
                          maximum_iterations=key_type.size * 8)
  within = rank - tf.reduce_sum(tf.cast(key < high, tf.int32))
  ties = tf.cumsum(tf.cast(tf.equal(key, high), tf.int32))
  return tf.argmax(tf.cast(ties > within, tf.int32), output_type=tf.int32)


def step_size_update(state, accept_prob, target_accept, share, power=ACCEPT_POWER):
  """One step-size adaptation step for the chains' acceptance ``[C]``.

  * One pooled state (``h_bar`` of shape ``[1, 1]``): dual averaging on the
    mean acceptance over chains.
  * Per-chain states ``[C, 1]``: each chain's dual averaging on its own
    acceptance; with ``share`` (a scalar bool), the bulk (``bulk_chains``)
    shares one state -- one step size, with the noise of one chain's
    acceptance averaged out -- while a chain outside the bulk adapts its own
    step size from the shared state it left, so no chain can be frozen at a
    step size tuned to the others.  A chain that rejoins takes the bulk's
    state.

  The bulk's state is fed the power mean with exponent ``power`` (by
  default ``ACCEPT_POWER = -1``, the harmonic mean; the kernel's
  ``bulk_accept_power``: 0, the geometric mean, for random-walk
  Metropolis) of the bulk's acceptance statistics, each floored at
  ``ACCEPT_FLOOR``:

      a_bulk = (mean_{c in bulk} max(a_c, ACCEPT_FLOOR)^p)^(1/p)
             (p = 0: exp(mean_{c in bulk} log max(a_c, ACCEPT_FLOOR))).

  On a posterior whose curvature is about the same everywhere the chains'
  acceptances are close and this is about their mean.  Where it is not (a
  funnel's neck, GARCH's ``alpha1 + beta1 -> 1``, a latent Gaussian
  process), the few chains that reject or diverge there pull it down far
  more than they pull down the mean, so the shared step size settles
  smaller, as each chain's own dual averaging would.  The arithmetic mean
  ran hot there, and the geometric mean (``p -> 0``) still diverged several
  times as often as per-chain step sizes; the harmonic mean brings the
  divergences to the per-chain level for about 15% of the ESS on a
  near-Gaussian posterior (RESULTS sections 17 and 19).

  ``deficit`` (each chain's ``target_accept - a_t``, exponentially averaged
  at rate ``DEFICIT_RATE``) is updated every call.
  """
  accept = tf.cast(accept_prob, state.h_bar.dtype)
  accept = tf.where(tf.math.is_finite(accept), accept, 0.)
  if state.h_bar.shape[0] == 1:
    return dual_averaging_update(state, tf.reduce_mean(accept)[None, None], target_accept)
  deficit = (1. - DEFICIT_RATE) * state.deficit + DEFICIT_RATE * (target_accept - accept[:, None])
  own = dual_averaging_update(state._replace(deficit=deficit), accept[:, None], target_accept)
  bulk, median_chain = bulk_chains(deficit)
  bulk_accept = power_mean(accept, tf.cast(bulk[:, 0], accept.dtype), power, axis=0)
  shared = dual_averaging_update(
      tf.nest.map_structure(lambda x: tf.gather(x, median_chain[None]), state),
      bulk_accept[None, None], target_accept)
  mixed = DualAveragingState(*[tf.where(share & bulk, s, o) for s, o in zip(shared, own)])
  return mixed._replace(deficit=deficit)


def power_mean(accept, weight, power, axis):
  """The weighted power mean with exponent ``power`` (0: geometric) of the
  acceptance statistics ``accept`` floored at ``ACCEPT_FLOOR``, along
  ``axis`` (weights broadcast against it, at least one positive)."""
  floored = tf.maximum(accept, ACCEPT_FLOOR)
  weight = tf.broadcast_to(weight, tf.shape(floored))
  total = tf.reduce_sum(weight, axis)
  if power == 0:
    return tf.exp(tf.reduce_sum(weight * tf.math.log(floored), axis) / total)
  return (tf.reduce_sum(weight * floored**power, axis) / total)**(1. / power)


def pool_flags(pooled):
  """``(pool_step, pool_metric)`` -- whether the step size and the metric
  are one for all chains -- from such a pair, or one bool for both.
  ``pool_step`` may also be ``"bulk"``: per-chain dual averaging whose bulk
  shares one state in the slow windows (``step_size_update``)."""
  return (bool(pooled), bool(pooled)) if isinstance(pooled, bool) else tuple(pooled)
