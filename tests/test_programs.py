"""Tests of program transformations: make_log_joint_fn, condition, do."""

import math
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
import tf_keras  # noqa: E402

import edward_lite as ed  # noqa: E402

tfd = tfp.distributions

LOG_2PI = math.log(2. * math.pi)


def normal_lp(x, loc, scale):
  """Normal log density written out by hand (NumPy, float64)."""
  x, loc, scale = (np.asarray(v, np.float64) for v in (x, loc, scale))
  return -0.5 * LOG_2PI - np.log(scale) - 0.5 * ((x - loc) / scale) ** 2


@pytest.fixture(autouse=True)
def _seed():
  tf.random.set_seed(0)


# ---------------------------------------------------------------------------
# Models.


def simple_model():
  mu = ed.Normal(0., 1., name="mu")
  return ed.Normal(mu, 2., sample_shape=3, name="y")


SIGMA = np.array([15., 10., 16., 11., 9., 11., 10., 18.], np.float32)
Y8 = np.array([28., 8., -3., 7., -1., 1., 18., 12.], np.float32)
THETA = np.array([1., -2., 0.5, 3., 0., -1., 2., 4.], np.float32)


def hierarchical_model(sigma):
  mu = ed.Normal(0., 5., name="mu")
  tau = ed.HalfNormal(5., name="tau")
  theta = ed.Normal(mu, tau, sample_shape=8, name="theta")
  return ed.Normal(theta, sigma, name="y")


def hierarchical_by_hand(mu, tau, theta, y, sigma):
  half_normal = math.log(2.) + normal_lp(tau, 0., 5.)  # HalfNormal(5) at tau > 0
  return (normal_lp(mu, 0., 5.) + half_normal + normal_lp(theta, mu, tau).sum() +
          normal_lp(y, theta, sigma).sum())


def test_simple_model_log_joint():
  log_joint = ed.make_log_joint_fn(simple_model)
  y = np.array([0.5, -1., 2.5], np.float32)
  got = log_joint(mu=0.3, y=y)
  by_hand = normal_lp(0.3, 0., 1.) + normal_lp(y, 0.3, 2.).sum()
  with_tfp = (tfd.Normal(0., 1.).log_prob(0.3) +
              tf.reduce_sum(tfd.Normal(0.3, 2.).log_prob(y)))
  assert got.shape == tf.TensorShape([])
  assert got.dtype == tf.float32
  np.testing.assert_allclose(got.numpy(), by_hand, rtol=1e-5)
  np.testing.assert_allclose(got.numpy(), with_tfp.numpy(), rtol=1e-6)


def test_hierarchical_model_log_joint_positional_and_keyword_args():
  log_joint = ed.make_log_joint_fn(hierarchical_model)
  point = dict(mu=1.5, tau=2.5, theta=THETA, y=Y8)
  expected = hierarchical_by_hand(1.5, 2.5, THETA, Y8, SIGMA)
  with_tfp = (tfd.Normal(0., 5.).log_prob(1.5) + tfd.HalfNormal(5.).log_prob(2.5) +
              tf.reduce_sum(tfd.Normal(1.5, 2.5).log_prob(THETA)) +
              tf.reduce_sum(tfd.Normal(THETA, SIGMA).log_prob(Y8)))
  positional = log_joint(SIGMA, **point)
  keyword = log_joint(sigma=SIGMA, **point)
  np.testing.assert_allclose(positional.numpy(), expected, rtol=1e-5)
  np.testing.assert_allclose(positional.numpy(), with_tfp.numpy(), rtol=1e-6)
  np.testing.assert_allclose(keyword.numpy(), positional.numpy(), rtol=1e-7)
  # The program argument matters: another sigma gives the hand value for it.
  sigma2 = SIGMA * 2.
  np.testing.assert_allclose(log_joint(sigma=sigma2, **point).numpy(),
                             hierarchical_by_hand(1.5, 2.5, THETA, Y8, sigma2), rtol=1e-5)


