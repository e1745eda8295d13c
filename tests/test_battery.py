"""The robustness battery's bounded CI part (issue 17).

Every model of ``tests/battery_models.py`` once with the sampler's defaults
at 8 chains (one fixed seed, 500 warmup + 500 draws), and 64 chains on a
few cheap ones: no stuck chain, max R-hat < 1.01, posterior means and sds
within 4 Monte Carlo standard errors of references computed another way
(exact, or quadrature).  The full battery (4, 8 and 64 chains, three seeds,
1000 + 1000) is ``benchmarks/robustness_battery.py``; its results are in
``benchmarks/RESULTS.md``.
"""

import numpy as np
import pytest

import battery_models as bm

CI_MODELS = [name for name, m in bm.MODELS.items() if name != "funnel" and m.in_ci]
# Long (``--long``) at 8 chains: the default run keeps linreg, hier_centred,
# funnel_noncentred and arma11.
LONG_AT_8_CHAINS = {"gp_poisson", "garch11", "gp", "gauss_mix", "linreg10", "loglinreg",
                    "poisson", "logistic", "hier_noncentred", "ar3"}


def _explain(out):
  lines = [f"{out['model']} chains={out['chains']} seed={out['seed']}: stuck {out['stuck']}, "
           f"max R-hat {out['max_rhat']:.3f}, divergences {out['divergences']}"]
  for row in out["rows"]:
    lines.append(f"  {row['label']}: mean {row['mean']:.4f} (ref {row['ref_mean']:.4f}, "
                 f"z {row['z_mean']:.2f}), sd {row['sd']:.4f} (ref {row['ref_sd']:.4f}, "
                 f"z {row.get('z_sd', np.nan):.2f})")
  return "\n".join(lines)


def _assert_passes(out):
  assert out["stuck"] == [], _explain(out)
  assert out["max_rhat"] < bm.RHAT_MAX, _explain(out)
  assert out["max_z_mean"] < bm.Z_MAX, _explain(out)
  assert out["max_z_sd"] < bm.Z_MAX, _explain(out)


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.long) if name in LONG_AT_8_CHAINS else name
    for name in CI_MODELS])
def test_model_at_8_chains_matches_its_reference(name):
  _assert_passes(bm.run(bm.MODELS[name], chains=8, seed=0, warmup=500, draws=500))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["linreg",  # the default run keeps linreg at 64 chains
                                  pytest.param("logistic", marks=pytest.mark.long),
                                  pytest.param("hier_noncentred", marks=pytest.mark.long)])
def test_cheap_models_at_64_chains(name):
  _assert_passes(bm.run(bm.MODELS[name], chains=64, seed=1, warmup=500, draws=250))


@pytest.mark.slow
def test_centred_funnel_is_flagged_when_it_is_wrong():
  """Neal's centred funnel defeats NUTS with one step size per chain, at
  target_accept 0.99 too (NumPyro's as well: benchmarks/RESULTS.md): a run
  either matches the exact marginals or its summary says not to trust it."""
  out = bm.run(bm.MODELS["funnel"], chains=4, seed=0, warmup=300, draws=300)
  if not out["passed"]:
    with pytest.warns(RuntimeWarning, match="R-hat > 1.01|divergent|stuck|apart"):
      out["result"].summary()


def test_references_agree_with_a_second_computation():
  """The exact regression reference against the closed form with flat
  sigma (Student-t b, inverse-gamma sigma^2), and the grid against the
  exact answer on a model that has one."""
  (x,), obs = bm.wide_regression_data()
  xx = np.concatenate([np.ones((len(x), 1)), x], 1)
  ref = bm.MODELS["linreg10"].reference()
  n, p = xx.shape
  b_hat, sse = np.linalg.lstsq(xx, obs["y"], rcond=None)[:2]
  nu = n - p - 1               # flat sigma: b is Student-t with N - p - 1 dof
  np.testing.assert_allclose(ref["b"][0], b_hat, rtol=1e-10)
  np.testing.assert_allclose(ref["b"][1], np.sqrt(np.diag(sse[0] / (nu - 2)
                                                          * np.linalg.inv(xx.T @ xx))),
                             rtol=1e-6)
  # sigma^2 ~ Inv-Gamma(nu / 2, SSE / 2): E sigma = sqrt(SSE / 2) G((nu-1)/2) / G(nu/2).
  from scipy.special import gammaln
  e_sigma = np.sqrt(sse[0] / 2) * np.exp(gammaln((nu - 1) / 2) - gammaln(nu / 2))
  np.testing.assert_allclose(ref["sigma"][0], e_sigma, rtol=1e-6)
  np.testing.assert_allclose(ref["sigma"][1]**2 + e_sigma**2, sse[0] / (nu - 2), rtol=1e-6)
  # The 3-D grid on a small regression with flat sigma (u = b0, b1, log sigma).
  rng = np.random.default_rng(0)
  x2 = np.stack([np.ones(30), rng.normal(size=30)], 1)
  y = x2 @ [1., 0.7] + rng.normal(0., 0.5, 30)
  exact = bm.flat_regression_reference(x2, y, lambda s: 0. * s)

  def log_density(u):
    sigma = np.exp(u[:, 2])
    resid = y[None] - u[:, :2] @ x2.T
    return -30 * np.log(sigma) - np.sum(resid**2, 1) / (2 * sigma**2) + u[:, 2]
  grid = bm.grid_reference(log_density, lambda u: {"b": u[:, :2], "sigma": np.exp(u[:, 2])},
                           [1., 0.7, np.log(0.5)], points=31, width=8.)
  for name in ("b", "sigma"):
    np.testing.assert_allclose(grid[name][0], exact[name][0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(grid[name][1], exact[name][1], rtol=1e-5)
