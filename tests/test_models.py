"""Models as people write them (issue 13): float64 data, loops, factors,
flat priors -- each against a known answer."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import edward_lite as ed
from edward_lite.analysis import arviz_compat
import zoo
import battery_models as bm  # the shared kid-score data

tfd = tfp.distributions

Y8 = zoo.EIGHT_SCHOOLS_Y.astype(np.float64)  # as a newcomer's NumPy data
SIGMA8 = zoo.EIGHT_SCHOOLS_SIGMA.astype(np.float64)
eight_schools = zoo.eight_schools


@pytest.mark.long  # the default run keeps the float64 model's conjugate check
def test_float64_numpy_data_gives_the_float32_results():
  kwargs = dict(chains=2, warmup=40, draws=20, seed=3, kernel="hmc", progress=False)
  a = ed.mcmc.sample(eight_schools, SIGMA8, observed={"y": Y8}, **kwargs)
  b = ed.mcmc.sample(eight_schools, SIGMA8.astype(np.float32),
                     observed={"y": Y8.astype(np.float32)}, **kwargs)
  c = ed.mcmc.sample(eight_schools, SIGMA8, observed={"y": list(Y8)}, **kwargs)
  assert a.draws["mu"].dtype == np.float32
  np.testing.assert_array_equal(a.draws["mu"], b.draws["mu"])
  np.testing.assert_array_equal(c.draws["tau"], b.draws["tau"])


def normal_mean(y):
  mu = ed.Normal(1., 2., name="mu")
  return ed.Normal(mu, 1.5, sample_shape=len(y), name="y")


@pytest.mark.slow
def test_float64_model_matches_the_conjugate_posterior():
  y = np.random.default_rng(0).normal(2., 1.5, 20)
  post = ed.mcmc.sample(normal_mean, y, observed={"y": y}, dtype=tf.float64, chains=4,
                        warmup=300, draws=500, seed=1, progress=False)
  assert post.draws["mu"].dtype == np.float64
  prec = 1 / 4 + len(y) / 1.5**2
  mean, sd = (1 / 4 + y.sum() / 1.5**2) / prec, prec**-0.5
  x = post.draws["mu"]
  ess = float(ed.diagnostics.ess_bulk(x))
  assert abs(x.mean() - mean) < 4 * sd / np.sqrt(ess)
  assert abs(x.std() / sd - 1) < 0.15


def test_a_dtype_conflict_names_the_variable():
  def model(sigma):
    mu = ed.Normal(tf.zeros([], tf.float32), 1., name="mu")
    return ed.Normal(mu, sigma, name="y")
  with pytest.raises(TypeError, match="'y'.*float64"):
    ed.make_target(model, tf.constant(SIGMA8), observed={"y": Y8})
  with pytest.raises(TypeError, match="dtype must be a floating"):
    ed.make_target(model, SIGMA8, observed={"y": Y8}, dtype=tf.int32)


COUNTS64 = np.array([2., 4., 3., 7., 6.])  # float64, read by the program below as a global


def _global_rate_model():
  rate = ed.Exponential(0.2, name="rate")
  ed.Factor(tf.reduce_sum(tf.math.xlogy(COUNTS64, rate) - rate), name="poisson")


def test_float64_data_read_from_outside_the_arguments_is_named():
  # Arguments are converted to the model's dtype; a global or closure is not,
  # and the dtype error says which one to pass as an argument.
  with pytest.raises(TypeError, match=r"mixes floating dtypes.*reads float64 data from "
                                      r"outside its arguments \(\['COUNTS64'\]"):
    ed.make_target(_global_rate_model)
  import pandas as pd  # pylint: disable=g-import-not-at-top
  frame = pd.DataFrame({"n": COUNTS64})

  def closure_model():
    rate = ed.Exponential(0.2, name="rate")
    ed.Factor(tf.reduce_sum(tf.math.xlogy(frame["n"].values, rate)), name="poisson")
  with pytest.raises(TypeError, match=r"outside its arguments \(\['frame'\]"):
    ed.make_target(closure_model)
  # The same data as an argument runs, and the dtype error of a program
  # that reads none from outside has no such sentence.
  def rate_model(counts):
    rate = ed.Exponential(0.2, name="rate")
    ed.Factor(tf.reduce_sum(tf.math.xlogy(counts, rate) - rate), name="poisson")
  target = ed.make_target(rate_model, COUNTS64)
  np.testing.assert_allclose(target.log_joint({"rate": np.float32([2.])}),
                             [np.log(0.2) - 0.4 + COUNTS64.sum() * np.log(2.) - 10.], rtol=1e-5)
  def model(sigma):
    mu = ed.Normal(tf.zeros([], tf.float32), 1., name="mu")
    return ed.Normal(mu, sigma, name="y")
  with pytest.raises(TypeError) as info:
    ed.make_target(model, tf.constant(SIGMA8), observed={"y": Y8})
  assert "outside its arguments" not in str(info.value)


# -- loops --------------------------------------------------------------------

def ar_data(n=60, phi=(0.5, -0.3), seed=0):
  rng = np.random.default_rng(seed)
  y = np.zeros(n)
  for t in range(2, n):
    y[t] = phi[0] * y[t - 1] + phi[1] * y[t - 2] + rng.normal()
  return y


def _ar2_scan_mu(phi, y):
  def step(carry, yt):  # carry: ((y[t-1], y[t-2]), prediction of y[t-1])
    (y1, y2), _ = carry
    return (yt, y1), phi[0] * y1 + phi[1] * y2
  _, mu = tf.scan(step, y[2:], initializer=((y[1], y[0]), tf.zeros([], y.dtype)))
  return mu


def ar2_scan_model(y):
  phi = ed.Normal(0., 1., sample_shape=2, name="phi")
  sigma = ed.HalfNormal(1., name="sigma")
  return ed.Normal(_ar2_scan_mu(phi, y), sigma, name="y")


def ar2_matrix_model(y):
  phi = ed.Normal(0., 1., sample_shape=2, name="phi")
  sigma = ed.HalfNormal(1., name="sigma")
  lags = tf.stack([y[1:-1], y[:-2]], axis=1)
  return ed.Normal(tf.linalg.matvec(lags, phi), sigma, name="y")


def test_ar2_with_tf_scan_equals_the_matrix_form_term_by_term():
  y = ar_data().astype(np.float32)
  scan = ed.make_target(ar2_scan_model, y, observed={"y": y[2:]})
  matrix = ed.make_target(ar2_matrix_model, y, observed={"y": y[2:]})
  assert scan.has_loops and not matrix.has_loops
  u = tf.constant(np.random.default_rng(1).normal(size=(5, 3)), tf.float32)
  lp_s, g_s = scan.value_and_gradient_flat(u)
  lp_m, g_m = matrix.value_and_gradient_flat(u)
  np.testing.assert_allclose(lp_s, lp_m, rtol=1e-5)
  np.testing.assert_allclose(g_s, g_m, rtol=1e-4, atol=1e-3)


def ar1_known_scale(y):
  phi = ed.Normal(0., 1., name="phi")
  def step(prev, yt):
    return yt
  lagged = tf.scan(step, y[:-1], initializer=tf.zeros([], y.dtype))  # y[:-1] via a loop
  return ed.Normal(phi * lagged, 1., name="y")


@pytest.mark.slow
@pytest.mark.parametrize("kernel, chains", [("nuts", 4), ("hmc", 40)])
def test_scan_model_matches_the_conjugate_posterior(kernel, chains):
  """AR(1) with known unit noise: phi | y is normal (conjugate), the
  likelihood written with tf.scan, sampled XLA-compiled."""
  y = ar_data(80, (0.6, 0.)).astype(np.float32)
  post = ed.mcmc.sample(ar1_known_scale, y, observed={"y": y[1:]}, kernel=kernel,
                        chains=chains, warmup=200, draws=200, seed=2, progress=False)
  lag = y[:-1].astype(np.float64)
  prec = 1 + np.sum(lag**2)
  mean, sd = np.sum(y[1:] * lag) / prec, prec**-0.5
  x = post.draws["phi"]
  ess = float(ed.diagnostics.ess_bulk(x))
  assert abs(x.mean() - mean) < 4 * sd / np.sqrt(ess), (x.mean(), mean)
  assert abs(x.std() / sd - 1) < 0.2


def forward_algorithm(y, p_stay, scales):
  """log p(y) of a 2-state Gaussian HMM by the forward algorithm (NumPy)."""
  from scipy.stats import norm  # pylint: disable=g-import-not-at-top
  trans = np.array([[p_stay, 1 - p_stay], [1 - p_stay, p_stay]])
  emis = norm.pdf(y[:, None], loc=[-1., 1.], scale=scales)
  alpha = 0.5 * emis[0]
  log_norm = 0.
  for t in range(1, len(y)):
    c = alpha.sum()
    log_norm += np.log(c)
    alpha = (alpha / c) @ trans * emis[t]
  return log_norm + np.log(alpha.sum())


def hmm(y):
  p_stay = ed.Beta(2., 2., name="p_stay")
  scale = ed.HalfNormal(1., name="scale")
  trans = tf.stack([[p_stay, 1 - p_stay], [1 - p_stay, p_stay]])
  return ed.HiddenMarkovModel(tfd.Categorical(probs=[0.5, 0.5]), tfd.Categorical(probs=trans),
                              tfd.Normal([-1., 1.], scale), num_steps=len(y), name="y")


@pytest.mark.slow
def test_hidden_markov_model_likelihood_equals_the_forward_algorithm_and_samples():
  rng = np.random.default_rng(4)
  states = np.cumsum(rng.uniform(size=50) < 0.1) % 2
  y = (np.where(states, 1., -1.) + 0.5 * rng.normal(size=50)).astype(np.float32)
  target = ed.make_target(hmm, y, observed={"y": y})
  assert target.has_loops
  values = {"p_stay": np.array([0.7, 0.9]), "scale": np.array([0.5, 1.2])}
  u = target.flatten(target.unconstrain(values))
  terms = target.log_prob_terms_flat(u)
  for c in range(2):
    expected = forward_algorithm(y.astype(np.float64), values["p_stay"][c], values["scale"][c])
    np.testing.assert_allclose(terms["y"][c], expected, rtol=1e-4)
  post = ed.mcmc.sample(hmm, y, observed={"y": y}, chains=3, warmup=150, draws=150, seed=0,
                        progress=False)
  assert np.all(np.isfinite(post.draws["p_stay"]))
  assert 0.5 < post.draws["scale"].mean() < 0.65  # the data's noise scale is 0.5


@pytest.mark.slow
def test_while_loop_without_maximum_iterations_runs_without_xla():
  y = ar_data(30, (0.3, 0.)).astype(np.float32)
  def model(y):
    phi = ed.Normal(0., 1., name="phi")
    def body(t, acc):
      return t + 1, acc + (y[t] - phi * y[t - 1]) ** 2
    _, sse = tf.while_loop(lambda t, acc: t < len(y), body, (tf.constant(1), tf.constant(0.)))
    ed.Factor(-0.5 * sse, name="likelihood")
  with pytest.warns(RuntimeWarning, match="maximum_iterations"):
    post = ed.mcmc.sample(model, y, chains=2, warmup=150, draws=300, seed=0, progress=False)
  lag = y[:-1].astype(np.float64)
  prec = 1 + np.sum(lag**2)
  x = post.draws["phi"]
  ess = float(ed.diagnostics.ess_bulk(x))
  assert abs(x.mean() - np.sum(y[1:] * lag) / prec) < 4 * prec**-0.5 / np.sqrt(ess)


# -- factors and flat priors ------------------------------------------------------

def test_factor_equals_the_observed_distribution():
  y = np.random.default_rng(2).normal(1., 2., 15)

  def with_factor(y):
    mu = ed.Normal(0., 3., name="mu")
    sigma = ed.HalfNormal(2., name="sigma")
    ed.Factor(tfd.Normal(mu, sigma).log_prob(y), name="likelihood")

  def with_observed(y):
    mu = ed.Normal(0., 3., name="mu")
    sigma = ed.HalfNormal(2., name="sigma")
    return ed.Normal(mu, sigma, sample_shape=len(y), name="y")

  a = ed.make_target(with_factor, y)
  b = ed.make_target(with_observed, y, observed={"y": y})
  assert a.names == b.names == ("mu", "sigma")
  u = tf.constant(np.random.default_rng(3).normal(size=(4, 2)), tf.float32)
  np.testing.assert_allclose(a.log_prob_flat(u), b.log_prob_flat(u), rtol=1e-5)
  log_joint = ed.make_log_joint_fn(with_factor)
  expected = (tfd.Normal(0., 3.).log_prob(1.) + tfd.HalfNormal(2.).log_prob(2.) +
              tf.reduce_sum(tfd.Normal(1., 2.).log_prob(y.astype(np.float32))))
  np.testing.assert_allclose(log_joint(y, mu=1., sigma=2.), expected, rtol=1e-5)


def flat_regression(hs, iq):
  b = ed.Flat(shape=3, name="b")
  sigma = ed.Flat(low=0., name="sigma")
  return ed.Normal(b[0] + b[1] * hs + b[2] * iq, sigma, name="score")


@pytest.mark.slow
def test_flat_priors_give_the_analytic_student_t_posterior():
  """Flat priors on b and sigma: b | y is Student-t with N - 1 - p degrees
  of freedom, centred at least squares, covariance SSE / (nu - 2) (X'X)^-1."""
  (hs, iq), score = bm.kid_score_data()
  score = score["kid_score"]
  post = ed.mcmc.sample(flat_regression, hs, iq, observed={"score": score}, chains=4,
                        warmup=500, draws=500, seed=0, progress=False)
  x = np.stack([np.ones_like(hs), hs, iq], 1)
  b_hat, sse = np.linalg.lstsq(x, score, rcond=None)[:2]
  nu = len(score) - 1 - 3
  sd = np.sqrt(np.diag(sse[0] / (nu - 2) * np.linalg.inv(x.T @ x)))
  draws = post.draws["b"]
  ess = np.asarray(ed.diagnostics.ess_bulk(draws))
  z = (draws.mean(axis=(0, 1)) - b_hat) / (sd / np.sqrt(ess))
  assert np.all(np.abs(z) < 4), z
  np.testing.assert_allclose(draws.std(axis=(0, 1)) / sd, 1., atol=0.12)
  assert post.stuck_chains() == []


def test_flat_prior_with_latent_bounds_and_no_prior_draws():
  def model():
    tau = ed.HalfNormal(1., name="tau")
    x = ed.Flat(low=0., high=tau, name="x")
    return ed.Normal(x, 0.1, name="y")
  target = ed.make_target(model, observed={"y": 0.3})
  u = tf.constant([[0.1, -0.5], [-1., 2.]], tf.float32)
  values = target.constrain(target.unflatten(u))
  assert np.all((values["x"] > 0) & (values["x"] < values["tau"]))
  with pytest.raises(NotImplementedError, match="improper flat prior"):
    target.sample_prior(3, seed=0)


def ar1_newcomer(y):
  """As a newcomer writes it: float64 NumPy data, a tf.scan, a Factor.

  y_t | y_{t-1} ~ N(phi y_{t-1}, 1) for t >= 1, phi flat plus a Factor adding
  a N(0, 1) log density: phi | y is N(S_xy / (1 + S_xx), 1 / (1 + S_xx)).
  """
  phi = ed.Flat(name="phi")
  ed.Factor(tfd.Normal(0., 1.).log_prob(phi), name="phi_prior")
  y = tf.convert_to_tensor(y, tf.float32)
  means = tf.scan(lambda _, y_prev: phi * y_prev, y[:-1], initializer=tf.zeros([]))
  return ed.Normal(means, 1., name="y")


@pytest.mark.slow
def test_newcomer_model_runs_end_to_end_with_arviz_loo():
  az = pytest.importorskip("arviz")
  rng = np.random.default_rng(4)
  y = np.zeros(30)
  for t in range(1, 30):
    y[t] = 0.6 * y[t - 1] + rng.normal()
  posterior = ed.mcmc.sample(ar1_newcomer, y, observed={"y": y[1:]}, chains=4, warmup=300,
                             draws=1000, seed=2, init="uniform", progress=False)
  lag, now = y[:-1], y[1:]
  precision = 1. + lag @ lag
  row = posterior.summary().loc["phi"]
  assert abs(row["mean"] - lag @ now / precision) < 4 * row["mcse_mean"]
  assert abs(row["sd"] / precision**-0.5 - 1.) < 0.1
  # PSIS-LOO against exact leave-one-term-out: without term t, phi is
  # N(m_t, v_t); the term's predictive is N(m_t y_{t-1}, 1 + v_t y_{t-1}^2).
  # The first term (y_0 = 0) does not depend on phi: its log-likelihood is
  # the same at every draw, which ArviZ 1.x's PSIS refuses ("All tail values
  # are the same"), so LOO runs on the other terms.
  idata = posterior.to_arviz()
  log_lik = idata.log_likelihood["y"].values
  np.testing.assert_allclose(log_lik[..., 0], -0.5 * np.log(2 * np.pi) - 0.5 * now[0]**2,
                             rtol=1e-6)
  loo = arviz_compat.elpd(az.loo(arviz_compat.from_groups({
      "posterior": {"phi": idata.posterior["phi"].values},
      "log_likelihood": {"y": log_lik[..., 1:]}}), pointwise=True))
  exact = []
  for t in range(1, len(now)):
    keep = np.arange(len(now)) != t
    v = 1. / (1. + lag[keep] @ lag[keep])
    m = v * (lag[keep] @ now[keep])
    exact.append(-0.5 * np.log(2 * np.pi * (1. + v * lag[t]**2))
                 - 0.5 * (now[t] - m * lag[t])**2 / (1. + v * lag[t]**2))
  # Each term's Monte Carlo error: the estimate is -log mean_s a_s with a_s =
  # 1 / p(y_t | phi_s), so its standard error is sd(a) / (mean(a) sqrt(ESS))
  # (delta method; ESS of a's draws).  All terms share phi's draws, so they
  # err together: at seed 2 every term is 1-3 standard errors off, as phi's
  # mean is 2.7 MCSE off its exact value (a fixed 0.02 failed there).
  a = np.exp(-log_lik[..., 1:].astype(np.float64))
  a /= a.mean(axis=(0, 1))
  ess = np.array([float(np.squeeze(ed.diagnostics.ess_bulk(a[..., t].T)))
                  for t in range(a.shape[-1])])
  se = a.std(axis=(0, 1)) / np.sqrt(ess)
  error = np.abs(np.asarray(loo.pointwise) - np.array(exact))
  assert np.all(error < 4. * se), (error / se).max()
