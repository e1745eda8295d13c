"""ed.mcmc.sample against analytic posteriors, reference posteriors and itself.

Tolerances: an estimate from ``S`` effective draws of a quantity with
posterior sd ``s`` has Monte Carlo error ``s / sqrt(S)``; the checks allow
4-5 such errors (the ESS is measured from the draws, so a badly mixing
sampler gets no free pass: its ESS floor is asserted too).
"""

import dataclasses
import json
import re
import pathlib

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.analysis import column_summary, diagnostics
import zoo
from edward_lite.mcmc import chunk, compiled, kept_draws
from edward_lite.mcmc import run as run_module
from edward_lite.mcmc.chunk import ROUNDS_MIN_CHAINS

KERNELS = ["nuts", "hmc", "rwmh", "chees"]

# Normal-normal: mu ~ N(0, 2^2), y_i ~ N(mu, 1), i = 1..4.
Y_NN = np.array([1.2, 0.5, 2.0, 1.5], np.float32)
POST_PREC = 1 / 4. + len(Y_NN)
POST_MEAN, POST_VAR = Y_NN.sum() / POST_PREC, 1 / POST_PREC


def normal_normal():
  mu = ed.Normal(0., 2., name="mu")
  return ed.Normal(mu, 1., sample_shape=len(Y_NN), name="y")


def check_moments(draws, mean, var, what, min_ess=100):
  """Posterior mean and variance of ``draws[draws, chains, ...]`` against
  the exact values, within 5 Monte Carlo standard errors."""
  draws = np.asarray(draws, np.float64)
  ess = np.asarray(diagnostics.ess_bulk(draws))
  assert np.all(ess > min_ess), f"{what}: ESS {ess} too low"
  est_mean = draws.mean(axis=(0, 1))
  sd = np.sqrt(var)
  assert np.all(np.abs(est_mean - mean) < 5 * sd / np.sqrt(ess)), (what, est_mean, mean)
  # Var of the sample variance of a normal ~ 2 var^2 / ESS (ESS of squares is
  # similar to that of the draws for these targets; allow 6 errors).
  est_var = draws.var(axis=(0, 1))
  assert np.all(np.abs(est_var - var) < 6 * var * np.sqrt(2 / ess)), (what, est_var, var)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_normal_normal_posterior(kernel):
  result = ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, kernel=kernel, chains=16,
                          warmup=300, draws=400, seed=1, progress=False)
  assert result.draws["mu"].shape == (400, 16)
  check_moments(result.draws["mu"], POST_MEAN, POST_VAR, kernel)
  assert result.divergences.sum() == 0


RHO = 0.9
COV = np.array([[1., RHO * 2.], [RHO * 2., 4.]], np.float32)
LOC = np.array([1., -2.], np.float32)


def correlated_normal():
  return ed.MultivariateNormalTriL(LOC, np.linalg.cholesky(COV), name="x")


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_correlated_multivariate_normal(kernel):
  result = ed.mcmc.sample(correlated_normal, kernel=kernel, chains=16, warmup=300,
                          draws=500, seed=2, progress=False)
  x = result.draws["x"]  # [500, 16, 2]
  check_moments(x, LOC, np.diag(COV), kernel, min_ess=60)
  flat = x.reshape(-1, 2)
  # Antithetic samplers can exceed the draw count; the correlation estimator
  # does not share that, so cap the ESS at the number of draws.
  ess = min(float(np.min(diagnostics.ess_bulk(x))), flat.shape[0])
  corr = np.corrcoef(flat.T)[0, 1]
  # sd of a sample correlation ~ (1 - rho^2) / sqrt(n)
  assert abs(corr - RHO) < 5 * (1 - RHO ** 2) / np.sqrt(ess), (kernel, corr)


# Gamma-Poisson: lam ~ Gamma(3, 2); y_i ~ Poisson(lam) -> Gamma(3 + sum y, 2 + n).
Y_POIS = np.array([2., 4., 1., 3., 5., 2.], np.float32)
A_POST, B_POST = 3. + Y_POIS.sum(), 2. + len(Y_POIS)


