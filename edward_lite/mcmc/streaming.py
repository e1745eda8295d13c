"""Constant-memory statistics of the draws, updated inside the compiled loop.

With ``keep_draws=False`` nothing grows with the number of draws; per chain
``c`` and constrained coordinate ``d`` the sampler keeps

* the moments (count, mean, sum of squared deviations) of each half of
  the sampling run separately, which give the mean, the variance and the
  split R-hat (Gelman et al. 2013; the halves are the split chains);
* batch means for the effective sample size: the sums of ``K`` consecutive
  batches of ``b`` draws.  When all ``K`` slots are full, neighbouring pairs
  are merged and ``b`` doubles, so ``K / 2 <= batches <= K`` once ``n >= K``
  and ``b`` grows with ``n`` (Flegal & Jones 2010's batch means with
  ``b ~ n / K``).  The sampler knows ``n`` and starts at ``b = ceil(n / K)``,
  so its slots never fill up and nothing is merged.

Memory: ``(K + 5) C D`` numbers (``K = 32``), independent of the number of
draws.  The batch-means estimate of the asymptotic variance of the mean of
chain ``c`` is

    sigma2_c = b / (a - 1) sum_k (Y_ck - Ybar_c)^2,   a batches of means Y_ck,

and the effective sample size of the pooled mean is
``ESS = C n s^2 / mean_c sigma2_c`` with ``s^2`` the pooled variance of the
draws; ``MCSE = sqrt(mean_c sigma2_c / (C n))``.  This is the ESS of the
mean (not rank-normalized, so it is no ``ess_bulk`` for heavy tails); it is
NaN until there are at least 8 batches of at least 2 draws.

Precision: the statistics are float64 whatever the draws' dtype (each draw
is cast as it is added).  In float32 every update rounds to the ulp of the
running mean, ``m2`` or batch sum, which grow with the draws while the
increments do not: the errors pile up over 10^5-10^6 draws per chain, worst
for a parameter far from 0 relative to its sd, whose batch means' rounding
then rivals their spread and corrupts the ESS (RESULTS, issue 52's precision
audit: ``benchmarks/precision_audit.py``; a compensated float32 update was
measured too, for a device without float64).  The elementwise updates cost
little next to a transition; memory is ``(K + 5) C D`` float64 numbers.
The loop runs where float64 exists: on one device (CPU or GPU), in chain
groups (GPUs or CPUs), and on the host under a TPU strategy
(``ShardedTarget`` runs only the log density on the TPU cores).
``stream_summary`` reduces over chains in float64 too.
"""

import collections

import numpy as np
import tensorflow as tf

from edward_lite.analysis import column_summary, diagnostics
from edward_lite.mcmc import adaptation

__all__ = ["StreamState", "stream_init", "stream_update", "stream_add", "stream_close",
           "stream_summary", "Accumulator", "run_begin", "accumulate", "run_end",
           "NUM_BATCHES", "STATISTICS_DTYPE"]

NUM_BATCHES = 32  # K, even
STATISTICS_DTYPE = tf.float64  # of the moments and batch sums, whatever the draws' dtype

StreamState = collections.namedtuple(
    "StreamState", ["halves", "batch_sums", "partial", "in_batch", "batch_size", "filled"])
StreamState.__doc__ = """Streaming statistics of ``[C, D]`` draws.

Fields: ``halves`` (``WelfordState`` with a leading axis of 2: the first and
second half of the sampling run), ``batch_sums [K, C, D]``, ``partial
[C, D]`` (the running sum of the current batch), ``in_batch`` (draws in it),
``batch_size`` (``b``), ``filled`` (complete batches stored).
"""

# The chain axis of each field (None: one value for all chains).
STREAM_CHAIN_AXES = StreamState(halves=adaptation.WelfordState(count=None, mean=1, m2=1),
                                batch_sums=1, partial=0, in_batch=None, batch_size=None,
                                filled=None)


