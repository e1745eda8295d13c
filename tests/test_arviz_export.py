"""to_arviz() under the installed ArviZ: an ``arviz.InferenceData`` (0.2x)
or an ``xarray.DataTree`` (1.x) with every group, and ArviZ's summary and
PSIS-LOO on it against the conjugate normal model's exact answers.

CI runs this file under both (.ci/run: Python 3.11 with ArviZ 0.2x, 3.12+
with ArviZ 1.x).
"""

import numpy as np
import pytest
from scipy import stats

import edward_lite as ed
from edward_lite.analysis import arviz_compat

az = pytest.importorskip("arviz")

# mu ~ N(0, 2^2), y_i ~ N(mu, 1): mu | y ~ N(sum y / (n + 1/4), 1 / (n + 1/4)).
Y = np.array([1.2, 0.4, 2.2, 1.0, 0.7, 1.9], np.float32)
GROUPS = {"posterior": "mu", "sample_stats": "diverging", "log_likelihood": "y",
          "posterior_predictive": "y", "observed_data": "y", "prior": "mu",
          "prior_predictive": "y"}  # group -> a variable it holds


def normal_normal():
  mu = ed.Normal(0., 2., name="mu")
  return ed.Normal(mu, 1., sample_shape=len(Y), name="y")


def posterior_of(y):
  precision = len(y) + 0.25
  return np.sum(y, dtype=np.float64) / precision, 1. / precision


@pytest.fixture(scope="module")
def result():
  return ed.mcmc.sample(normal_normal, observed={"y": Y}, chains=4, warmup=200, draws=1000,
                        seed=21, progress=False)


def test_to_arviz_is_the_installed_arviz_container_with_every_group(result):
  idata = result.to_arviz(prior_draws=300)
  major = int(az.__version__.split(".", 1)[0])
  if major >= 1:
    import xarray  # pylint: disable=g-import-not-at-top
    assert isinstance(idata, xarray.DataTree)
  else:
    assert isinstance(idata, az.InferenceData)
  assert isinstance(idata, arviz_compat.data_type()) and arviz_compat.is_datatree() == (major >= 1)
  for group, name in GROUPS.items():
    assert name in idata[group], (group, name)
  np.testing.assert_array_equal(idata.posterior["mu"].values, result.draws["mu"].T)
  assert idata.log_likelihood["y"].shape == (4, 1000, len(Y))
  assert idata.posterior_predictive["y"].shape == (4, 1000, len(Y))
  assert idata.prior["mu"].shape == (1, 300) and idata.prior_predictive["y"].shape == (1, 300,
                                                                                      len(Y))
  np.testing.assert_array_equal(idata.observed_data["y"].values, Y)
  assert int(idata.sample_stats["diverging"].sum()) == int(result.divergences.sum())
  # The prior draws: mu ~ N(0, 2^2), 300 of them (4.5 standard errors).
  assert abs(float(idata.prior["mu"].mean())) < 4.5 * 2. / np.sqrt(300)


def test_arviz_summary_and_loo_on_it_match_the_exact_answers(result):
  idata = result.to_arviz()
  mean, var = posterior_of(Y)
  row = az.summary(idata, var_names=["mu"], round_to="none").loc["mu"]
  assert abs(row["mean"] - mean) < 4 * row["mcse_mean"]
  assert abs(row["sd"] / np.sqrt(var) - 1.) < 0.1
  assert row["r_hat"] < 1.01 and row["ess_bulk"] > 1000
  # Exact LOO: y_i | y_-i ~ N(mean_-i, 1 + var_-i).
  exact = []
  for i in range(len(Y)):
    m, v = posterior_of(np.delete(Y, i))
    exact.append(stats.norm.logpdf(Y[i], m, np.sqrt(1. + v)))
  loo = arviz_compat.elpd(az.loo(idata, pointwise=True))
  # Each term is a Monte Carlo estimate of log p(y_i | y_-i) = -log E[1 / p(y_i | mu)]
  # over the posterior; its MCSE by the delta method with the ESS of 1 / p.
  loglik = result.log_likelihood()["y"]  # [draws, chains, n]
  inverse = np.exp(-loglik.astype(np.float64))
  mcse = np.array([inverse[..., i].std() / inverse[..., i].mean()
                   / np.sqrt(float(ed.diagnostics.ess(inverse[..., i]))) for i in range(len(Y))])
  assert np.all(np.abs(np.asarray(loo.pointwise) - exact) < 4 * mcse + 0.005), (
      np.asarray(loo.pointwise) - exact, mcse)
  assert abs(loo.elpd - np.sum(exact)) < 4 * np.sqrt(np.sum(mcse**2)) + 0.02
  assert loo.se > 0  # (0.2x and 1.x take the sd of the terms with ddof 0 and 1)
  # p_loo = lppd - elpd_loo, lppd_i = log N(y_i; mean, 1 + var) exactly.
  lppd = stats.norm.logpdf(Y, mean, np.sqrt(1. + var)).sum()
  assert abs(loo.p - (lppd - np.sum(exact))) < 0.05
  assert np.all(np.asarray(loo.pareto_k) < 0.7)


def test_vi_to_arviz_and_plots_take_the_container(result, tmp_path):
  fit = ed.vi.fit(normal_normal, observed={"y": Y}, steps=300, seed=2, progress=False)
  idata = fit.to_arviz(draws=400, seed=3)
  assert isinstance(idata, arviz_compat.data_type())
  assert idata.posterior["mu"].shape == (1, 400)
  mean, var = posterior_of(Y)
  assert abs(float(idata.posterior["mu"].mean()) - mean) < 4.5 * np.sqrt(var / 400)
  # ed.plot takes ArviZ's container as it is.
  fig = ed.plot.trace(result.to_arviz(posterior_predictive=False), path=tmp_path / "t.png")
  assert fig.get_suptitle().startswith("Trace: 4 chains x 1000 draws")
