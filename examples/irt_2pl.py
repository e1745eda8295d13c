"""Hierarchical two-parameter logistic (2PL) item-response model.

``I`` students answer ``K`` items; every pair is observed:

    theta_i ~ N(0, 1)                          ability of student i
    mu_beta ~ N(0, 1)
    sigma_beta, sigma_gamma ~ HalfNormal(1)
    beta_k ~ N(mu_beta, sigma_beta)            difficulty of item k
    log_gamma_k ~ N(0, sigma_gamma)            log discrimination of item k
    y_ik ~ Bernoulli(logit^-1(gamma_k (theta_i - beta_k)))

With the default 800 x 100 the posterior has ``I + 3 + 2K = 1,003``
parameters.  The model is written centered (as in Stan's and NumPyro's
benchmark versions): ``beta`` and ``log_gamma`` sit in funnels with their
scales ``sigma_beta`` and ``sigma_gamma``.

This module is shared by ``examples/irt_2pl_flows.py``,
``benchmarks/vi_irt.py`` and the tests:

    from irt_2pl import model, make_data
    y = make_data(seed=0)
    fit = ed.vi.fit(model, 800, 100, observed={"y": y}, family="realnvp")

The data generator is the one of ``benchmarks/mcmc_nuts.py`` (same seed, same
draws), so results here are comparable with the NUTS numbers there.
"""

import numpy as np
import tensorflow as tf

import edward_lite as ed

STUDENTS, ITEMS = 800, 100
# True hyperparameters of the synthetic data.
TRUE = dict(mu_beta=0., sigma_beta=1., sigma_gamma=0.5)
# Latent variables in program order (= the order of the flat parameter vector).
NAMES = ("theta", "mu_beta", "sigma_beta", "sigma_gamma", "beta", "log_gamma")


def model(students=STUDENTS, items=ITEMS):
  """The 2PL IRT program; observe ``y`` (int ``[students, items]``)."""
  theta = ed.Normal(tf.zeros(students), 1., name="theta")
  mu_beta = ed.Normal(0., 1., name="mu_beta")
  sigma_beta = ed.HalfNormal(1., name="sigma_beta")
  sigma_gamma = ed.HalfNormal(1., name="sigma_gamma")
  beta = ed.Normal(mu_beta * tf.ones(items), sigma_beta, name="beta")
  log_gamma = ed.Normal(tf.zeros(items), sigma_gamma, name="log_gamma")
  logits = tf.exp(log_gamma)[None, :] * (theta[:, None] - beta[None, :])
  return ed.Bernoulli(logits=logits, name="y")


def make_data(seed=0, students=STUDENTS, items=ITEMS):
  """Synthetic responses ``y`` (int32 ``[students, items]``) from fixed true
  hyperparameters (``TRUE``) and NumPy seed ``seed``."""
  rng = np.random.default_rng(seed)
  theta = rng.normal(size=students)
  beta = rng.normal(TRUE["mu_beta"], TRUE["sigma_beta"], size=items)
  gamma = np.exp(rng.normal(0., TRUE["sigma_gamma"], size=items))
  logits = gamma * (theta[:, None] - beta)
  return (rng.uniform(size=logits.shape) < 1. / (1. + np.exp(-logits))).astype(np.int32)


def flatten(values):
  """Dict name -> ``[n, *shape]`` (or one draw ``[*shape]`` with ``n`` absent
  for every name) -> NumPy ``[n, 1003]`` (or ``[1003]``) in ``NAMES`` order:
  one column per scalar parameter."""
  scalar = np.ndim(values["mu_beta"]) == 0
  parts = [np.asarray(values[name], np.float64) for name in NAMES]
  if scalar:
    return np.concatenate([np.reshape(p, [-1]) for p in parts])
  n = parts[0].shape[0]
  return np.concatenate([np.reshape(p, [n, -1]) for p in parts], axis=1)


def labels(students=STUDENTS, items=ITEMS):
  """Scalar parameter names in ``flatten`` order: ``theta[0]``, ..."""
  sizes = dict(theta=students, beta=items, log_gamma=items)
  out = []
  for name in NAMES:
    out += [f"{name}[{i}]" for i in range(sizes[name])] if name in sizes else [name]
  return out