def gamma_poisson():
  lam = ed.Gamma(3., 2., name="lam")
  return ed.Poisson(lam, sample_shape=len(Y_POIS), name="y")


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_constrained_latent_gamma_poisson(kernel):
  result = ed.mcmc.sample(gamma_poisson, observed={"y": Y_POIS}, kernel=kernel, chains=16,
                          warmup=300, draws=500, seed=3, progress=False)
  lam = result.draws["lam"]
  assert lam.min() > 0
  check_moments(lam, A_POST / B_POST, A_POST / B_POST ** 2, kernel)
  # A tail too: the fraction of draws below the exact 95% point of
  # Gamma(a, b) (bisection on the regularized incomplete gamma function) is
  # 0.95 within 4 Monte Carlo errors, sqrt(p (1 - p) / ESS) with the ESS of
  # the indicator.
  below = (lam <= _gamma_quantile(0.95, A_POST, B_POST)).astype(np.float64)
  mcse = np.sqrt(0.95 * 0.05 / float(diagnostics.ess(below)))
  assert abs(below.mean() - 0.95) < 4 * mcse, (below.mean(), mcse)


def _gamma_quantile(p, a, b):
  lo, hi = 0., 100.
  for _ in range(100):
    mid = (lo + hi) / 2
    if float(tf.math.igamma(tf.constant(a, tf.float64), mid * b)) < p:
      lo = mid
    else:
      hi = mid
  return (lo + hi) / 2


EIGHT_Y, EIGHT_SIGMA = zoo.EIGHT_SCHOOLS_Y, zoo.EIGHT_SCHOOLS_SIGMA
eight_schools = zoo.eight_schools


def _reference(name):
  """A long Stan run shipped with the tests (tests/refs/, 7 kB): never skipped."""
  return json.loads((pathlib.Path(__file__).resolve().parent / "refs" / f"{name}.json")
                    .read_text())


# Settings per kernel: NUTS and HMC as a user would run them; ChEES adapts its
# trajectory length across chains, so it gets more; random-walk Metropolis
# mixes ~D times slower per draw in these 10 dimensions, so it gets many
# cheap chains and longer runs (still under a second of sampling).
EIGHT_SCHOOLS_RUNS = {
    "nuts": dict(chains=8, warmup=1000, draws=1000),
    "hmc": dict(chains=8, warmup=1000, draws=1000),
    "chees": dict(chains=64, warmup=1000, draws=500),
    "rwmh": dict(chains=128, warmup=2000, draws=4000),
}


@pytest.mark.slow
# Long: HMC and ChEES; the default run keeps NUTS and RWMH here (ChEES and HMC
# on the normal-normal posterior).
@pytest.mark.parametrize("kernel", [
    pytest.param(k, marks=pytest.mark.long) if k in ("hmc", "chees") else k for k in KERNELS])
def test_eight_schools_against_stan_reference(kernel):
  ref = _reference("eight_schools")
  run = EIGHT_SCHOOLS_RUNS[kernel]
  result = ed.mcmc.sample(eight_schools, EIGHT_SIGMA, observed={"y": EIGHT_Y}, kernel=kernel,
                          seed=4, progress=False, **run)
  for name in ("mu", "tau", "theta_tilde"):
    draws = np.asarray(result.draws[name], np.float64)
    params = ref["params"][name]
    ess = np.asarray(diagnostics.ess_bulk(draws)).reshape(-1)
    mean = draws.mean(axis=(0, 1)).reshape(-1)
    ref_mean, ref_sd = np.array(params["mean"]), np.array(params["sd"])
    err = np.sqrt(np.array(params["mcse_mean"]) ** 2 + ref_sd ** 2 / ess)
    assert np.all(np.abs(mean - ref_mean) <= 5 * err), (kernel, name, mean, ref_mean, err)
    assert np.all(ess > 300), (kernel, name, ess)
    r_hat = np.asarray(diagnostics.rhat(draws)).reshape(-1)
    assert np.all(r_hat < 1.02), (kernel, name, r_hat)
  assert result.divergences.sum() <= 0.01 * run["chains"] * run["draws"]


@pytest.mark.slow
@pytest.mark.parametrize("kernel, chains", [("hmc", 4), ("nuts", 4),  # long: nuts at 32
                                            pytest.param("nuts", 32, marks=pytest.mark.long)])
