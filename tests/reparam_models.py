"""Centred hierarchical models and their exact posteriors, for ``ed.reparameterize``.

Shared by ``tests/test_reparameterize.py`` and
``benchmarks/reparameterize.py``.  Each model is written *centred*, as a
user would write it first; each reference is exact (a Gaussian given one
scale, integrated over that scale by a fine quadrature), in float64.

* ``funnel``: Neal's funnel, ``v ~ N(0, 3)``, ``x[9] ~ N(0, exp(v / 2))``;
  marginals ``v ~ N(0, 3)``, ``x_i`` with mean 0 and sd ``exp(9 / 4)``.
* ``schools_centred``: eight schools (the original data), ``mu ~ N(0, 5)``,
  ``tau ~ HalfCauchy(0, 5)``, ``theta[8] ~ N(mu, tau)``, ``y ~ N(theta,
  sigma)`` (``battery_models.hierarchical_reference``); and the same model on
  well-measured schools (``sigma_j`` 1-3, tau 8: the centred form's regime).
* ``varying_intercepts``: a hierarchical regression with weak groups,
  ``y_ij ~ N(a_j + beta x_ij, 2)``, ``a_j ~ N(mu, tau)``, ``mu, beta ~ N(0,
  5)``, ``tau ~ HalfNormal(2)``: 8 groups of 4 rows, ``tau`` small, so its
  posterior reaches down to 0 and the centred form is a funnel.
"""

import numpy as np
import tensorflow as tf

import edward_lite as ed
from battery_models import (EIGHT_SCHOOLS_SIGMA, EIGHT_SCHOOLS_Y, hierarchical_reference,
                            informative_schools_data)

__all__ = ["funnel", "FUNNEL_REFERENCE", "schools_centred", "schools_data", "schools_reference",
           "informative_data", "informative_reference", "varying_intercepts", "regression_data",
           "regression_reference"]


def funnel():
  v = ed.Normal(0., 3., name="v")
  return ed.Normal(0., tf.exp(v / 2.), sample_shape=9, name="x")


FUNNEL_REFERENCE = {"v": (0., 3.), "x": (np.zeros(9), np.full(9, np.exp(9. / 4.)))}


def schools_centred(sigma):
  mu = ed.Normal(0., 5., name="mu")
  tau = ed.HalfCauchy(0., 5., name="tau")
  theta = ed.Normal(mu, tau, sample_shape=8, name="theta")
  return ed.Normal(theta, sigma, name="y")


def schools_data():
  """``((sigma,), {"y": y})`` in float32."""
  return (EIGHT_SCHOOLS_SIGMA.astype(np.float32),), {"y": EIGHT_SCHOOLS_Y.astype(np.float32)}


def schools_reference():
  """name -> (mean, sd), exact."""
  return hierarchical_reference(EIGHT_SCHOOLS_Y, EIGHT_SCHOOLS_SIGMA)


def informative_data():
  """``((sigma,), {"y": y})``: the battery's well-measured schools, float32."""
  (sigma,), obs = informative_schools_data()
  return (sigma.astype(np.float32),), {"y": obs["y"].astype(np.float32)}


def informative_reference():
  (sigma,), obs = informative_schools_data()
  return hierarchical_reference(obs["y"], sigma)


GROUPS, ROWS, NOISE, PRIOR_SD, TAU_SCALE = 8, 4, 2., 5., 2.


def varying_intercepts(x, group):
  mu = ed.Normal(0., PRIOR_SD, name="mu")
  beta = ed.Normal(0., PRIOR_SD, name="beta")
  tau = ed.HalfNormal(TAU_SCALE, name="tau")
  a = ed.Normal(mu * tf.ones(GROUPS), tau, name="a")
  return ed.Normal(tf.gather(a, group) + beta * x, NOISE, name="y")


def regression_data(seed=3):
  """``((x, group), {"y": y})``: 8 groups of 4 rows, true tau 0.5."""
  rng = np.random.default_rng(seed)
  group = np.repeat(np.arange(GROUPS), ROWS)
  x = rng.normal(size=GROUPS * ROWS)
  a = 1. + 0.5 * rng.normal(size=GROUPS)
  y = a[group] + 0.7 * x + NOISE * rng.normal(size=GROUPS * ROWS)
  return (x.astype(np.float32), group.astype(np.int32)), {"y": y.astype(np.float32)}


def regression_reference(seed=3):
  """name -> (mean, sd), exact: given tau, ``y ~ N(0, K(tau))`` with
  ``K = s^2 (1 1' + x x') + tau^2 G G' + noise^2 I`` (``G`` the group
  indicators) and ``(mu, beta, a)`` Gaussian; tau by quadrature on log tau."""
  (x, group), obs = regression_data(seed)
  x, y = x.astype(np.float64), obs["y"].astype(np.float64)
  n = x.size
  g = np.eye(GROUPS)[group]                                   # [N, J]
  one = np.ones(n)
  s2 = PRIOR_SD**2
  log_tau = np.linspace(-12., 3., 3001)
  lp, means, second = [], [], []
  for t in np.exp(log_tau):
    k = s2 * (np.outer(one, one) + np.outer(x, x)) + t**2 * g @ g.T + NOISE**2 * np.eye(n)
    chol = np.linalg.cholesky(k)
    alpha = np.linalg.solve(k, y)
    # cov((mu, beta, a), y): mu -> s2 1', beta -> s2 x', a_j -> s2 1' + t^2 G_j'
    cross = np.concatenate([s2 * one[None], s2 * x[None], s2 * one[None] + t**2 * g.T])
    prior_var = np.concatenate([[s2, s2], np.full(GROUPS, s2 + t**2)])
    mean = cross @ alpha
    var = prior_var - np.einsum("in,in->i", cross, np.linalg.solve(k, cross.T).T)
    lp.append(-np.sum(np.log(np.diag(chol))) - 0.5 * y @ alpha
              - 0.5 * (t / TAU_SCALE)**2 + np.log(t))        # HalfNormal prior, d tau = tau d log tau
    means.append(np.concatenate([mean, [t]]))
    second.append(np.concatenate([var + mean**2, [t**2]]))
  lp = np.array(lp)
  w = np.exp(lp - lp.max())
  assert w[0] < 1e-3 * w.max() and w[-1] < 1e-10 * w.max()
  w /= w.sum()
  m, m2 = w @ np.array(means), w @ np.array(second)
  sd = np.sqrt(m2 - m**2)
  return {"mu": (m[0], sd[0]), "beta": (m[1], sd[1]), "a": (m[2:-1], sd[2:-1]),
          "tau": (m[-1], sd[-1])}
