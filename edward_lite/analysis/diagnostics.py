"""MCMC diagnostics: R-hat, effective sample size, Monte Carlo error, E-BFMI.

Every function takes draws of shape ``[draws, chains, *param_shape]`` (NumPy
or Tensor, any real dtype) and returns a float64 Tensor of shape
``param_shape``: one number per scalar parameter, all parameters computed
together by batched TensorFlow ops (sorts, FFTs, reductions, no Python loop
over parameters or lags).  Everything works inside ``tf.function``, also
with ``jit_compile=True``; shapes must be static.  The cost is one or two
row sorts of the ``[P, chains * draws]`` draws (rank-based diagnostics) and
one batched FFT per ESS; eagerly on CPU the sort dominates.  XLA's CPU sort
is slower than TensorFlow's, so on CPU call these eagerly for large P.

Notation (Vehtari, Gelman, Simpson, Carpenter, Burkner 2021, "Rank-
normalization, folding, and localization: an improved R-hat for assessing
convergence of MCMC", Bayesian Analysis 16(2)):

* *split chains*: each of the C chains of N draws is cut into halves of
  ``n = N // 2`` draws (the middle draw is dropped when N is odd), giving
  ``M = 2C`` chains ``theta[i, m]``, ``S = M n`` draws;
* *rank normalization*: ``z = Phi^-1((r - 3/8) / (S + 1/4))``, ``r`` the rank
  of a draw among all S (ties get their average rank);
* *folding*: ``zeta = |theta - median(theta)|``.

Functions:

* ``split_rhat``: the R-hat of BDA3 (Gelman et al. 2013) on split chains.
* ``rhat``: ``max(bulk R-hat, tail R-hat)``, split R-hat of the rank-
  normalized draws and of the rank-normalized folded draws.
* ``ess``, ``ess_bulk``, ``ess_tail``: effective sample sizes with Geyer's
  initial-monotone-sequence truncation (``ess`` on split chains, ``ess_bulk``
  on rank-normalized split chains, ``ess_tail`` the smaller of the ESS of the
  indicators ``I(theta <= q05)`` and ``I(theta <= q95)``).
* ``mcse_mean``, ``mcse_quantile``: Monte Carlo standard errors.
* ``nested_rhat``: nested R-hat for many short chains grouped in superchains
  (Margossian, Hoffman, Sountsov, Riou-Durand, Vehtari, Gelman 2024,
  "Nested R-hat", Bayesian Analysis).
* ``ebfmi``: energy Bayesian fraction of missing information per chain
  (Betancourt 2016).
* ``convergence``: ``ess_bulk``, ``ess_tail``, ``rhat`` and ``mcse_mean`` at
  once, sharing the sorts (what a summary table needs).

The per-parameter statistics run over blocks of ``PARAMETER_BLOCK``
parameters, so memory stays bounded and time linear for 10^5 parameters.

Conventions shared with Stan's ``posterior`` package and ArviZ: a parameter
with any non-finite draw gets NaN; R-hat of draws that are all equal is NaN
(0 / 0); ESS of draws that are all equal is S.
"""

import functools
import math

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.analysis import autocorrelation, ranks

__all__ = ["split_rhat", "psrf_from_moments", "rhat", "ess", "ess_bulk", "ess_tail", "mcse_mean",
           "mcse_quantile", "nested_rhat", "ebfmi", "convergence"]

F64 = tf.float64
MIN_DRAWS = 4

# Phi(-1) and Phi(1): the central 68% interval of the Beta posterior of a
# quantile's rank, whose half-width is the quantile's MCSE.
_PHI_MINUS_1 = 0.5 * math.erfc(1. / math.sqrt(2.))
_PHI_PLUS_1 = 1. - _PHI_MINUS_1


# Parameters per block: each diagnostic holds several float64 copies of its
# draws (ranks, FFTs), so 10^5 parameters x thousands of draws at once would
# need tens of GB; blocks keep memory bounded and time linear in P.
PARAMETER_BLOCK = 4096


