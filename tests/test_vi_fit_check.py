"""``ed.vi.fit`` warns at the end of a fit that cannot be trusted (issue 32,
item 3): Pareto k-hat of the importance weights, and an ELBO still rising."""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.vi import fit_check


def varying_intercepts_data(seed=0, groups=18, days=10):
  """Reaction times as in the sleep-deprivation study: intercept near 250."""
  rng = np.random.default_rng(seed)
  group = np.repeat(np.arange(groups), days)
  day = np.tile(np.arange(days), groups).astype(np.float32)
  a = 251. + rng.normal(0., 24., groups)
  y = a[group] + 10.5 * day + rng.normal(0., 25., groups * days)
  return day, group, groups, y.astype(np.float32)


def varying_intercepts(day, group, groups):
  mu = ed.Normal(0., 1000., name="mu")
  tau = ed.HalfNormal(100., name="tau")
  a = ed.Normal(mu * tf.ones(groups), tau, name="a")
  beta = ed.Normal(0., 100., name="beta")
  sigma = ed.HalfNormal(100., name="sigma")
  return ed.Normal(tf.gather(a, group) + beta * day, sigma, name="y")


def test_a_fit_far_from_the_posterior_warns_with_k_hat_and_the_rising_elbo():
  """Started uniformly near 0, mean-field Adam cannot travel to an intercept
  near 250 in 5000 steps (the exact posterior mean of mu, by NUTS, is 242
  with sd 7); the fit ends near 38 and must say so."""
  day, group, groups, y = varying_intercepts_data()
  with pytest.warns(RuntimeWarning) as caught:
    fit = ed.vi.fit(varying_intercepts, day, group, groups, observed={"y": y}, seed=0,
                    progress=False)
  assert fit.sample(1000, seed=1)["mu"].mean() < 150.  # the fit really is far off
  messages = [str(w.message) for w in caught]
  assert any(m.startswith("The fitted meanfield approximation cannot be trusted") and
             "Pareto k-hat" in m for m in messages), messages
  assert any(m.startswith("The ELBO was still rising") for m in messages), messages
  assert fit.k_hat > 1.  # the draws behind the warning are the result's


def test_an_exact_fit_does_not_warn():
  """y_i ~ N(mu, 1), mu ~ N(0, 10): the posterior is normal, which
  mean-field represents exactly; k-hat small, the ELBO flat at the end."""
  y = np.random.default_rng(1).normal(3., 1., 50).astype(np.float32)

  def model():
    mu = ed.Normal(0., 10., name="mu")
    return ed.Normal(mu * tf.ones(50), 1., name="y")

  with warnings.catch_warnings():
    warnings.simplefilter("error", RuntimeWarning)
    fit = ed.vi.fit(model, observed={"y": y}, steps=2000, seed=0, progress=False)
  precision = 1. / 100. + 50.
  np.testing.assert_allclose(fit.params["mu"]["loc"], y.sum() / precision, atol=0.03)
  assert fit.k_hat < 0.5


def test_the_rising_elbo_rule_on_traces_with_a_known_answer():
  rng = np.random.default_rng(0)
  flat = -100. + rng.normal(0., 3., 5000)
  assert fit_check._rising_note(flat) == ""
  rising = flat + np.linspace(0., 30., 5000)  # 3 nats over the last two tenths
  assert "still rising" in fit_check._rising_note(rising)
  slight = flat + np.linspace(0., 3., 5000)  # 0.3 nats: below RISE_NATS
  assert fit_check._rising_note(slight) == ""
  assert fit_check._rising_note(flat[:50]) == ""  # too short to judge
