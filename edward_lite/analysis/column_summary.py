"""One scalar's posterior summary from its draws ``x [N draws, C chains]``,
right and fast at any number of chains.

Every sum runs in float64 over contiguous rows (one float32 copy of the
column, ``[C, N]``, is the only copy of the draws), and every step is
linear in ``S = C N``: no sort of the ``S`` draws.

**Exact.**  The mean, the sd (ddof 1), the 5/50/95% quantiles (NumPy's
linear interpolation, from the order statistics themselves) and the
per-chain moments.

**Ranks, binned.**  Rank normalization (Vehtari et al. 2021), ``z =
Phi^-1((r - 3/8) / (S + 1/4))``, needs each draw's rank ``r``.  Here the
draws, centred on their mean, are binned by the top ``BUCKET_BITS`` bits of
their float32 pattern (sign, exponent, 11 bits of mantissa: bins of relative
width ``2^-11``, logarithmically spaced, so any scale and any tail is
resolved), and every draw of a bin gets the bin's average rank, as tied
draws do.  The ranks are those of the draws' distances from the mean
rounded to three significant digits, so ``z`` is within about 1e-3 of its
exact value; the folded draws ``|x - median|`` are binned the same way.
RESULTS section 53 gives the difference from exact ranks.

**Between-chain (batch-means) ESS.**  With ``C`` independent chains the
variance of the grand mean is estimated without any model of the
autocorrelation as ``var_c(chain mean) / C``: the effective sample size is

    ESS = s^2 / (var_b(batch mean) b / S)

with ``s^2`` the pooled variance and batch means ``b`` draws long: whole
chains when ``C >= MIN_BATCHES``, else each chain cut into
``ceil(MIN_BATCHES / C)`` batches (Flegal & Jones 2010).  It is the ESS of
the mean of these finite chains, capped at ``S log10 S`` as Stan's; its
relative error is about ``sqrt(2 / batches)``.  ``ess_bulk`` applies it to
``z``, ``ess_tail`` to the indicators ``I(x <= q05)``, ``I(x <= q95)``
(the smaller), and ``mcse_mean = sqrt(var_b(batch mean of x) b / S)``.

**R-hat.**  Split R-hat of ``z`` and of the folded ``z`` (their maximum,
Vehtari et al. 2021) from the half chains' moments; and, when the chains
form superchains that shared their initial points, nested R-hat
(Margossian et al. 2024) of the same two, from the whole chains' moments.

``summarize`` returns these for any ``S``; ``mcmc.results`` replaces the
ESS, MCSE and split R-hat by the exact Vehtari estimators
(``diagnostics.convergence``) where ``S <= EXACT_LIMIT``.
"""

import concurrent.futures
import math

import numpy as np
import tensorflow as tf

from edward_lite.analysis.diagnostics import convergence, superchain_ids
from edward_lite.analysis.rhat import nested_psrf_from_moments, psrf_from_moments

__all__ = ["summarize", "variable_statistics", "drift", "EXACT_LIMIT", "MIN_BATCHES",
           "BUCKET_BITS"]

# Draws per scalar up to which the summary uses the exact estimators of
# ``diagnostics.convergence`` for ESS, MCSE and split R-hat (RESULTS
# section 53: their cost against this module's).
EXACT_LIMIT = 2**18
# Draws per call of ``diagnostics.convergence`` there, a block of scalars at
# a time: its float64 working copies stay near this many values each.
EXACT_BLOCK = 2**22
# Batches the between-chain ESS needs at least (relative error about
# sqrt(2 / MIN_BATCHES), 14%, at this many).
MIN_BATCHES = 100
# Bits of the float32 pattern that name a rank bin: 1 sign, 8 exponent, 11
# mantissa.
BUCKET_BITS = 20
_SHIFT = np.uint32(32 - BUCKET_BITS)
_BINS = 1 << BUCKET_BITS
# Values per chunk of rows: a chunk's float64 temporaries stay near 16 MB,
# under glibc's largest mmap threshold (32 MB), so freed ones are reused from
# the heap instead of mapped and faulted in anew for every chunk: 2**22 took
# 5.1 s for the first summary of 10^5 chains x 500 draws and 4.0 s after, 2**21
# 4.5 and 3.3 s (RESULTS section 63).
CHUNK_VALUES = 2**21
# Chunks run on this many threads (NumPy's loops release the GIL).
THREADS = 2


