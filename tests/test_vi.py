"""Variational inference against known answers.

Gaussian targets have exact optima: the full-rank family recovers the mean
and covariance, mean-field the mean and the mean-field variances
``1 / diag(precision)``.  Conjugate Gamma-Poisson checks a constrained
latent; a banana checks that a flow reaches a usable Pareto k-hat where
mean-field does not; minibatch scaling is checked exactly on fixed batches.
"""

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.vi import results as vi_results
from edward_lite.vi.minibatch import Minibatcher

LOC = np.array([1., -1.], np.float32)
COV = np.array([[1., .9], [.9, 1.]], np.float32)


def mvn():
  return ed.MultivariateNormalTriL(LOC, np.linalg.cholesky(COV), name="x")


def moments(draws):
  return draws.mean(0), np.cov(draws.T)


@pytest.mark.slow
def test_fullrank_recovers_mean_and_covariance():
  fit = ed.vi.fit(mvn, family="fullrank", steps=1500, stl=True, seed=1, progress=False)
  mean, cov = moments(fit.sample(40000)["x"])
  np.testing.assert_allclose(mean, LOC, atol=0.03)
  np.testing.assert_allclose(cov, COV, atol=0.04)
  # The named parameters: x's unconstrained space is its own (no bijector).
  params = fit.params
  assert list(params) == ["x", "scale_tril"] and list(params["x"]) == ["loc", "scale"]
  tril = params["scale_tril"]
  np.testing.assert_array_equal(tril, np.tril(tril))
  np.testing.assert_allclose(params["x"]["scale"], np.sqrt(np.diag(tril @ tril.T)), rtol=1e-6)
  np.testing.assert_allclose(params["x"]["loc"], LOC, atol=0.03)
  np.testing.assert_allclose(tril @ tril.T, COV, atol=0.04)
  # q equals p: the importance weights are constant up to round-off.
  assert fit.k_hat < 0.3 and fit.ess > 0.95 * 4000


@pytest.mark.slow
def test_meanfield_recovers_mean_and_meanfield_variances():
  fit = ed.vi.fit(mvn, family="meanfield", steps=1500, samples=256, seed=2, progress=False)
  loc, scale = fit.params["x"]["loc"], fit.params["x"]["scale"]
  np.testing.assert_allclose(loc, LOC, atol=0.02)
  np.testing.assert_allclose(scale**2, 1. / np.diag(np.linalg.inv(COV)), rtol=0.05)
  # The reverse-KL optimum underestimates the marginal variance (0.19 vs 1),
  # which importance weighting detects.
  assert fit.k_hat > 0.7


@pytest.mark.slow
@pytest.mark.parametrize("family", ["realnvp",  # long: iaf, maf
                                    pytest.param("iaf", marks=pytest.mark.long),
                                    pytest.param("maf", marks=pytest.mark.long)])
def test_flows_fit_a_correlated_gaussian(family):
  fit = ed.vi.fit(mvn, family=family, steps=800, seed=3, progress=False)
  mean, cov = moments(fit.sample(20000)["x"])
  np.testing.assert_allclose(mean, LOC, atol=0.06)
  np.testing.assert_allclose(cov, COV, atol=0.12)
  assert fit.k_hat < 0.7


@pytest.mark.parametrize("family", [ed.vi.RealNVP(layers=3, hidden=(8,)),
                                    ed.vi.IAF(layers=3, hidden=(8,))])
def test_single_pass_flow_sampler_equals_tfp_bijectors(family):
  """The one-network-pass sampler gives the draws and densities of the
  family's TFP distribution (perturbed parameters, so the networks matter)."""
  dim, rng = 5, np.random.RandomState(1)
  params = {k: tf.constant(v + 0.3 * rng.standard_normal(v.shape))
            for k, v in family.init(dim, np.float64, np.arange(dim, dtype=np.float64)).items()}
  seed = tf.constant([1, 2])
  u, log_q = family.sample_and_log_prob(params, dim, 6, seed)
  q = family.distribution(params, dim)
  z = tf.random.stateless_normal([6, dim], seed, dtype=tf.float64)
  np.testing.assert_allclose(u, q.bijector.forward(z), atol=1e-12)
  np.testing.assert_allclose(log_q, q.log_prob(u), atol=1e-10)