def test_reproducible_and_independent_of_chunking(kernel, chains):
  """A seed gives the same draws.  Transition t draws from fold_in(seed, t),
  so draws do not depend on the chunking -- except NUTS's sampling phase
  with 32 chains or more, which runs in rounds of transitions that end with
  the chunk (its warmup, and so the step size it ends with, does not)."""
  kwargs = dict(observed={"y": Y_NN}, kernel=kernel, chains=chains, warmup=120, draws=80,
                progress=False)
  a = ed.mcmc.sample(normal_normal, seed=7, **kwargs)
  a2 = ed.mcmc.sample(normal_normal, seed=7, **kwargs)
  b = ed.mcmc.sample(normal_normal, seed=7, chunk_size=33, **kwargs)
  c = ed.mcmc.sample(normal_normal, seed=8, **kwargs)
  np.testing.assert_array_equal(a.draws["mu"], a2.draws["mu"])
  np.testing.assert_array_equal(a.step_size, b.step_size)
  if chains < ROUNDS_MIN_CHAINS:
    np.testing.assert_array_equal(a.draws["mu"], b.draws["mu"])
    np.testing.assert_array_equal(a.sample_stats["num_gradients"], b.sample_stats["num_gradients"])
  else:
    assert not np.array_equal(a.draws["mu"], b.draws["mu"])
  assert not np.array_equal(a.draws["mu"], c.draws["mu"])


@pytest.mark.slow
def test_many_chains_equal_few_chains_in_distribution():
  few = ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, chains=4, warmup=200, draws=500,
                       seed=5, progress=False)
  many = ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, chains=256, warmup=200,
                        draws=50, seed=5, progress=False)
  for r in (few, many):
    check_moments(r.draws["mu"], POST_MEAN, POST_VAR, f"{r.chains} chains")