def summarize(x, superchains=0, threads=None):
  """Summary statistics of one scalar's draws.

  Args:
    x: ``[N, C]`` real array (a strided view of the kept draws is fine).
    superchains: ``K``; 2 or more adds nested R-hat over ``K`` contiguous
      superchains (``diagnostics.superchain_ids``).
    threads: the threads its chunks of rows run on (default ``THREADS``).

  Returns:
    dict of Python floats: ``mean``, ``sd``, ``mcse_mean``, ``q5``, ``q50``,
    ``q95``, ``ess_bulk``, ``ess_tail``, ``r_hat`` (rank-normalized split),
    ``nested_r_hat`` (NaN without superchains), ``drift`` and ``drift_z``
    (``drift``: the second halves' mean less the first's).  Non-finite draws give NaN
    for all but the mean and sd; fewer than 4 draws a chain give NaN ESS,
    MCSE and R-hat.
  """
  n, c = x.shape
  s = n * c
  col = np.ascontiguousarray(np.asarray(x).T)                        # [C, N], one copy
  if col.dtype != np.float64:
    col = col.astype(np.float32, copy=False)
  batches = 1 if c >= MIN_BATCHES else min(n, -(-MIN_BATCHES // c))
  out = dict.fromkeys(("q5", "q50", "q95", "mcse_mean", "ess_bulk", "ess_tail", "r_hat",
                       "nested_r_hat", "drift", "drift_z"), math.nan)

  # Pass 1: the draws' moments and the bin counts of the centred draws.
  center = np.float32(np.mean(col[:max(1, CHUNK_VALUES // n)], dtype=np.float64))
  threads = THREADS if threads is None else threads
  parts = _map(lambda rows: (_row_moments(rows, batches),
                             np.bincount(_bins(rows - center).reshape(-1), minlength=_BINS)), col,
               threads)
  x_mom = _Moments(n, [p[0] for p in parts], batches)
  out["mean"] = x_mom.grand_mean
  out["sd"] = math.sqrt(x_mom.pooled_var) if s > 1 else math.nan
  if not x_mom.finite:
    return out
  counts = sum(p[1] for p in parts)
  order_stats = _order_statistics(s, (0.05, 0.5, 0.95))
  bins = _RankBins(counts)
  holding = {k: bins.holding(k) for p in order_stats.values() for k in p[:2]}
  z_table = bins.z_table()
  fold_at = _bin_value(holding[order_stats[0.5][0]])  # a value in the median's bin

  # Pass 2: z's moments, the folded draws' bin counts, the tail indicators'
  # counts and the draws in the bins that hold the quantiles.
  wanted = np.zeros(_BINS, bool)
  wanted[list(holding.values())] = True
  cuts = [z_table[holding[order_stats[p][0]]] for p in (0.05, 0.95)]

  def rank_pass(rows):
    centred = rows - center
    bins = _bins(centred)
    z = z_table[bins]
    hit = wanted[bins]
    return (_row_moments(z, batches),
            np.bincount(_bins(np.abs(centred - fold_at)).reshape(-1), minlength=_BINS),
            [_batch_counts(z <= cut, batches) for cut in cuts],
            (rows[hit], bins[hit]))

  parts = _map(rank_pass, col, threads)
  z_mom = _Moments(n, [p[0] for p in parts], batches)
  fold_table = _RankBins(sum(p[1] for p in parts)).z_table()
  below = [np.concatenate([p[2][i] for p in parts]).reshape(-1) for i in range(2)]
  quantiles = _quantiles(bins, holding, order_stats, parts)
  out.update(q5=quantiles[0.05], q50=quantiles[0.5], q95=quantiles[0.95])
  if n < 4:
    return out

  # Pass 3: the folded draws' z moments.
  zf_mom = _Moments(n, _map(lambda rows: _row_moments(
      fold_table[_bins(np.abs((rows - center) - fold_at))], batches), col, threads), batches)

  out["drift"], out["drift_z"] = drift(x_mom.half_mean[:, 1] - x_mom.half_mean[:, 0])
  out["mcse_mean"] = math.sqrt(x_mom.mean_var) if x_mom.pooled_var > 0 else 0.
  out["ess_bulk"] = _ess(z_mom.pooled_var, z_mom.batch_var, s, x_mom.batch_size)
  out["ess_tail"] = min(_indicator_ess(b, s, n, batches) for b in below)
  if x_mom.pooled_var == 0:
    out["ess_bulk"] = out["ess_tail"] = float(s)
  out["r_hat"] = max(_split_psrf(z_mom), _split_psrf(zf_mom))
  if superchains >= 2:
    out["nested_r_hat"] = float(np.max(nested_psrf_from_moments(
        np.stack([z_mom.chain_mean, zf_mom.chain_mean]),
        np.stack([z_mom.chain_var, zf_mom.chain_var]), superchain_ids(c, superchains),
        superchains)))
  return out


def _map(fn, col, threads):
  """``[fn(rows) for rows in chunks of col]``, on ``threads`` threads."""
  step = max(1, CHUNK_VALUES // col.shape[1])
  chunks = [col[i:i + step] for i in range(0, col.shape[0], step)]
  return _on_threads(fn, chunks, threads)


def _on_threads(fn, items, threads):
  """``[fn(item) for item in items]``, on ``threads`` threads."""
  if len(items) == 1 or threads == 1:
    return [fn(item) for item in items]
  with concurrent.futures.ThreadPoolExecutor(threads) as pool:
    return list(pool.map(fn, items))


# -- moments ------------------------------------------------------------------------

class _Moments:
  """Float64 moments of rows ``[C, N]`` from ``_row_moments`` of their
  chunks: per chain (``chain_mean``, ``chain_var``), per half chain
  (``half_mean``, ``half_var`` ``[C, 2]``, ``half_len`` draws each; the
  middle draw of an odd ``N`` left out), per batch (``batch_var``, the
  variance of the ``[C, B]`` batch means of ``batch_size`` draws), and
  pooled (``grand_mean``, ``pooled_var`` ddof 1, ``mean_var``: the
  batch-means variance of the grand mean)."""

  def __init__(self, n, parts, batches):
    cat = lambda k: np.concatenate([p[k] for p in parts])  # pylint: disable=unnecessary-lambda-assignment
    self.chain_mean, chain_m2 = cat("mean"), cat("m2")
    self.half_mean, half_m2 = cat("half_mean"), cat("half_m2")
    batch_mean = cat("batch_mean").reshape(-1)
    c = len(self.chain_mean)
    self.finite = bool(np.all(np.isfinite(self.chain_mean)) & np.all(np.isfinite(chain_m2)))
    self.chain_var = chain_m2 / max(n - 1, 1)
    self.half_len = n // 2
    self.half_var = half_m2 / max(self.half_len - 1, 1)
    self.grand_mean = float(np.mean(self.chain_mean))
    between = float(np.sum(np.square(self.chain_mean - self.grand_mean)))
    self.pooled_var = (float(np.sum(chain_m2)) + n * between) / max(n * c - 1, 1)
    self.batch_size = n // batches
    self.batch_var = float(np.var(batch_mean, ddof=1)) if batch_mean.size > 1 else math.nan
    self.mean_var = self.batch_var * self.batch_size / (n * c)


def _row_moments(rows, batches):
  """Float64 moments of a chunk of rows ``[c, N]``: sums and sums of squares
  of each half chain shifted by its first value (no cancellation), the
  whole chain's by Chan et al.'s combination of its halves (and an odd
  ``N``'s middle draw), and the batch means."""
  n = rows.shape[1]
  half = n // 2
  r = rows.astype(np.float64, copy=False)
  halves = np.stack([r[:, :half], r[:, n - half:]], axis=1) if n % 2 else r.reshape(
      len(r), 2, half)                                                   # [c, 2, n // 2]
  shift = halves[:, :, :1]
  d = halves - shift
  s1 = d.sum(axis=2)
  half_mean = shift[..., 0] + s1 / half
  half_m2 = np.maximum(np.einsum("ijk,ijk->ij", d, d) - s1 * s1 / half, 0.)
  mean = half_mean.mean(axis=1)
  m2 = half_m2.sum(axis=1) + 0.5 * half * np.square(half_mean[:, 1] - half_mean[:, 0])
  if n % 2:  # the middle draw, added to the halves' moments (Welford)
    middle = r[:, half]
    delta = middle - mean
    mean = mean + delta / n
    m2 = m2 + delta * (middle - mean)
  if batches == 1:
    batch_mean = mean[:, None]
  else:
    b = n // batches
    batch_mean = r[:, :b * batches].reshape(len(r), batches, b).mean(axis=2)
  return dict(mean=mean, m2=m2, half_mean=half_mean, half_m2=half_m2, batch_mean=batch_mean)


def _batch_counts(hit, batches):
  """Per row and batch, how many of ``hit [c, N]`` are True: ``[c, batches]``."""
  b = hit.shape[1] // batches
  return np.count_nonzero(hit[:, :b * batches].reshape(len(hit), batches, b), axis=2)


# -- binned ranks -------------------------------------------------------------------

def _bins(values):
  """Rank bins of float values: the top ``BUCKET_BITS`` bits of their
  float32 pattern.  Patterns of positive numbers grow with them, those of
  negative numbers fall: ``_RankBins`` puts the bins in value order."""
  return np.ascontiguousarray(values, np.float32).view(np.uint32) >> _SHIFT


def _bin_value(b):
  """A float32 value in bin ``b`` (its pattern's lower bits zero)."""
  return np.array([np.uint32(b) << _SHIFT], np.uint32).view(np.float32)[0]


class _RankBins:
  """Bin counts ``[2^BUCKET_BITS]`` (by ``_bins``) in value order: the
  negative bins reversed, then the positive ones."""

  def __init__(self, counts):
    half = _BINS // 2
    self.counts = counts
    self.cum = np.cumsum(np.concatenate([counts[:half - 1:-1], counts[:half]]))
    self.total = int(self.cum[-1])

  @staticmethod
  def position(b):
    """The value-order position of raw bins ``b`` (and back: it is its
    own inverse on each half's reversal)."""
    b = np.asarray(b, np.int64)
    return np.where(b < _BINS // 2, _BINS // 2 + b, _BINS - 1 - b)

  @staticmethod
  def raw(position):
    position = np.asarray(position, np.int64)
    return np.where(position >= _BINS // 2, position - _BINS // 2, _BINS - 1 - position)

  def before(self, b):
    """Draws in the bins below raw bin ``b``."""
    return int(self.cum[self.position(b)]) - int(self.counts[b])

  def holding(self, k):
    """The raw bin that holds order statistic ``k`` (0-based)."""
    return int(self.raw(np.searchsorted(self.cum, k, side="right")))

  def z_table(self):
    """``z`` of each raw bin: ``Phi^-1((r - 3/8) / (S + 1/4))`` at its
    draws' average rank ``r`` (1-based).  Empty bins get 0 (never looked
    up)."""
    occupied = np.flatnonzero(self.counts)
    count = self.counts[occupied]
    rank = self.cum[self.position(occupied)] - count + (count + 1) / 2.
    table = np.zeros(_BINS, np.float64)
    table[occupied] = tf.math.ndtri((rank - 0.375) / (self.total + 0.25)).numpy()
    return table


def _order_statistics(s, probs):
  """For each quantile, the 0-based order statistics NumPy's linear
  interpolation reads and its weight: ``p -> (lo, hi, frac)``."""
  out = {}
  for p in probs:
    h = (s - 1) * p
    lo = int(math.floor(h))
    out[p] = (lo, min(lo + 1, s - 1), h - lo)
  return out


def _quantiles(bins, holding, order_stats, parts):
  """Exact quantiles from the draws collected in the bins that hold their
  order statistics (``parts``' last items: the draws and their bins)."""
  values = np.concatenate([p[-1][0] for p in parts]).astype(np.float64)
  raw = np.concatenate([p[-1][1] for p in parts])
  order = {}
  for k, b in holding.items():
    inside = np.sort(values[raw == b])
    order[k] = inside[k - bins.before(b)]
  return {p: order[lo] + frac * (order[hi] - order[lo])
          for p, (lo, hi, frac) in order_stats.items()}


# -- ESS and R-hat ------------------------------------------------------------------

def _ess(pooled_var, batch_var, s, batch_size):
  """Batch-means ESS ``s^2 / (var_b(batch mean) b / S)``, capped at ``S log10 S``."""
  if not pooled_var > 0:
    return float(s)
  if not batch_var > 0:
    return s * math.log10(s)
  return min(pooled_var * s / (batch_var * batch_size), s * math.log10(s))


def _indicator_ess(below, s, n, batches):
  """Batch-means ESS of an indicator from its counts per batch ``below``."""
  b = n // batches
  frac = below / b
  p = float(np.sum(below)) / (len(below) * b)
  return _ess(p * (1. - p), float(np.var(frac, ddof=1)) if len(frac) > 1 else math.nan, s, b)


def _split_psrf(moments):
  """Split R-hat (``psrf_from_moments``) of the ``2C`` half chains."""
  return float(psrf_from_moments(moments.half_mean.reshape(-1), moments.half_var.reshape(-1),
                                 float(moments.half_len)).numpy())


def variable_statistics(x, superchains=0):
  """The summary's statistics of every scalar of one variable.

  Args:
    x: ``[N, C, *shape]`` draws.
    superchains: ``K`` (``summarize``).

  Returns:
    dict column -> float64 ``[*shape]``: ``summarize``'s, with ESS, MCSE
    and split R-hat from ``diagnostics.convergence`` (Vehtari et al.'s
    exact estimators) where ``N C <= EXACT_LIMIT``.
  """
  n, c = x.shape[:2]
  shape = x.shape[2:]
  flat = x.reshape(n, c, -1)
  if n * c > EXACT_LIMIT:
    # Scalars side by side on the threads, each one's chunks on one: two
    # float32 copies at once, one float64 column's bytes.
    p = flat.shape[2]
    rows = _on_threads(lambda j: summarize(flat[:, :, j], superchains,
                                           threads=1 if p > 1 else THREADS), list(range(p)),
                       THREADS)
    return {k: np.array([row[k] for row in rows]).reshape(shape) for k in rows[0]}
  block = max(1, EXACT_BLOCK // (n * c))
  parts = [_exact_statistics(flat[:, :, i:i + block], superchains)
           for i in range(0, flat.shape[2], block)]
  return {k: np.concatenate([part[k] for part in parts]).reshape(shape) for k in parts[0]}


def _exact_statistics(x, superchains):
  """``variable_statistics`` of ``x [N, C, P]`` with ``N C <= EXACT_LIMIT``."""
  n, c, p = x.shape
  x64 = x.astype(np.float64)
  q5, q50, q95 = np.quantile(x64, [0.05, 0.5, 0.95], axis=(0, 1))
  out = dict(mean=x64.mean(axis=(0, 1)), sd=x64.std(axis=(0, 1), ddof=1) if n * c > 1
             else np.full(p, np.nan), q5=q5, q50=q50, q95=q95)
  half = n // 2
  out["drift"], out["drift_z"] = (drift(x64[n - half:].mean(axis=0) - x64[:half].mean(axis=0))
                                  if half else (np.full(p, np.nan),) * 2)
  nan = np.full(p, np.nan)
  out.update(mcse_mean=nan, ess_bulk=nan, ess_tail=nan, r_hat=nan, nested_r_hat=nan)
  if n >= 4:
    out.update({k: np.asarray(v) for k, v in convergence(x64, superchains).items()})
  return out


def drift(differences):
  """How far the chains' second halves lie from their first halves:
  ``differences [C, ...]`` (per chain, the second half's mean less the
  first's) -> ``(mean, z)``, ``z`` the mean over its standard error
  ``sd_c / sqrt(C)``.  The chains being independent, ``z`` is about
  standard normal for stationary chains of any autocorrelation (the
  mean of ``C`` independent differences of expectation 0); chains still
  moving away from their starts after warmup give a large ``|z|``."""
  d = np.asarray(differences, np.float64)
  c = d.shape[0]
  mean = d.mean(axis=0)
  if c < 2:
    return mean, np.full_like(mean, np.nan)
  with np.errstate(divide="ignore", invalid="ignore"):
    return mean, mean / (d.std(axis=0, ddof=1) / math.sqrt(c))
