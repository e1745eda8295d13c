"""Tests of the MCMC diagnostics in ``edward_lite.analysis.diagnostics``.

Three kinds of check:

* agreement, to ~1e-10, with a plain NumPy reference written below from the
  papers' formulas one scalar at a time (Python loops, direct O(n^2)
  autocovariances, stdlib inverse normal CDF, numerically integrated Beta
  quantiles), on seeded iid, AR(1), shifted-chain, Cauchy and tied draws;
* known answers: ESS of iid draws ~ S, ESS of AR(1) ~ S (1 - rho) / (1 + rho),
  R-hat ~ 1 for mixed chains and > 1.1 for a shifted chain, nested R-hat,
  E-BFMI ~ 2 for iid energies;
* ArviZ on the same arrays, when it is installed.
"""

import math
import statistics

import numpy as np
import pytest
import tensorflow as tf

from edward_lite.analysis import chains
from edward_lite.analysis import diagnostics as diag
from edward_lite.analysis import ranks

# -- NumPy reference (one scalar parameter; x is [draws, chains]) ----------------

_INV_CDF = np.vectorize(statistics.NormalDist().inv_cdf)


def ref_split(x):
  n = x.shape[0]
  half = n // 2
  return np.concatenate([x[:half], x[n - half:]], axis=1)


def ref_average_ranks(v):
  """1-based ranks of a 1-D array, ties get the mean of their positions."""
  order = np.argsort(v, kind="mergesort")
  sv = v[order]
  ranks = np.empty(len(v))
  i = 0
  while i < len(v):
    j = i
    while j + 1 < len(v) and sv[j + 1] == sv[i]:
      j += 1
    ranks[order[i:j + 1]] = (i + j) / 2. + 1.
    i = j + 1
  return ranks


def ref_z_scale(x):
  s = x.size
  r = ref_average_ranks(x.ravel()).reshape(x.shape)
  return _INV_CDF((r - 3. / 8.) / (s + 1. / 4.))


def ref_psrf(x):
  n, m = x.shape
  w = np.mean([np.var(x[:, j], ddof=1) for j in range(m)])
  b = n * np.var(x.mean(axis=0), ddof=1)
  return math.sqrt(((n - 1.) / n * w + b / n) / w)


def ref_autocov(chain):
  n = len(chain)
  c = chain - chain.mean()
  return np.array([np.dot(c[:n - t], c[t:]) / n for t in range(n)])


def ref_ess_chains(x):
  """Vehtari et al. (2021) / Stan ESS of chains x [n, m]; loops as in `posterior`."""
  n, m = x.shape
  s = n * m
  if x.max() == x.min():
    return float(s)
  acov = np.stack([ref_autocov(x[:, j]) for j in range(m)], axis=1)  # [n, m]
  mean_var = acov[0].mean() * n / (n - 1.)
  var_plus = mean_var * (n - 1.) / n
  if m > 1:
    var_plus += np.var(x.mean(axis=0), ddof=1)
  rho = np.zeros(n)
  rho[0] = rho_even = 1.
  rho[1] = rho_odd = 1. - (mean_var - acov[1].mean()) / var_plus
  t = 0
  while t < n - 5 and rho_even + rho_odd > 0:
    t += 2
    rho_even = 1. - (mean_var - acov[t].mean()) / var_plus
    rho_odd = 1. - (mean_var - acov[t + 1].mean()) / var_plus
    if rho_even + rho_odd >= 0:
      rho[t], rho[t + 1] = rho_even, rho_odd
  max_t = t
  if rho_even > 0:
    rho[max_t] = rho_even
  t = 0
  while t <= max_t - 4:
    t += 2
    if rho[t] + rho[t + 1] > rho[t - 2] + rho[t - 1]:
      rho[t] = rho[t + 1] = (rho[t - 2] + rho[t - 1]) / 2.
  # posterior's R code writes sum(rho[1:max_t]), which for max_t = 0 sums
  # rho_0 by R's 1:0 quirk; the formula (and ArviZ) sums lags < max_t.
  tau = -1. + 2. * rho[:max_t].sum() + rho[max_t]
  tau = max(tau, 1. / math.log10(s))
  return s / tau


def ref_split_rhat(x):
  return ref_psrf(ref_split(x))


def ref_rhat(x):
  bulk = ref_psrf(ref_z_scale(ref_split(x)))
  tail = ref_psrf(ref_z_scale(ref_split(np.abs(x - np.median(x)))))
  return max(bulk, tail)


