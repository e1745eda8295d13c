"""Tests of Pareto-smoothed importance sampling in ``edward_lite.analysis.psis``.

* agreement, to ~1e-10, with ArviZ's ``psislw`` (when installed) on seeded
  normal, Student-t, Pareto, short and partly ``-inf`` log-weight vectors;
* known answers: the GPD fit recovers k from 20000 GPD draws, ``psis``
  recovers the tail index of Pareto weights and of normal-vs-normal ratios;
* properties of the smoothed weights, expectations within a few standard
  errors of the analytic moments, Kish ESS on known weights;
* input errors and the documented conventions (k_hat = inf for tiny or
  degenerate tails), thresholds and messages.
"""

import math

import numpy as np
import pytest

from edward_lite.analysis import psis as ps


def normal_ratio_log_weights(rng, proposal_scale, num_draws):
  """Draws from N(0, s^2) and log N(x; 0, 1) - log N(x; 0, s^2)."""
  x = rng.normal(scale=proposal_scale, size=num_draws)
  log_w = -0.5 * x ** 2 + 0.5 * (x / proposal_scale) ** 2 + math.log(proposal_scale)
  return x, log_w


def logsumexp(x):
  top = np.max(x)
  return top + np.log(np.sum(np.exp(x - top)))


# -- agreement with ArviZ -----------------------------------------------------------

def _arviz_cases():
  rng = np.random.default_rng(1)
  with_zeros = 2 * rng.normal(size=2000)
  with_zeros[rng.random(2000) < 0.3] = -np.inf
  return {
      "normal": rng.normal(size=1000),
      "student_t3": np.log(np.abs(rng.standard_t(3, size=4000))),
      "pareto_k0.7": -0.7 * np.log(rng.random(3000)) + 40.,  # large offset: shift
      "normal_ratio": normal_ratio_log_weights(rng, 0.6, 5000)[1],
      "short_S30": rng.normal(size=30),
      "tail_of_5_S23": rng.normal(size=23),
      "cutoff_below_tiny": 1000 * rng.normal(size=500),  # exp(cutoff) underflows
      "tiny_S15": rng.normal(size=15),
      "with_minus_inf": with_zeros,
  }


@pytest.mark.parametrize("name", sorted(_arviz_cases()))
def test_psis_matches_arviz_psislw(name):
  az = pytest.importorskip("arviz")
  if not hasattr(az, "psislw"):
    pytest.skip("the reference is ArviZ 0.2x's psislw, which takes R loo's ceil(min(0.2 S, "
                "3 sqrt S)) tail draws; ArviZ 1.x takes floor(3 sqrt S) and has no az.psislw")
  log_w = _arviz_cases()[name]
  expected_lw, expected_k = az.psislw(log_w.copy())  # reff = 1, normalized
  lw, k_hat = ps.psis(log_w)
  expected_lw, expected_k = np.asarray(expected_lw), float(expected_k)
  if math.isinf(expected_k):
    assert k_hat == expected_k
  else:
    assert k_hat == pytest.approx(expected_k, abs=1e-10)
  np.testing.assert_array_equal(np.isneginf(lw), np.isneginf(expected_lw))
  finite = np.isfinite(expected_lw)
  np.testing.assert_allclose(lw[finite], expected_lw[finite], rtol=0, atol=1e-10)


# -- known tail shapes ----------------------------------------------------------------

@pytest.mark.parametrize("k", [-0.2, 0.2, 0.5, 0.8])
def test_fit_generalized_pareto_recovers_shape(k):
  # The ML / Zhang-Stephens estimate of k has standard deviation about
  # (1 + k) / sqrt(M) = 0.013 at k = 0.8 and M = 20000; allow 4 of them
  # (the prior toward 0.5 moves k by only 10 |k - 0.5| / (M + 10)).
  rng = np.random.default_rng(int(100 * (k + 1)))
  m, sigma = 20000, 2.
  x = sigma * (rng.random(m) ** -k - 1) / k
  k_hat, sigma_hat = ps.fit_generalized_pareto(x)
  tol = 4 * (1 + k) / math.sqrt(m)
  assert k_hat == pytest.approx(k, abs=tol)
  assert sigma_hat == pytest.approx(sigma, rel=0.1)


def test_fit_generalized_pareto_is_order_and_scale_equivariant():
  # The prior adjustment toward k = 0.5 is checked by the ArviZ comparison.
  rng = np.random.default_rng(3)
  x = rng.exponential(size=12)
  k, sigma = ps.fit_generalized_pareto(x)
  assert ps.fit_generalized_pareto(x[::-1]) == (k, sigma)
  k_scaled, sigma_scaled = ps.fit_generalized_pareto(1000. * x)
  assert k_scaled == pytest.approx(k, abs=1e-12)
  assert sigma_scaled == pytest.approx(1000. * sigma, rel=1e-12)