def test_dirichlet_categorical_log_joint():
  alpha = np.array([2., 3., 0.5])

  def model(n):
    p = ed.Dirichlet(tf.constant(alpha, tf.float32), name="p")
    return ed.Categorical(probs=p, sample_shape=n, name="z")

  p = np.array([0.2, 0.5, 0.3], np.float32)
  z = np.array([0, 1, 1, 2, 1], np.int32)
  log_dirichlet = (math.lgamma(alpha.sum()) - sum(math.lgamma(a) for a in alpha) +
                   np.sum((alpha - 1.) * np.log(p.astype(np.float64))))
  expected = log_dirichlet + np.log(p.astype(np.float64)[z]).sum()
  log_joint = ed.make_log_joint_fn(model)
  np.testing.assert_allclose(log_joint(5, p=p, z=z).numpy(), expected, rtol=1e-5)
  np.testing.assert_allclose(log_joint(n=5, p=p, z=z).numpy(), expected, rtol=1e-5)
  np.testing.assert_allclose(log_joint(n=5, p=p, z=[0, 1, 1, 2, 1]).numpy(), expected,
                             rtol=1e-5)


def test_keras_dense_mean_function_log_joint():
  kernel = np.array([[0.5], [-1.]], np.float32)
  bias = np.array([0.25], np.float32)
  layer = tf_keras.layers.Dense(
      1, kernel_initializer=tf_keras.initializers.Constant(kernel),
      bias_initializer=tf_keras.initializers.Constant(bias))

  def model(n):
    z = ed.Normal(tf.zeros([n, 2]), 1., name="z")
    mean = layer(z)[:, 0]
    return ed.Normal(mean, 0.5, name="y")

  z = np.array([[1., 2.], [-0.5, 0.5], [3., -1.], [0., 0.]], np.float32)
  y = np.array([-1., 0., 2.5, 0.5], np.float32)
  mean = (z.astype(np.float64) @ kernel.astype(np.float64))[:, 0] + bias[0]
  expected = normal_lp(z, 0., 1.).sum() + normal_lp(y, mean, 0.5).sum()
  log_joint = ed.make_log_joint_fn(model)
  np.testing.assert_allclose(log_joint(4, z=z, y=y).numpy(), expected, rtol=1e-5)
  np.testing.assert_allclose(log_joint(n=4, z=z, y=y).numpy(), expected, rtol=1e-5)


def test_log_joint_inside_tf_function():
  log_joint = ed.make_log_joint_fn(simple_model)
  y = np.array([0.5, -1., 2.5], np.float32)
  fn = tf.function(lambda mu: log_joint(mu=mu, y=y))
  expected = normal_lp(0.3, 0., 1.) + normal_lp(y, 0.3, 2.).sum()
  np.testing.assert_allclose(fn(tf.constant(0.3)).numpy(), expected, rtol=1e-5)


# ---------------------------------------------------------------------------
# Fixed values.


def test_value_fixed_in_program_used_and_keyword_overrides():
  def model():
    x = ed.Normal(0., 1., name="x")
    return ed.Normal(x, 0.5, value=1.2, name="obs")

  log_joint = ed.make_log_joint_fn(model)
  np.testing.assert_allclose(log_joint(x=0.3).numpy(),
                             normal_lp(0.3, 0., 1.) + normal_lp(1.2, 0.3, 0.5), rtol=1e-6)
  np.testing.assert_allclose(log_joint(x=0.3, obs=-0.7).numpy(),
                             normal_lp(0.3, 0., 1.) + normal_lp(-0.7, 0.3, 0.5), rtol=1e-6)


def test_condition_inside_program_used():
  def model():
    with ed.condition(obs=1.2):
      x = ed.Normal(0., 1., name="x")
      return ed.Normal(x, 0.5, name="obs")

  log_joint = ed.make_log_joint_fn(model)
  np.testing.assert_allclose(log_joint(x=0.3).numpy(),
                             normal_lp(0.3, 0., 1.) + normal_lp(1.2, 0.3, 0.5), rtol=1e-6)