@pytest.mark.parametrize("dim, hidden", [(100, (64, 64)), (10, (64, 64)), (40, (8,))])
def test_made_is_autoregressive_and_every_input_conditions(dim, hidden):
  """An autoregressive layer's network: output ``i`` depends on inputs
  ``< i`` only, and every input but the last conditions the last output,
  also with hidden layers narrower than ``D`` (hidden degrees that only
  cycled through ``1..width`` left inputs past ``width`` conditioning
  nothing: a 100-D funnel's ``v`` set no scale in layers where it sat late)."""
  family, rng = ed.vi.IAF(layers=1, hidden=hidden), np.random.RandomState(2)
  params = {k: tf.constant(v + 0.3 * rng.standard_normal(v.shape))
            for k, v in family.init(dim, np.float64, np.zeros(dim)).items()}
  x = tf.constant(rng.standard_normal([3, dim]))
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    shift, log_scale = family._made(params, dim, 0)(x)  # pylint: disable=protected-access
  for out in (shift, log_scale):
    jac = np.abs(np.asarray(tape.batch_jacobian(out, x))).max(0)  # [output, input]
    assert np.all(jac[np.triu_indices(dim)] == 0.)
    assert np.all(jac[-1, :-1] > 0.)

GP_A, GP_B = 2., 1.
# Two groups of counts with independent Gamma(2, 1) rates: two constrained
# latents (flows need at least two dimensions), each with a conjugate
# Gamma(GP_A + sum y, GP_B + n) posterior.
Y_GP = np.array([[3, 5, 2, 4, 6, 1, 3, 4], [0, 1, 0, 2, 1, 0, 1, 0]], np.float32)
GP_POST_A, GP_POST_B = GP_A + Y_GP.sum(1), GP_B + Y_GP.shape[1]


def gamma_poisson():
  lam = ed.Gamma(GP_A, GP_B, sample_shape=2, name="lam")
  return ed.Poisson(tf.broadcast_to(lam[:, None], Y_GP.shape), name="y")


@pytest.mark.slow
@pytest.mark.parametrize("family", ["meanfield", "fullrank", "realnvp",  # long: iaf, maf
                                    pytest.param("iaf", marks=pytest.mark.long),
                                    pytest.param("maf", marks=pytest.mark.long)])
def test_constrained_latent_matches_conjugate_posterior(family):
  a, b = GP_POST_A, GP_POST_B  # posterior Gamma(a, b) per group
  fit = ed.vi.fit(gamma_poisson, observed={"y": Y_GP}, family=family, steps=1000,
                  seed=4, progress=False)
  draws = fit.sample(20000)["lam"]
  assert draws.min() > 0
  np.testing.assert_allclose(draws.mean(0), a / b, rtol=0.03)
  np.testing.assert_allclose(draws.var(0), a / b**2, rtol=0.15)
  if family == "meanfield":
    # A Gaussian q in the unconstrained space has lighter tails than the
    # Gamma posterior, so the importance ratios have a heavy right tail:
    # PSIS says so.
    assert fit.k_hat > 0.7
    # log_prob of the surrogate on the constrained space integrates to one.
    grid = np.linspace(1e-3, 10., 801, dtype=np.float32)
    l1, l2 = np.meshgrid(grid, grid, indexing="ij")
    density = np.exp(fit.log_prob({"lam": np.stack([l1, l2], -1).reshape(-1, 2)}))
    total = np.trapezoid(np.trapezoid(density.reshape(l1.shape), grid), grid)
    np.testing.assert_allclose(total, 1., atol=3e-3)


BANANA_B, BANANA_SIGMA = 1.5, 0.5


def banana():
  """x1 ~ N(0, 1), x2 | x1 ~ N(b (x1^2 - 1), sigma^2): E[x2] = 0 and
  var(x2) = sigma^2 + b^2 var(x1^2) = sigma^2 + 2 b^2."""
  x1 = ed.Normal(0., 1., name="x1")
  return ed.Normal(BANANA_B * (x1**2 - 1.), BANANA_SIGMA, name="x2")


def test_meanfield_fails_on_the_banana():
  meanfield = ed.vi.fit(banana, family="meanfield", steps=600, seed=6, progress=False)
  assert meanfield.k_hat > 0.7, meanfield.k_hat


@pytest.mark.slow
@pytest.mark.parametrize("family", [ed.vi.RealNVP(layers=4, hidden=(32, 32)),
                                    pytest.param(ed.vi.IAF(layers=4, hidden=(32, 32)),
                                                 marks=pytest.mark.long),
                                    pytest.param(ed.vi.MAF(layers=4, hidden=(32, 32)),
                                                 marks=pytest.mark.long)],
                         ids=["realnvp", "iaf", "maf"])  # long: all but RealNVP