def _by_parameter_blocks(fn):
  """Applies a per-parameter diagnostic ``fn(draws [N, C, *shape], ...)`` to
  blocks of at most ``PARAMETER_BLOCK`` parameters and reassembles ``shape``.
  Exact: every statistic here treats each parameter separately."""

  @functools.wraps(fn)
  def wrapper(draws, *args, **kwargs):
    try:
      shape = tuple(np.shape(draws))
    except ValueError:  # ragged input: let fn raise its own error
      return fn(draws, *args, **kwargs)
    size = int(np.prod(shape[2:])) if len(shape) > 2 else 0
    if size <= PARAMETER_BLOCK:
      return fn(draws, *args, **kwargs)
    flat = (tf.reshape if tf.is_tensor(draws) else np.reshape)(draws, shape[:2] + (size,))
    blocks = [fn(flat[:, :, i:i + PARAMETER_BLOCK], *args, **kwargs)
              for i in range(0, size, PARAMETER_BLOCK)]
    join = lambda *parts: tf.reshape(tf.concat(parts, axis=0), shape[2:])
    return tf.nest.map_structure(join, *blocks)

  return wrapper


# -- input ----------------------------------------------------------------------

def _to_float64(value, name):
  """``value`` as a float64 Tensor; TypeError for non-real dtypes."""
  if tf.is_tensor(value) or isinstance(value, tf.Variable):
    dtype = tf.as_dtype(value.dtype)
    if dtype.is_complex or not (dtype.is_floating or dtype.is_integer or dtype.is_bool):
      raise TypeError(f"`{name}` must hold real numbers, got dtype {dtype.name}.")
    return tf.cast(value, F64)
  try:
    array = np.asarray(value)
  except ValueError as e:  # ragged nested lists
    raise ValueError(f"`{name}` must be a rectangular array of numbers: {e}") from None
  if array.dtype.kind not in "biuf":
    raise TypeError(f"`{name}` must hold real numbers, got dtype {array.dtype}.")
  return tf.constant(array.astype(np.float64))


def _draws_to_pcn(draws, name="draws", min_draws=MIN_DRAWS):
  """Checks ``draws`` [N, C, *param_shape] and returns ``([P, C, N], param_shape)``."""
  x = _to_float64(draws, name)
  shape = x.shape
  if shape.rank is None or not shape.is_fully_defined():
    raise ValueError(f"`{name}` needs a static shape, got {shape}.")
  if shape.rank < 2:
    raise ValueError(f"`{name}` must have shape [draws, chains, *param_shape], "
                     f"got shape {shape.as_list()}.")
  n, c = shape[0], shape[1]
  if n < min_draws:
    raise ValueError(f"`{name}` needs at least {min_draws} draws per chain, got {n}.")
  if c < 1:
    raise ValueError(f"`{name}` needs at least one chain, got shape {shape.as_list()}.")
  param_shape = shape[2:]
  p = param_shape.num_elements()
  return tf.transpose(tf.reshape(x, [n, c, p]), [2, 1, 0]), param_shape


def _finish(result, x, param_shape):
  """NaN where a parameter has a non-finite draw; reshape [P] -> param_shape."""
  finite = tf.reduce_all(tf.math.is_finite(x), axis=[-2, -1])
  result = tf.where(finite, result, tf.constant(np.nan, F64))
  return tf.reshape(result, param_shape)


# -- building blocks on [P, M, n] -------------------------------------------------

def _split_chains(x):
  """[P, C, N] -> [P, 2C, N // 2]: each chain's halves as two chains.

  Chain c becomes chains 2c and 2c + 1 (every statistic here is symmetric in
  the chains); for even N this is a reshape, for odd N the middle draw is
  dropped first.
  """
  p, c, n = x.shape
  half = n // 2
  if n % 2:
    x = tf.concat([x[..., :half], x[..., half + 1:]], axis=-1)
  return tf.reshape(x, [p, 2 * c, half])


def _psrf(x):
  """Potential scale reduction of chains [P, M, n] (``psrf_from_moments``)."""
  n = x.shape[-1]
  chain_mean = tf.reduce_mean(x, axis=-1)
  chain_var = tf.reduce_sum(tf.square(x - chain_mean[..., None]), axis=-1) / (n - 1)
  return psrf_from_moments(chain_mean, chain_var, n)


