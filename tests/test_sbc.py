"""ed.sbc: simulation-based calibration, one vectorized run for all simulations.

Every kernel and the batched VI families pass on two small models at a fixed
seed, and deliberately broken inference -- a random walk without its
Metropolis correction, NUTS on a density with the Jacobian of a positive
parameter dropped, a VI fit whose scale is held too small, a mean-field fit
of a correlated posterior -- fails the uniformity test: the test can fail.
"""

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.mcmc.base import GradState, TransitionInfo, stateless_normal
from edward_lite.sbc import batched
from edward_lite.sbc import ranks as sbc_stats
from edward_lite.sbc.batched import BatchedMeanField
from edward_lite.sbc.simulated import SimulationTarget

SIMS = 100
MCMC = dict(simulations=SIMS, chains=2, warmup=200, draws=100, max_rank=49)


def normal_scale(n):
  """Unknown mean and positive scale: the scale's Jacobian matters."""
  mu = ed.Normal(0., 1., name="mu")
  sigma = ed.HalfNormal(1., name="sigma")
  return ed.Normal(mu, sigma, sample_shape=n, name="y")


def logistic(x):
  w = ed.Normal(0., 1., sample_shape=2, name="w")
  return ed.Bernoulli(logits=tf.linalg.matvec(x, w), name="y")


def normal_normal(n):
  mu = ed.Normal(0., 1., name="mu")
  return ed.Normal(mu, 1., sample_shape=n, name="y")


def regression(x):
  w = ed.Normal(0., 1., sample_shape=2, name="w")
  return ed.Normal(tf.linalg.matvec(x, w), 1., name="y")


X_LOGISTIC = np.random.default_rng(3).normal(size=(20, 2)).astype(np.float32)
X_ORTHOGONAL = np.array([[1., 1.], [1., -1.]] * 5, np.float32)  # independent posterior
X_CORRELATED = np.random.default_rng(0).normal(size=(20, 2)).astype(np.float32)
X_CORRELATED[:, 1] = 0.9 * X_CORRELATED[:, 0] + 0.3 * X_CORRELATED[:, 1]

# Long: logistic; the default run checks every kernel on normal_scale.
MCMC_MODELS = [(normal_scale, 10), pytest.param(logistic, X_LOGISTIC, marks=pytest.mark.long)]
VI_MODELS = [(normal_normal, 10), (regression, X_ORTHOGONAL)]


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["nuts", "hmc", "chees", "rwmh"])
@pytest.mark.parametrize("model,arg", MCMC_MODELS, ids=["normal_scale", "logistic"])
@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_kernels_are_calibrated(kernel, model, arg):
  # A random walk mixes slowly, and ChEES's trajectory length and metric are
  # shared by every data set's chains (sbc/run.py): longer runs,
  # thinned to the same 49 draws, so no ESS warning is due.
  settings = dict(MCMC, **{"rwmh": dict(warmup=500, draws=1000),
                           "chees": dict(draws=300)}.get(kernel, {}))
  # Each run is a 1% test (Bonferroni over the parameters), so a calibrated
  # kernel fails one seed in a hundred: when the kernels' random streams
  # changed (RESULTS section 37), seed 1 gave HMC on normal_scale p = 0.004
  # for mu, while seeds 2-6 gave 0.11-0.91 for mu and 0.04-0.96 for sigma.
  result = ed.sbc(model, arg, observed=["y"], kernel=kernel, seed=2, **settings)
  assert result.passes(alpha=0.01), result.summary()
  for name, r in result.ranks.items():
    assert r.shape[0] == SIMS and r.min() >= 0 and r.max() <= 49, name
  assert result.method["pooled"] == ("metric" if kernel == "chees" else False)


@pytest.mark.parametrize("family", ["meanfield", "fullrank"])
@pytest.mark.parametrize("model,arg", VI_MODELS, ids=["normal_normal", "regression"])
def test_gaussian_families_are_calibrated_where_exact(family, model, arg):
  result = ed.sbc(model, arg, observed=["y"], family=family, simulations=SIMS, steps=600,
                  seed=2)
  assert result.method["vectorized"]
  assert result.passes(alpha=0.01), result.summary()