def stream_init(chains, dim, dtype, batch_size=1):
  """Empty statistics of ``[C, D]`` draws of ``dtype``, kept in
  ``STATISTICS_DTYPE`` (float64) whatever ``dtype`` is (module docstring);
  ``batch_size`` is the initial ``b`` (``ceil(n / K)`` when the number of
  draws ``n`` is known: then the K slots never fill up and no batches are
  merged).  The updates keep the dtype of the state they are given."""
  del dtype  # the draws'; the statistics do not follow it
  zeros = tf.zeros([chains, dim], STATISTICS_DTYPE)
  halves = adaptation.WelfordState(tf.zeros([2], STATISTICS_DTYPE), tf.stack([zeros, zeros]),
                                   tf.stack([zeros, zeros]))
  return StreamState(halves, tf.zeros([NUM_BATCHES, chains, dim], STATISTICS_DTYPE), zeros,
                     tf.constant(0), tf.cast(batch_size, tf.int32), tf.constant(0))


def stream_update(state, x, second_half):
  """Adds one draw per chain ``x [C, D]``; ``second_half`` a bool Tensor."""
  return stream_close(stream_add(state, x, second_half))


def stream_add(state, x, second_half):
  """Adds ``x [C, D]`` to the moments of its half and to the current batch;
  ``stream_close`` must follow before the batch is over-full."""
  return run_end(state, accumulate(run_begin(state, x), x), second_half)


Accumulator = collections.namedtuple("Accumulator", ["count", "shift", "s1", "s2"])
Accumulator.__doc__ = """The sums a run of draws inside one batch and one
half updates: ``count`` (a float scalar: draws in the run), and per chain and
coordinate ``[C, D]`` the ``shift`` ``K`` (a draw from where the chains were
when the run began) and the shifted sums ``s1 = sum (x - K)``,
``s2 = sum (x - K)^2``.  Carried through the sampler's per-transition loop
instead of the ``StreamState``: a transition does two additions per number,
with no division and no gather or scatter by half; ``run_end`` merges the
run's moments, ``mean = K + s1 / n`` and ``m2 = s2 - s1^2 / n``, into its
half's (Chan et al. 1979) and ``s1 + n K`` into the current batch.  The
shift keeps ``s2`` of the order of ``n`` variances (the deviations are
within a few posterior sds), so the subtraction loses no more than a few
float64 digits."""


def run_begin(state, shift):
  """An empty accumulator shifted by ``shift [C, D]`` (the chains' current
  draws), in the state's dtype; ``run_end`` says which half it was."""
  shift = tf.cast(shift, state.partial.dtype)
  zeros = tf.zeros_like(shift)
  return Accumulator(tf.zeros([], shift.dtype), shift, zeros, zeros)


def accumulate(acc, x):
  """Adds one draw per chain ``x [C, D]``, cast to the accumulator's dtype."""
  d = tf.cast(x, acc.s1.dtype) - acc.shift
  return Accumulator(acc.count + 1., acc.shift, acc.s1 + d, acc.s2 + d * d)


def run_end(state, acc, second_half):
  """Merges an accumulator of draws of one half (``second_half`` a bool
  Tensor) into the state; the run must not have crossed a batch end
  (``stream_close`` follows)."""
  half = tf.cast(second_half, tf.int32)
  h = state.halves
  count_a, mean_a, m2_a = tf.gather(h.count, half), tf.gather(h.mean, half), tf.gather(h.m2, half)
  count_b = acc.count
  mean_b = acc.s1 / tf.maximum(count_b, 1.)
  m2_b = tf.maximum(acc.s2 - acc.s1 * mean_b, 0.)
  mean_b += acc.shift
  count = count_a + count_b
  delta = mean_b - mean_a
  weight = count_b / tf.maximum(count, 1.)
  mean = tf.where(count_b > 0, mean_a + delta * weight, mean_a)
  m2 = m2_a + m2_b + delta * delta * count_a * weight
  index = [[half]]
  halves = adaptation.WelfordState(
      tf.tensor_scatter_nd_update(h.count, index, count[None]),
      tf.tensor_scatter_nd_update(h.mean, index, mean[None]),
      tf.tensor_scatter_nd_update(h.m2, index, m2[None]))
  partial = state.partial + acc.s1 + count_b * acc.shift
  return state._replace(halves=halves, partial=partial,
                        in_batch=state.in_batch + tf.cast(count_b, tf.int32))