def test_condition_around_log_joint_call():
  def model():
    x = ed.Normal(0., 1., name="x")
    return ed.Normal(x, 0.5, name="obs")

  log_joint = ed.make_log_joint_fn(model)
  with ed.condition(obs=1.2):
    got = log_joint(x=0.3)
  np.testing.assert_allclose(got.numpy(),
                             normal_lp(0.3, 0., 1.) + normal_lp(1.2, 0.3, 0.5), rtol=1e-6)
  with ed.trace(ed.make_value_setter(obs=-1.)):
    got = log_joint(x=0.3)
  np.testing.assert_allclose(got.numpy(),
                             normal_lp(0.3, 0., 1.) + normal_lp(-1., 0.3, 0.5), rtol=1e-6)


# ---------------------------------------------------------------------------
# Errors of the log joint.


def test_missing_value_raises_naming_variable():
  log_joint = ed.make_log_joint_fn(simple_model)
  with pytest.raises(ValueError, match=r"no value for random variable \['y'\]"):
    log_joint(mu=0.3)


def test_unknown_keyword_raises_naming_it():
  log_joint = ed.make_log_joint_fn(simple_model)
  with pytest.raises(ValueError, match=r"keyword \['muu'\]"):
    log_joint(mu=0.3, y=[0., 0., 0.], muu=1.)


def test_unnamed_random_variable_raises():
  def model():
    return ed.Normal(0., 1.)

  with pytest.raises(ValueError, match="no name"):
    ed.make_log_joint_fn(model)()


def test_an_unnamed_random_variable_is_one_error_everywhere():
  from edward_lite.language.transformations import UnnamedRandomVariableError  # pylint: disable=import-outside-toplevel

  def model():
    return ed.Normal(0., 1.)

  for run, needs in ((lambda: ed.make_log_joint_fn(model)(), "to be given a value"),
                     (lambda: ed.make_target(model), "inference needs"),
                     (lambda: ed.prior_predictive(model, draws=2), "simulation needs")):
    with pytest.raises(UnnamedRandomVariableError, match=f"with Normal and no name=; .*{needs}"):
      run()


def test_duplicate_name_raises_naming_it():
  def model():
    ed.Normal(0., 1., name="twice")
    ed.Normal(0., 1., name="twice")

  with pytest.raises(ValueError, match="'twice'"):
    ed.make_log_joint_fn(model)(twice=0.)


def test_wrong_shape_value_raises_naming_variable():
  log_joint = ed.make_log_joint_fn(simple_model)
  with pytest.raises(ValueError, match="'y'"):
    log_joint(mu=0.3, y=[0., 0.])


# ---------------------------------------------------------------------------
# ed.condition.


def test_condition_sets_values_keeps_distribution():
  with ed.condition(x=2., y=[1., 2.]):
    x = ed.Normal(1., 3., name="x")
    y = ed.Normal(x, 0.5, sample_shape=2, name="y")
  assert isinstance(x, ed.RandomVariable) and isinstance(y, ed.RandomVariable)
  assert x.numpy() == 2.
  np.testing.assert_array_equal(y.numpy(), [1., 2.])
  assert type(x.distribution) is tfd.Normal
  np.testing.assert_allclose(x.distribution.log_prob(x).numpy(), normal_lp(2., 1., 3.),
                             rtol=1e-6)
  assert y.distribution.loc.numpy() == 2.


def test_condition_unknown_name_raises_at_block_exit():
  reached_end = []
  with pytest.raises(ValueError, match=r"'nope'"):
    with ed.condition(x=1., nope=2.):
      x = ed.Normal(0., 1., name="x")
      reached_end.append(True)
  assert reached_end == [True]
  assert x.numpy() == 1.


def test_condition_exception_inside_wins():
  with pytest.raises(KeyError):
    with ed.condition(nope=2.):
      raise KeyError("inner")


# ---------------------------------------------------------------------------
# ed.do.


def chain_model():
  x = ed.Normal(0., 1., name="x")
  return ed.Normal(x, 1e-4, name="y")


def test_do_replaces_variable_with_constant():
  with ed.tape() as rvs:
    with ed.do(x=3.):
      x = ed.Normal(0., 1., name="x")
      y = ed.Normal(x, 1e-4, name="y")
  assert not isinstance(x, ed.RandomVariable)
  assert isinstance(x, tf.Tensor)
  assert x.dtype == tf.float32 and x.numpy() == 3.
  assert isinstance(y, ed.RandomVariable)
  assert abs(y.numpy() - 3.) < 1e-2  # generated from the intervened value
  assert y.distribution.loc.numpy() == 3.
  assert list(rvs) == ["y"]  # x is not on the tape


