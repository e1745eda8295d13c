"""Time-series programs (loops inside the log density) against answers
computed another way.

- A local-level state-space model written with ``ed.LinearGaussianStateSpaceModel``
  (TFP's Kalman filter, a loop): the NUTS posterior of its two noise scales
  against a 2-D grid posterior from a NumPy Kalman filter.
- A 2-state hidden Markov model with known Gaussian emissions
  (``ed.HiddenMarkovModel``): the posterior of its two stay probabilities
  against a 2-D grid posterior from a NumPy forward algorithm.
- ``examples/time_series.py`` in its quick form: the GARCH(1,1) and HMM
  posteriors (and, marked slow, the stochastic-volatility one) cover the
  parameters the data were simulated with.

Posterior means and sds are compared within 4 Monte Carlo standard errors
plus the grid's own error (the change from halving the grid resolution).
"""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import edward_lite as ed

tfd = tfp.distributions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def grid_moments(log_density, axes):
  """Posterior means and sds of the parameters on a 2-D grid.

  ``log_density[i, j]`` is the log density of the grid cell
  ``(axes[0][i], axes[1][j])`` per unit cell volume (equal cells); returns
  ``(mean [2], sd [2])``.
  """
  w = np.exp(log_density - log_density.max())
  w /= w.sum()
  a, b = np.meshgrid(*axes, indexing="ij")
  mean = np.array([np.sum(w * a), np.sum(w * b)])
  sd = np.sqrt(np.array([np.sum(w * a**2), np.sum(w * b**2)]) - mean**2)
  return mean, sd