def test_flow_fits_banana_where_meanfield_fails(family):
  flow = ed.vi.fit(banana, family=family, steps=2000, seed=6, progress=False)
  assert flow.k_hat < 0.7, flow.k_hat
  draws = flow.resample(20000, proposals=20000, seed=6)
  np.testing.assert_allclose(draws["x1"].mean(), 0., atol=0.05)
  np.testing.assert_allclose(draws["x1"].std(), 1., rtol=0.03)
  np.testing.assert_allclose(draws["x2"].mean(), 0., atol=0.08)
  np.testing.assert_allclose(np.var(draws["x2"]), BANANA_SIGMA**2 + 2 * BANANA_B**2, rtol=0.1)


# -- variational programs ---------------------------------------------------------

Y_NN = np.array([1.2, 0.4, 2.2, 1.0, 0.7], np.float32)
NN_PREC = 1 / 4. + len(Y_NN)  # prior N(0, 2^2), unit noise


def normal_normal():
  mu = ed.Normal(0., 2., name="mu")
  return ed.Normal(mu, 1., sample_shape=len(Y_NN), name="y")


@pytest.mark.slow
def test_meanfield_params_are_the_conjugate_posterior():
  # mu ~ N(0, 2^2), y_i ~ N(mu, 1): the posterior is N(sum y / prec, 1 / prec).
  # It is in the mean-field family (mu's unconstrained space is its own), and
  # with stl=True the gradient of every draw is zero at q = p (Roeder et al.
  # 2017), so Adam settles on the exact optimum: only float32 round-off
  # (~1e-7 relative) is left; 1e-5 is a margin of ~100 ulps.  The plain
  # estimator keeps a gradient noise that leaves about 1% here.
  post_mean, post_sd = Y_NN.sum() / NN_PREC, NN_PREC**-0.5
  fit = ed.vi.fit(normal_normal, observed={"y": Y_NN}, steps=1000, stl=True, seed=1,
                  progress=False)
  params = fit.params
  assert list(params) == ["mu"] and params["mu"]["loc"].shape == ()
  np.testing.assert_allclose(params["mu"]["loc"], post_mean, atol=1e-5 * post_sd)
  np.testing.assert_allclose(params["mu"]["scale"], post_sd, rtol=1e-5)
  # The raw variables stay available: scale before the softplus.
  np.testing.assert_allclose(np.logaddexp(0., fit.raw_params["scale"]), post_sd, rtol=1e-5)
  # Positive scales, in each latent's unconstrained shape, after a plain fit
  # of a vector latent with a positive support.
  gp = ed.vi.fit(gamma_poisson, observed={"y": Y_GP}, steps=300, seed=2, progress=False)
  assert gp.params["lam"]["loc"].shape == gp.params["lam"]["scale"].shape == (2,)
  assert np.all(gp.params["lam"]["scale"] > 0)


@pytest.mark.slow
def test_variational_program_recovers_the_posterior():
  loc, raw_scale = tf.Variable(0.), tf.Variable(0.)

  def q():
    return ed.Normal(loc, tf.nn.softplus(raw_scale), name="mu")

  fit = ed.vi.fit(normal_normal, observed={"y": Y_NN}, family=q, steps=1500, samples=64,
                  seed=7, progress=False)
  np.testing.assert_allclose(loc.numpy(), Y_NN.sum() / NN_PREC, atol=0.03)
  np.testing.assert_allclose(tf.nn.softplus(raw_scale).numpy(), NN_PREC**-0.5, rtol=0.05)
  assert fit.k_hat < 0.5
  np.testing.assert_allclose(fit.sample(20000)["mu"].mean(), Y_NN.sum() / NN_PREC, atol=0.03)
  np.testing.assert_allclose(fit.log_prob({"mu": np.float32([loc.numpy()])}),
                             [-0.5 * np.log(2 * np.pi / NN_PREC)], atol=0.05)


def test_variational_program_errors():
  scale = tf.Variable(1.)
  with pytest.raises(ValueError, match="'sigma'.*not a latent"):
    ed.vi.fit(normal_normal, observed={"y": Y_NN},
              family=lambda: ed.Normal(0., scale, name="sigma"), steps=1)
  with pytest.raises(ValueError, match="'mu'.*shape \\[3\\]"):
    ed.vi.fit(normal_normal, observed={"y": Y_NN},
              family=lambda: ed.Normal(0., scale, sample_shape=3, name="mu"), steps=1)
  with pytest.raises(ValueError, match="no trainable tf.Variable"):
    ed.vi.fit(normal_normal, observed={"y": Y_NN},
              family=lambda: ed.Normal(0., 1., name="mu"), steps=1)
  with pytest.raises(ValueError, match="'mu'.*not reparameterized"):
    ed.vi.fit(normal_normal, observed={"y": Y_NN}, steps=1,
              family=lambda: ed.Poisson(scale, name="mu"))


