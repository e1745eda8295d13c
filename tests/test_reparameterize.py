"""``ed.reparameterize`` (issue 33, item 3): automatic non-centring.

The transformation is exact (the density of the new latent is the old one
at the image point times the Jacobian), keeps the user's names, and makes
the centred funnel, centred eight schools and a centred hierarchical
regression sample at the defaults (NUTS, adaptive warmup; 500 or 1000
draws) with no divergences (eight schools: at most 1 in 1000) and match
their exact posteriors; the learned centredness goes the way the data say.  Tolerances: a mean from ``S`` effective draws within 5 Monte
Carlo errors ``sd / sqrt(S)`` of the exact one.
"""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.analysis import diagnostics
import battery_models
import reparam_models as rm

Z = 5.


def check_means(result, reference, names):
  for name in names:
    draws = np.asarray(result.draws[name], np.float64)
    mean, sd = (np.asarray(v, np.float64) for v in reference[name])
    ess = np.asarray(diagnostics.ess_bulk(draws))
    err = sd / np.sqrt(ess)
    z = (draws.mean(axis=(0, 1)) - mean) / err
    assert np.all(np.abs(z) < Z), (name, z, ess)
    assert np.all(ess > 300), (name, ess)


# -- the transformation is exact ---------------------------------------------------

def latent_params():
  """Every family, each with latent (and non-scalar) location and scale."""
  mu = ed.Normal(0., 1., name="mu")
  s = ed.LogNormal(0., 0.5, name="s")
  ed.Normal(mu, s, sample_shape=3, name="x")
  ed.StudentT(4., mu * tf.ones(2), s, name="t")
  ed.LogNormal(mu, s, sample_shape=2, name="w")
  return ed.HalfCauchy(mu, s, name="h")


VALUES = {"mu": 0.4, "s": 1.7}
TILDE = {"x": [0.3, -1.2, 2.], "t": [0.5, -0.4], "w": [-0.7, 1.1], "h": 0.8}


@pytest.mark.parametrize("centeredness", [0., 0.3, {"x": [0.1, 0.5, 0.9], "t": 1., "w": 0.6}])
def test_density_of_the_new_latents_is_the_old_at_the_image_times_the_jacobian(centeredness):
  """log p_new(mu, s, x_tilde) = log p(mu, s, x(x_tilde)) + log |dx / dx_tilde|,
  the Jacobian by autodiff of the program's own map (elementwise)."""
  names = ["x", "t", "w", "h"]
  program = ed.reparameterize(latent_params, variables=names, centeredness=centeredness)
  tilde = {n: tf.constant(v) for n, v in TILDE.items()}
  c = {n: (centeredness.get(n, 0.) if isinstance(centeredness, dict) else centeredness)
       for n in names}
  setting = dict(VALUES)
  setting.update({n + "_noncentred" if np.any(np.asarray(c[n]) != 1.) else n: v
                  for n, v in tilde.items()})
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(list(tilde.values()))
    with ed.tape() as rvs, ed.trace(ed.make_value_setter(**setting)):
      program()
    image = {n: tf.convert_to_tensor(rvs[n]) for n in names}
  log_jacobian = sum(tf.reduce_sum(tf.math.log(tf.abs(tape.gradient(image[n], tilde[n]))))
                     for n in names)
  # the recorded x (an ed.Deterministic, density 1 at its own value) given too
  new = ed.make_log_joint_fn(program)(**{**setting, **image})
  old = ed.make_log_joint_fn(latent_params)(**VALUES, **image)
  np.testing.assert_allclose(new.numpy(), (old + log_jacobian).numpy(), rtol=1e-5)
  # and the map itself: at c = 0, x = mu + s x_tilde
  if not isinstance(centeredness, dict) and centeredness == 0.:
    np.testing.assert_allclose(image["x"], 0.4 + 1.7 * np.array(TILDE["x"]), rtol=1e-6)
    np.testing.assert_allclose(image["w"], np.exp(0.4 + 1.7 * np.array(TILDE["w"])), rtol=1e-5)
  assert set(rvs) >= {"x", "t", "w", "h"}