def kl_optimal_gaussian(y, full_rank):
  """The Gaussian ``q`` on ``(mu, u)``, ``sigma = softplus(u)``, maximizing the
  ELBO of ``normal_scale`` given ``y`` (``KL(q || p)`` at its minimum), by
  40 x 40 Gauss-Hermite quadrature of ``E_q log p`` and BFGS: ``(loc [2],
  marginal sd [2])``, computed without edward_lite."""
  optimize = pytest.importorskip("scipy.optimize")
  x, w = np.polynomial.hermite_e.hermegauss(40)
  z1, z2 = np.meshgrid(x, x, indexing="ij")
  weights = np.outer(w, w) / (2. * np.pi)
  n, ybar, ss = len(y), y.mean(), np.sum((y - y.mean()) ** 2)

  def log_p(mu, u):  # up to a constant, with the softplus Jacobian log sigmoid(u)
    sigma = np.logaddexp(0., u)
    return (-0.5 * mu ** 2 - 0.5 * sigma ** 2 - np.logaddexp(0., -u) - n * np.log(sigma)
            - (ss + n * (ybar - mu) ** 2) / (2. * sigma ** 2))

  def negative_elbo(theta):
    s = np.exp(theta[2:4])
    corr = theta[4] if full_rank else 0.
    return -(np.sum(weights * log_p(theta[0] + s[0] * z1, theta[1] + s[1] * (corr * z1 + z2)))
             + np.sum(np.log(s)))

  sd = max(y.std(), 0.05)
  start = np.array([ybar, np.log(np.expm1(sd)), np.log(sd / np.sqrt(n)), np.log(0.25), 0.])
  theta = optimize.minimize(negative_elbo, start[:5 if full_rank else 4], method="BFGS").x
  s = np.exp(theta[2:4])
  corr = theta[4] if full_rank else 0.
  return theta[:2], np.array([s[0], s[1] * np.hypot(corr, 1.)])


def normal_scale_data(sims, seed=7):
  rng = np.random.default_rng(seed)
  mu, sigma = rng.normal(size=sims), np.abs(rng.normal(size=sims))
  return (mu[:, None] + sigma[:, None] * rng.normal(size=(sims, 10))).astype(np.float32)


def distance_to_optimum(y, params, family):
  """Per data set: the largest error of the fitted surrogate against its
  optimal Gaussian, the location's in optimal sds and the sd's relative."""
  scale = np.logaddexp(0., params["scale"])
  out = []
  for s in range(len(y)):
    loc, sd = kl_optimal_gaussian(y[s].astype(np.float64), family == "fullrank")
    tril = np.eye(2) + (np.tril(params["scale_tril"][s], -1) if family == "fullrank" else 0.)
    got_sd = np.sqrt(np.sum((scale[s][:, None] * tril) ** 2, axis=1))
    out.append((np.max(np.abs(params["loc"][s] - loc) / sd), np.max(np.abs(got_sd / sd - 1.))))
  return np.array(out)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["meanfield", "fullrank"])
def test_batched_fits_reach_the_optimal_gaussian_of_a_positive_scale(family):
  # ed.sbc's default 1,000 steps.  From a start of scale 1 on the unconstrained
  # space, the first steps' gradients (draws of sigma near 0) swamped Adam's
  # second moment and the fits stalled: every full-rank fit of 100 data sets
  # ended away from this optimum (sigma's unconstrained sd 1.2-3.2 times its
  # optimum) and SBC rejected the family (sigma's rank mean 0.30, p = 0.00025).
  # The same fits pass the convergence test: "converged" means at the optimum.
  sims = 12
  y = normal_scale_data(sims)
  fam = batched.BATCHED_FAMILIES[family]()
  target = SimulationTarget(ed.make_target(normal_scale, 10, observed={"y": y[0]}), {"y": y},
                            fam.samples)
  fit = batched.fit_batched(target, fam, 1000, fam.samples, fam.learning_rate,
                            tf.constant([1, 2], tf.int32))
  assert np.all(np.isfinite(fit.elbo))
  error = distance_to_optimum(y, fit.params, family)
  np.testing.assert_array_less(error[:, 0], 0.15)
  np.testing.assert_array_less(error[:, 1], 0.08)
  assert fit.converged.all() and fit.window == 100
  np.testing.assert_array_less(fit.distance, batched.TOLERANCE)


