"""The shorter log-probability formulas of ``interpreter.log_prob_term``
against TFP's own ``log_prob``, in float64 (value and gradient) and, for the
ordered logistic's close cutpoints, against a float64 reference in float32."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.model.interpreter import log_prob_term

tfd = tfp.distributions


def _ordered_case(rng, rows, dtype, gap=None):
  cutpoints = np.sort(rng.normal(0., 2., 4))
  if gap is not None:
    cutpoints[2] = cutpoints[1] + gap
  eta = rng.normal(0., 6., rows)
  k = rng.integers(0, 5, rows)  # every category, the two edges among them
  return tf.constant(cutpoints, dtype), tf.constant(eta, dtype), tf.constant(k, tf.int32)


def test_ordered_logistic_value_and_gradient_equal_tfps():
  cutpoints, eta, k = _ordered_case(np.random.default_rng(0), 500, tf.float64)

  def both(fn):
    with tf.GradientTape() as tape:
      tape.watch([cutpoints, eta])
      value = fn(tfd.OrderedLogistic(cutpoints, eta), k)
      total = tf.reduce_sum(value)
    return [value] + tape.gradient(total, [cutpoints, eta])

  ours, tfps = both(log_prob_term), both(lambda d, v: d.log_prob(v))
  for a, b in zip(ours, tfps):
    np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy(),
                               rtol=1e-9, atol=1e-12)
  assert set(k.numpy()) == {0, 1, 2, 3, 4}


def test_ordered_logistic_broadcasts_its_location_over_the_values():
  cutpoints = tf.constant([-1., 0.5, 2.], tf.float64)
  k = tf.constant([[0, 1, 2, 3], [3, 2, 1, 0]])
  eta = tf.constant([0.3, -0.7, 1.1, 2.5], tf.float64)  # [4] against values [2, 4]
  dist = tfd.OrderedLogistic(cutpoints, eta)
  np.testing.assert_allclose(log_prob_term(dist, k).numpy(), dist.log_prob(k).numpy(),
                             rtol=1e-12)


@pytest.mark.parametrize("gap", [1e-2, 1e-3, 1e-4, 1e-5])
def test_ordered_logistic_close_cutpoints_in_float32(gap):
  """Where two cutpoints are ``gap`` apart, the category between them has
  probability about ``gap * sigmoid'``: TFP's float32 difference of two
  sigmoids loses about ``eps / gap`` of it (1e-2 relative at 1e-5 apart);
  the gap's own term keeps float32's precision."""
  rng = np.random.default_rng(1)
  c64, eta64, k = _ordered_case(rng, 20000, tf.float64, gap=gap)
  reference = tfd.OrderedLogistic(c64, eta64).log_prob(k).numpy()
  c32, eta32 = tf.cast(c64, tf.float32), tf.cast(eta64, tf.float32)
  ours = log_prob_term(tfd.OrderedLogistic(c32, eta32), k).numpy()
  tfps = tfd.OrderedLogistic(c32, eta32).log_prob(k).numpy()
  relative = lambda x: np.max(np.abs(x - reference) / np.maximum(1., np.abs(reference)))
  assert relative(ours) < 2e-4
  assert relative(ours) < relative(tfps) / 5


def test_ordered_logistic_cutpoints_out_of_order_give_nan():
  """A category between cutpoints out of order has a negative "probability":
  NaN (a rejected proposal), where TFP's form gives log |P| and samples a
  model the user did not write."""
  cutpoints = tf.constant([0., -1., 1.], tf.float64)  # the second below the first
  dist = tfd.OrderedLogistic(cutpoints, tf.constant([0.2], tf.float64))
  assert np.isnan(log_prob_term(dist, tf.constant([1])).numpy()).all()
  assert np.isfinite(log_prob_term(dist, tf.constant([2])).numpy()).all()  # ordered there


def test_ordered_logistic_with_cutpoints_per_row_is_tfps():
  cutpoints = tf.constant([[-1., 1.], [0., 2.]], tf.float64)  # per row: TFP's form
  dist = tfd.OrderedLogistic(cutpoints, tf.constant([0.3, 0.4], tf.float64))
  k = tf.constant([1, 2])
  np.testing.assert_array_equal(log_prob_term(dist, k).numpy(), dist.log_prob(k).numpy())


def test_ordered_logistic_regression_target_equals_tfps(monkeypatch):
  """Inside a model's target, batched over chains (``[C, D]`` states): the
  log density with the two-cutpoint formula equals TFP's form, in float64."""
  import edward_lite as ed  # pylint: disable=g-import-not-at-top
  from edward_lite.model import interpreter  # pylint: disable=g-import-not-at-top

  def ordinal_regression(x):
    beta = ed.Normal(tf.zeros(2, tf.float64), 2., name="beta")
    cutpoints = ed.Flat(support="ordered", shape=3, name="cutpoints")
    return ed.OrderedLogistic(cutpoints, tf.linalg.matvec(x, beta), name="y")

  rng = np.random.default_rng(2)
  x = rng.normal(size=(40, 2))
  y = rng.integers(0, 4, 40).astype(np.int32)
  ours = ed.make_target(ordinal_regression, x, observed={"y": y}, dtype=tf.float64)
  u = tf.constant(rng.normal(size=(5, ours.dim)))
  value = ours.log_prob_flat(u).numpy()
  monkeypatch.setattr(interpreter, "_ordered_logistic_log_prob", lambda *args: None)
  tfps = ed.make_target(ordinal_regression, x, observed={"y": y}, dtype=tf.float64)
  np.testing.assert_allclose(value, tfps.log_prob_flat(u).numpy(), rtol=1e-10)