def ref_ess(x):
  return ref_ess_chains(ref_split(x))


def ref_ess_bulk(x):
  return ref_ess_chains(ref_z_scale(ref_split(x)))


def ref_ess_quantile(x, prob):
  return ref_ess_chains(ref_split((x <= np.quantile(x, prob)).astype(float)))


def ref_ess_tail(x):
  return min(ref_ess_quantile(x, 0.05), ref_ess_quantile(x, 0.95))


def ref_mcse_mean(x):
  return np.std(x, ddof=1) / math.sqrt(ref_ess(x))


def ref_beta_ppf(q, a, b):
  """Beta(a, b) quantile by integrating the density on a fine grid."""
  mean = a / (a + b)
  sd = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.)))
  lo, hi = max(0., mean - 20. * sd), min(1., mean + 20. * sd)
  grid = np.linspace(lo, hi, 400001)[1:-1]
  logpdf = (a - 1.) * np.log(grid) + (b - 1.) * np.log1p(-grid)
  pdf = np.exp(logpdf - logpdf.max())
  cdf = np.concatenate([[0.], np.cumsum(0.5 * (pdf[1:] + pdf[:-1]))])
  return np.interp(q, cdf / cdf[-1], grid)


def ref_mcse_quantile(x, prob):
  e = ref_ess_quantile(x, prob)
  a, b = e * prob + 1., e * (1. - prob) + 1.
  ordered = np.sort(x.ravel())
  s = ordered.size
  a1 = ref_beta_ppf(0.5 * math.erfc(1. / math.sqrt(2.)), a, b)
  a2 = ref_beta_ppf(1. - 0.5 * math.erfc(1. / math.sqrt(2.)), a, b)
  th1 = ordered[max(int(np.rint(a1 * s)), 1) - 1]
  th2 = ordered[min(int(np.rint(a2 * s)), s) - 1]
  return (th2 - th1) / 2.


def ref_nested_rhat(x, k):
  """Margossian et al. (2024), eqs. 15-19, with an explicit loop over superchains."""
  n, c = x.shape
  m = c // k
  superchain_means, within = [], []
  for g in range(k):
    chains = x[:, g * m:(g + 1) * m]
    chain_means = chains.mean(axis=0)
    b_k = np.var(chain_means, ddof=1) if m > 1 else 0.
    w_k = np.mean(np.var(chains, axis=0, ddof=1)) if n > 1 else 0.
    superchain_means.append(chains.mean())
    within.append(b_k + w_k)
  return math.sqrt(1. + np.var(superchain_means, ddof=1) / np.mean(within))


def ref_ebfmi(e):
  return np.array([np.sum(np.diff(e[:, j]) ** 2) / np.sum((e[:, j] - e[:, j].mean()) ** 2)
                   for j in range(e.shape[1])])


# -- seeded draws --------------------------------------------------------------------

def ar1(rng, rho, n, chains, params):
  """Stationary AR(1) chains x_t = rho x_{t-1} + e_t with unit innovations."""
  x = np.empty((n, chains, params))
  x[0] = rng.standard_normal((chains, params)) / math.sqrt(1. - rho ** 2)
  e = rng.standard_normal((n, chains, params))
  for t in range(1, n):
    x[t] = rho * x[t - 1] + e[t]
  return x


def _datasets():
  rng = np.random.default_rng(20240611)
  shifted = rng.standard_normal((200, 4, 2))
  shifted[:, 1] += 1.5
  return {
      "iid": rng.standard_normal((200, 4, 3)),
      "ar1": ar1(rng, 0.7, 300, 4, 2),
      "shifted": shifted,
      "cauchy_odd_n": rng.standard_cauchy((251, 3, 2)),
      "ties": rng.poisson(2., (200, 4, 2)).astype(np.float64),
      "one_chain": ar1(rng, 0.3, 101, 1, 2),
  }


DATASETS = _datasets()

PAIRS = [
    (diag.split_rhat, ref_split_rhat),
    (diag.rhat, ref_rhat),
    (diag.ess, ref_ess),
    (diag.ess_bulk, ref_ess_bulk),
    (diag.ess_tail, ref_ess_tail),
    (diag.mcse_mean, ref_mcse_mean),
    (lambda d: diag.mcse_quantile(d, 0.05), lambda x: ref_mcse_quantile(x, 0.05)),
    (lambda d: diag.mcse_quantile(d, 0.5), lambda x: ref_mcse_quantile(x, 0.5)),
]


