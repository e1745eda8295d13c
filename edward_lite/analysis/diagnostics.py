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

The per-parameter statistics run over blocks of ``chains.PARAMETER_BLOCK``
parameters, so memory stays bounded and time linear for 10^5 parameters.

This module is the namespace ``ed.diagnostics``; the estimators live in
``analysis/rhat.py`` (R-hat) and ``analysis/ess.py`` (ESS and MCSE), the
draws' layout, checks and parameter blocks in ``analysis/chains.py``.

Conventions shared with Stan's ``posterior`` package and ArviZ: a parameter
with any non-finite draw gets NaN; R-hat of draws that are all equal is NaN
(0 / 0); ESS of draws that are all equal is S.
"""

import numpy as np
import tensorflow as tf

from edward_lite.analysis import autocorrelation
from edward_lite.analysis.chains import (MIN_DRAWS, by_parameter_blocks, draws_to_pcn, finish,
                                         to_float64)
from edward_lite.analysis.ess import (ess, ess_bulk, ess_tail, mcse_mean, mcse_of_mean,
                                      mcse_quantile, tail_ess)
from edward_lite.analysis.rhat import (bulk_ranks, folded_ranks, nested_rank_rhat, nested_rhat,
                                       psrf, psrf_from_moments, rhat, split_rhat)

__all__ = ["split_rhat", "psrf_from_moments", "rhat", "ess", "ess_bulk", "ess_tail", "mcse_mean",
           "mcse_quantile", "nested_rhat", "ebfmi", "convergence", "superchain_ids"]


def superchain_ids(chains, superchains):
  """``[chains]`` int32: the superchain of each chain, ``superchains``
  contiguous groups whose sizes differ by at most one."""
  return (np.arange(chains, dtype=np.int64) * superchains // chains).astype(np.int32)


@by_parameter_blocks
def convergence(draws, superchains=0):
  """``ess_bulk``, ``ess_tail``, ``rhat`` and ``mcse_mean`` in one pass.

  The same values as the four functions, computed with two sorts of the
  draws instead of four (the pooled sorted draws give the quantiles of
  ``ess_tail`` and the median that ``rhat`` folds around).

  Args:
    draws: [draws, chains, *param_shape] array or Tensor, at least 4 draws.
    superchains: Python int ``K``; when 2 or more, the chains form ``K``
      contiguous superchains (``superchain_ids``; chains of one superchain
      started at one point), and ``nested_r_hat`` is added: the nested
      R-hat (Margossian et al. 2024) of the rank-normalized and of the
      folded rank-normalized draws, the larger.

  Returns:
    dict ``ess_bulk``, ``ess_tail``, ``r_hat``, ``mcse_mean`` (and
    ``nested_r_hat``) -> float64 Tensors of shape ``param_shape``.
  """
  x, param_shape = draws_to_pcn(draws)
  z, ordered = bulk_ranks(x)
  folded = folded_ranks(x, ordered)
  out = dict(ess_bulk=autocorrelation.ess(z), ess_tail=tail_ess(x, ordered),
             r_hat=tf.maximum(psrf(z), psrf(folded)), mcse_mean=mcse_of_mean(x))
  if superchains >= 2:
    out["nested_r_hat"] = nested_rank_rhat(z, folded, superchain_ids(x.shape[1], superchains),
                                           superchains)
  return {key: finish(value, x, param_shape) for key, value in out.items()}


def ebfmi(energy, pooled=False):
  """Energy Bayesian fraction of missing information per chain (Betancourt 2016).

      E-BFMI = sum_{n=1}^{N-1} (E_n - E_{n-1})^2 / sum_{n=0}^{N-1} (E_n - mean E)^2

  ``pooled``: one value for all chains, both sums taken over the chains too
  and the energies centred on their mean over all draws: for many short
  chains, whose E-BFMI one by one is noisy, and whose own means would take
  up much of a slowly moving energy's variance.

  Values below about 0.3 mean the momentum resampling explores the energy
  distribution poorly.  For iid energies it is about 2 (the variance of a
  difference of two independent draws is twice their variance); for a random
  walk it is about 6 / N.  Equals Stan's and ArviZ's ``bfmi``.

  Args:
    energy: [draws, chains] Hamiltonian energies (any trailing batch shape is
      kept), at least 4 draws.

  Returns:
    float64 Tensor of shape ``[chains]`` (``[]`` when ``pooled``).
  """
  e = to_float64(energy, "energy")
  shape = e.shape
  if shape.rank is None or not shape.is_fully_defined() or shape.rank < 2:
    raise ValueError(f"`energy` must have a static shape [draws, chains], got {shape}.")
  if shape[0] < MIN_DRAWS:
    raise ValueError(f"`energy` needs at least {MIN_DRAWS} draws per chain, got {shape[0]}.")
  axes = [0, 1] if pooled else 0
  numerator = tf.reduce_sum(tf.square(e[1:] - e[:-1]), axis=axes)
  denominator = tf.reduce_sum(tf.square(e - tf.reduce_mean(e, axis=axes, keepdims=True)),
                              axis=axes)
  return numerator / denominator
