"""R-hat: split, rank-normalized and nested potential scale reduction.

Draws ``[draws, chains, *param_shape]`` in, a float64 Tensor of shape
``param_shape`` out (the layout and conventions of ``chains``).  On ``M``
sequences of ``n`` draws with means ``mean_m`` and variances ``s_m^2``,

    W = mean_m s_m^2,   B / n = var_m(mean_m),   R-hat = sqrt(((n - 1) / n W + B / n) / W)

(BDA3, eq. 11.4); ``rhat`` applies it to rank-normalized split chains and
their folded draws (Vehtari et al. 2021), ``nested_rhat`` to superchains of
many short chains (Margossian et al. 2024).
"""

import numpy as np
import tensorflow as tf

from edward_lite.analysis import autocorrelation, ranks
from edward_lite.analysis.chains import F64, by_parameter_blocks, draws_to_pcn, finish, split_chains

__all__ = ["split_rhat", "psrf", "psrf_from_moments", "rhat", "nested_rhat",
           "nested_psrf_from_moments"]


def psrf(x):
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


def bulk_ranks(x):
  """``(z, ordered)``: the rank-normalized split chains of x [P, C, N] and all
  draws sorted [P, C N] (one sort for both when N is even)."""
  z, ordered = ranks.rank_normalize(split_chains(x))
  if x.shape[-1] % 2:  # the split dropped each chain's middle draw
    ordered = ranks.pooled_sorted(x)
  return z, ordered


def folded_ranks(x, ordered):
  """The rank-normalized split chains of the folded draws ``|x - median|``
  of x [P, C, N], given its pooled sorted draws ``ordered``."""
  folded = tf.abs(x - ranks.sorted_quantile(ordered, 0.5)[:, None, None])
  return ranks.rank_normalize(split_chains(folded))[0]


def rank_rhat(x, z, ordered):
  """``max(bulk, tail)`` rank-normalized split R-hat, given ``bulk_ranks``."""
  return tf.maximum(psrf(z), psrf(folded_ranks(x, ordered)))


def nested_rank_rhat(z, folded, superchain, superchains):
  """``max(bulk, tail)`` nested R-hat of the rank-normalized split chains
  ``z`` and ``folded`` [P, 2C, n] (``bulk_ranks``, ``folded_ranks``),
  the halves joined again into whole chains; ``superchain [C]`` in
  ``0..superchains - 1``."""
  def nested(split):
    p, m, n = split.shape
    whole = tf.reshape(split, [p, m // 2, 2 * n])
    return nested_psrf_from_moments(tf.reduce_mean(whole, axis=-1),
                                    autocorrelation.var_ddof1(whole), superchain,
                                    superchains)
  return tf.maximum(nested(z), nested(folded))


@by_parameter_blocks
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
  x, param_shape = draws_to_pcn(draws)
  return finish(psrf(split_chains(x)), x, param_shape)


@by_parameter_blocks
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
  x, param_shape = draws_to_pcn(draws)
  z, ordered = bulk_ranks(x)
  return finish(rank_rhat(x, z, ordered), x, param_shape)


@by_parameter_blocks
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
  x, param_shape = draws_to_pcn(draws, min_draws=1)
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
  superchain = tf.range(c) // m
  return finish(nested_psrf_from_moments(tf.reduce_mean(x, axis=-1),
                                         autocorrelation.var_ddof1(x), superchain, k),
                x, param_shape)


def nested_psrf_from_moments(chain_mean, chain_var, superchain, superchains):
  """Nested R-hat of chains from their means and variances (ddof 1)
  ``[P, C]`` and their superchains ``superchain [C]`` (ints ``0`` to
  ``superchains - 1``; the superchains' sizes may differ):

      B_nu = var_k(mean_k)                      (ddof 1)
      W_nu = mean_k(B_k + W_k),  B_k = var_{m in k}(mean_m)  (ddof 1; 0 for one chain)
                                 W_k = mean_{m in k} s_m^2
      nR-hat = sqrt(1 + B_nu / W_nu)

  (Margossian et al. 2024, eqs. 15-19).  Shared by ``nested_rhat``, the
  summary of kept draws and that of streamed moments.  Returns ``[P]``.
  """
  mean = tf.transpose(tf.convert_to_tensor(chain_mean, F64))          # [C, P]
  var = tf.transpose(tf.convert_to_tensor(chain_var, F64))
  superchain = tf.convert_to_tensor(superchain, tf.int32)
  total = lambda x: tf.math.unsorted_segment_sum(x, superchain, superchains)  # pylint: disable=unnecessary-lambda-assignment
  size = total(tf.ones_like(mean[:, :1]))                              # [K, 1]
  superchain_mean = total(mean) / size                                 # [K, P]
  between_chains = total(tf.square(mean - tf.gather(superchain_mean, superchain))) / tf.maximum(
      size - 1., 1.)
  within = total(var) / size
  w_nu = tf.reduce_mean(between_chains + within, axis=0)
  b_nu = autocorrelation.var_ddof1(tf.transpose(superchain_mean))
  return tf.sqrt(1. + b_nu / w_nu)