@pytest.mark.parametrize("data", sorted(DATASETS))
@pytest.mark.parametrize("fn,ref", PAIRS, ids=[
    "split_rhat", "rhat", "ess", "ess_bulk", "ess_tail", "mcse_mean", "mcse_q05",
    "mcse_q50"])
def test_matches_numpy_reference(fn, ref, data):
  draws = DATASETS[data]
  got = fn(draws)
  assert got.dtype == tf.float64 and got.shape == draws.shape[2:]
  want = [ref(draws[:, :, j]) for j in range(draws.shape[2])]
  np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)


def _tied_values():
  values = np.random.default_rng(3).integers(0, 7, size=(5, 300)).astype(np.float64)
  values[0] = 1.  # all tied
  return values


def test_average_ranks_with_ties():
  values = _tied_values()
  got = ranks.doubled_ranks(tf.constant(values))[0].numpy() / 2.
  np.testing.assert_array_equal(got, [ref_average_ranks(v) for v in values])


def test_ranks_in_graph_and_xla():
  rank_of = lambda x: ranks.doubled_ranks(x)[0]
  untied = np.random.default_rng(4).standard_normal((3, 50))
  for values in (_tied_values(), untied):
    want = np.array([ref_average_ranks(v) for v in values]) * 2.
    for fn in (tf.function(rank_of), tf.function(rank_of, jit_compile=True)):
      np.testing.assert_array_equal(fn(tf.constant(values)).numpy(), want)


def test_reference_ranks_match_scipy():
  scipy_stats = pytest.importorskip("scipy.stats")
  values = _tied_values()
  np.testing.assert_array_equal([ref_average_ranks(v) for v in values],
                                scipy_stats.rankdata(values, axis=-1))


