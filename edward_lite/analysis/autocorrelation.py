"""Effective sample size of chains from their autocorrelations, batched
over parameters (Vehtari et al. 2021; Geyer's initial monotone sequence as
in Stan).  ``x [P, M, n]``: ``P`` parameters, ``M`` chains of ``n`` draws;
autocovariances by one batched FFT, no loop over parameters or lags.
"""

import math

import numpy as np
import tensorflow as tf

from edward_lite.analysis import ranks

__all__ = ["var_ddof1", "autocovariance", "geyer_tau", "ess"]

F64 = tf.float64


def var_ddof1(x):
  """Sample variance along the last axis (ddof 1); 0 for a single entry."""
  k = x.shape[-1]
  if k < 2:
    return tf.zeros_like(x[..., 0])
  mean = tf.reduce_mean(x, axis=-1, keepdims=True)
  return tf.reduce_sum(tf.square(x - mean), axis=-1) / (k - 1)


def autocovariance(x):
  """Biased autocovariance per chain, ``acov[t] = 1/n sum_i xc_i xc_{i+t}``.

  x: [P, M, n] -> [P, M, n].  Via FFT, zero-padded to a power of two >= 2n
  so the circular correlation has no wrap-around.
  """
  n = x.shape[-1]
  xc = x - tf.reduce_mean(x, axis=-1, keepdims=True)
  length = 1 << (2 * n - 1).bit_length()
  spectrum = tf.signal.rfft(xc, fft_length=[length])
  power = tf.cast(tf.math.real(spectrum * tf.math.conj(spectrum)), spectrum.dtype)
  acov = tf.signal.irfft(power, fft_length=[length])[..., :n]
  return acov / n


def geyer_tau(rho):
  """Integrated autocorrelation time from autocorrelations rho [P, n], n >= 2.

  Geyer's initial monotone sequence as in Stan / Vehtari et al. (2021):
  pairs ``P_k = rho_2k + rho_2k+1`` are summed while positive; the last pair
  looked at is ``k* = min(first k with P_k <= 0, k_max)`` with ``k_max`` the
  last pair the reference loop may reach (lags up to about n - 3); the
  positive pairs are made monotone, ``P_k <- min_{j<=k} P_j``; and

      tau = -1 + 2 sum_{k < k*} P_k + rho_2k*,

  the last term (kept when positive, or when its pair was kept) is Stan's
  bias correction for antithetic chains.  Vectorized: no data-dependent loop.
  """
  n = rho.shape[-1]
  k_max = max(0, math.ceil((n - 3) / 2) - 1)
  num_pairs = k_max + 1
  even = rho[:, 0:2 * num_pairs:2]
  odd = rho[:, 1:2 * num_pairs:2]
  pairs = even + odd
  leading_positive = tf.math.cumprod(tf.cast(pairs > 0., F64), axis=-1)
  num_positive = tf.cast(tf.reduce_sum(leading_positive, axis=-1), tf.int32)
  k_star = tf.minimum(num_positive, k_max)
  monotone = ranks.scan_extreme(pairs, tf.minimum, np.inf)
  before = tf.range(num_pairs)[None, :] < k_star[:, None]
  pair_sum = tf.reduce_sum(tf.where(before, monotone, 0.), axis=-1)
  rho_last = tf.gather(even, k_star[:, None], batch_dims=1)[:, 0]
  pair_last = tf.gather(pairs, k_star[:, None], batch_dims=1)[:, 0]
  last = tf.where((rho_last > 0.) | (pair_last >= 0.), rho_last, 0.)
  return -1. + 2. * pair_sum + last


def ess(x):
  """Effective sample size of chains x [P, M, n] (Vehtari et al. 2021, eq. 10).

      acov_m(t) = biased autocovariance of chain m,
      W = mean_m acov_m(0) n / (n - 1),   var+ = (n - 1) / n W + var_m(mean_m),
      rho_t = 1 - (W - mean_m acov_m(t)) / var+   (rho_0 = 1),
      ESS = S / max(tau, 1 / log10 S),   tau from ``geyer_tau``.

  ESS is S where all draws of a parameter are equal.
  """
  p, m, n = x.shape
  s = m * n
  acov = autocovariance(x)
  chain_mean = tf.reduce_mean(x, axis=-1)
  mean_var = tf.reduce_mean(acov[..., 0], axis=-1) * n / (n - 1.)
  var_plus = mean_var * (n - 1.) / n
  if m > 1:
    var_plus += var_ddof1(chain_mean)
  rho = 1. - (mean_var[:, None] - tf.reduce_mean(acov, axis=1)) / var_plus[:, None]
  rho = tf.concat([tf.ones([p, 1], F64), rho[:, 1:]], axis=-1)
  tau = tf.maximum(geyer_tau(rho), 1. / math.log10(s))
  constant = tf.reduce_max(x, axis=[1, 2]) == tf.reduce_min(x, axis=[1, 2])
  return tf.where(constant, tf.constant(float(s), F64), s / tau)