def test_do_tape_inside():
  with ed.do(x=np.float64(-2.)):  # cast to the distribution's dtype
    with ed.tape() as rvs:
      y = chain_model()
  assert list(rvs) == ["y"]
  assert abs(y.numpy() + 2.) < 1e-2


def test_do_vector_value_and_shape_check():
  with ed.do(x=[1., 2.]):
    x = ed.Normal(tf.zeros(2), 1., name="x")
  np.testing.assert_array_equal(x.numpy(), [1., 2.])
  with pytest.raises(ValueError, match="'x'"):
    with ed.do(x=[1., 2., 3.]):
      ed.Normal(tf.zeros(2), 1., name="x")


def test_do_unknown_name_raises():
  with pytest.raises(ValueError, match="'nope'"):
    with ed.do(nope=1.):
      chain_model()


def do_log_joint_expected(y):
  return normal_lp(y, 2., 0.5)


def noisy_model():
  x = ed.Normal(0., 1., name="x")
  return ed.Normal(x, 0.5, name="y")


def test_log_joint_with_do_inside_program():
  def model():
    with ed.do(x=2.):
      return noisy_model()

  got = ed.make_log_joint_fn(model)(y=1.7)
  with_tfp = tfd.Normal(2., 0.5).log_prob(1.7)
  np.testing.assert_allclose(got.numpy(), do_log_joint_expected(1.7), rtol=1e-6)
  np.testing.assert_allclose(got.numpy(), with_tfp.numpy(), rtol=1e-7)


def test_log_joint_with_do_around_call():
  log_joint = ed.make_log_joint_fn(noisy_model)
  with ed.do(x=2.):
    got = log_joint(y=1.7)
  np.testing.assert_allclose(got.numpy(), do_log_joint_expected(1.7), rtol=1e-6)
  # Without the intervention x's density is there again.
  np.testing.assert_allclose(log_joint(x=2., y=1.7).numpy(),
                             normal_lp(2., 0., 1.) + do_log_joint_expected(1.7), rtol=1e-6)


def test_log_joint_with_do_hierarchical_both_orders():
  # Intervene on the group scale of the hierarchical model.
  def model_do_inside(sigma):
    with ed.do(tau=4.):
      return hierarchical_model(sigma)

  expected = (normal_lp(1.5, 0., 5.) + normal_lp(THETA, 1.5, 4.).sum() +
              normal_lp(Y8, THETA, SIGMA).sum())
  inside = ed.make_log_joint_fn(model_do_inside)(SIGMA, mu=1.5, theta=THETA, y=Y8)
  with ed.do(tau=4.):
    around = ed.make_log_joint_fn(hierarchical_model)(SIGMA, mu=1.5, theta=THETA, y=Y8)
  np.testing.assert_allclose(inside.numpy(), expected, rtol=1e-5)
  np.testing.assert_allclose(around.numpy(), expected, rtol=1e-5)


def test_keyword_for_intervened_variable_rejected_with_do_inside():
  def model():
    with ed.do(x=2.):
      return noisy_model()

  with pytest.raises(ValueError, match=r"keyword \['x'\]"):
    ed.make_log_joint_fn(model)(x=5., y=1.7)


def test_keyword_for_intervened_variable_rejected_with_do_around():
  log_joint = ed.make_log_joint_fn(noisy_model)
  with ed.do(x=2.):
    with pytest.raises(ValueError, match="'x'"):
      log_joint(x=5., y=1.7)


def test_log_joint_errors_are_edward2_exception_types():
  """Edward2 raises LookupError for a missing value and KeyError for an
  unnamed random variable; ours are those and ValueError at once."""

  def model():
    return ed.Normal(0., 1., name="z")

  with pytest.raises(LookupError, match="'z'"):
    ed.make_log_joint_fn(model)()

  def unnamed():
    return ed.Normal(0., 1.)

  with pytest.raises(KeyError) as info:
    ed.make_log_joint_fn(unnamed)()
  assert "no name=" in str(info.value) and not str(info.value).startswith('"')