@pytest.mark.slow
def test_batched_fits_cut_short_are_not_converged_and_off_their_optimum():
  # 50 steps: on 100 such data sets 88 mean-field fits ended more than 0.1
  # optimal sd or 10% off their optimum (up to 171 sds), and the mean ELBO of
  # the last tenth rose over the tenth before by more than ed.vi.fit's 1 nat
  # in none (the learning rate decays to a hundredth: a stuck fit's ELBO is
  # flat too).  The gradient test flagged 67 of them, and no fit at its optimum.
  sims = 24
  y = normal_scale_data(sims)
  fam = BatchedMeanField()
  target = SimulationTarget(ed.make_target(normal_scale, 10, observed={"y": y[0]}), {"y": y},
                            fam.samples)
  fit = batched.fit_batched(target, fam, 50, fam.samples, fam.learning_rate,
                            tf.constant([1, 2], tf.int32))
  off = np.max(distance_to_optimum(y, fit.params, "meanfield"), axis=1) > 0.1
  assert fit.window == 5 and off.mean() > 0.7
  assert (~fit.converged).mean() > 0.5, fit.distance
  assert np.all(off[~fit.converged])  # a flagged fit is off its optimum
  np.testing.assert_array_less(batched.TOLERANCE, fit.distance[~fit.converged])


@pytest.mark.slow
def test_sbc_counts_unconverged_vi_fits_and_warns_once():
  with pytest.warns(RuntimeWarning) as record:
    result = ed.sbc(normal_scale, 10, observed=["y"], family="meanfield", simulations=20,
                    steps=50, max_rank=19, seed=0)
  notes = [str(w.message) for w in record if "had not converged" in str(w.message)]
  assert len(notes) == 1, notes
  converged = result.diagnostics["vi_converged"]
  assert converged.shape == (20,) and converged.dtype == bool
  count = int(np.sum(~converged))
  assert count > 10, result.diagnostics["vi_distance"]
  assert notes[0].startswith(f"{count} of 20 meanfield fits had not converged after 50 steps")
  assert "steps=, e.g. 100" in notes[0]
  table = result.summary()
  assert list(table["unconverged_fits"]) == [count, count]


@pytest.mark.slow
@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_sbc_vi_fits_converge_at_the_defaults_and_reach_their_optimum(monkeypatch):
  from edward_lite.sbc import run as sbc_run  # pylint: disable=import-outside-toplevel
  fits, fit_batched = [], batched.fit_batched

  def recording(target, family, *args, **kwargs):
    fits.append((target._simulated["y"].numpy(),  # pylint: disable=protected-access
                 fit_batched(target, family, *args, **kwargs)))
    return fits[-1][1]

  monkeypatch.setattr(sbc_run.batched, "fit_batched", recording)
  result = ed.sbc(normal_scale, 10, observed=["y"], family="meanfield", simulations=16,
                  max_rank=19, seed=0)
  assert result.diagnostics["vi_converged"].all()
  assert list(result.summary().columns) == ["p_ecdf", "p_chi2", "rank_mean", "rank_sd"]
  (y, fit), = fits
  error = distance_to_optimum(y, fit.params, "meanfield")
  np.testing.assert_array_less(error[:, 0], 0.15)
  np.testing.assert_array_less(error[:, 1], 0.08)