def psrf_from_moments(chain_mean, chain_var, n):
  """Potential scale reduction of ``M`` sequences of ``n`` draws from their
  means and variances (ddof 1), ``[..., M]`` each (BDA3, eq. 11.4):

      W = mean_m s_m^2,   B / n = var_m(mean_m)  (ddof 1)
      var+ = (n - 1) / n W + B / n,   R-hat = sqrt(var+ / W)

  Shared by the R-hat of kept draws (here) and of streamed moments
  (``mcmc.streaming``).  Returns ``[...]``.
  """
  within = tf.reduce_mean(chain_var, axis=-1)
  var_plus = (n - 1.) / n * within + autocorrelation.var_ddof1(chain_mean)
  return tf.sqrt(var_plus / within)


def _ess_quantile(x, ordered, prob):
  """ESS of the indicator ``I(theta <= q_prob)`` on split chains; x [P, C, N]."""
  q = ranks.sorted_quantile(ordered, prob)
  indicator = tf.cast(x <= q[:, None, None], F64)
  return autocorrelation.ess(_split_chains(indicator))


def _bulk_ranks(x):
  """``(z, ordered)``: the rank-normalized split chains of x [P, C, N] and all
  draws sorted [P, C N] (one sort for both when N is even)."""
  z, ordered = ranks.rank_normalize(_split_chains(x))
  if x.shape[-1] % 2:  # the split dropped each chain's middle draw
    ordered = ranks.pooled_sorted(x)
  return z, ordered


def _rank_rhat(x, z, ordered):
  """``max(bulk, tail)`` rank-normalized split R-hat, given ``_bulk_ranks``."""
  folded = tf.abs(x - ranks.sorted_quantile(ordered, 0.5)[:, None, None])
  return tf.maximum(_psrf(z), _psrf(ranks.rank_normalize(_split_chains(folded))[0]))


def _tail_ess(x, ordered):
  """``min`` of the ESS of ``I(theta <= q05)`` and ``I(theta <= q95)``."""
  return tf.minimum(_ess_quantile(x, ordered, 0.05), _ess_quantile(x, ordered, 0.95))


def _mcse_mean(x):
  """``sd / sqrt(ESS)`` of x [P, C, N]."""
  sd = tf.sqrt(autocorrelation.var_ddof1(tf.reshape(x, [x.shape[0], -1])))
  return sd / tf.sqrt(autocorrelation.ess(_split_chains(x)))


# -- public --------------------------------------------------------------------------

@_by_parameter_blocks
def split_rhat(draws):
  """Split R-hat (Gelman et al., BDA3, 2013).

  On the M = 2C split chains of n draws each,

      W = mean_m s_m^2,   B = n var_m(mean_m),
      R-hat = sqrt(((n - 1) / n W + B / n) / W).

  Args:
    draws: [draws, chains, *param_shape] array or Tensor, at least 4 draws.

  Returns:
    float64 Tensor of shape ``param_shape``.
  """
  x, param_shape = _draws_to_pcn(draws)
  return _finish(_psrf(_split_chains(x)), x, param_shape)


@_by_parameter_blocks
def rhat(draws):
  """Rank-normalized split R-hat (Vehtari et al. 2021).

  ``max(bulk, tail)``: bulk R-hat is split R-hat of the rank-normalized split
  chains, ``z = Phi^-1((r - 3/8) / (S + 1/4))``; tail R-hat the same for the
  folded draws ``|theta - median(theta)|`` (median over all draws).  Values
  above 1.01 signal chains that have not mixed.

  Args:
    draws: [draws, chains, *param_shape] array or Tensor, at least 4 draws.

  Returns:
    float64 Tensor of shape ``param_shape``.
  """
  x, param_shape = _draws_to_pcn(draws)
  z, ordered = _bulk_ranks(x)
  return _finish(_rank_rhat(x, z, ordered), x, param_shape)


@_by_parameter_blocks
def ess(draws):
  """Effective sample size of the mean on split chains (Stan's basic ESS).

  ``S / tau`` with the integrated autocorrelation time ``tau`` from the
  multi-chain autocorrelations (FFT), truncated by Geyer's initial monotone
  sequence; capped at ``S log10 S``.

  Args:
    draws: [draws, chains, *param_shape] array or Tensor, at least 4 draws.

  Returns:
    float64 Tensor of shape ``param_shape``.
  """
  x, param_shape = _draws_to_pcn(draws)
  return _finish(autocorrelation.ess(_split_chains(x)), x, param_shape)