def stream_close(state):
  """Stores the current batch if it is complete; when all ``K`` slots are
  full, merges neighbouring pairs (``b`` doubles).  A no-op otherwise."""
  partial, in_batch = state.partial, state.in_batch
  complete = tf.equal(in_batch, state.batch_size)
  sums = tf.where(complete, tf.tensor_scatter_nd_update(
      state.batch_sums, [[state.filled]], partial[None]), state.batch_sums)
  filled = state.filled + tf.cast(complete, tf.int32)
  partial = tf.where(complete, tf.zeros_like(partial), partial)
  in_batch = tf.where(complete, 0, in_batch)

  full = tf.equal(filled, NUM_BATCHES)
  shape = tf.shape(sums)
  merged = tf.reduce_sum(tf.reshape(sums, tf.concat([[NUM_BATCHES // 2, 2], shape[1:]], 0)),
                         axis=1)
  merged = tf.concat([merged, tf.zeros_like(merged)], axis=0)
  return StreamState(
      state.halves, tf.where(full, merged, sums), partial, in_batch,
      tf.where(full, state.batch_size * 2, state.batch_size),
      tf.where(full, NUM_BATCHES // 2, filled))


def stream_summary(state):
  """NumPy float64 statistics per ``[D]`` coordinate: ``mean``, ``sd``,
  ``r_hat`` (split), ``ess``, ``mcse_mean`` (from ``column_summary.MIN_BATCHES``
  chains on, from the variance of the chains' means, as for kept draws;
  else from the batch means), ``drift``, ``drift_z``
  (``column_summary.drift``); per chain ``[C, D]``:
  ``chain_mean``, ``variance``; and ``count`` (draws per chain).  Every sum
  over chains is float64, whatever the state's dtype: NumPy sums a strided
  axis one element at a time, in the array's dtype."""
  as64 = lambda t: np.asarray(t, np.float64)  # pylint: disable=unnecessary-lambda-assignment
  counts = as64(state.halves.count)
  means, m2s = as64(state.halves.mean), as64(state.halves.m2)
  n = counts.sum()
  # Per-chain moments over the whole run (Chan et al. combination of halves).
  chain_mean = (counts[0] * means[0] + counts[1] * means[1]) / max(n, 1.)
  chain_m2 = m2s[0] + m2s[1] + (counts[0] * counts[1] / max(n, 1.)) * (means[1] - means[0]) ** 2
  chain_var = chain_m2 / max(n - 1., 1.)
  chains = chain_mean.shape[0]
  grand = chain_mean.mean(axis=0)
  pooled = (chain_m2.sum(axis=0) + n * ((chain_mean - grand) ** 2).sum(axis=0)) / max(
      chains * n - 1., 1.)
  out = dict(mean=grand, chain_mean=chain_mean, variance=chain_var, sd=np.sqrt(pooled),
             count=n)
  nan = np.full_like(grand, np.nan)

  # Split R-hat: the 2C half-chains (the halves differ by at most one draw).
  if counts.min() >= 2:
    seq_means = means.reshape(-1, means.shape[-1])
    seq_vars = (m2s / (counts[:, None, None] - 1.)).reshape(-1, means.shape[-1])
    out["r_hat"] = diagnostics.psrf_from_moments(seq_means.T, seq_vars.T,
                                                 float(counts.min())).numpy()
  else:
    out["r_hat"] = nan

  # The second halves' means less the first's, over the chains (a drift).
  out["drift"], out["drift_z"] = column_summary.drift(means[1] - means[0])

  filled, size = int(np.asarray(state.filled)), int(np.asarray(state.batch_size))
  if chains >= column_summary.MIN_BATCHES and n >= 2:
    # Many chains: the chains' means are the batch means, as for kept draws
    # (``column_summary``): no model of the autocorrelation needed.
    between = chain_mean.var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
      out["ess"] = np.where(between > 0, np.minimum(
          pooled / (between / chains), chains * n * np.log10(chains * n)), np.nan)
    out["mcse_mean"] = np.sqrt(between / chains)
  elif filled >= 8 and size >= 2:
    batch_means = as64(state.batch_sums[:filled]) / size  # [a, C, D]
    sigma2 = size * batch_means.var(axis=0, ddof=1)  # [C, D]
    sigma2 = sigma2.mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
      out["ess"] = np.where(sigma2 > 0, chains * n * pooled / sigma2, np.nan)
      out["mcse_mean"] = np.sqrt(sigma2 / (chains * n))
  else:
    out["ess"], out["mcse_mean"] = nan, nan
  return out