@pytest.mark.parametrize("k", [0.3, 0.7])
def test_psis_khat_of_pareto_weights(k):
  # Weights U^-k are Pareto with tail index 1 / k; exceedances over any
  # threshold are GPD with shape k.  Per vector (S = 10^4, M = 300) the sd of
  # k_hat is about (1 + k) / sqrt(300) < 0.1; the mean of 20 has sd < 0.023.
  rng = np.random.default_rng(10 + int(10 * k))
  k_hats = [ps.psis(-k * np.log(rng.random(10000)))[1] for _ in range(20)]
  assert np.mean(k_hats) == pytest.approx(k, abs=0.07)


def test_psis_khat_of_normal_ratios():
  # Target N(0, 1), proposal N(0, s^2), s < 1: log w = x^2 (1/s^2 - 1) / 2, so
  # P(w > t) = P(|x| > a(t)) ~ t^(-1 / (1 - s^2)) (log t)^(-1/2): a Pareto
  # tail with k = 1 - s^2 up to the slowly varying factor, which biases k_hat
  # low at finite S.  Over 20 seeds, the mean of 10 k_hats at S = 10^4 was
  # 0.28 +- 0.03 (s = 0.85, k = 0.28), 0.48 +- 0.02 (s = 0.7, k = 0.51) and
  # 0.68 +- 0.03 (s = 0.5, k = 0.75).
  rng = np.random.default_rng(5)
  means = {}
  for s in (0.5, 0.7, 0.85):
    means[s] = np.mean([ps.psis(normal_ratio_log_weights(rng, s, 10000)[1])[1]
                        for _ in range(10)])
  assert means[0.85] == pytest.approx(1 - 0.85 ** 2, abs=0.1)
  assert means[0.7] == pytest.approx(1 - 0.7 ** 2, abs=0.1)
  assert 0.75 - 0.17 < means[0.5] < 0.75 + 0.05
  assert means[0.5] > means[0.7] > means[0.85]
  # s > 1: bounded weights, a light tail.
  assert ps.psis(normal_ratio_log_weights(rng, 1.5, 10000)[1])[1] < 0.3


# -- smoothed weights ---------------------------------------------------------------

def test_smoothed_weights_properties():
  rng = np.random.default_rng(7)
  for log_w in (-0.9 * np.log(rng.random(5000)) + 3.,
                normal_ratio_log_weights(rng, 0.5, 5000)[1],
                rng.normal(size=500)):
    lw, k_hat = ps.psis(log_w)
    assert lw.shape == log_w.shape and math.isfinite(k_hat)
    assert np.sum(np.exp(lw)) == pytest.approx(1., abs=1e-12)
    order = np.argsort(log_w)
    assert np.all(np.diff(lw[order]) >= 0)  # order kept
    # The body is only shifted (by the normalizing constant): the smallest
    # raw weight is never in the tail.  Undo the shift and compare the tail
    # with the largest raw weight.
    shift = lw[order[0]] - log_w[order[0]]
    body = order[:len(order) - math.ceil(min(0.2 * len(order), 3 * math.sqrt(len(order))))]
    np.testing.assert_allclose(lw[body] - shift, log_w[body], atol=1e-9)
    assert np.max(lw - shift) <= np.max(log_w) + 1e-9
    assert np.any(lw[order[-5:]] != log_w[order[-5:]] + shift)  # tail changed


def test_heavy_tail_is_truncated_at_max_raw_weight():
  # Squash the 5 largest of 2000 heavy-tailed (k = 0.95) raw log weights to
  # just above the 6th: the fitted GPD's top quantiles then exceed the
  # largest raw weight and are truncated to it.
  rng = np.random.default_rng(8)
  log_w = -0.95 * np.log(rng.random(2000))
  order = np.argsort(log_w)
  log_w[order[-5:]] = log_w[order[-6]] + 1e-3 * np.arange(1, 6)
  lw, k_hat = ps.psis(log_w)
  assert k_hat > 0.5
  shift = lw[order[0]] - log_w[order[0]]
  at_max = np.isclose(lw - shift, np.max(log_w), rtol=0, atol=1e-9)
  assert np.max(lw - shift) <= np.max(log_w) + 1e-9 and np.sum(at_max) >= 2


def test_psis_expectation_light_tail_matches_moments():
  # Target N(0, 1), proposal N(0, 1.5^2): bounded ratios, k_hat < 0.5.
  rng = np.random.default_rng(11)
  x, log_w = normal_ratio_log_weights(rng, 1.5, 4000)
  values = np.stack([x, x ** 2], axis=1)  # [S, 2]
  estimate, k_hat = ps.psis_expectation(values, log_w)
  assert k_hat < 0.5 and estimate.shape == (2,)
  w = np.exp(ps.psis(log_w)[0])
  # Self-normalized IS standard error: sqrt(sum_s w_s^2 (h_s - estimate)^2).
  se = np.sqrt(np.sum(w[:, None] ** 2 * (values - estimate) ** 2, axis=0))
  assert np.all(np.abs(estimate - [0., 1.]) < 4 * se)
  assert np.all(se < 0.05)
  scalar, k_scalar = ps.psis_expectation(x, log_w)
  assert isinstance(scalar, float) and scalar == pytest.approx(estimate[0])
  assert k_scalar == k_hat
  with pytest.raises(ValueError, match="shape"):
    ps.psis_expectation(x[:-1], log_w)