@_by_parameter_blocks
def ess_bulk(draws):
  """Bulk ESS: ESS of the rank-normalized split chains (Vehtari et al. 2021).

  Args:
    draws: [draws, chains, *param_shape] array or Tensor, at least 4 draws.

  Returns:
    float64 Tensor of shape ``param_shape``.
  """
  x, param_shape = _draws_to_pcn(draws)
  return _finish(autocorrelation.ess(ranks.rank_normalize(_split_chains(x))[0]), x, param_shape)


@_by_parameter_blocks
def ess_tail(draws):
  """Tail ESS: ``min(ESS(I(theta <= q05)), ESS(I(theta <= q95)))``.

  The quantiles are of all draws (linear interpolation); the indicators are
  split into half chains (Vehtari et al. 2021, section 4.3).

  Args:
    draws: [draws, chains, *param_shape] array or Tensor, at least 4 draws.

  Returns:
    float64 Tensor of shape ``param_shape``.
  """
  x, param_shape = _draws_to_pcn(draws)
  return _finish(_tail_ess(x, ranks.pooled_sorted(x)), x, param_shape)


@_by_parameter_blocks
def convergence(draws):
  """``ess_bulk``, ``ess_tail``, ``rhat`` and ``mcse_mean`` in one pass.

  The same values as the four functions, computed with two sorts of the
  draws instead of four (the pooled sorted draws give the quantiles of
  ``ess_tail`` and the median that ``rhat`` folds around).

  Args:
    draws: [draws, chains, *param_shape] array or Tensor, at least 4 draws.

  Returns:
    dict ``ess_bulk``, ``ess_tail``, ``r_hat``, ``mcse_mean`` -> float64
    Tensors of shape ``param_shape``.
  """
  x, param_shape = _draws_to_pcn(draws)
  z, ordered = _bulk_ranks(x)
  return {key: _finish(value, x, param_shape) for key, value in dict(
      ess_bulk=autocorrelation.ess(z), ess_tail=_tail_ess(x, ordered),
      r_hat=_rank_rhat(x, z, ordered), mcse_mean=_mcse_mean(x)).items()}


@_by_parameter_blocks
def mcse_mean(draws):
  """Monte Carlo standard error of the mean, ``sd / sqrt(ESS)``.

  ``sd`` is the standard deviation of all draws (ddof 1) and ESS is ``ess``.

  Args:
    draws: [draws, chains, *param_shape] array or Tensor, at least 4 draws.

  Returns:
    float64 Tensor of shape ``param_shape``.
  """
  x, param_shape = _draws_to_pcn(draws)
  return _finish(_mcse_mean(x), x, param_shape)


@_by_parameter_blocks
def mcse_quantile(draws, prob=0.5):
  """Monte Carlo standard error of the ``prob`` quantile (Vehtari et al. 2021).

  With ``E = ESS(I(theta <= q_prob))``, the rank of the quantile is
  approximately ``Beta(E prob + 1, E (1 - prob) + 1)`` times S; its central
  68% interval ``[a1, a2]`` maps to sorted draws and

      MCSE = (theta_(round(a2 S)) - theta_(round(a1 S))) / 2

  (1-based order statistics, clipped to 1..S, as in ``posterior``).

  Args:
    draws: [draws, chains, *param_shape] array or Tensor, at least 4 draws.
    prob: Python float in (0, 1).

  Returns:
    float64 Tensor of shape ``param_shape``.
  """
  prob = float(prob)
  if not 0. < prob < 1.:
    raise ValueError(f"`prob` must lie strictly between 0 and 1, got {prob}.")
  x, param_shape = _draws_to_pcn(draws)
  ordered = ranks.pooled_sorted(x)
  s = ordered.shape[-1]
  e = _ess_quantile(x, ordered, prob)
  a, b = e * prob + 1., e * (1. - prob) + 1.
  a1 = tfp.math.betaincinv(a, b, tf.constant(_PHI_MINUS_1, F64))
  a2 = tfp.math.betaincinv(a, b, tf.constant(_PHI_PLUS_1, F64))
  i1 = tf.cast(tf.clip_by_value(tf.round(a1 * s), 1., float(s)), tf.int32) - 1
  i2 = tf.cast(tf.clip_by_value(tf.round(a2 * s), 1., float(s)), tf.int32) - 1
  th1 = tf.gather(ordered, i1[:, None], batch_dims=1)[:, 0]
  th2 = tf.gather(ordered, i2[:, None], batch_dims=1)[:, 0]
  return _finish(0.5 * (th2 - th1), x, param_shape)


