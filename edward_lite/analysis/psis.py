"""Pareto-smoothed importance sampling (PSIS), in NumPy.

Reference: Vehtari, Simpson, Gelman, Yao, Gabry (2024), "Pareto smoothed
importance sampling", Journal of Machine Learning Research 25(72).

Given S draws ``theta_s`` from a proposal ``q`` (for example a variational
approximation) and log importance ratios ``log r_s = log p(theta_s) -
log q(theta_s)`` (``p`` may be unnormalized), the self-normalized importance
sampling estimate of ``E_p[h]`` is ``sum_s w_s h(theta_s)`` with ``w_s = r_s
/ sum_t r_t``.  When the ratios have a heavy right tail a few draws carry
most of the weight and the estimate is noisy or badly biased.  PSIS

1. takes the M = ceil(min(0.2 S, 3 sqrt(S))) largest ratios as the tail,
2. fits a generalized Pareto distribution (GPD) to their exceedances over
   the largest ratio not in the tail (Zhang & Stephens 2009, with the weakly
   informative prior on the shape used by loo / posterior / ArviZ),
3. replaces the tail ratios, in order, by the GPD quantiles at
   ``(z - 1/2) / M``, z = 1..M (expected order statistics), truncated at
   the largest raw ratio,
4. self-normalizes.

The fitted shape ``k_hat`` is the diagnostic: the GPD has ``1 / k`` finite
moments, and the estimate is reliable when ``k_hat < khat_threshold(S) =
min(1 - 1 / log10(S), 0.7)``.

Functions:

* ``fit_generalized_pareto``: the Zhang-Stephens empirical-Bayes GPD fit.
* ``psis``: smoothed, normalized log weights and ``k_hat``.
* ``psis_expectation``: ``E_p[values]`` under the smoothed weights.
* ``importance_ess``: Kish effective sample size ``1 / sum w_s^2``.
* ``khat_threshold``, ``khat_message``: reading ``k_hat``.

Conventions (the same as ArviZ's ``psislw`` with ``reff=1``):

* the tail is the set of shifted log ratios strictly greater than the
  (M + 1)-th largest one (floored at ``log`` of the smallest normal float),
  so ties at the cutoff and ``-inf`` entries (zero weight) never enter it;
* when the tail has 4 draws or fewer, no GPD is fitted: ``k_hat = inf`` and
  the tail is left as it is (only truncated and normalized).

One deliberate difference from ArviZ, following R's ``loo``: when all tail
ratios are equal no GPD is fitted, ``k_hat = inf`` and the tail is left
unsmoothed (ArviZ fits the constant exceedances anyway).
"""

import math

import numpy as np

__all__ = ["ZeroWeightsError", "fit_generalized_pareto", "psis", "psis_expectation",
           "importance_ess", "khat_threshold", "khat_message"]


class ZeroWeightsError(ValueError):
  """Every log importance weight is ``-inf``: there is nothing to smooth."""


MIN_DRAWS = 2
MIN_TAIL = 5        # fewer tail draws than this: no GPD fit, k_hat = inf
PRIOR_K_WEIGHT = 10  # weakly informative prior: k <- (M k + 10 * 0.5) / (M + 10)
PRIOR_K_MEAN = 0.5
_LOG_TINY = math.log(np.finfo(np.float64).tiny)


# -- input ----------------------------------------------------------------------

def _as_vector(value, name):
  """``value`` as a 1-D float64 array; TypeError for non-real dtypes."""
  array = np.asarray(value)
  if array.dtype.kind not in "biuf":
    raise TypeError(f"`{name}` must hold real numbers, got dtype {array.dtype}.")
  if array.ndim != 1:
    raise ValueError(f"`{name}` must be a 1-D array, got shape {array.shape}.")
  return array.astype(np.float64)


def _check_log_weights(log_weights):
  """Validated copy of ``log_weights`` [S]: no NaN or +inf, some finite entry."""
  lw = _as_vector(log_weights, "log_weights")
  if lw.size < MIN_DRAWS:
    raise ValueError(f"`log_weights` needs at least {MIN_DRAWS} draws, got {lw.size}.")
  if np.isnan(lw).any():
    raise ValueError("`log_weights` contains NaN; every log importance ratio must be "
                     "a number or -inf.")
  if np.isposinf(lw).any():
    raise ValueError("`log_weights` contains +inf, an infinite importance ratio.")
  if np.isneginf(lw).all():
    raise ZeroWeightsError("`log_weights` is -inf everywhere, so every weight is zero.")
  return lw