def test_prior_draws_keep_the_distribution():
  """Prior draws of ``mu ~ N(1, 1), tau ~ LogNormal(0, 0.3), x[20000] ~
  N(mu, tau)`` at c = 0.4: given the run's (mu, tau), the 20000 x's have
  mean mu and sd tau."""
  def prior():
    mu = ed.Normal(1., 1., name="mu")
    tau = ed.LogNormal(0., 0.3, name="tau")
    return ed.Normal(mu, tau, sample_shape=20000, name="x")
  tf.random.set_seed(1)
  with ed.tape() as rvs:
    ed.reparameterize(prior, centeredness=0.4)()
  mu, tau, x = (rvs[n].numpy() for n in ("mu", "tau", "x"))
  assert abs(x.mean() - mu) < 5 * tau / np.sqrt(x.size)
  assert abs(x.std() / tau - 1.) < 5 / np.sqrt(2 * x.size)
  assert type(rvs["x"].distribution).__name__ == "Deterministic"


# -- names and errors --------------------------------------------------------------

def test_draws_keep_the_names_and_observed_and_constant_priors_are_left_alone():
  args, obs = rm.schools_data()
  program = ed.reparameterize(rm.schools_centred)
  target = ed.make_target(program, *args, observed=obs)
  # mu ~ N(0, 5) and tau ~ HalfCauchy(0, 5) have numbers for parameters; y is observed
  assert target.names == ("mu", "tau", "theta_noncentred")
  assert list(target.deterministic_names) == ["theta"]
  assert program.__name__ == "schools_centred"
  # fully non-centred, theta_noncentred ~ N(0, 1) is drawn from nothing; y stays data
  assert ed.model_graph(program, *args, observed=obs).edges == (
      ("mu", "theta"), ("tau", "theta"), ("theta_noncentred", "theta"), ("theta", "y"))


@pytest.mark.slow
def test_variational_fit_of_the_transformed_program_keeps_the_names():
  args, obs = rm.schools_data()
  with warnings.catch_warnings():  # a short fit: the end-of-fit check may warn
    warnings.simplefilter("ignore")
    fit = ed.vi.fit(ed.reparameterize(rm.schools_centred), *args, observed=obs, steps=100,
                    seed=0, progress=False, init="uniform", warm_start=0, jit_compile=False)
  draws = fit.sample(200, seed=1)
  assert sorted(draws) == ["mu", "tau", "theta", "theta_noncentred"]
  assert draws["theta"].shape == (200, 8)


def test_the_transformed_program_is_identified_by_content():
  """Checkpoints and saved results identify a program by its code: the
  transformation's settings are part of it."""
  from edward_lite.runtime.fingerprints import fingerprint  # pylint: disable=import-outside-toplevel
  args, obs = rm.schools_data()
  codes = [fingerprint(p, args, {}, obs).code for p in (
      rm.schools_centred, ed.reparameterize(rm.schools_centred),
      ed.reparameterize(rm.schools_centred, centeredness=0.5),
      ed.reparameterize(rm.schools_centred, centeredness={"theta": np.full(8, 0.3)}))]
  assert None not in codes and len(set(codes)) == 4
  assert fingerprint(ed.reparameterize(rm.schools_centred), args, {}, obs).code == codes[1]


@pytest.mark.parametrize("variables, message", [
    (["thetta"], "ed.reparameterize: 'thetta' is not a random variable of the program"),
    (["tau", "y", "mu", "sigma"], "'sigma' is not a random variable"),
])
def test_an_unknown_name_is_an_error_naming_it_before_compiled_work(variables, message):
  args, obs = rm.schools_data()
  with pytest.raises(ValueError, match=message):
    ed.make_target(ed.reparameterize(rm.schools_centred, variables=variables), *args,
                   observed=obs)


def test_other_families_and_bad_centeredness_are_errors():
  def model():
    a = ed.Gamma(2., 1., name="a")
    return ed.Normal(0., a, name="b")
  with pytest.raises(ValueError, match="'a' is a Gamma, not a location-scale family"):
    ed.make_target(ed.reparameterize(model, variables=["a"]))
  with pytest.raises(ValueError, match="centeredness of 'b' must lie in \\[0, 1\\]"):
    ed.reparameterize(model, centeredness={"b": 1.5})
  assert ed.make_target(ed.reparameterize(model, centeredness={"b": 1.})).names == ("a", "b")