@_by_parameter_blocks
def nested_rhat(draws, superchains):
  """Nested R-hat for many short chains (Margossian et al. 2024, eqs. 15-19).

  The chains axis is cut into ``K = superchains`` contiguous groups of
  ``M = chains / K`` chains (chains of one superchain should share their
  initial point).  With chain means ``mean_mk``, superchain means ``mean_k``,

      B_nu = var_k(mean_k)                                (ddof 1)
      W_nu = mean_k(B_k + W_k),  B_k = var_m(mean_mk)     (ddof 1; 0 if M = 1)
                                 W_k = mean_m s_mk^2      (ddof 1; 0 if N = 1)
      nR-hat = sqrt(1 + B_nu / W_nu).

  Chains are not split and draws are not rank-normalized, as in the paper.

  Args:
    draws: [draws, chains, *param_shape] array or Tensor; any number of draws
      (one is fine) when each superchain holds at least two draws in all.
    superchains: Python int K >= 2 dividing the number of chains.

  Returns:
    float64 Tensor of shape ``param_shape``.
  """
  x, param_shape = _draws_to_pcn(draws, min_draws=1)
  p, c, n = x.shape
  if isinstance(superchains, bool) or not isinstance(superchains, (int, np.integer)):
    raise TypeError(f"`superchains` must be a Python int, got {superchains!r}.")
  k = int(superchains)
  if k < 2 or c % k:
    raise ValueError(f"`superchains` must be at least 2 and divide the {c} chains, "
                     f"got {k}.")
  m = c // k
  if m * n < 2:
    raise ValueError("nested R-hat needs at least two draws per superchain, got "
                     f"{m} chain(s) of {n} draw(s).")
  x4 = tf.reshape(x, [p, k, m, n])
  chain_mean = tf.reduce_mean(x4, axis=-1)                      # [P, K, M]
  within = tf.reduce_mean(autocorrelation.var_ddof1(x4), axis=-1)              # 0 when N = 1
  between_chains = autocorrelation.var_ddof1(chain_mean)                       # 0 when M = 1
  superchain_mean = tf.reduce_mean(chain_mean, axis=-1)         # [P, K]
  b_nu = autocorrelation.var_ddof1(superchain_mean)
  w_nu = tf.reduce_mean(between_chains + within, axis=-1)
  return _finish(tf.sqrt(1. + b_nu / w_nu), x, param_shape)


def ebfmi(energy):
  """Energy Bayesian fraction of missing information per chain (Betancourt 2016).

      E-BFMI = sum_{n=1}^{N-1} (E_n - E_{n-1})^2 / sum_{n=0}^{N-1} (E_n - mean E)^2

  Values below about 0.3 mean the momentum resampling explores the energy
  distribution poorly.  For iid energies it is about 2 (the variance of a
  difference of two independent draws is twice their variance); for a random
  walk it is about 6 / N.  Equals Stan's and ArviZ's ``bfmi``.

  Args:
    energy: [draws, chains] Hamiltonian energies (any trailing batch shape is
      kept), at least 4 draws.

  Returns:
    float64 Tensor of shape ``[chains]``.
  """
  e = _to_float64(energy, "energy")
  shape = e.shape
  if shape.rank is None or not shape.is_fully_defined() or shape.rank < 2:
    raise ValueError(f"`energy` must have a static shape [draws, chains], got {shape}.")
  if shape[0] < MIN_DRAWS:
    raise ValueError(f"`energy` needs at least {MIN_DRAWS} draws per chain, got {shape[0]}.")
  numerator = tf.reduce_sum(tf.square(e[1:] - e[:-1]), axis=0)
  denominator = tf.reduce_sum(tf.square(e - tf.reduce_mean(e, axis=0)), axis=0)
  return numerator / denominator