def _logsumexp(x):
  """``log(sum(exp(x)))`` of a 1-D array with a finite maximum."""
  top = np.max(x)
  return top + math.log(np.sum(np.exp(x - top)))


# -- generalized Pareto ------------------------------------------------------------

def _gpd_quantile(p, k, sigma):
  """Quantiles ``sigma ((1 - p)^-k - 1) / k`` of GPD(0, sigma, k) at ``p`` in (0, 1)."""
  if abs(k) < np.finfo(np.float64).eps:
    return -sigma * np.log1p(-p)  # the k -> 0 limit, an exponential
  return sigma * np.expm1(-k * np.log1p(-p)) / k


def fit_generalized_pareto(x):
  """Fits a generalized Pareto distribution with location 0 to ``x``.

  The GPD(0, sigma, k) has CDF ``F(x) = 1 - (1 + k x / sigma)^(-1 / k)``
  (``1 - exp(-x / sigma)`` for k = 0); here ``k`` is the usual shape
  (Zhang & Stephens use ``-k``).  With ``theta = k / sigma`` the maximum-
  likelihood ``k`` for a given ``theta`` is ``k(theta) = mean(log1p(theta
  x))``, so the profile log likelihood is ``l(theta) = M (log(theta /
  k(theta)) - k(theta) - 1)``.  Zhang & Stephens (2009, "A new and efficient
  estimation method for the generalized Pareto distribution",
  Technometrics 51) estimate ``theta`` by its posterior mean over a grid of
  ``m = 30 + floor(sqrt(M))`` points

      theta_j = -(1 / x_(M) + (1 - sqrt(m / (j - 1/2))) / (3 x*)),

  ``j = 1..m``, ``x*`` the first sample quartile ``x_(floor(M/4 + 1/2))``,
  weighted by ``exp(l(theta_j))`` (the ``3`` comes from their prior on
  ``theta``).  Then ``k = k(theta_hat)``, ``sigma = k / theta_hat``, and,
  as in PSIS (Vehtari et al. 2024) and its implementations, ``k`` is pulled
  toward 0.5 by a weakly informative prior worth 10 observations:
  ``k <- (M k + 10 * 0.5) / (M + 10)`` (``sigma`` keeps the value from the
  unadjusted ``k``).

  Args:
    x: positive exceedances, shape [M], M >= 2, finite and >= 0 (any order).

  Returns:
    ``(k, sigma)`` as Python floats.  ``(inf, nan)`` when the sample is too
    degenerate to fit: all values equal, or the first quartile ``x*`` is 0.
    (R's ``posterior::gpdfit`` gives up, with NA, whenever ``x*`` equals the
    minimum, which includes every sample of 5 or fewer; like ArviZ, this
    function fits those.)

  Raises:
    ValueError: if ``x`` is not 1-D, has fewer than 2 values, or has a
      negative or non-finite value.
  """
  x = np.sort(_as_vector(x, "x"))
  n = x.size
  if n < 2:
    raise ValueError(f"`x` needs at least 2 values, got {n}.")
  if not np.isfinite(x).all() or x[0] < 0:
    raise ValueError("`x` must hold finite exceedances >= 0.")
  x_star = x[int(n / 4 + 0.5) - 1]
  if x[-1] == x[0] or x_star <= 0:
    return math.inf, math.nan
  m = 30 + int(math.sqrt(n))
  # b = -theta (Zhang & Stephens' theta); every b_j < 1 / x_(M), so log1p is finite.
  b = 1 / x[-1] + (1 - np.sqrt(m / (np.arange(1, m + 1) - 0.5))) / (3 * x_star)
  k_of_b = np.mean(np.log1p(-b[:, None] * x[None, :]), axis=1)  # [m]
  with np.errstate(divide="ignore", invalid="ignore"):
    log_lik = n * (np.log(-b / k_of_b) - k_of_b - 1)
  log_lik = np.where(np.isfinite(log_lik), log_lik, -np.inf)
  if not np.isfinite(log_lik).any():
    return math.inf, math.nan
  b_hat = np.sum(b * np.exp(log_lik - _logsumexp(log_lik)))
  k = float(np.mean(np.log1p(-b_hat * x)))
  sigma = -k / b_hat
  k = (n * k + PRIOR_K_WEIGHT * PRIOR_K_MEAN) / (n + PRIOR_K_WEIGHT)
  if not (math.isfinite(k) and sigma > 0):
    return math.inf, math.nan
  return k, float(sigma)