@pytest.mark.slow
def test_nuts_rounds_with_many_chains():
  """64 chains: NUTS samples in rounds (each chain's transitions in a row);
  the posterior, the kept statistics and the streamed ones agree.  (One
  pooled step size: with per-chain step sizes the kept and the streaming
  programs, compiled separately, round differently at this many chains, so
  their trajectories agree in distribution, not bit for bit.  A diagonal
  metric: the default low-rank one makes this posterior a standard normal,
  whose trees are all one or two leapfrogs long.)"""
  kwargs = dict(kernel="nuts", chains=64, warmup=200, draws=100, seed=15, progress=False,
                pooled=True, adapt_metric="diag")
  kept = ed.mcmc.sample(correlated_normal, **kwargs)
  x = kept.draws["x"]
  check_moments(x, LOC, np.diag(COV), "rounds", min_ess=500)
  n_grads = kept.sample_stats["num_gradients"]
  assert len(np.unique(n_grads)) > 3 and n_grads.min() >= 1
  streamed = ed.mcmc.sample(correlated_normal, keep_draws=False, **kwargs)
  np.testing.assert_allclose(streamed.mean["x"], x.mean(axis=0), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(streamed.variance["x"], x.var(axis=0, ddof=1), rtol=1e-4)


@pytest.mark.slow
def test_warmup_in_rounds_tunes_the_step_size_as_lockstep(monkeypatch):
  """From ``WARMUP_ROUNDS_MIN_CHAINS`` chains NUTS's warmup runs in rounds,
  one step-size update per round on each chain's harmonic mean acceptance
  over it.  On eight schools (whose funnel-shaped tau direction makes the
  chains' acceptances differ) the shared step size it ends with is within
  15% of lockstep warmup's, and so are the trees' lengths, over three seeds
  (one run's gradients per iteration vary: seed 3's ratio was 1.28, then
  1.37 after a change of round-off).  (The arithmetic mean over the round
  ran 18% hot here.)"""
  min_chains, seeds = chunk.WARMUP_ROUNDS_MIN_CHAINS, (3, 4, 5)
  runs = {}
  for mode, from_chains in (("rounds", min_chains), ("lockstep", 10**9)):
    # One program per mode (traced anew: the constant is read when tracing), all seeds.
    monkeypatch.setattr(compiled.Program, "_cache", type(compiled.Program._cache)())
    monkeypatch.setattr(chunk, "WARMUP_ROUNDS_MIN_CHAINS", from_chains)
    runs[mode] = [ed.mcmc.sample(zoo.eight_schools, zoo.EIGHT_SCHOOLS_SIGMA,
                                 observed={"y": zoo.EIGHT_SCHOOLS_Y}, chains=min_chains,
                                 warmup=150, draws=50, seed=seed, progress=False,
                                 keep_draws=False) for seed in seeds]
  log_ratios = []
  for seed, rounds, lockstep in zip(seeds, runs["rounds"], runs["lockstep"]):
    a, b = float(np.ravel(rounds.step_size)[0]), float(np.ravel(lockstep.step_size)[0])
    assert abs(np.log(a / b)) < np.log(1.15), (seed, a, b)
    grads = [r.num_gradients.sum() / (r.chains * (r.warmup + r.num_draws))
             for r in (rounds, lockstep)]
    log_ratios.append(np.log(grads[0] / grads[1]))
    divergent = [r.chain_divergent.sum() * r.num_draws for r in (rounds, lockstep)]
    assert divergent[0] <= 3 * divergent[1] + 10, (seed, divergent)
  assert abs(np.mean(log_ratios)) < np.log(1.3), np.exp(log_ratios)


@pytest.mark.slow
def test_streaming_moments_equal_moments_of_kept_draws():
  result = ed.mcmc.sample(gamma_poisson, observed={"y": Y_POIS}, chains=6, warmup=100,
                          draws=150, seed=6, progress=False)
  lam = result.draws["lam"].astype(np.float64)
  np.testing.assert_allclose(result.mean["lam"], lam.mean(axis=0), rtol=1e-5)
  np.testing.assert_allclose(result.variance["lam"], lam.var(axis=0, ddof=1), rtol=1e-4)
  streamed = ed.mcmc.sample(gamma_poisson, observed={"y": Y_POIS}, chains=6, warmup=100,
                            draws=150, seed=6, progress=False, keep_draws=False)
  assert streamed.draws is None
  np.testing.assert_allclose(streamed.mean["lam"], result.mean["lam"], rtol=1e-6)
  table = streamed.summary()
  np.testing.assert_allclose(table.loc["lam", "mean"], lam.mean(), rtol=1e-5)
  np.testing.assert_allclose(table.loc["lam", "sd"], lam.std(ddof=1), rtol=1e-3)


@pytest.mark.slow
def test_thinning_keeps_every_kth_draw():
  kwargs = dict(observed={"y": Y_NN}, chains=3, warmup=50, draws=60, seed=9, progress=False)
  full = ed.mcmc.sample(normal_normal, **kwargs)
  thinned = ed.mcmc.sample(normal_normal, thin=3, **kwargs)
  np.testing.assert_array_equal(thinned.draws["mu"], full.draws["mu"][::3])


def test_kept_buffers_sized_to_the_draws_give_the_same_run(monkeypatch):
  """Above ``KEPT_BUFFER_BYTES`` a chunk's buffers hold the run's kept draws
  instead of ``chunk_size`` rows (20 draws at 10^5 chains held 200 rows a
  chain).  Forced here at a small size: the same draws and statistics, bit
  for bit, thinned."""
  kwargs = dict(observed={"y": Y_NN}, chains=3, warmup=40, draws=23, thin=2, seed=4,
                progress=False)
  full = ed.mcmc.sample(normal_normal, **kwargs)
  monkeypatch.setattr(kept_draws, "KEPT_BUFFER_BYTES", 0)
  monkeypatch.setattr(run_module.Run, "_capacity", _capacity_seen(run_module.Run._capacity))
  small = ed.mcmc.sample(normal_normal, **kwargs)
  assert _capacity_seen.values == [12]  # ceil(23 / 2) rows, not chunk_size's 200
  np.testing.assert_array_equal(small.draws["mu"], full.draws["mu"])
  for key in ("num_gradients", "accept_prob", "log_prob"):
    np.testing.assert_array_equal(small.sample_stats[key], full.sample_stats[key])


@pytest.mark.slow
def test_summary_in_blocks_of_scalars_equals_the_whole(monkeypatch):
  """``summary()`` computes its exact diagnostics a block of scalars at a
  time (``column_summary.EXACT_BLOCK`` values), which bounds its memory:
  blocks of 3 scalars (3 calls for eight schools' 8 thetas) give the table
  of one call for all."""
  result = ed.mcmc.sample(eight_schools, EIGHT_SIGMA, observed={"y": EIGHT_Y}, chains=4,
                          warmup=100, draws=50, seed=3, progress=False)
  whole = result.summary()
  monkeypatch.setattr(column_summary, "EXACT_BLOCK", 3 * 4 * 50)
  blocks = dataclasses.replace(result).summary()  # a new result: nothing kept
  for column in ("ess_bulk", "ess_tail", "r_hat", "mcse_mean"):
    np.testing.assert_allclose(blocks[column].to_numpy(np.float64),
                               whole[column].to_numpy(np.float64), rtol=1e-12)


def _capacity_seen(capacity):
  """``Run._capacity``, recording what it returns."""
  _capacity_seen.values = []

  def wrapped(self):
    value = capacity(self)
    if value not in _capacity_seen.values:
      _capacity_seen.values.append(value)
    return value

  return wrapped


@pytest.mark.slow
def test_summary_table_and_warnings():
  result = ed.mcmc.sample(eight_schools, EIGHT_SIGMA, observed={"y": EIGHT_Y}, chains=4,
                          warmup=200, draws=100, seed=10, progress=False)
  with pytest.warns(RuntimeWarning):  # 400 draws: ESS below 400 for some entries
    table = result.summary()
  labels = list(table.index)
  assert labels[:3] == ["mu", "tau", "theta_tilde[0]"] and len(labels) == 10
  theta = result.draws["theta_tilde"][..., 3].astype(np.float64)
  row = table.loc["theta_tilde[3]"]
  np.testing.assert_allclose(row["mean"], theta.mean(), rtol=1e-5)
  np.testing.assert_allclose(row["q95"], np.quantile(theta, 0.95), rtol=1e-5)
  np.testing.assert_allclose(row["r_hat"], float(diagnostics.rhat(theta)), rtol=1e-6)
  assert "ess_bulk" in table.columns and "theta_tilde[7]" in table.index


def nan_region():
  x = ed.Normal(0., 1., name="x")
  # The likelihood is NaN for x > 1.5: the sampler must reject, not crash.
  return ed.Normal(0., tf.where(x > 1.5, np.float32(np.nan), 1.), value=0., name="y")


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["hmc", "nuts"])
def test_nan_log_density_counts_as_divergence(kernel):
  result = ed.mcmc.sample(nan_region, kernel=kernel, chains=8, warmup=150, draws=300, seed=11,
                          progress=False, init={"x": 0.})
  x = result.draws["x"]
  assert np.all(np.isfinite(x)) and x.max() <= 1.5
  assert result.divergences.sum() + result.warmup_divergences.sum() > 0
  # N(0, 1) truncated at 1.5: mean = -phi(1.5) / Phi(1.5)
  exact = -np.exp(-1.125) / np.sqrt(2 * np.pi) / 0.9331928
  assert abs(x.mean() - exact) < 0.15