def test_importance_ess():
  assert ps.importance_ess(np.zeros(50)) == pytest.approx(50.)
  assert ps.importance_ess(np.full(50, 7.)) == pytest.approx(50.)
  assert ps.importance_ess([0., 0., -np.inf, -np.inf]) == pytest.approx(2.)
  assert ps.importance_ess([0., -1000., -1000.]) == pytest.approx(1.)
  log_w = np.log([1., 2., 3., 4.])
  assert ps.importance_ess(log_w) == pytest.approx(100. / 30.)
  rng = np.random.default_rng(12)
  raw = -0.8 * np.log(rng.random(4000))
  assert ps.importance_ess(ps.psis(raw)[0]) > ps.importance_ess(raw)


# -- errors and conventions ---------------------------------------------------------

@pytest.mark.parametrize("fn", [ps.psis, ps.importance_ess,
                                lambda lw: ps.psis_expectation(np.zeros(len(lw)), lw)])
def test_bad_log_weights_raise(fn):
  with pytest.raises(ValueError, match="NaN"):
    fn(np.array([0., np.nan, 1.]))
  with pytest.raises(ValueError, match=r"\+inf"):
    fn(np.array([0., np.inf, 1.]))
  with pytest.raises(ValueError, match="at least 2 draws"):
    fn(np.array([0.]))
  with pytest.raises(ValueError, match="zero"):
    fn(np.full(5, -np.inf))
  with pytest.raises(ValueError, match="1-D"):
    fn(np.zeros((3, 2)))


def test_minus_inf_gets_zero_weight():
  rng = np.random.default_rng(13)
  log_w = rng.normal(size=300)
  log_w[::3] = -np.inf
  lw, k_hat = ps.psis(log_w)
  assert np.all(np.isneginf(lw[::3])) and np.all(np.isfinite(np.delete(lw, np.s_[::3])))
  assert math.isfinite(k_hat)
  assert np.sum(np.exp(lw)) == pytest.approx(1.)


def test_short_or_degenerate_tail_gives_inf_and_no_smoothing():
  rng = np.random.default_rng(14)
  log_w = rng.normal(size=20)  # M = 4 < 5
  lw, k_hat = ps.psis(log_w)
  assert k_hat == math.inf
  np.testing.assert_allclose(lw, log_w - logsumexp(log_w))
  # S = 100, M = 20: the 20 largest raw weights are equal; ArviZ would fit
  # the constant exceedances, here (as in R's loo) k_hat = inf.
  log_w = np.concatenate([rng.normal(size=80) - 5., np.zeros(20)])
  lw, k_hat = ps.psis(log_w)
  assert k_hat == math.inf
  np.testing.assert_allclose(lw, log_w - logsumexp(log_w))
  for degenerate in (np.ones(10), [0., 0., 0., 1., 2.]):  # all equal; quartile 0
    k_hat, sigma = ps.fit_generalized_pareto(degenerate)
    assert k_hat == math.inf and math.isnan(sigma)
  assert math.isfinite(ps.fit_generalized_pareto([1., 2., 3., 5., 8.])[0])


def test_fit_generalized_pareto_bad_input():
  with pytest.raises(ValueError, match="at least 2"):
    ps.fit_generalized_pareto([1.])
  with pytest.raises(ValueError, match=">= 0"):
    ps.fit_generalized_pareto([1., -1., 2.])
  with pytest.raises(ValueError, match=">= 0"):
    ps.fit_generalized_pareto([1., np.nan, 2.])


# -- reading k_hat ------------------------------------------------------------------

def test_khat_threshold():
  assert ps.khat_threshold(100) == pytest.approx(0.5)
  assert ps.khat_threshold(1000) == pytest.approx(2. / 3.)
  assert ps.khat_threshold(10 ** 6) == pytest.approx(0.7)
  assert ps.khat_threshold(2000) == pytest.approx(1 - 1 / math.log10(2000))
  with pytest.raises(ValueError):
    ps.khat_threshold(1)


def test_khat_message():
  msg = ps.khat_message(0.3, 1000)
  assert "0.30" in msg and "1000" in msg and "0.67" in msg
  assert "reliable" in msg and "unreliable" not in msg
  msg = ps.khat_message(0.6, 100)  # above 0.5, below 0.7: more draws help
  assert "0.60" in msg and "0.50" in msg and "unreliable" in msg
  assert str(math.ceil(10 ** (1 / 0.4))) in msg
  msg = ps.khat_message(0.8, 10 ** 6)
  assert "0.80" in msg and "0.70" in msg and "unreliable" in msg and "bias" in msg
  assert "not help" in msg
  msg = ps.khat_message(1.3, 4000)
  assert "1.30" in msg and "not usable" in msg and "mean" in msg
  assert "not usable" in ps.khat_message(math.inf, 20)
  with pytest.raises(ValueError, match="NaN"):
    ps.khat_message(math.nan, 100)
