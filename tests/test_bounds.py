"""Truncated normals with an infinite end (edward_lite.language.bounds).

TFP's ``TruncatedNormal`` takes ``low=-inf`` or ``high=inf``, but its
event-space bijector ``Sigmoid(low, high)`` is NaN there: a latent
``TruncatedNormal(1, 0.5, 0, inf)`` (Stan's ``real<lower=0>`` with a
normal prior) could not start, and observed data of one was called outside
its support.  ``Bounds`` is the transform used instead.
"""

import math
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import edward_lite as ed  # noqa: E402
from edward_lite.language.bijectors import support_bijector  # noqa: E402
from edward_lite.language.bounds import Bounds  # noqa: E402

tfd = tfp.distributions
INF = np.inf
# One element of each kind: low only, high only, both ends, neither.
LOW = np.array([0., -INF, -1., -INF], np.float32)
HIGH = np.array([INF, 0.5, 2., INF], np.float32)
LOC = np.array([1., 0., 0., 0.3], np.float32)
SCALE = np.array([0.5, 1., 1., 2.], np.float32)


def test_bounds_round_trip_and_log_det_jacobian_by_autodiff():
  """forward(inverse(y)) = y inside each interval, forward lands inside, and
  the log-Jacobian equals the log of forward's derivative by autodiff."""
  bijector = Bounds(LOW, HIGH, tf.float64)
  x = tf.constant(np.linspace(-6., 6., 25)[:, None] * np.ones(4), tf.float64)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = bijector.forward(x)
  derivative = tape.gradient(y, x)  # elementwise: d y_ij / d x_ij
  np.testing.assert_allclose(bijector.forward_log_det_jacobian(x, event_ndims=0),
                             np.log(derivative), rtol=1e-10, atol=1e-10)
  y = y.numpy()
  assert (y > LOW).all() and (y < HIGH).all()
  np.testing.assert_allclose(bijector.forward(bijector.inverse(tf.identity(y))), y, rtol=1e-10)
  np.testing.assert_array_equal(y[:, 3], x[:, 3])  # neither end: the identity


def test_bounds_gradients_are_finite_where_a_branch_is_not_taken():
  """Every branch runs on every element (tf.where); the stand-ins keep the
  unselected ones finite, so no NaN reaches a gradient."""
  bijector = Bounds(LOW, HIGH, tf.float32)
  x = tf.constant([[-40., 40., -40., 40.], [40., -40., 40., -40.]])
  y = tf.constant([[0.5, -3., 1.5, 7.], [1e-3, 0.4, -0.9, -7.]])
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([x, y])
    forward = tf.reduce_sum(bijector.forward(x) + bijector.forward_log_det_jacobian(x, 0))
    inverse = tf.reduce_sum(bijector.inverse(y))
  for grad in (tape.gradient(forward, x), tape.gradient(inverse, y)):
    assert np.isfinite(grad.numpy()).all()


@pytest.mark.parametrize("low, high, expected", [
    (0., INF, Bounds), (-INF, 0., Bounds), (LOW, HIGH, Bounds), (0., 1., tfp.bijectors.Sigmoid)])
def test_support_bijector_of_a_truncated_normal(low, high, expected):
  """An infinite end: Bounds; finite ends: TFP's own Sigmoid."""
  dist = tfd.TruncatedNormal(0., 1., low, high)
  assert type(support_bijector(dist)) is expected  # pylint: disable=unidiomatic-typecheck


def truncated_prior():
  # Three of the kinds: TFP's sampler refuses both ends infinite (a Normal).
  return ed.TruncatedNormal(LOC[:3], SCALE[:3], LOW[:3], HIGH[:3], name="theta")


def truncated_normal_moments(loc, scale, low, high):
  """Mean and sd of normals truncated to ``[low, high]`` in closed form:
  with ``a, b`` the standardized ends, ``Z = Phi(b) - Phi(a)``,
  mean ``loc + scale (phi(a) - phi(b)) / Z`` and variance ``scale^2 (1 +
  (a phi(a) - b phi(b)) / Z - ((phi(a) - phi(b)) / Z)^2)``, where ``x phi(x)``
  is 0 at an infinite end."""
  a, b = (low - loc) / scale, (high - loc) / scale
  phi = lambda x: np.exp(-0.5 * x**2) / np.sqrt(2 * np.pi)  # pylint: disable=unnecessary-lambda-assignment
  cdf = lambda x: 0.5 * (1 + np.vectorize(math.erf)(x / np.sqrt(2)))  # pylint: disable=unnecessary-lambda-assignment
  x_phi = lambda x: np.where(np.isfinite(x), np.nan_to_num(x) * phi(x), 0.)  # pylint: disable=unnecessary-lambda-assignment
  z = cdf(b) - cdf(a)
  shift = (phi(a) - phi(b)) / z
  return loc + scale * shift, scale * np.sqrt(1 + (x_phi(a) - x_phi(b)) / z - shift**2)