def test_bad_settings_are_clear_errors():
  with pytest.raises(ValueError, match="chains"):
    ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, chains=0)
  with pytest.raises(ValueError, match="Unknown kernel 'gibbs'"):
    ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, kernel="gibbs")
  with pytest.raises(ValueError, match="init names \\['sigma'\\]"):
    ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, init={"sigma": 1.})
  with pytest.raises(ValueError, match="init must be"):
    ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, init="prior-ish")
  with pytest.raises(ValueError, match="'lam'"):  # outside the support
    ed.mcmc.sample(gamma_poisson, observed={"y": Y_POIS}, init={"lam": -1.})
  with pytest.raises(ValueError, match="max_tree_depth"):
    ed.mcmc.NUTS(max_tree_depth=0)

  def hopeless():
    x = ed.Normal(0., 1., name="x")
    return ed.Normal(0., tf.where(x > -100., np.float32(np.nan), 1.), value=0., name="y")

  with pytest.raises(ValueError, match="non-finite initial log density"):
    ed.mcmc.sample(hopeless, max_init_tries=3, progress=False)


@pytest.mark.slow
def test_prior_init_and_posterior_predictive():
  result = ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, chains=8, warmup=150,
                          draws=200, seed=12, init="prior", progress=False)
  check_moments(result.draws["mu"], POST_MEAN, POST_VAR, "prior init")
  predictive = result.posterior_predictive(seed=1)
  y_rep = predictive["y"]
  assert set(predictive) == {"y"} and y_rep.shape == (200, 8, 4)
  # y_rep = mu + N(0, 1): mean POST_MEAN, variance POST_VAR + 1 per coordinate;
  # the noise is independent of mu draw by draw.
  noise = y_rep - result.draws["mu"][..., None]
  assert abs(noise.mean()) < 5 / np.sqrt(noise.size)
  assert abs(noise.var() - 1.) < 5 * np.sqrt(2 / noise.size)
  np.testing.assert_array_equal(result.posterior_predictive(seed=1)["y"], y_rep)