# -- minibatching ---------------------------------------------------------------------

N_REG, B_REG = 60, 12
RNG = np.random.default_rng(0)
X_REG = RNG.normal(size=[N_REG, 2]).astype(np.float32)
Y_REG = (X_REG @ np.float32([1., -2.]) + 0.5 + RNG.normal(size=N_REG)).astype(np.float32)


def regression(x):
  w = ed.Normal(0., 1., sample_shape=2, name="w")
  b = ed.Normal(0., 1., name="b")
  return ed.Normal(tf.linalg.matvec(x, w) + b, 1., name="y")


def test_minibatch_log_density_is_scaled_exactly():
  target = ed.make_target(regression, X_REG, observed={"y": Y_REG})
  batches = Minibatcher(regression, (X_REG,), {}, {"y": Y_REG}, B_REG, target)
  seed = tf.constant([3, 4], tf.int32)
  state = tf.random.stateless_normal([5, 3], seed)  # five points [w, b]
  w, b = state[:, :2].numpy(), state[:, 2].numpy()
  prior = -0.5 * (state.numpy()**2).sum(1) - 1.5 * np.log(2 * np.pi)
  epoch = [batches.indices(seed, t).numpy() for t in range(N_REG // B_REG)]
  # One epoch visits every observation once.
  np.testing.assert_array_equal(np.sort(np.concatenate(epoch)), np.arange(N_REG))
  total = 0.
  for t, idx in enumerate(epoch):
    lp = batches.target_for(target, tf.constant(idx)).log_prob_flat(state).numpy()
    resid = Y_REG[idx][None] - (w @ X_REG[idx].T + b[:, None])
    lik = (-0.5 * resid**2 - 0.5 * np.log(2 * np.pi)).sum(1)
    np.testing.assert_allclose(lp, prior + N_REG / B_REG * lik, rtol=1e-5)
    total += lp
  # The mean over the batches of an epoch is the full-data log density.
  np.testing.assert_allclose(total / len(epoch), target.log_prob_flat(state).numpy(),
                             rtol=1e-5)


@pytest.mark.slow
def test_minibatch_fit_matches_the_conjugate_posterior():
  design = np.column_stack([X_REG, np.ones(N_REG)])
  precision = np.eye(3) + design.T @ design
  mean = np.linalg.solve(precision, design.T @ Y_REG)
  fit = ed.vi.fit(regression, X_REG, observed={"y": Y_REG}, family="fullrank",
                  batch_size=B_REG, steps=3000, seed=8, progress=False)
  draws = fit.sample(20000)
  np.testing.assert_allclose(draws["w"].mean(0), mean[:2], atol=0.05)
  np.testing.assert_allclose(draws["b"].mean(), mean[2], atol=0.05)


@pytest.mark.slow
def test_dataset_minibatches_and_full_data_weights():
  design = np.column_stack([X_REG, np.ones(N_REG)])
  precision = np.eye(3) + design.T @ design
  mean = np.linalg.solve(precision, design.T @ Y_REG)
  dataset = tf.data.Dataset.from_tensor_slices({"x": X_REG, "y": Y_REG}).shuffle(
      N_REG, seed=0).batch(B_REG, drop_remainder=True)
  fit = ed.vi.fit(regression, dataset=dataset, family="fullrank", steps=3000, seed=8,
                  progress=False)
  draws = fit.sample(20000)
  np.testing.assert_allclose(draws["w"].mean(0), mean[:2], atol=0.05)
  np.testing.assert_allclose(draws["b"].mean(), mean[2], atol=0.05)
  # Importance weights use the full data, accumulated over one pass.
  full = ed.make_target(regression, X_REG, observed={"y": Y_REG})
  u = tf.random.stateless_normal([7, 3], [1, 2])
  np.testing.assert_allclose(fit._full_log_prob(u).numpy(),  # pylint: disable=protected-access
                             full.log_prob_flat(u).numpy(), rtol=1e-5)
  assert fit.k_hat < 0.7
  with pytest.raises(ValueError, match="batch_size= .* or dataset=, not both"):
    ed.vi.fit(regression, dataset=dataset, batch_size=5, steps=1)
  with pytest.raises(ValueError, match="all arguments of the program"):
    ed.vi.fit(regression, dataset=tf.data.Dataset.from_tensor_slices({"x": X_REG}).batch(5),
              steps=1)


def test_dataset_log_density_sums_its_batches_in_float64():
  # 500 batches near -2e5 each: a float32 running total near -1e8 (steps of
  # 8 nats) was off by 1e-6 of it, noise in the importance weights.
  from edward_lite.vi import minibatch, surrogates  # pylint: disable=g-import-not-at-top
  rows, size = 5_000, 10
  rng = np.random.default_rng(6)
  data = {"x": rng.normal(size=(rows, 2)).astype(np.float32),
          "y": (200. + rng.normal(size=rows)).astype(np.float32)}
  dataset = tf.data.Dataset.from_tensor_slices(data).batch(size)
  batches = minibatch.DatasetBatches(regression, (), {}, None, dataset, rows)
  full = batches.full_log_prob_fn(surrogates.FlatSurrogate.model_log_prob, batches.target)
  u = tf.random.stateless_normal([3, 3], [5, 6])
  # The reference: the same compiled batch terms, summed in float64 by NumPy.
  term = tf.function(lambda u, batch, scale: batches.target_for(
      batches.target, batch, scale).log_prob_flat(u), jit_compile=True, autograph=False)
  prior = term(u, next(iter(dataset)), 0.).numpy().astype(np.float64)
  reference = prior + sum(term(u, batch, 1.).numpy().astype(np.float64) - prior
                          for batch in dataset)
  got = full(u).numpy()
  np.testing.assert_allclose(got, reference, rtol=1e-13)
  assert got.dtype == np.float64


def test_minibatch_errors():
  with pytest.raises(ValueError, match="batch_size=100 is larger than .* N=60"):
    ed.vi.fit(regression, X_REG, observed={"y": Y_REG}, batch_size=100, steps=1)

  def local_latents(x):
    z = ed.Normal(tf.zeros([N_REG]), 1., name="z")
    return ed.Normal(z + x[:, 0], 1., name="y")

  with pytest.raises(ValueError, match="does not run on part of its data|global latents"):
    ed.vi.fit(local_latents, X_REG, observed={"y": Y_REG}, batch_size=10, steps=1)


@pytest.mark.slow
def test_warm_start_stage_is_the_mean_field_fit_of_its_steps():
  # A full-rank fit starts where a separate mean-field fit of warm_start
  # steps ends (same seed); its first step, at a negligible learning rate,
  # does not move it.
  settings = dict(observed={"y": Y_REG}, seed=3, progress=False, batch_size=20)
  mean_field = ed.vi.fit(regression, X_REG, family="meanfield", steps=40, **settings)
  full_rank = ed.vi.fit(regression, X_REG, family="fullrank", steps=1, warm_start=40,
                        learning_rate=1e-12, **settings)
  warm = mean_field.raw_params
  np.testing.assert_allclose(full_rank.raw_params["loc"], warm["loc"], atol=1e-6)
  np.testing.assert_allclose(np.logaddexp(0., full_rank.raw_params["scale"]),
                             np.logaddexp(0., warm["scale"]), rtol=1e-5)


def test_surrogates_and_batch_sources_keep_their_contracts():
  from edward_lite.vi import minibatch, surrogates  # pylint: disable=g-import-not-at-top
  fit = ed.vi.fit(regression, X_REG, observed={"y": Y_REG}, steps=1, progress=False)
  assert isinstance(fit._surrogate, surrogates.Surrogate)  # pylint: disable=protected-access
  batches = Minibatcher(regression, (X_REG,), {}, {"y": Y_REG}, 10, fit.target)
  dataset = minibatch.DatasetBatches(
      regression, (), {}, None,
      tf.data.Dataset.from_tensor_slices({"x": X_REG, "y": Y_REG}).batch(10), None)
  for source in (batches, dataset):
    assert isinstance(source, minibatch.BatchSource)
    carry, data = source.next(source.carry_init(tf.constant([1, 2]), 0), tf.constant([1, 2]), 0)
    assert tf.nest.map_structure(lambda t: t.dtype, data) == tf.nest.map_structure(
        lambda s: s.dtype, source.data_spec)
    assert source.num_examples == N_REG


# -- numerical trouble, checkpoints, settings ---------------------------------------


def sqrt_model():
  mu = ed.Normal(0., 3., name="mu")
  return ed.Normal(tf.sqrt(mu), 1., name="y")  # NaN for mu < 0


@pytest.mark.slow
def test_nonfinite_steps_are_skipped_and_reported():
  with pytest.warns(RuntimeWarning, match=r"steps had a non-finite.*log-density term of 'y'"):
    fit = ed.vi.fit(sqrt_model, observed={"y": 1.}, steps=50, init={"mu": 0.5},
                    family=ed.vi.MeanField(init_scale=2.), progress=False)
  assert fit.nonfinite["skipped"] > 0 and fit.nonfinite["first_step"] == 0
  assert np.isnan(fit.elbo).sum() == fit.nonfinite["skipped"]
  assert all(np.all(np.isfinite(v)) for v in fit.raw_params.values())
  with pytest.raises(ed.vi.NonFiniteELBOError, match="step 0: .*'y'"):
    ed.vi.fit(sqrt_model, observed={"y": 1.}, steps=50, init={"mu": 0.5},
              family=ed.vi.MeanField(init_scale=2.), on_nonfinite="stop", progress=False)


@pytest.mark.slow
def test_overflowing_gradient_is_a_nonfinite_step():
  def tiny_noise():
    x = ed.Normal(0., 1., name="x")
    return ed.Normal(x, 1e-10, name="y")  # ELBO ~ -1e20, gradient ~ 1e20

  # From Stan's uniform start (init="auto" starts at x = 1, where it is finite).
  with pytest.raises(ed.vi.NonFiniteELBOError, match="step 0: .*'loc'.*overflows"):
    ed.vi.fit(tiny_noise, observed={"y": 1.}, steps=20, on_nonfinite="stop", init="uniform",
              progress=False)
  with pytest.warns(RuntimeWarning, match="20 of 20 steps"):
    fit = ed.vi.fit(tiny_noise, observed={"y": 1.}, steps=20, init="uniform", progress=False)
  assert all(np.all(np.isfinite(v)) for v in fit.raw_params.values())


@pytest.mark.slow
def test_nonfinite_step_is_diagnosed_on_its_own_draws():
  # Few draws near the edge of sqrt's domain: the non-finite value is in one
  # draw of the step only, which the diagnosis must draw again (with XLA's
  # random numbers, as the compiled step).
  with pytest.raises(ed.vi.NonFiniteELBOError,
                     match=r"step \d+: the log-density term of 'y' is not finite at 1 of 8"):
    ed.vi.fit(sqrt_model, observed={"y": 1.}, steps=200, init={"mu": 2.}, samples=8,
              family=ed.vi.MeanField(init_scale=0.7), on_nonfinite="stop", progress=False)


N_POIS, B_POIS = 20, 5  # four batches an epoch
X_POIS = np.linspace(-1., 1., N_POIS).astype(np.float32)
Y_POIS = np.random.default_rng(1).poisson(np.exp(0.5 * X_POIS)).astype(np.float32)


def poisson_regression(x):
  w = ed.Normal(0., 1., name="w")
  return ed.Poisson(tf.exp(w * x), name="y")


def _fit_with_bad_batch(on_nonfinite, **data):
  return ed.vi.fit(poisson_regression, steps=12, chunk_size=5, seed=3, progress=False,
                   on_nonfinite=on_nonfinite, **data)


def test_count_outside_the_support_is_refused_before_the_fit():
  # One count outside the Poisson's support.  It used to make one minibatch
  # an epoch non-finite, diagnosed during the fit; the support check of the
  # observed data (issue 13) now refuses it before anything compiles.  The
  # per-minibatch diagnosis stays tested with a dataset below.
  y = Y_POIS.copy()
  y[13] = -1.
  with pytest.raises(ValueError, match="'y'"):
    _fit_with_bad_batch("skip", x=X_POIS, observed={"y": y}, batch_size=B_POIS)


@pytest.mark.slow
def test_nonfinite_step_of_a_dataset_is_diagnosed_on_its_batch():
  # A NaN covariate in the third batch (rows 10..14); only the first batch
  # is checked when the fit starts.
  x = X_POIS.copy()
  x[12] = np.nan
  dataset = tf.data.Dataset.from_tensor_slices({"x": x, "y": Y_POIS}).batch(B_POIS)
  with pytest.warns(RuntimeWarning, match="3 of 12 steps .* the first at step 2: the data "
                    r"'x' of this step contains 1 non-finite value\(s\)"):
    fit = _fit_with_bad_batch("skip", dataset=dataset)
  # The skipped step's batch is not read again: steps and batches stay aligned.
  np.testing.assert_array_equal(np.flatnonzero(np.isnan(fit.elbo)), [2, 6, 10])
  with pytest.raises(ed.vi.NonFiniteELBOError, match="step 2: the data 'x' of this step"):
    _fit_with_bad_batch("stop", dataset=dataset)


def _interrupted_and_resumed(model, checkpoint_dir, step, settings):
  """Fits with checkpoints, interrupted after ``step``, then resumes."""

  def interrupt(info):
    if info["step"] == step:
      raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    ed.vi.fit(model, checkpoint_dir=checkpoint_dir, callback=interrupt, **settings)
  return ed.vi.fit(model, checkpoint_dir=checkpoint_dir, **settings)


@pytest.mark.slow
def test_checkpoint_resume_equals_uninterrupted(tmp_path):
  settings = dict(observed={"y": Y_NN}, family="meanfield", steps=300, chunk_size=100,
                  seed=9, progress=False)
  full = ed.vi.fit(normal_normal, **settings)
  resumed = _interrupted_and_resumed(normal_normal, tmp_path, 200, settings)
  np.testing.assert_array_equal(resumed.elbo, full.elbo)
  for name, value in full.raw_params.items():
    np.testing.assert_array_equal(resumed.raw_params[name], value)
  with pytest.raises(ed.mcmc.CheckpointMismatchError, match="settings.samples"):
    ed.vi.fit(normal_normal, checkpoint_dir=tmp_path, **dict(settings, samples=7))


@pytest.mark.slow
def test_dataset_checkpoint_resume_reads_the_next_batch(tmp_path):
  # With a tf.data stream, a resumed fit must continue with the batch an
  # uninterrupted fit would read at that step, not with the first one.
  dataset = tf.data.Dataset.from_tensor_slices({"x": X_REG, "y": Y_REG}).batch(
      12, drop_remainder=True)
  settings = dict(dataset=dataset, family="meanfield", steps=9, chunk_size=3, seed=4,
                  progress=False)
  full = ed.vi.fit(regression, **settings)
  resumed = _interrupted_and_resumed(regression, tmp_path, 6, settings)
  np.testing.assert_allclose(resumed.elbo, full.elbo, rtol=1e-6)


@pytest.mark.slow
def test_resumed_fit_reports_the_first_nonfinite_step_of_the_interrupted_part(tmp_path):
  x = X_POIS.copy()
  x[12] = np.nan  # third batch: steps 2, 6, 10
  dataset = tf.data.Dataset.from_tensor_slices({"x": x, "y": Y_POIS}).batch(B_POIS)
  settings = dict(dataset=dataset, steps=12, chunk_size=5, seed=3, progress=False)
  with pytest.warns(RuntimeWarning):
    full = ed.vi.fit(poisson_regression, **settings)
  with pytest.warns(RuntimeWarning, match="3 of 12 steps .* the first at step 2: the data 'x'"):
    resumed = _interrupted_and_resumed(poisson_regression, tmp_path, 8, settings)
  assert resumed.nonfinite == full.nonfinite
  np.testing.assert_allclose(resumed.elbo, full.elbo, rtol=1e-6)


@pytest.mark.slow
def test_tolerance_stops_early_and_reproducible():
  a = ed.vi.fit(normal_normal, observed={"y": Y_NN}, steps=5000, tol=1e-3, seed=10,
                progress=False)
  assert a.converged and a.steps < 5000 and len(a.elbo) == a.steps
  b = ed.vi.fit(normal_normal, observed={"y": Y_NN}, steps=5000, tol=1e-3, seed=10,
                progress=False)
  np.testing.assert_array_equal(a.elbo, b.elbo)


@pytest.mark.parametrize("kwargs, message", [
    (dict(family="gaussian"), "Unknown variational family 'gaussian'"),
    (dict(steps=0), "steps must be an integer >= 1"),
    (dict(samples=0), "samples must be an integer >= 1"),
    (dict(family="iaf", stl=True), "stl=True needs .* 'iaf'"),
    (dict(tol=-1.), "tol must be a positive number"),
    (dict(on_nonfinite="ignore"), "on_nonfinite must be"),
    (dict(init="zeros"), "init must be"),
    (dict(learning_rate=0.), "learning_rate must be a positive number"),
    (dict(observed={"y": Y_NN, "z": 1.}), r"Observed name\(s\) \['z'\]"),
])
def test_bad_settings_are_refused(kwargs, message):
  kwargs = dict(dict(observed={"y": Y_NN}, steps=10), **kwargs)
  with pytest.raises(ValueError, match=message):
    ed.vi.fit(normal_normal, **kwargs)


def test_flow_needs_two_dimensions_and_optimizer_type():
  with pytest.raises(ValueError, match="at least 2 unconstrained dimensions"):
    ed.vi.fit(normal_normal, observed={"y": Y_NN}, family="realnvp", steps=1, warm_start=0)
  with pytest.raises(TypeError, match="Keras optimizer"):
    ed.vi.fit(normal_normal, observed={"y": Y_NN}, optimizer="adam", steps=1)


def test_summary_and_arviz():
  fit = ed.vi.fit(normal_normal, observed={"y": Y_NN}, steps=800, seed=11, progress=False)
  assert fit.elbo.dtype == np.float64 and fit.elbo.shape == (800,)
  table = fit.summary()
  row = table.loc["mu"]
  np.testing.assert_allclose(row["psis_mean"], Y_NN.sum() / NN_PREC, atol=0.02)
  np.testing.assert_allclose(row["psis_sd"], NN_PREC**-0.5, rtol=0.05)
  assert row["q5"] < row["q50"] < row["q95"]
  assert "psis_mean" in table.columns
  arviz = pytest.importorskip("arviz")
  data = fit.to_arviz(draws=500)
  assert data.posterior["mu"].shape == (1, 500)
  np.testing.assert_allclose(float(arviz.summary(data, round_to="none")["mean"]["mu"]),
                             Y_NN.sum() / NN_PREC, atol=0.05)


def big_data_fit():
  x = ed.Normal(0., 1., name="x")
  ed.Factor(-1e6 + 0. * x, name="data")  # as a good fit of much data: log p - log q ~ -1e6
  return x


def test_elbo_estimate_is_a_float64_mean_over_draws():
  # q = p up to the constant: the 1000 terms log p - log q are -1e6 to
  # round-off, whose mean has a Monte Carlo error of 6e-4 nats; in float32
  # (ulp 0.0625 there) the estimate was off by 0.06.
  from edward_lite.vi import elbo, families, surrogates  # pylint: disable=g-import-not-at-top
  target = ed.make_target(big_data_fit)
  surrogate = surrogates.FlatSurrogate(families.get_family("meanfield"), target,
                                       np.zeros([1], np.float32), np.ones([1]))

  @tf.function(jit_compile=True, autograph=False)
  def step():
    value, _, u, log_q = elbo.elbo_and_gradients(surrogate, target, tf.constant([1, 2]), 1000,
                                                 False, tf.constant(0))
    return value, surrogate.model_log_prob(target, u), log_q

  value, log_p, log_q = (t.numpy() for t in step())
  assert log_p.dtype == np.float32
  np.testing.assert_allclose(value, np.mean(log_p.astype(np.float64) - log_q), rtol=1e-14)
  assert value.dtype == np.float64


@pytest.mark.filterwarnings("ignore:The fitted meanfield")  # one step: k-hat is high
def test_psis_sd_is_centred():
  # Draws near 1e8 with sd 1 (float64): sum w x^2 - mean^2 cancels to
  # round-off of 1e16 (units of 2), so the sd came out 0 or 2, not 1.
  fit = ed.vi.fit(normal_normal, observed={"y": Y_NN}, steps=1, progress=False)
  draws = 1e8 + np.random.default_rng(7).standard_normal(4000)
  log_w = np.random.default_rng(8).normal(0., 0.1, 4000)
  smoothed, k_hat = ed.psis.psis(log_w)
  fit._importance = vi_results.ImportanceSample(  # pylint: disable=protected-access
      {"mu": draws}, log_w, smoothed, k_hat, ed.psis.importance_ess(smoothed))
  w = np.exp(smoothed)
  expected = np.sqrt(np.sum(w * (draws - np.sum(w * draws)) ** 2))  # ~1
  np.testing.assert_allclose(fit.summary().loc["mu", "psis_sd"], expected, rtol=1e-6)


def test_progress_bar_and_keras3_optimizer(monkeypatch):
  pytest.importorskip("tqdm")
  keras = pytest.importorskip("keras")
  import io  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top

  class Terminal(io.StringIO):

    def isatty(self):
      return True

  terminal = Terminal()
  monkeypatch.setattr(sys, "stderr", terminal)
  fit = ed.vi.fit(normal_normal, observed={"y": Y_NN}, steps=600, seed=12,
                  optimizer=keras.optimizers.Adam(0.05))
  text = terminal.getvalue()
  assert "fitting" in text and "600/600" in text and "elbo=" in text, text[-300:]
  np.testing.assert_allclose(fit.sample(20000)["mu"].mean(), Y_NN.sum() / NN_PREC, atol=0.03)


@pytest.mark.slow
def test_sample_gives_fresh_draws_per_call_and_repeats_with_a_seed():
  def normal():
    return ed.Normal(0., 1., name="x")

  fit = ed.vi.fit(normal, steps=50, seed=3, progress=False)
  first, second = fit.sample(500)["x"], fit.sample(500)["x"]
  assert not np.allclose(first, second)
  np.testing.assert_array_equal(fit.sample(500, seed=7)["x"], fit.sample(500, seed=7)["x"])
  again = ed.vi.fit(normal, steps=50, seed=3, progress=False)
  np.testing.assert_array_equal(again.sample(500)["x"], first)  # reproducible sequence
  np.testing.assert_array_equal(again.sample(500)["x"], second)
