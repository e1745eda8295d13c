"""``ed.Ordered``: Stan's ``ordered[K] mu; mu ~ base;`` in one call, and the
mixture example it serves (issue 53, item 11)."""

import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from scipy import stats

import edward_lite as ed
from edward_lite.language.ordered import Ordered

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import mixture_ordered_means as example  # pylint: disable=wrong-import-position

tfd = tfp.distributions


def test_density_draws_and_support():
  """log p = log K! + sum log base(x_k) on the ordered set, -inf off it
  (batched too); draws are sorted and their minimum has the mean of the
  smallest of three standard normals, -3 / (2 sqrt(pi)); the event-space
  bijector lands in the ordered part of base's support."""
  d = Ordered(tfd.Normal(0., 5.), 3)
  x = np.array([-1., 0.5, 2.])
  np.testing.assert_allclose(d.log_prob(x), stats.norm.logpdf(x, 0., 5.).sum() + np.log(6.),
                             rtol=1e-6)
  assert d.log_prob([1., 0.5, 2.]).numpy() == -np.inf
  batched = Ordered(tfd.Normal([0., 1.], 1.), 2)
  assert batched.batch_shape == (2,) and batched.event_shape == (2,)
  np.testing.assert_allclose(batched.log_prob(tf.zeros([2, 2])),
                             2. * stats.norm.logpdf(0., [0., 1.], 1.) + np.log(2.), rtol=1e-6)
  draws = Ordered(tfd.Normal(0., 1.), 3).sample(40000, seed=1).numpy()
  assert np.all(np.diff(draws, axis=-1) >= 0.)
  assert abs(draws[:, 0].mean() + 3. / (2. * np.sqrt(np.pi))) < 0.02  # sd/sqrt(n) = 0.0037
  positive = Ordered(tfd.Gamma(2., 1.), 4).experimental_default_event_space_bijector()
  y = positive.forward(tf.random.stateless_normal([100, 4], [0, 1]) * 3.).numpy()
  assert np.all(y > 0.) and np.all(np.diff(y, axis=-1) > 0.)


def _with_ordered():
  mu = ed.Ordered(tfd.Normal(0., 5.), 3, name="mu")
  return ed.Normal(mu, 1., name="y")


def _with_flat_and_factor():
  mu = ed.Flat(support="ordered", shape=3, name="mu")
  ed.Factor(tf.reduce_sum(tfd.Normal(0., 5.).log_prob(mu)), name="mu_prior")
  return ed.Normal(mu, 1., name="y")


def test_the_target_equals_stans_ordered_with_a_prior_statement():
  """Through the target (the ordered transform and its Jacobian), the log
  density is the Flat-plus-Factor form's plus log 3!, with the same
  gradient, at random unconstrained points."""
  y = np.array([-1., 0.3, 2.], np.float32)
  u = tf.random.stateless_normal([5, 3], [1, 2]) * 2.
  one = ed.make_target(_with_ordered, observed={"y": y}).value_and_gradient_flat(u)
  two = ed.make_target(_with_flat_and_factor, observed={"y": y}).value_and_gradient_flat(u)
  np.testing.assert_allclose(one[0] - two[0], np.full(5, np.log(6.)), rtol=1e-5)
  np.testing.assert_allclose(one[1], two[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(base=3., size=2), "base must be a distribution"),
    (dict(base=tfd.Dirichlet([1., 1.]), size=2), "scalar events"),
    (dict(base=tfd.Normal(0., 1.), size=0), "size must be a positive int"),
])
def test_bad_arguments_name_the_variable(kwargs, pattern):
  with pytest.raises((TypeError, ValueError), match=f"(?s)'mu'.*{pattern}|{pattern}.*'mu'"):
    ed.Ordered(name="mu", **kwargs)


@pytest.mark.slow
def test_the_mixture_example_matches_em_without_label_switching():
  """The example's three-component mixture with ordered means, NUTS 4 x
  (300 + 300): R-hat near 1 and every posterior mean within 0.3 posterior
  sd of the EM fit (priors this weak move the mean by less)."""
  y = example.simulate()
  posterior = example.fit(y, warmup=300, draws=300)
  mle = example.em(y)
  summary = posterior.summary(var_names=["mu", "w", "sigma"])
  assert summary["r_hat"].max() < 1.01, summary
  for name in ("mu", "w"):
    for k in range(3):
      row = summary.loc[f"{name}[{k}]"]
      assert abs(row["mean"] - mle[name][k]) < 0.3 * row["sd"], (name, k, row, mle[name])
  assert abs(summary.loc["sigma", "mean"] - mle["sigma"]) < 0.5 * summary.loc["sigma", "sd"]