def test_sample_prior_matches_prior_moments():
  target = ed.make_target(eight_schools, EIGHT_SIGMA, observed={"y": EIGHT_Y})
  prior = target.sample_prior(4000, seed=3)
  mu, theta = prior["mu"].numpy(), prior["theta_tilde"].numpy()
  assert abs(mu.mean()) < 5 * 5 / np.sqrt(4000) and abs(mu.std() - 5) < 0.3
  assert abs(theta.std() - 1) < 0.03
  # HalfCauchy(0, 5): median 5
  assert abs(np.median(prior["tau"].numpy()) - 5.) < 0.6


def test_to_arviz_matches_our_summary():
  az = pytest.importorskip("arviz")
  result = ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, chains=4, warmup=100,
                          draws=150, seed=13, progress=False)
  idata = result.to_arviz()
  assert idata.posterior["mu"].shape == (4, 150)
  assert int(idata.sample_stats["diverging"].sum()) == int(result.divergences.sum())
  theirs = az.summary(idata, var_names=["mu"], round_to="none")
  ours = result.summary().loc["mu"]
  np.testing.assert_allclose(theirs["ess_bulk"].iloc[0], ours["ess_bulk"], rtol=1e-3, atol=1)
  np.testing.assert_allclose(theirs["r_hat"].iloc[0], ours["r_hat"], atol=0.006)


@pytest.mark.slow
def test_per_chain_adaptation():
  result = ed.mcmc.sample(correlated_normal, kernel="nuts", chains=6, warmup=300, draws=400,
                          seed=14, pooled=False, progress=False)
  assert result.step_size.shape == (6,) and result.inverse_metric.shape == (6, 2)
  # Each chain's metric is the Fisher-divergence diagonal of its own last
  # windows' draws and gradients, sqrt(Var x_i / Var g_i): for a bivariate
  # normal sigma_i^2 sqrt(1 - rho^2) (Var g_i = 1 / ((1 - rho^2) sigma_i^2)),
  # within a factor of 3 from a few hundred autocorrelated draws.
  ratio = result.inverse_metric / (np.diag(COV) * np.sqrt(1. - RHO**2))
  assert np.all((ratio > 1 / 3) & (ratio < 3.)), ratio
  assert len(set(result.step_size.tolist())) == 6  # adapted separately
  check_moments(result.draws["x"], LOC, np.diag(COV), "per-chain", min_ess=60)


@pytest.mark.slow
def test_progress_bar_on_a_terminal(monkeypatch):
  pytest.importorskip("tqdm")
  import io  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top

  class Terminal(io.StringIO):

    def isatty(self):
      return True

  terminal = Terminal()
  monkeypatch.setattr(sys, "stderr", terminal)
  ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, chains=2, warmup=100, draws=100,
                 seed=15, chunk_size=50)
  text = terminal.getvalue()
  assert "sampling" in text and "200/200" in text and "step_size" in text, text[-500:]
  quiet = Terminal()
  monkeypatch.setattr(sys, "stderr", quiet)
  ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, chains=2, warmup=100, draws=100,
                 seed=15, chunk_size=50, progress=False)
  assert quiet.getvalue() == ""


@pytest.mark.slow
def test_callback_reports_each_chunks_gradients():
  seen = []
  result = ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, chains=3, warmup=40, draws=30,
                          chunk_size=20, seed=2, progress=False,
                          callback=lambda info: seen.append(info["num_gradients"]))
  assert len(seen) >= 4  # chunks of at most 20, also cut at warmup window ends
  np.testing.assert_array_equal(np.sum(seen, axis=0), result.num_gradients)