# -- PSIS ------------------------------------------------------------------------

def psis(log_weights):
  """Pareto-smoothed, normalized log importance weights and Pareto ``k_hat``.

  With ``lw = log_weights - max(log_weights)`` (so the largest raw ratio is
  1), S draws and tail length ``M = ceil(min(0.2 S, 3 sqrt(S)))``: the cutoff
  ``c`` is the (M + 1)-th largest ``lw`` (at least ``log`` of the smallest
  normal float), the tail is the ``n <= M`` entries with ``lw > c``, and
  ``(k_hat, sigma) = fit_generalized_pareto(exp(lw_tail) - exp(c))``.  The
  tail entry of rank z (z = 1..n, ascending) becomes

      min(0, log(exp(c) + F^-1((z - 1/2) / n; k_hat, sigma))),

  ``F^-1`` the GPD quantile function; then everything is shifted so that
  ``logsumexp`` is 0.  Smoothing keeps the order of the weights (ties in the
  tail are broken arbitrarily) and never raises a weight above the largest
  raw one.

  When ``n <= 4`` (always for S <= 20) or the GPD cannot be fitted, the
  weights are only normalized and ``k_hat = inf``, flagging the estimate as
  unusable; this matches ArviZ's ``psislw`` and R's ``loo``.

  Args:
    log_weights: log importance ratios ``log p(theta_s) - log q(theta_s)``,
      shape [S], S >= 2, up to an additive constant.  ``-inf`` is a zero
      weight; NaN and ``+inf`` are errors.

  Returns:
    ``(smoothed_log_weights, k_hat)``: float64 array [S] with ``logsumexp
    = 0`` and a Python float.

  Raises:
    ValueError: on NaN or +inf, fewer than 2 draws, all weights zero, or a
      shape other than [S].
  """
  lw = _check_log_weights(log_weights)
  lw = lw - np.max(lw)
  s = lw.size
  tail_len = math.ceil(min(0.2 * s, 3 * math.sqrt(s)))
  order = np.argsort(lw)
  cutoff = max(lw[order[-tail_len - 1]], _LOG_TINY)
  tail = order[lw[order] > cutoff]  # tail indices, ascending in lw
  k_hat = math.inf
  if tail.size >= MIN_TAIL:
    exp_cutoff = math.exp(cutoff)
    k_hat, sigma = fit_generalized_pareto(np.exp(lw[tail]) - exp_cutoff)
    if math.isfinite(k_hat):
      probs = (np.arange(tail.size) + 0.5) / tail.size
      lw[tail] = np.minimum(np.log(exp_cutoff + _gpd_quantile(probs, k_hat, sigma)), 0.)
  return lw - _logsumexp(lw), k_hat


def psis_expectation(values, log_weights):
  """PSIS estimate of ``E_p[h]`` from ``values[s] = h(theta_s)``.

  ``sum_s w_s values[s]`` with ``w = exp(psis(log_weights)[0])``, the
  smoothed weights summing to 1.

  Args:
    values: ``h`` at the draws, shape [S, ...].
    log_weights: log importance ratios of the same draws, shape [S] (see
      ``psis``).

  Returns:
    ``(estimate, k_hat)``: a float (scalar ``h``) or a float64 array of
    shape ``values.shape[1:]``, and the Pareto ``k_hat`` of the weights.

  Raises:
    ValueError: as ``psis``, or when ``values`` does not have S rows.
  """
  values = np.asarray(values)
  if values.dtype.kind not in "biuf":
    raise TypeError(f"`values` must hold real numbers, got dtype {values.dtype}.")
  smoothed, k_hat = psis(log_weights)
  if values.ndim < 1 or values.shape[0] != smoothed.size:
    raise ValueError(f"`values` must have shape [S, ...] with S = {smoothed.size} "
                     f"draws, got shape {values.shape}.")
  estimate = np.tensordot(np.exp(smoothed), values.astype(np.float64), axes=1)
  return (float(estimate) if estimate.ndim == 0 else estimate), k_hat