def test_nested_rhat_matches_reference():
  rng = np.random.default_rng(5)
  for n, c, k in [(10, 32, 4), (1, 12, 3), (6, 4, 4), (20, 9, 3)]:
    draws = rng.standard_normal((n, c, 2)) + np.repeat(rng.normal(0., 0.5, (k, 2)), c // k, 0)
    want = [ref_nested_rhat(draws[:, :, j], k) for j in range(2)]
    np.testing.assert_allclose(diag.nested_rhat(draws, k).numpy(), want, rtol=1e-12)


def test_ebfmi_matches_reference():
  energy = np.random.default_rng(6).gamma(3., size=(300, 4)).cumsum(0) % 7.
  np.testing.assert_allclose(diag.ebfmi(energy).numpy(), ref_ebfmi(energy), rtol=1e-12)


# -- known answers ----------------------------------------------------------------------

def test_iid_ess_close_to_number_of_draws():
  draws = np.random.default_rng(7).standard_normal((1000, 4, 16))
  for fn in (diag.ess, diag.ess_bulk, diag.ess_tail):
    ratio = fn(draws).numpy() / 4000.
    assert abs(ratio.mean() - 1.) < 0.1, (fn.__name__, ratio)
    assert np.all((ratio > 0.7) & (ratio < 1.3)), (fn.__name__, ratio)


@pytest.mark.parametrize("rho", [0.5, 0.9])
def test_ar1_ess(rho):
  draws = ar1(np.random.default_rng(8), rho, 4000, 4, 8)
  expected = draws.shape[0] * draws.shape[1] * (1. - rho) / (1. + rho)
  for fn in (diag.ess, diag.ess_bulk):
    ratio = fn(draws).numpy().mean() / expected
    assert abs(ratio - 1.) < 0.15, (fn.__name__, ratio)


def test_rhat_near_one_for_mixed_chains_and_large_for_shifted_chain():
  draws = np.random.default_rng(9).standard_normal((1000, 4, 10))
  assert np.all(diag.rhat(draws).numpy() < 1.01)
  assert np.all(diag.split_rhat(draws).numpy() < 1.01)
  draws[:, 2] += 3.
  assert np.all(diag.rhat(draws).numpy() > 1.1)
  assert np.all(diag.split_rhat(draws).numpy() > 1.1)


def test_tail_rhat_catches_chain_with_different_scale():
  # Same location, one chain three times narrower: the bulk looks mixed, the
  # folded (tail) R-hat does not (Vehtari et al. 2021, section 5.1).
  draws = np.random.default_rng(10).standard_normal((1000, 4, 6))
  draws[:, 0] /= 3.
  assert np.all(diag.split_rhat(draws).numpy() < 1.02)
  assert np.all(diag.rhat(draws).numpy() > 1.05)


def test_ess_tail_catches_chain_stuck_in_tail():
  rng = np.random.default_rng(1)
  draws = rng.standard_normal((1000, 4, 10))
  draws[400:500, 0] = 2.3 + 0.05 * rng.standard_normal((100, 10))
  tail, bulk = diag.ess_tail(draws).numpy(), diag.ess_bulk(draws).numpy()
  assert np.all(tail < 100.) and np.all(tail < bulk / 3.)


def test_nested_rhat_known_answers():
  rng = np.random.default_rng(11)
  draws = rng.standard_normal((10, 256, 5))   # K = 4 superchains of 64 chains
  assert np.all(diag.nested_rhat(draws, 4).numpy() < 1.01)
  draws[:, :64] += 2.  # superchain 0 disagrees
  assert np.all(diag.nested_rhat(draws, 4).numpy() > 1.1)


def test_ebfmi_iid_and_random_walk():
  rng = np.random.default_rng(12)
  iid = rng.standard_normal((4000, 4))
  np.testing.assert_allclose(diag.ebfmi(iid).numpy(), 2., atol=0.1)
  walk = np.cumsum(rng.standard_normal((4000, 4)), axis=0)
  assert np.all(diag.ebfmi(walk).numpy() < 0.05)


def test_mcse_mean_iid_is_sd_over_sqrt_n():
  draws = np.random.default_rng(13).normal(0., 2., (1000, 4, 8))
  got = diag.mcse_mean(draws).numpy()
  np.testing.assert_allclose(got.mean(), 2. / math.sqrt(4000.), rtol=0.1)


# -- shapes, tf.function, XLA -------------------------------------------------------

ALL = {
    "split_rhat": diag.split_rhat, "rhat": diag.rhat, "ess": diag.ess,
    "ess_bulk": diag.ess_bulk, "ess_tail": diag.ess_tail, "mcse_mean": diag.mcse_mean,
    "mcse_quantile": diag.mcse_quantile, "nested_rhat": lambda d: diag.nested_rhat(d, 2),
}


def test_param_shape_kept_and_float32_tensor_input():
  draws = np.random.default_rng(14).standard_normal((100, 4, 3, 2)).astype(np.float32)
  for name, fn in ALL.items():
    got = fn(tf.constant(draws))
    assert got.shape == (3, 2), name
    np.testing.assert_allclose(got.numpy(), fn(draws.astype(np.float64)).numpy(),
                               rtol=1e-12, err_msg=name)
    assert fn(draws[:, :, 1, 1]).shape == (), name
  assert diag.ebfmi(draws[:, :, 0, 0]).shape == (4,)


def test_non_finite_draws_give_nan_and_constant_draws():
  draws = np.random.default_rng(15).standard_normal((100, 2, 3))
  draws[5, 1, 0] = np.nan
  draws[:, :, 1] = 4.
  for name in ("rhat", "split_rhat", "ess", "ess_bulk"):
    got = ALL[name](draws).numpy()
    assert np.isnan(got[0]) and np.isfinite(got[2]), name
  assert np.isnan(diag.rhat(draws).numpy()[1])
  assert diag.ess_bulk(draws).numpy()[1] == 200.


@pytest.mark.slow
def test_tf_function_and_xla_equal_eager():
  # One compiled program for all diagnostics: one XLA compilation, not nine.
  # mcse_quantile compiles too, but its Beta quantile (betaincinv) alone
  # takes ~3 s to compile, so it is checked in a plain graph only.
  draws = tf.constant(np.random.default_rng(16).standard_normal((64, 4, 5)))
  energy = draws[:, :, 0]

  def everything(draws, energy, names):
    out = {name: ALL[name](draws) for name in names}
    out["ebfmi"] = diag.ebfmi(energy)
    return out

  names = sorted(ALL)
  eager = everything(draws, energy, names)
  graph = tf.function(everything)(draws, energy, names)
  jit_names = [name for name in names if name != "mcse_quantile"]
  compiled = tf.function(everything, jit_compile=True)(draws, energy, jit_names)
  for name, value in eager.items():
    np.testing.assert_allclose(graph[name].numpy(), value.numpy(), rtol=1e-12, err_msg=name)
    if name in compiled:
      np.testing.assert_allclose(compiled[name].numpy(), value.numpy(), rtol=1e-9,
                                 err_msg=name)
  assert len(compiled) == len(ALL)


# -- errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ALL))
def test_errors(name):
  fn = ALL[name]
  if name != "nested_rhat":
    with pytest.raises(ValueError, match="at least 4 draws"):
      fn(np.zeros((3, 4)))
  with pytest.raises(ValueError, match="shape"):
    fn(np.zeros(10))
  with pytest.raises(TypeError, match="real numbers"):
    fn(np.array([["a", "b"]] * 10))
  with pytest.raises(TypeError, match="real numbers"):
    fn(tf.zeros((10, 2), tf.complex64))


def test_argument_errors():
  draws = np.zeros((10, 6))
  with pytest.raises(ValueError, match="divide"):
    diag.nested_rhat(draws, 4)
  with pytest.raises(ValueError, match="divide"):
    diag.nested_rhat(draws, 1)
  with pytest.raises(ValueError, match="two draws per superchain"):
    diag.nested_rhat(np.zeros((1, 6)), 6)
  with pytest.raises(TypeError, match="int"):
    diag.nested_rhat(draws, 2.)
  with pytest.raises(ValueError, match="between 0 and 1"):
    diag.mcse_quantile(draws, 1.)
  with pytest.raises(ValueError, match="at least 4 draws"):
    diag.ebfmi(np.zeros((3, 2)))
  with pytest.raises(TypeError, match="real numbers"):
    diag.ebfmi([["x"] * 2] * 5)


# -- ArviZ ------------------------------------------------------------------------------

def test_matches_arviz():
  az = pytest.importorskip("arviz")
  rng = np.random.default_rng(18)
  draws = np.concatenate([rng.standard_normal((400, 4, 1)), ar1(rng, 0.8, 400, 4, 1),
                          rng.standard_cauchy((400, 4, 1))], axis=2)
  draws[:, 0, 0] += 0.5
  checks = [
      (diag.rhat, lambda a: az.rhat(a, method="rank")),
      (diag.split_rhat, lambda a: az.rhat(a, method="split")),
      (diag.ess, lambda a: az.ess(a, method="mean")),
      (diag.ess_bulk, lambda a: az.ess(a, method="bulk")),
      (diag.ess_tail, lambda a: az.ess(a, method="tail", prob=(0.05, 0.95))),  # 1.x: no default
      (diag.mcse_mean, lambda a: az.mcse(a, method="mean")),
  ]
  for fn, ref in checks:
    want = [ref(draws[:, :, j].T) for j in range(draws.shape[2])]  # ArviZ: [chain, draw]
    np.testing.assert_allclose(fn(draws).numpy(), want, rtol=1e-10)
  energy = draws[:, :, 1]
  np.testing.assert_allclose(diag.ebfmi(energy).numpy(), az.bfmi(energy.T), rtol=1e-10)


@pytest.mark.parametrize("draws", [40, 41])  # odd: the split drops middle draws
def test_convergence_equals_the_separate_diagnostics(draws):
  rng = np.random.default_rng(11)
  x = np.cumsum(rng.normal(size=(draws, 4, 3, 2)), axis=0)  # autocorrelated
  x[:, 1, 0, 0] += 2.  # one chain shifted: R-hat well above 1
  together = diag.convergence(x)
  for key, fn in (("ess_bulk", diag.ess_bulk), ("ess_tail", diag.ess_tail),
                  ("r_hat", diag.rhat), ("mcse_mean", diag.mcse_mean)):
    np.testing.assert_allclose(together[key], fn(x), rtol=1e-12, err_msg=key)
    assert together[key].shape == (3, 2)


def test_parameter_blocks_give_the_unblocked_values(monkeypatch):
  rng = np.random.default_rng(12)
  x = rng.normal(size=(30, 3, 5, 3))
  x[:, :, 1, 2] = np.nan  # a non-finite parameter stays NaN in its block
  whole = {name: np.asarray(getattr(diag, name)(x))
           for name in ("rhat", "ess_bulk", "ess_tail", "mcse_mean", "mcse_quantile", "ess")}
  whole["nested"] = np.asarray(diag.nested_rhat(x, 3))
  monkeypatch.setattr(chains, "PARAMETER_BLOCK", 4)  # 15 parameters -> 4 blocks
  for name, value in whole.items():
    got = (diag.nested_rhat(x, 3) if name == "nested"
           else getattr(diag, name)(tf.constant(x) if name == "ess" else x))
    np.testing.assert_allclose(got, value, rtol=1e-12, err_msg=name)
    assert got.shape == (5, 3)
  blocks = diag.convergence(x)
  assert np.isnan(blocks["ess_bulk"][1, 2]) and np.isfinite(blocks["ess_bulk"][1, 1])