@pytest.mark.slow
def test_dense_metric_learns_the_covariance(tmp_path):
  # Correlation 0.995: a diagonal metric leaves a long, thin posterior and
  # long trajectories; the dense metric learns the covariance and makes the
  # preconditioned target nearly isotropic.
  cov = np.array([[1., 0.995 * 2.], [0.995 * 2., 4.]], np.float32)

  def very_correlated():
    return ed.MultivariateNormalTriL(LOC, np.linalg.cholesky(cov), name="x")

  kwargs = dict(chains=4, warmup=400, draws=400, seed=15, progress=False)
  dense = ed.mcmc.sample(very_correlated, adapt_metric="dense", **kwargs)
  diag = ed.mcmc.sample(very_correlated, adapt_metric="diag", **kwargs)
  default = ed.mcmc.sample(very_correlated, **kwargs)  # low rank: here, every direction
  assert dense.inverse_metric.shape == (2, 2)
  np.testing.assert_allclose(dense.inverse_metric, cov, rtol=0.3)
  check_moments(dense.draws["x"], LOC, np.diag(cov), "dense metric")
  assert dense.sample_stats["num_gradients"].mean() < 0.3 * diag.sample_stats["num_gradients"].mean()
  assert default.sample_stats["num_gradients"].mean() < 0.3 * diag.sample_stats["num_gradients"].mean()
  # A checkpointed dense run reloads the same draws (the state template
  # carries the [D, D] low-rank part).
  ckpt = str(tmp_path / "dense")
  first = ed.mcmc.sample(very_correlated, adapt_metric="dense", checkpoint_dir=ckpt,
                         **dict(kwargs, warmup=60, draws=20))
  again = ed.mcmc.sample(very_correlated, adapt_metric="dense", checkpoint_dir=ckpt,
                         **dict(kwargs, warmup=60, draws=20))
  np.testing.assert_array_equal(first.draws["x"], again.draws["x"])
  # With per-chain step sizes the dense metric is still one for all chains.
  own_steps = ed.mcmc.sample(very_correlated, adapt_metric="dense", pooled=False, **kwargs)
  assert own_steps.step_size.shape == (4,) and own_steps.inverse_metric.shape == (2, 2)
  check_moments(own_steps.draws["x"], LOC, np.diag(cov), "dense metric, own step sizes")
  with pytest.raises(ValueError, match="adapt_metric must be"):
    ed.mcmc.sample(very_correlated, adapt_metric="full", **kwargs)


@pytest.mark.slow
def test_progress_lines_off_a_terminal(monkeypatch):
  import io  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  log = io.StringIO()  # a batch job's log: not a terminal
  monkeypatch.setattr(sys, "stderr", log)
  compiled.Program._cache.clear()  # pylint: disable=protected-access  (a first call)
  result = ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, chains=2, warmup=100,
                          draws=100, seed=15, chunk_size=20, step_size=3.)
  lines = log.getvalue().splitlines()
  assert lines[0] == "sampling: compiling (first call)"
  first = re.fullmatch(r"sampling: first chunk done (\d+\.\d) s after the call", lines[1])
  # Its seconds are the first chunk's with the setup before it (the initial
  # states, found while the chunk compiles); the result's compile_s counts
  # until the first compiled chunk returns, the second here (the first runs
  # without XLA while XLA compiles: compiled.FIRST_CHUNK_MAX_CHAINS).
  assert 0. < float(first.group(1)) <= result.timings["compile_s"] + 0.06
  # Then a line each time a new tenth of the 200 iterations is reached.
  pattern = r"sampling: (\d+)% \((\d+)/200\), \d+ it/s, phase (warmup|sampling), step_size .*"
  done = [int(re.fullmatch(pattern, line).group(2)) for line in lines[2:]]
  tenths = [10 * d // 200 for d in done]
  assert tenths == sorted(set(tenths)) and 5 <= len(done) <= 10, lines
  assert done[-1] == 200 and "phase sampling" in lines[-1] and "phase warmup" in lines[2]
  # Divergences are running counts that say which phase they count.
  counts = [int(re.search(r"divergent_so_far (\d+)", line).group(1)) for line in lines[2:]]
  warm = [c for c, line in zip(counts, lines[2:]) if "phase warmup" in line]
  assert warm == sorted(warm) and counts[-1] == int(np.sum(result.divergences))
  assert lines[-1].endswith(f"divergent_in_warmup {int(np.sum(result.warmup_divergences))}")
  assert int(np.sum(result.warmup_divergences)) > 0  # step_size=3 diverges at first
  log.truncate(0)
  ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, chains=2, warmup=10, draws=10,
                 seed=15, progress=False)
  assert log.getvalue() == ""


def test_progress_shows_the_step_size_sampling_uses(monkeypatch):
  # After warmup the chains sample with the dual-averaging *average*; the
  # progress line showed the last iterate, another number.
  import io  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  log = io.StringIO()
  monkeypatch.setattr(sys, "stderr", log)
  result = ed.mcmc.sample(normal_normal, observed={"y": Y_NN}, chains=2, warmup=100,
                          draws=100, seed=15, chunk_size=20)
  shown = float(re.search(r"step_size ([0-9.e-]+)", log.getvalue().splitlines()[-1]).group(1))
  assert shown == float(f"{np.mean(result.step_size):.3g}")