def importance_ess(log_weights):
  """Kish effective sample size ``1 / sum_s w_s^2`` of normalized weights.

  ``w = exp(log_weights - logsumexp(log_weights))``; the result lies in
  ``[1, S]``, S for equal weights.  Works on raw or on smoothed log weights
  (``psis(...)[0]``); it says how many equally weighted draws the weights
  are worth, but for heavy tails (large ``k_hat``) it is itself noisy and
  optimistic, so read it together with ``k_hat``.

  Args:
    log_weights: log weights, shape [S], up to an additive constant; ``-inf``
      is a zero weight.

  Returns:
    The effective sample size, a Python float.

  Raises:
    ValueError: as ``psis``.
  """
  lw = _check_log_weights(log_weights)
  w = np.exp(lw - _logsumexp(lw))
  return float(1 / np.sum(w * w))


# -- reading k_hat ------------------------------------------------------------------

def khat_threshold(num_draws):
  """Sample-size-dependent threshold ``min(1 - 1 / log10(S), 0.7)`` for ``k_hat``.

  Below it the PSIS estimate from S draws is reliable (Vehtari et al. 2024,
  Section 3.2): 0.5 for S = 100, 2/3 for S = 1000, 0.7 from S = 10^(10/3)
  (about 2154) on.

  Args:
    num_draws: the number of draws S, at least 2.

  Returns:
    The threshold, a Python float (negative for S < 10).

  Raises:
    ValueError: if ``num_draws < 2``.
  """
  if num_draws < MIN_DRAWS:
    raise ValueError(f"`num_draws` must be at least {MIN_DRAWS}, got {num_draws}.")
  return min(1 - 1 / math.log10(num_draws), 0.7)


def khat_message(k_hat, num_draws):
  """One or two sentences on what ``k_hat`` says about a PSIS estimate.

  Four cases (Vehtari et al. 2024): ``k_hat < khat_threshold(S)``: reliable;
  threshold <= ``k_hat`` < 0.7: unreliable at this S, but more draws help
  (the threshold is met once ``S > 10^(1 / (1 - k_hat))``); 0.7 <= ``k_hat``
  < 1: unreliable, possibly large bias, the proposal misses part of the
  target and more draws do not help in practice; ``k_hat >= 1``: the
  weights' distribution has no mean and the estimate is not usable.
  ``inf`` (tail too short or degenerate to fit) is reported as not usable.

  Args:
    k_hat: the Pareto shape estimate, e.g. from ``psis``.
    num_draws: the number of draws S.

  Returns:
    The message, a string naming ``k_hat``, the threshold and S.

  Raises:
    ValueError: if ``k_hat`` is NaN or ``num_draws < 2``.
  """
  threshold = khat_threshold(num_draws)
  if math.isnan(k_hat):
    raise ValueError("`k_hat` is NaN.")
  head = f"Pareto k-hat = {k_hat:.2f} with S = {num_draws} draws (threshold {threshold:.2f}): "
  if k_hat < threshold:
    return head + "the importance-sampling estimate is reliable."
  if k_hat < 0.7:
    needed = math.ceil(10 ** (1 / (1 - k_hat)))
    return head + (f"the estimate is unreliable at this sample size; more draws help, "
                   f"and about S > {needed} draws would bring k-hat under the threshold.")
  if k_hat < 1:
    return head + ("the estimate is unreliable and may have large bias; the proposal "
                   "(e.g. the variational approximation) misses part of the target "
                   "distribution, so more draws will not help much.")
  if math.isinf(k_hat):
    return head + ("the tail of the weights was too short or too degenerate to fit a "
                   "Pareto distribution, so the estimate's reliability is unknown; "
                   "treat it as not usable.")
  return head + ("the estimate is not usable: the weights' tail is so heavy that their "
                 "mean does not exist, and the estimate does not converge.")