@pytest.mark.slow
def test_truncated_normal_latent_with_infinite_ends_samples_its_analytic_moments():
  """A latent with no data: its posterior is the truncated normal itself,
  whose mean and sd are known in closed form.  NUTS's means are within 4
  Monte Carlo standard errors of them, the sds within 8%."""
  post = ed.mcmc.sample(truncated_prior, chains=4, draws=1000, seed=0, progress=False)
  exact_mean, exact_sd = truncated_normal_moments(*(v[:3].astype(np.float64)
                                                    for v in (LOC, SCALE, LOW, HIGH)))
  summary = post.summary()
  names = [f"theta[{i}]" for i in range(3)]
  mean = np.array([summary.loc[n, "mean"] for n in names])
  sd = np.array([summary.loc[n, "sd"] for n in names])
  mcse = np.array([summary.loc[n, "mcse_mean"] for n in names])
  assert (np.abs(mean - exact_mean) < 4 * mcse).all(), (mean, exact_mean)
  np.testing.assert_allclose(sd, exact_sd, rtol=0.08)
  draws = post.draws["theta"].reshape(-1, 3)
  assert (draws > LOW[:3]).all() and (draws < HIGH[:3]).all()
  assert int(np.sum(post.divergences)) == 0


def truncated_likelihood():
  mu = ed.Normal(1., 1., name="mu")
  return ed.TruncatedNormal(mu, 1., 0., INF, sample_shape=5, name="y")


def test_observed_values_of_a_half_bounded_truncated_normal_are_checked_by_its_end():
  """Positive data is inside the support (Sigmoid(0, inf) called every
  value outside it); a negative value is named with the bound."""
  target = ed.make_target(truncated_likelihood,
                          observed={"y": np.array([0.3, 1.2, 2.5, 0.1, 4.], np.float32)})
  value = target.log_prob({"mu": tf.constant([1., 2.])})  # two chains
  assert np.isfinite(value.numpy()).all()
  with pytest.raises(ValueError, match=r"'y' is outside the support of its TruncatedNormal "
                                       r"distribution, which expects values of at least 0"):
    ed.make_target(truncated_likelihood,
                   observed={"y": np.array([0.3, -1.2, 2.5, 0.1, 4.], np.float32)})


def above_a_latent():
  a = ed.Normal(0., 1., name="a")
  return ed.TruncatedNormal(0., 1., low=a, high=INF, name="b")


@pytest.mark.slow
def test_truncated_normal_bounded_below_by_a_latent():
  """``b ~ N(0, 1)`` truncated to ``(a, inf)`` with ``a ~ N(0, 1)``: the
  truncation's normalizer makes ``a``'s marginal N(0, 1) exactly, and
  ``E[b] = E_a[phi(a) / (1 - Phi(a))]`` (the inverse Mills ratio), here
  by quadrature.  Every draw has ``b > a``."""
  post = ed.mcmc.sample(above_a_latent, chains=4, draws=1000, seed=0, progress=False)
  a, b = post.draws["a"].ravel(), post.draws["b"].ravel()
  assert (b > a).all()
  grid = np.linspace(-8., 8., 4001)
  density = np.exp(-0.5 * grid**2) / np.sqrt(2 * np.pi)
  tail = 0.5 * (1 - np.vectorize(math.erf)(grid / np.sqrt(2)))
  expected_b = np.sum(density * density / np.maximum(tail, 1e-300)) * (grid[1] - grid[0])
  summary = post.summary()
  for name, exact in (("a", 0.), ("b", expected_b)):
    assert abs(summary.loc[name, "mean"] - exact) < 4 * summary.loc[name, "mcse_mean"], name
  np.testing.assert_allclose(summary.loc["a", "sd"], 1., rtol=0.08)


@pytest.mark.parametrize("make, message", [
    (lambda: ed.TruncatedCauchy(0., 1., 0., INF, name="s"),
     r"^Random variable 's': TFP's TruncatedCauchy needs finite low and high"),
    (lambda: ed.TruncatedNormal(0., 1., [0., -INF], INF, name="s"),
     r"^Random variable 's': a TruncatedNormal with both ends infinite is not truncated")])
def test_truncations_tfp_cannot_take_are_refused_by_name(make, message):
  """TFP's TruncatedCauchy is NaN with an infinite end, and its
  TruncatedNormal cannot draw with both: one sentence at make_target, not a
  non-finite initial density blamed on the initial points."""
  def program():
    s = make()
    return ed.Normal(0., tf.reduce_sum(s), sample_shape=3, name="y")

  with pytest.raises(ValueError, match=message):
    ed.make_target(program, observed={"y": np.ones(3, np.float32)})
