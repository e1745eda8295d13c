"""Effective sample size and the Monte Carlo standard errors it gives.

Draws ``[draws, chains, *param_shape]`` in, a float64 Tensor of shape
``param_shape`` out (the layout and conventions of ``chains``).  ESS is
``S / tau`` with the integrated autocorrelation time ``tau`` truncated by
Geyer's initial monotone sequence (``autocorrelation.ess``), on split chains
(``ess``), rank-normalized split chains (``ess_bulk``) or the indicators
``I(theta <= q)`` (``ess_tail``, ``mcse_quantile``); the MCSE of the mean is
``sd / sqrt(ESS)``, that of a quantile comes from the Beta posterior of its
rank (Vehtari et al. 2021).
"""

import math

import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.analysis import autocorrelation, ranks
from edward_lite.analysis.chains import (F64, by_parameter_blocks, draws_to_pcn, finish,
                                         split_chains)

__all__ = ["ess", "ess_bulk", "ess_tail", "mcse_mean", "mcse_quantile"]

# Phi(-1) and Phi(1): the central 68% interval of the Beta posterior of a
# quantile's rank, whose half-width is the quantile's MCSE.
_PHI_MINUS_1 = 0.5 * math.erfc(1. / math.sqrt(2.))
_PHI_PLUS_1 = 1. - _PHI_MINUS_1


def _ess_quantile(x, ordered, prob):
  """ESS of the indicator ``I(theta <= q_prob)`` on split chains; x [P, C, N]."""
  q = ranks.sorted_quantile(ordered, prob)
  indicator = tf.cast(x <= q[:, None, None], F64)
  return autocorrelation.ess(split_chains(indicator))


def tail_ess(x, ordered):
  """``min`` of the ESS of ``I(theta <= q05)`` and ``I(theta <= q95)``; x [P, C, N]
  and its pooled sorted draws ``ordered`` [P, C N]."""
  return tf.minimum(_ess_quantile(x, ordered, 0.05), _ess_quantile(x, ordered, 0.95))


def mcse_of_mean(x):
  """``sd / sqrt(ESS)`` of x [P, C, N]."""
  sd = tf.sqrt(autocorrelation.var_ddof1(tf.reshape(x, [x.shape[0], -1])))
  return sd / tf.sqrt(autocorrelation.ess(split_chains(x)))


@by_parameter_blocks
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
  x, param_shape = draws_to_pcn(draws)
  return finish(autocorrelation.ess(split_chains(x)), x, param_shape)


@by_parameter_blocks
def ess_bulk(draws):
  """Bulk ESS: ESS of the rank-normalized split chains (Vehtari et al. 2021).

  Args:
    draws: [draws, chains, *param_shape] array or Tensor, at least 4 draws.

  Returns:
    float64 Tensor of shape ``param_shape``.
  """
  x, param_shape = draws_to_pcn(draws)
  return finish(autocorrelation.ess(ranks.rank_normalize(split_chains(x))[0]), x, param_shape)


@by_parameter_blocks
def ess_tail(draws):
  """Tail ESS: ``min(ESS(I(theta <= q05)), ESS(I(theta <= q95)))``.

  The quantiles are of all draws (linear interpolation); the indicators are
  split into half chains (Vehtari et al. 2021, section 4.3).

  Args:
    draws: [draws, chains, *param_shape] array or Tensor, at least 4 draws.

  Returns:
    float64 Tensor of shape ``param_shape``.
  """
  x, param_shape = draws_to_pcn(draws)
  return finish(tail_ess(x, ranks.pooled_sorted(x)), x, param_shape)


@by_parameter_blocks
def mcse_mean(draws):
  """Monte Carlo standard error of the mean, ``sd / sqrt(ESS)``.

  ``sd`` is the standard deviation of all draws (ddof 1) and ESS is ``ess``.

  Args:
    draws: [draws, chains, *param_shape] array or Tensor, at least 4 draws.

  Returns:
    float64 Tensor of shape ``param_shape``.
  """
  x, param_shape = draws_to_pcn(draws)
  return finish(mcse_of_mean(x), x, param_shape)


@by_parameter_blocks
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
  x, param_shape = draws_to_pcn(draws)
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
  return finish(0.5 * (th2 - th1), x, param_shape)
