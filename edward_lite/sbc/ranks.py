"""Rank statistics of simulation-based calibration and their uniformity tests.

SBC (Talts, Betancourt, Simpson, Vehtari & Gelman 2018): draw
``theta_s ~ p(theta)``, ``y_s ~ p(y | theta_s)`` for ``s = 1 .. S``, and
``L`` draws ``theta_s^(1..L)`` from the inference's posterior given
``y_s``.  For each scalar parameter element the rank

    r_s = #{l : theta_s^(l) < theta_s}  in {0, ..., L}

is discrete uniform on ``{0 .. L}`` when the inference is exact (the data-
averaged posterior is the prior); a sampler with too narrow, too wide or
shifted posteriors makes the ranks U-shaped, humped or sloped.

Two tests of uniformity, per parameter element:

* **ECDF (the default, Säilynoja, Bürkner & Vehtari 2022).**  At the
  ``K = L`` points ``z_k = k / (L + 1)`` the ECDF of the ranks,
  ``F_k = #{s : r_s < k} / S``, has ``S F_k ~ Binomial(S, z_k)`` under
  uniformity.  The statistic is the smallest two-sided pointwise tail
  probability ``T = min_k 2 min(P(B <= S F_k), P(B >= S F_k))``; its null
  distribution (the ``K`` points are dependent) is simulated from ``M``
  multinomial rank samples with a fixed seed, so the p-value
  ``(1 + #{T_null <= T}) / (M + 1)`` is exact up to Monte Carlo error.  The
  ``alpha`` quantile ``gamma`` of ``T_null`` gives the simultaneous
  ``1 - alpha`` band: the binomial ``gamma/2`` and ``1 - gamma/2``
  quantiles at every ``z_k``, drawn as ``F_k - z_k`` (``ecdf_bands``).
* **Chi-square** on ``B`` equal-width rank bins (expected counts from the
  exact discrete uniform), for comparison with the histogram.

``sbc.result.SBCResult`` holds a run's ranks and tests; ``ed.plot.sbc``
draws the ECDF differences with their bands.
"""

import functools

import numpy as np
import tensorflow as tf

__all__ = ["ranks", "ecdf_test", "ecdf_bands", "chi_square_test", "element_names",
           "NULL_SAMPLES"]

NULL_SAMPLES = 4000  # simulated uniform rank samples for the ECDF test's null distribution


def ranks(truth, draws, seed=0):
  """Ranks of the true values among posterior draws.

  Args:
    truth: ``[S, *shape]`` true (prior) values.
    draws: ``[S, L, *shape]`` posterior draws.
    seed: breaks ties (a draw equal to the truth counts below it with
      probability 1/2 per tie, so ranks stay uniform for discrete values).

  Returns:
    int ``[S, *shape]`` ranks in ``0 .. L``.
  """
  truth, draws = np.asarray(truth), np.asarray(draws)
  below = np.sum(draws < truth[:, None], axis=1)
  ties = np.sum(draws == truth[:, None], axis=1)
  if ties.any():
    below = below + np.random.default_rng(seed).binomial(ties, 0.5)
  return below.astype(np.int64)


def _binomial_cdf(k, n, p):
  """``P(B <= k)``, ``B ~ Binomial(n, p)``: ``I_{1-p}(n - k, k + 1)`` (the
  regularized incomplete beta, float64), 0 below 0 and 1 from ``n``."""
  k, p = np.broadcast_arrays(np.asarray(k, np.float64), np.asarray(p, np.float64))
  inside = (k >= 0) & (k < n)
  kk = np.clip(k, 0, n - 1)
  value = tf.math.betainc(n - kk, kk + 1., 1. - p).numpy()
  return np.where(inside, value, np.where(k < 0, 0., 1.))


def _binomial_at_least(k, n, p):
  """``P(B >= k)``: ``I_p(k, n - k + 1)``, 1 up to 0 and 0 above ``n``."""
  k, p = np.broadcast_arrays(np.asarray(k, np.float64), np.asarray(p, np.float64))
  inside = (k >= 1) & (k <= n)
  kk = np.clip(k, 1, n)
  value = tf.math.betainc(kk, n - kk + 1., p).numpy()
  return np.where(inside, value, np.where(k < 1, 1., 0.))