class NoMetropolisCorrection(ed.mcmc.RWMH):
  """Broken on purpose: every random-walk proposal is taken."""

  def one_step(self, kstate, step_size, seed, fn, step=0, adapt_state=()):
    seeds = tf.random.experimental.stateless_split(seed, 2)
    z = kstate.z + step_size * stateless_normal(tf.shape(kstate.z), seeds[0], kstate.z.dtype)
    lp = fn(z)
    accept = tf.exp(tf.minimum(lp - kstate.log_prob, 0.))
    zeros = tf.zeros_like(lp, tf.int32)
    return GradState(z, lp, ()), TransitionInfo(accept, tf.zeros_like(lp, tf.bool), zeros,
                                                zeros, -lp, lp)


class TooNarrow(BatchedMeanField):
  """Broken on purpose: the surrogate's scale is held at 0.1 (the posterior's
  sd is 1/sqrt(11) = 0.30)."""

  def scale(self, params):
    return 0. * params["scale"] + 0.1


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the random walk runs off to overflow
def test_broken_sampler_fails():
  result = ed.sbc(normal_normal, 10, observed=["y"], kernel=NoMetropolisCorrection(), seed=1,
                  **MCMC)
  assert not result.passes(alpha=0.01), result.summary()
  assert result.min_p_value < 1e-3


def test_broken_vi_fails():
  result = ed.sbc(normal_normal, 10, observed=["y"], family=TooNarrow(), simulations=SIMS,
                  steps=300, seed=2)
  assert result.min_p_value < 1e-3
  assert result.summary().loc["mu", "rank_sd"] > 0.34  # U-shaped: too narrow


def test_meanfield_on_a_correlated_posterior_fails():
  result = ed.sbc(regression, X_CORRELATED, observed=["y"], family="meanfield",
                  simulations=200, steps=600, seed=0)
  assert result.min_p_value < 1e-3, result.summary()


def scan_walk(n):
  """A program with a loop: the target evaluates chains one by one (map_fn)."""
  rho = ed.Uniform(-0.9, 0.9, name="rho")
  sigma = ed.HalfNormal(1., name="sigma")
  mean = tf.scan(lambda a, x: rho * a + x, tf.ones([n]), initializer=0.)
  return ed.Normal(mean, sigma, name="y")


@pytest.mark.parametrize("model", [normal_scale, scan_walk])
def test_simulation_target_reads_its_own_data_per_chain(model):
  sims, per = 3, 2
  y = np.random.default_rng(0).normal(size=(sims, 10)).astype(np.float32)
  base = ed.make_target(model, 10, observed={"y": y[0]})
  assert base.has_loops == (model is scan_walk)
  target = SimulationTarget(base, {"y": y}, per)
  u = tf.constant(np.random.default_rng(1).normal(size=(sims * per, 2)), tf.float32)
  lp, grad = target.value_and_gradient_flat(u)
  for s in range(sims):
    other = base.with_data(observed={"y": y[s]})
    want_lp, want_grad = other.value_and_gradient_flat(u[s * per:(s + 1) * per])
    np.testing.assert_allclose(lp[s * per:(s + 1) * per], want_lp, rtol=1e-5)
    np.testing.assert_allclose(grad[s * per:(s + 1) * per], want_grad, rtol=1e-4, atol=1e-5)
  with pytest.raises(ValueError, match="evaluates 6 chains"):
    target.log_prob_flat(u[:4])


def test_ecdf_test_is_uniform_under_the_null_and_chi_square_matches_scipy():
  stats = pytest.importorskip("scipy.stats")
  rng = np.random.default_rng(5)
  ranks = rng.integers(0, 50, size=(100, 300))
  p = sbc_stats.ecdf_test(ranks, 49)
  assert 0.01 <= np.mean(p < 0.05) <= 0.10
  assert 0.35 <= np.mean(p < 0.5) <= 0.65
  bins = 10
  which = (np.arange(50) * bins) // 50
  want = stats.chisquare(np.bincount(which[ranks[:, 0]], minlength=bins)).pvalue
  np.testing.assert_allclose(sbc_stats.chi_square_test(ranks[:, :1], 49, bins)[0], want,
                             rtol=1e-6)
  z, lower, upper = sbc_stats.ecdf_bands(100, 49)
  assert z.shape == lower.shape == upper.shape == (49,)
  assert np.all(lower < 0) and np.all(upper > 0)