def test_fixed_values_and_nested_transformations():
  """A value fixed inside the program is data: left alone.  Transforming
  twice (first theta, then all) non-centres each variable once and still
  leaves the observed ones alone."""
  def model():
    mu = ed.Normal(0., 1., name="mu")
    tau = ed.HalfNormal(1., name="tau")
    theta = ed.Normal(mu, tau, sample_shape=3, name="theta")
    ed.Normal(theta, 1., value=tf.zeros(3), name="z")
    return ed.Normal(theta, 1., name="y")
  target = ed.make_target(ed.reparameterize(model), observed={"y": np.ones(3, np.float32)})
  assert target.names == ("mu", "tau", "theta_noncentred") and "z" in target.fixed
  twice = ed.reparameterize(ed.reparameterize(model, variables=["theta"]))
  target = ed.make_target(twice, observed={"y": np.ones(3, np.float32)})
  assert target.names == ("mu", "tau", "theta_noncentred")


# -- init= by the original names -----------------------------------------------------

THETA = np.arange(8.) - 3.


@pytest.mark.parametrize("centeredness", [0., 0.5])
def test_init_by_the_original_names_starts_at_those_values(centeredness):
  """``init={"theta": ...}`` on the transformed eight schools starts
  ``theta_noncentred`` at ``c mu + (theta - mu) / tau^(1 - c)``: the
  Deterministic ``theta`` at the start is the given value, with ``mu`` and
  ``tau`` given or drawn (a partial init, chain by chain)."""
  from edward_lite.model.init_values import (  # pylint: disable=import-outside-toplevel
      complete, parse_init)
  args, obs = rm.schools_data()
  target = ed.make_target(ed.reparameterize(rm.schools_centred, centeredness=centeredness),
                          *args, observed=obs)
  start = lambda u: target.constrain(target.unflatten(tf.constant(u)))
  values = start(parse_init(target, {"mu": 1., "tau": 4., "theta": THETA}, 2))
  np.testing.assert_allclose(values["mu"], [1., 1.], rtol=1e-6)
  np.testing.assert_allclose(values["theta_noncentred"][1],
                             centeredness + (THETA - 1.) / 4.**(1. - centeredness), rtol=1e-5)
  np.testing.assert_allclose(target.deterministic(values)["theta"], [THETA, THETA], atol=1e-5)
  partial = parse_init(target, {"theta": THETA}, 3)
  drawn = np.random.default_rng(0).uniform(-2., 2., (3, target.dim)).astype(np.float32)
  values = start(complete(target, partial, drawn))
  assert len(set(np.asarray(values["tau"]).tolist())) == 3  # tau drawn per chain
  np.testing.assert_allclose(target.deterministic(values)["theta"], [THETA] * 3, atol=1e-5)


@pytest.mark.slow
def test_init_by_the_original_names_is_accepted_by_the_sampler():
  args, obs = rm.schools_data()
  result = ed.mcmc.sample(ed.reparameterize(rm.schools_centred), *args, observed=obs, chains=2,
                          draws=1, warmup=0, seed=0, progress=False,
                          init={"mu": 1., "tau": 4., "theta": THETA})
  assert result.draws["theta"].shape == (1, 2, 8)


def test_init_by_the_original_names_names_its_errors():
  args, obs = rm.schools_data()
  target = ed.make_target(ed.reparameterize(rm.schools_centred), *args, observed=obs)
  from edward_lite.model.init_values import parse_init  # pylint: disable=import-outside-toplevel
  with pytest.raises(ValueError, match="init names both 'theta' and 'theta_noncentred'"):
    parse_init(target, {"theta": THETA, "theta_noncentred": THETA}, 1)
  with pytest.raises(ValueError, match="their original names \\['theta'\\]"):
    parse_init(target, {"thetta": THETA}, 1)

  def lognormal():
    mu = ed.Normal(0., 1., name="mu")
    return ed.LogNormal(mu, 1., sample_shape=2, name="w")
  target = ed.make_target(ed.reparameterize(lognormal))
  u = parse_init(target, {"mu": 0.5, "w": [1., np.e]}, 1)
  np.testing.assert_allclose(target.constrain(target.unflatten(tf.constant(u)))[
      "w_noncentred"][0], [-0.5, 0.5], rtol=1e-5)
  with pytest.raises(ValueError, match="init values for \\['w'\\] map to non-finite"):
    parse_init(target, {"mu": 0.5, "w": [1., -1.]}, 1)