def _pointwise(counts, size, z):
  """Two-sided binomial tail probabilities of ECDF counts ``[..., K]``."""
  lower = _binomial_cdf(counts, size, z)
  upper = _binomial_at_least(counts, size, z)
  return np.minimum(1., 2. * np.minimum(lower, upper))


@functools.lru_cache(maxsize=16)
def _null_statistics(size, max_rank, samples, seed):
  """``T`` of ``samples`` uniform rank samples of size ``S`` (sorted)."""
  rng = np.random.default_rng(seed)
  hist = rng.multinomial(size, np.full(max_rank + 1, 1. / (max_rank + 1)), size=samples)
  counts = np.cumsum(hist, axis=1)[:, :-1]  # #{r < k}, k = 1 .. L
  z = np.arange(1, max_rank + 1) / (max_rank + 1)
  return np.sort(_pointwise(counts, size, z).min(axis=1))


def _statistic(rank_values, max_rank):
  """``T`` per column of ``rank_values [S, P]``."""
  size = rank_values.shape[0]
  k = np.arange(1, max_rank + 1)
  counts = np.sum(rank_values[:, :, None] < k, axis=0)  # [P, K]
  return _pointwise(counts, size, k / (max_rank + 1)).min(axis=1)


def ecdf_test(rank_values, max_rank, samples=NULL_SAMPLES, seed=0):
  """p-values of the ECDF uniformity test (module docstring).

  Args:
    rank_values: int ``[S, *shape]`` ranks in ``0 .. max_rank``.
    max_rank: ``L``.
    samples: ``M``, simulated null samples.
    seed: their seed.

  Returns:
    ``[*shape]`` p-values.
  """
  rank_values = np.asarray(rank_values)
  flat = rank_values.reshape(rank_values.shape[0], -1)
  null = _null_statistics(flat.shape[0], int(max_rank), int(samples), int(seed))
  t = _statistic(flat, max_rank)
  p = (1. + np.searchsorted(null, t, side="right")) / (len(null) + 1.)
  return p.reshape(rank_values.shape[1:])


def ecdf_bands(size, max_rank, alpha=0.05, samples=NULL_SAMPLES, seed=0):
  """Simultaneous ``1 - alpha`` bands of the ECDF difference.

  Returns:
    ``(z [K], lower [K], upper [K])``: the points ``z_k = k / (L + 1)`` and
    the band of ``F_k - z_k`` inside which the whole ECDF difference of
    uniform ranks stays with probability about ``1 - alpha``.
  """
  null = _null_statistics(int(size), int(max_rank), int(samples), int(seed))
  gamma = float(np.quantile(null, alpha))
  z = np.arange(1, max_rank + 1) / (max_rank + 1)
  # The counts whose two-sided tail probability exceeds gamma.
  counts = np.arange(size + 1)[None, :]
  inside = _pointwise(counts, size, z[:, None]) > gamma  # [K, S + 1]
  lower = np.argmax(inside, axis=1)
  upper = size - np.argmax(inside[:, ::-1], axis=1)
  return z, lower / size - z, upper / size - z


def chi_square_test(rank_values, max_rank, bins=None):
  """Chi-square p-values of ``[S, *shape]`` ranks in ``bins`` equal-width bins
  (default: at most 20, at least 5 expected per bin)."""
  rank_values = np.asarray(rank_values)
  flat = rank_values.reshape(rank_values.shape[0], -1)
  size = flat.shape[0]
  bins = bins or int(np.clip(size // 5, 2, min(20, max_rank + 1)))
  which = (np.arange(max_rank + 1) * bins) // (max_rank + 1)  # rank value -> bin
  expected = np.bincount(which, minlength=bins) / (max_rank + 1) * size
  observed = np.stack([np.bincount(which[col], minlength=bins) for col in flat.T])
  statistic = np.sum((observed - expected) ** 2 / expected, axis=1)
  p = tf.math.igammac((bins - 1) / 2., statistic / 2.).numpy()  # chi-square survival
  return np.asarray(p).reshape(rank_values.shape[1:])


def element_names(name, shape):
  """``"w[0]"``, ``"w[1]"``, ... (``name`` for a scalar)."""
  if not shape:
    return [name]
  return [f"{name}[{','.join(str(i) for i in idx)}]" for idx in np.ndindex(*shape)]