def grid_reference(log_density_fn, n):
  """``(mean, sd, error)``: grid moments with ``n`` points per axis, and as
  their error the change from the grid with ``n // 2`` points."""
  mean, sd = log_density_fn(n)
  mean_half, sd_half = log_density_fn(n // 2)
  return mean, sd, np.maximum(np.abs(mean - mean_half), np.abs(sd - sd_half))


def check_against_grid(draws, names, mean, sd, error):
  """Each parameter's NUTS mean and sd within 4 MCSE + grid error."""
  for k, name in enumerate(names):
    x = draws[name].astype(np.float64)
    mcse_mean = float(ed.diagnostics.mcse_mean(x))
    # delta method: sd = sqrt(E(x - m)^2), so mcse(sd) = mcse((x - m)^2) / (2 sd).
    mcse_sd = float(ed.diagnostics.mcse_mean((x - x.mean())**2)) / (2 * x.std())
    assert abs(x.mean() - mean[k]) < 4 * mcse_mean + error[k], (name, x.mean(), mean[k],
                                                                   mcse_mean)
    assert abs(x.std() - sd[k]) < 4 * mcse_sd + error[k], (name, x.std(), sd[k], mcse_sd)


# -- local-level model --------------------------------------------------------------

S0 = 2.  # prior sd of the first state


def local_level(num_steps):
  """x_1 ~ N(0, S0); x_t = x_{t-1} + N(0, q); y_t = x_t + N(0, r);
  q, r ~ HalfNormal(1)."""
  q = ed.HalfNormal(1., name="q")
  r = ed.HalfNormal(1., name="r")
  return ed.LinearGaussianStateSpaceModel(
      num_timesteps=num_steps,
      transition_matrix=tf.eye(1),
      transition_noise=tfd.MultivariateNormalDiag(scale_diag=q[None]),
      observation_matrix=tf.eye(1),
      observation_noise=tfd.MultivariateNormalDiag(scale_diag=r[None]),
      initial_state_prior=tfd.MultivariateNormalDiag(scale_diag=[S0]),
      name="y")


def kalman_log_likelihood(y, q, r):
  """log p(y | q, r) of the local-level model by the Kalman filter (NumPy,
  elementwise over arrays ``q`` and ``r``)."""
  m, p, ll = np.zeros_like(q), np.full_like(q, S0**2), np.zeros_like(q)
  for t, yt in enumerate(y):
    if t:
      p = p + q**2
    s = p + r**2
    ll -= 0.5 * (np.log(2 * np.pi * s) + (yt - m)**2 / s)
    gain = p / s
    m, p = m + gain * (yt - m), (1 - gain) * p
  return ll


def local_level_data(num_steps=50, q=0.5, r=1., seed=0):
  rng = np.random.default_rng(seed)
  x = S0 * rng.normal() + np.concatenate([[0.], np.cumsum(q * rng.normal(size=num_steps - 1))])
  return x + r * rng.normal(size=num_steps)


@pytest.mark.slow
def test_local_level_noise_scales_match_the_kalman_filter_grid_posterior():
  y = local_level_data()
  observed = {"y": y[:, None].astype(np.float32)}
  post = ed.mcmc.sample(local_level, len(y), observed=observed, chains=4, warmup=300,
                        draws=500, seed=0, progress=False)
  target = post.target
  assert target.has_loops
  values = {"q": np.array([0.3, 0.7]), "r": np.array([0.9, 1.2])}
  terms = target.log_prob_terms_flat(target.flatten(target.unconstrain(values)))
  np.testing.assert_allclose(terms["y"], kalman_log_likelihood(y, values["q"], values["r"]),
                             rtol=1e-5)

  def log_posterior(n):
    # Grid uniform in (log q, log r) over [1e-4, 10]^2: the density per cell is
    # likelihood x HalfNormal(1) prior x Jacobian q r.  The mass left out
    # (below 1e-4: about 1e-4 of it, the likelihood being finite at 0; above
    # 10: the prior's tail) moves the means by far less than the MCSE.
    log_axis = np.linspace(np.log(1e-4), np.log(10.), n)
    q, r = np.meshgrid(np.exp(log_axis), np.exp(log_axis), indexing="ij")
    log_density = (kalman_log_likelihood(y, q, r) - 0.5 * (q**2 + r**2) + np.log(q * r))
    return grid_moments(log_density, [np.exp(log_axis)] * 2)

  mean, sd, error = grid_reference(log_posterior, 400)
  assert post.divergences.sum() == 0
  check_against_grid(post.draws, ["q", "r"], mean, sd, error)


# -- hidden Markov model -------------------------------------------------------------

HMM_LOCS, HMM_SCALE = np.array([-1., 1.]), 0.8


def hmm_stay_probabilities(num_steps):
  """A 2-state HMM with known N(-1, 0.8), N(1, 0.8) emissions and a uniform
  first state; the probabilities of staying in each state ~ Beta(2, 2)."""
  stay0 = ed.Beta(2., 2., name="stay0")
  stay1 = ed.Beta(2., 2., name="stay1")
  trans = tf.stack([[stay0, 1. - stay0], [1. - stay1, stay1]])
  return ed.HiddenMarkovModel(tfd.Categorical(probs=[0.5, 0.5]), tfd.Categorical(probs=trans),
                              tfd.Normal(HMM_LOCS.astype(np.float32), HMM_SCALE),
                              num_steps=num_steps, name="y")


def forward_log_likelihood(y, stay0, stay1):
  """log p(y) by the scaled forward algorithm (NumPy, elementwise over arrays
  ``stay0`` and ``stay1``)."""
  emission = np.exp(-0.5 * ((y[:, None] - HMM_LOCS) / HMM_SCALE)**2) / (
      np.sqrt(2 * np.pi) * HMM_SCALE)
  a0, a1 = 0.5 * emission[0, 0], 0.5 * emission[0, 1]
  ll = 0.
  for t in range(1, len(y)):
    c = a0 + a1
    ll = ll + np.log(c)
    a0, a1 = a0 / c, a1 / c
    a0, a1 = ((a0 * stay0 + a1 * (1 - stay1)) * emission[t, 0],
              (a0 * (1 - stay0) + a1 * stay1) * emission[t, 1])
  return ll + np.log(a0 + a1)


def hmm_data(num_steps=100, stay=(0.9, 0.8), seed=1):
  rng = np.random.default_rng(seed)
  states = np.zeros(num_steps, int)
  states[0] = rng.integers(2)
  for t in range(1, num_steps):
    states[t] = states[t - 1] if rng.uniform() < stay[states[t - 1]] else 1 - states[t - 1]
  return HMM_LOCS[states] + HMM_SCALE * rng.normal(size=num_steps)


@pytest.mark.slow
def test_hmm_stay_probabilities_match_the_forward_algorithm_grid_posterior():
  y = hmm_data()
  observed = {"y": y.astype(np.float32)}
  post = ed.mcmc.sample(hmm_stay_probabilities, len(y), observed=observed, chains=4,
                        warmup=300, draws=500, seed=0, progress=False)
  target = post.target
  values = {"stay0": np.array([0.7, 0.95]), "stay1": np.array([0.6, 0.85])}
  terms = target.log_prob_terms_flat(target.flatten(target.unconstrain(values)))
  np.testing.assert_allclose(
      terms["y"], forward_log_likelihood(y, values["stay0"], values["stay1"]), rtol=1e-5)

  def log_posterior(n):
    axis = (np.arange(n) + 0.5) / n  # cell midpoints on (0, 1)
    a, b = np.meshgrid(axis, axis, indexing="ij")
    log_density = forward_log_likelihood(y, a, b) + np.log(a * (1 - a) * b * (1 - b))
    return grid_moments(log_density, [axis, axis])

  mean, sd, error = grid_reference(log_posterior, 400)
  assert post.divergences.sum() == 0
  check_against_grid(post.draws, ["stay0", "stay1"], mean, sd, error)


# -- examples/time_series.py ---------------------------------------------------------


def covers(draws, truth, prob=0.99):
  """Whether ``truth`` lies in the central ``prob`` posterior interval of
  every element of ``draws`` ``[draws, chains, *shape]``."""
  lo, hi = np.quantile(draws, [(1 - prob) / 2, (1 + prob) / 2], axis=(0, 1))
  return bool(np.all((lo <= truth) & (truth <= hi)))


def sv_log_volatility(mu, phi, sigma, h_std):
  """The stochastic-volatility program's ``h`` by the recursion in NumPy
  (elementwise over the leading axes of the draws)."""
  h = np.empty(h_std.shape, np.float64)
  h[..., 0] = mu + sigma * h_std[..., 0] / np.sqrt(1. - phi**2)
  for t in range(1, h_std.shape[-1]):
    h[..., t] = mu + phi * (h[..., t - 1] - mu) + sigma * h_std[..., t]
  return h


@pytest.fixture(scope="module")
def time_series():
  sys.path.insert(0, os.path.join(ROOT, "examples"))
  try:
    import time_series as module  # pylint: disable=g-import-not-at-top
  finally:
    sys.path.pop(0)
  return module


# The default form fits GARCH and the HMM (35-55 s on 2 shared cores);
# stochastic volatility, the costliest (target acceptance 0.99, float64),
# is the slow form.
@pytest.mark.long  # both forms; the default run keeps the grid-posterior checks above
@pytest.mark.parametrize("models", [("garch", "hmm"),
                                    pytest.param(("sv",), marks=pytest.mark.slow)],
                         ids=["garch-hmm", "sv"])
def test_time_series_example_quick_run_recovers_the_simulation_parameters(time_series, models):
  fits = time_series.main(quick=True, models=models, progress=False)
  assert sorted(fits) == sorted(models)
  for name, fit in fits.items():
    posterior = fit["posterior"]
    assert not posterior.stuck_chains(), (name, posterior.stuck_chains())
    for key, x in posterior.draws.items():
      assert np.all(np.isfinite(x)), (name, key)

  if "garch" in fits:
    garch = fits["garch"]
    draws = garch["posterior"].draws
    for key, truth in garch["truth"].items():
      assert covers(draws[key], truth), (key, truth, draws[key].mean(), draws[key].std())
      assert float(ed.diagnostics.rhat(draws[key])) < 1.05, key
    assert np.all(draws["alpha1"] + draws["beta1"] < 1)
    np.testing.assert_array_equal(draws["alpha1"], draws["w"][..., 0])

  if "hmm" in fits:
    hmm = fits["hmm"]
    draws = hmm["posterior"].draws
    for key in ("locs", "scale"):
      assert covers(draws[key], hmm["truth"][key]), key
    assert covers(np.diagonal(draws["trans"], axis1=-2, axis2=-1),
                  np.diag(hmm["truth"]["trans"]))

  if "sv" in fits:
    sv = fits["sv"]
    draws = sv["posterior"].draws
    for key in ("mu", "phi", "sigma"):
      assert covers(draws[key], sv["truth"][key]), (key, draws[key].mean(), draws[key].std())
    # h, an ed.Deterministic computed by tf.scan, is the recursion of the draws.
    d = {k: draws[k].astype(np.float64) for k in ("mu", "phi", "sigma", "h_std")}
    h = sv_log_volatility(d["mu"], d["phi"], d["sigma"], d["h_std"])
    np.testing.assert_allclose(draws["h"], h, rtol=1e-4, atol=1e-4)
    assert sv["h_covered"] > 0.75  # true log volatilities in the 90% intervals