def test_ranks_break_ties_and_count_draws_below():
  truth = np.array([0., 1.])
  draws = np.array([[-1., 1., 2.], [1., 1., 1.]])
  r = sbc_stats.ranks(truth, draws)
  assert r[0] == 1 and 0 <= r[1] <= 3


def test_summary_and_plot():
  with pytest.warns(RuntimeWarning, match="1 of 20 meanfield fits had not converged"):
    result = ed.sbc(normal_normal, 5, observed=["y"], family="meanfield", simulations=20,
                    steps=100, max_rank=19, seed=0)
  table = result.summary()  # one fit of 20 is unfinished after 100 steps (0.56 sd away)
  assert list(table.columns) == ["p_ecdf", "p_chi2", "rank_mean", "rank_sd", "unconverged_fits"]
  assert list(table.index) == ["mu"]
  pytest.importorskip("matplotlib")
  fig = ed.plot.sbc(result)
  assert fig.axes and "SBC of meanfield" in fig._suptitle.get_text()  # pylint: disable=protected-access
  assert result.plot() is not None


@pytest.mark.parametrize("kwargs,match", [
    (dict(simulations=1), "simulations"),
    (dict(kernel="metropolis"), "Unknown kernel"),
    (dict(kernel="nuts", family="meanfield"), "not both"),
    (dict(family="gaussian"), "family"),
    (dict(observed=["z"]), "not random variables"),
    (dict(observed=None), "observed= must name"),
    (dict(max_rank=501), "fewer than max_rank"),
])
def test_bad_input_is_one_sentence(kwargs, match):
  call = dict(observed=["y"], simulations=10)
  call.update(kwargs)
  with pytest.raises(ValueError, match=match):
    ed.sbc(normal_normal, 5, **call)


def test_a_model_without_latents_is_refused():
  def data_only():
    return ed.Normal(0., 1., name="y")
  with pytest.raises(ValueError, match="no latent"):
    ed.sbc(data_only, observed=["y"], simulations=10)


@pytest.mark.long  # flows: the default run keeps RealNVP in each check of test_vi.py
def test_flows_fall_back_to_one_fit_per_data_set():
  result = ed.sbc(regression, X_ORTHOGONAL, observed=["y"], family="realnvp", simulations=2,
                  steps=50, max_rank=9, seed=0)
  assert not result.method["vectorized"]
  assert result.ranks["w"].shape == (2, 2)
  assert np.all((result.ranks["w"] >= 0) & (result.ranks["w"] <= 9))


class DroppedJacobian(SimulationTarget):
  """Broken on purpose: the density misses log|dx/du| of the constrained
  latents (here sigma = exp(u): a missing factor sigma)."""

  def _one(self, mode):
    def fn(values, observed):
      run = ed.Target.with_data(self, observed=observed).run(values, mode)
      return run.log_prob - tf.add_n([run.terms[f"{n} (Jacobian)"] for n in self.names])
    return fn


@pytest.mark.slow
def test_dropped_jacobian_fails(monkeypatch):
  from edward_lite.sbc import run as sbc_run  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(sbc_run, "SimulationTarget", DroppedJacobian)
  result = ed.sbc(normal_scale, 3, observed=["y"], kernel="nuts", seed=1,
                  **dict(MCMC, simulations=200))
  assert result.p_values["sigma"] < 1e-3, result.summary()
  assert result.summary().loc["sigma", "rank_mean"] > 0.55  # posteriors too low: truths rank high


def test_autocorrelated_draws_are_warned_about():
  with pytest.warns(RuntimeWarning, match="bulk ESS"):
    result = ed.sbc(normal_scale, 10, observed=["y"], kernel="rwmh", simulations=20,
                    warmup=50, draws=50, max_rank=99, seed=0)
  assert result.diagnostics["ess_bulk"]["mu"].shape == (20,)