# -- the centred models sample at the defaults ---------------------------------------

@pytest.mark.slow
def test_centred_funnel_without_divergences():
  """The centred funnel defeats NUTS (RESULTS §17: divergences at any
  target_accept); non-centred it is an independent normal."""
  result = ed.mcmc.sample(ed.reparameterize(rm.funnel), draws=500, seed=0, progress=False)
  assert result.divergences.sum() == 0
  check_means(result, rm.FUNNEL_REFERENCE, ["v", "x"])
  v = np.asarray(result.draws["v"], np.float64)
  ess_sd = float(diagnostics.ess_bulk((v - v.mean())**2))
  assert abs(v.std() / 3. - 1.) < Z / np.sqrt(2 * ess_sd), v.std()


@pytest.mark.slow
def test_centred_eight_schools_matches_the_exact_posterior():
  args, obs = rm.schools_data()
  result = ed.mcmc.sample(ed.reparameterize(rm.schools_centred), *args, observed=obs, seed=0,
                          progress=False)
  assert result.divergences.sum() <= 0.001 * result.draws["mu"].size
  check_means(result, rm.schools_reference(), ["mu", "tau", "theta"])
  with warnings.catch_warnings():  # 2 divergences in 4000 (the non-centred form's usual few)
    warnings.simplefilter("ignore")
    summary = result.summary()
  # The program's variables as written, first (issue 53, item 10); the
  # non-centred auxiliaries when asked for.
  assert list(summary.index[:3]) == ["mu", "tau", "theta[0]"], list(summary.index)
  assert "theta_noncentred[0]" not in summary.index
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    assert "theta_noncentred[0]" in result.summary(var_names=["theta_noncentred"]).index
  predicted = ed.posterior_predictive(ed.reparameterize(rm.schools_centred), result, *args)
  assert sorted(predicted) == ["theta", "y"]  # y predicted, not non-centred


@pytest.mark.slow
def test_centred_hierarchical_regression_matches_the_exact_posterior():
  args, obs = rm.regression_data()
  result = ed.mcmc.sample(ed.reparameterize(rm.varying_intercepts), *args, observed=obs,
                          draws=500, seed=0, progress=False)
  assert result.divergences.sum() <= 0.001 * result.draws["mu"].size
  check_means(result, rm.regression_reference(), ["mu", "beta", "tau", "a"])


# -- learned centredness (VIP) ---------------------------------------------------------

@pytest.mark.slow
def test_learned_centeredness_follows_how_informative_the_data_are():
  """Gorinova, Moore and Hoffman (2020), Figure 1: eight schools' effects
  measured with sd 9-18 against tau near 3 want the non-centred form (c
  near 0); measured with sd 1-3 against tau near 8 the centred one (for
  the normal hierarchy the best c is near tau^2 / (tau^2 + sigma_j^2), 0.9
  to 0.98 there)."""
  args, obs = rm.schools_data()
  weak = ed.vi.learn_centeredness(rm.schools_centred, *args, observed=obs)["theta"]
  (sigma,), data = battery_models.informative_schools_data()
  strong = ed.vi.learn_centeredness(rm.schools_centred, sigma.astype(np.float32),
                                    observed={"y": data["y"].astype(np.float32)})["theta"]
  assert weak.shape == strong.shape == (8,)
  assert np.all(weak < 0.15), weak
  assert np.all(strong > 0.6) and strong.mean() > 0.8, strong


def test_learned_centeredness_has_a_clear_error_without_candidates():
  def model():
    return ed.Normal(0., 1., name="z")
  with pytest.raises(ValueError, match="learn_centeredness: the program has no location-scale"):
    ed.vi.learn_centeredness(model)
