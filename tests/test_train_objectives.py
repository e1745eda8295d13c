"""``ed.vi.train``'s objectives against known answers: the optimum of a
beta-weighted ELBO and of a model with ``ed.Factor`` terms (Gaussian
conjugacy), the IWAE bound against the ELBO of the same draws, and the
doubly reparameterized gradient, which is exactly zero at the exact
posterior where the reparameterized one is not.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import contextlib  # noqa: E402
import logging  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
import tf_keras  # noqa: E402

import edward_lite as ed  # noqa: E402

tfb, tfd = tfp.bijectors, tfp.distributions
rng = np.random.default_rng(0)
X = (rng.normal(size=512) * np.sqrt(2.)).astype(np.float32)[:, None]  # x ~ N(0, 1 + 1)
DATA = tf.data.Dataset.from_tensor_slices({"x": X}).batch(512)


def gaussian_pair(factor=False):
  """``z_i ~ N(0, 1)`` (times ``exp(-z_i^2 / 2)``, an ``ed.Factor``, if
  ``factor``), ``x_i ~ N(z_i, 1)``; guide ``q(z_i | x_i) = N(a x_i + c, s^2)``."""
  encoder, raw_scale = tf_keras.layers.Dense(1), tf.Variable(0.)

  def model(x):
    z = ed.Normal(tf.zeros_like(x), 1., name="z")
    if factor:
      ed.Factor(-0.5 * z[:, 0] ** 2, name="shrink")
    return ed.Normal(z, 1., name="x")

  def guide(x):
    return ed.Normal(encoder(x), tf.nn.softplus(raw_scale), name="z")

  def fitted():
    return (float(encoder.kernel.numpy().ravel()[0]), float(encoder.bias.numpy()[0]),
            float(tf.nn.softplus(raw_scale).numpy() ** 2))

  return model, guide, fitted


def check_optimum(fitted, slope, variance):
  a, c, s2 = fitted()
  assert abs(a - slope) < 0.01 and abs(c) < 0.03 and abs(s2 - variance) < 0.03 * variance, (
      a, c, s2, slope, variance)


def test_beta_elbo_reaches_the_tempered_posterior():
  """The beta-ELBO ``E_q log p(x | z) - beta KL(q || p)`` is maximized by
  ``q ∝ p(x | z)^(1 / beta) p(z)``: here ``N(x / (1 + beta), beta / (1 + beta))``."""
  model, guide, fitted = gaussian_pair()
  ed.vi.train(model, guide, DATA, steps=1500, learning_rate=0.02, progress=False, seed=1,
              objective=ed.vi.ELBO(samples=8, kl_weight=2.))
  check_optimum(fitted, 1 / 3, 2 / 3)


def test_kl_weight_schedule_is_applied_by_step():
  """``kl_weight(step)``: 1 for the first 300 steps (the objective is the
  ELBO), then 2 (it is ``log_likelihood - 2 kl``), ending at beta = 2's optimum."""
  model, guide, fitted = gaussian_pair()
  result = ed.vi.train(model, guide, DATA, steps=1500, learning_rate=0.02, progress=False,
                       seed=1, objective=ed.vi.ELBO(samples=8, kl_weight=lambda t: tf.where(
                           t < 300., 1., 2.)))
  h = result.history
  np.testing.assert_allclose(h["objective"][:300], h["elbo"][:300], rtol=1e-5)
  np.testing.assert_allclose(h["objective"][300:], h["log_likelihood"][300:] - 2 * h["kl"][300:],
                             rtol=1e-5, atol=1e-4)
  check_optimum(fitted, 1 / 3, 2 / 3)


def test_factor_terms_join_the_trained_joint():
  """A per-datapoint ``ed.Factor(-z_i^2 / 2)`` doubles the prior's precision:
  the posterior is ``N(x / 3, 1 / 3)``; the history reports the factor."""
  model, guide, fitted = gaussian_pair(factor=True)
  result = ed.vi.train(model, guide, DATA, steps=1500, learning_rate=0.02, progress=False,
                       seed=1, objective=ed.vi.ELBO(samples=8))
  check_optimum(fitted, 1 / 3, 1 / 3)
  h = result.history
  assert (h["factor"] < 0).all()
  np.testing.assert_allclose(h["elbo"], h["log_likelihood"] - h["kl"] + h["factor"], rtol=1e-6)


def test_scalar_factor_counts_once_per_batch():
  """A scalar ``ed.Factor(-lam m^2 / 2)`` (a penalty on a weight) in a model
  of one batch of ``B`` rows: the objective ``[sum_i log N(x_i | m, 1) -
  lam m^2 / 2] / B`` is maximized at ``m = sum_i x_i / (B + lam)``."""
  x = (3. + rng.normal(size=64)).astype(np.float32)
  m, lam = tf.Variable(0.), 32.

  def model(x):
    ed.Factor(-0.5 * lam * m ** 2, name="penalty")
    return ed.Normal(m + tf.zeros_like(x), 1., name="x")

  data = tf.data.Dataset.from_tensor_slices({"x": x}).batch(64)
  result = ed.vi.train(model, None, data, steps=800, learning_rate=0.05, progress=False)
  np.testing.assert_allclose(m.numpy(), x.sum() / (64 + lam), atol=2e-3)
  np.testing.assert_allclose(result.history["factor"][-1], -0.5 * lam * m.numpy() ** 2 / 64,
                             rtol=1e-4)


def test_iwae_bound_is_above_the_elbo_of_the_same_draws():
  """Per step, ``log mean_k w_k >= mean_k log w_k`` (Jensen), with equality
  at ``K = 1``; evaluations give the bound as ``iwae``."""
  model, guide, _ = gaussian_pair()
  result = ed.vi.train(model, guide, DATA, steps=20, progress=False,
                       objective=ed.vi.IWAE(samples=5), evaluate=DATA, eval_every=10)
  h = result.history
  assert (h["objective"] > h["elbo"]).all()
  assert result.evaluations[-1]["iwae"] > result.evaluations[-1]["elbo"]
  model, guide, _ = gaussian_pair()
  one = ed.vi.train(model, guide, DATA, steps=5, progress=False,
                    objective=ed.vi.IWAE(samples=1, gradient="reparameterized"))
  np.testing.assert_allclose(one.history["objective"], one.history["elbo"], rtol=1e-6)


def exact_posterior_guide():
  """``x_i ~ N(W z_i, sigma^2 I_3)``, ``W`` with orthogonal columns, and a
  guide set to the exact posterior ``N(M^-1 W^T x_i, sigma^2 M^-1)``,
  ``M = W^T W + sigma^2 I`` (diagonal)."""
  w = np.array([[1., 0.], [1., 1.], [1., -1.]], np.float32)  # W^T W = diag(3, 2)
  sigma2 = 0.5
  m_inv = 1. / (np.diag(w.T @ w) + sigma2)
  encoder = tf_keras.layers.Dense(2, kernel_initializer=tf_keras.initializers.Constant(
      (w * m_inv).astype(np.float32)), bias_initializer="zeros")
  log_scale = tf.Variable(0.5 * np.log(sigma2 * m_inv).astype(np.float32))

  def model(x):
    z = ed.Normal(tf.zeros([tf.shape(x)[0], 2]), 1., name="z")
    return ed.Normal(tf.matmul(z, w.T), np.sqrt(sigma2), name="x")

  def guide(x):
    return ed.Normal(encoder(x), tf.exp(log_scale), name="z")

  return model, guide, encoder, log_scale


@pytest.mark.parametrize("objective,moves", [
    (ed.vi.IWAE(samples=8), False),
    (ed.vi.IWAE(samples=8, gradient="reparameterized"), True),
    (ed.vi.ELBO(), True)])
def test_doubly_reparameterized_gradient_is_zero_at_the_exact_posterior(objective, moves):
  """At ``q = p(z | x)`` every weight is ``p(x)``: the doubly reparameterized
  gradient ``sum_k w~_k^2 d log w_k / dz dz/dphi`` is 0 (``d log w / dz = 0``);
  the reparameterized one keeps the score term ``-d log q / dphi``, zero
  only in expectation.  One SGD step of rate 1 shows it."""
  x = rng.normal(size=(64, 3)).astype(np.float32)
  model, guide, encoder, log_scale = exact_posterior_guide()
  data = tf.data.Dataset.from_tensor_slices({"x": x}).batch(64)
  ed.vi.train(model, guide, data, steps=1, objective=objective, progress=False,
              optimizer=tf_keras.optimizers.SGD(1.))
  after = [encoder.kernel.numpy(), encoder.bias.numpy(), log_scale.numpy()]
  _, guide2, encoder2, log_scale2 = exact_posterior_guide()
  guide2(x=tf.constant(x))  # builds it at the exact posterior
  start = [encoder2.kernel.numpy(), encoder2.bias.numpy(), log_scale2.numpy()]
  change = max(np.abs(a - b).max() for a, b in zip(after, start))
  assert (change > 1e-2) if moves else (change < 1e-4), change


def test_bad_objectives_are_one_sentence_before_compiled_work():
  model, guide, _ = gaussian_pair()
  cases = [
      (dict(objective="iwae"), TypeError, r"objective= must be ed.vi.ELBO\(...\) or"),
      (dict(early_stopping=ed.vi.EarlyStopping()), ValueError, "give evaluate="),
      (dict(early_stopping=ed.vi.EarlyStopping(monitor="loss"), evaluate=DATA), ValueError,
       r"EarlyStopping\(monitor='loss'\) names no value of the held-out evaluation"),
  ]
  for change, error, message in cases:
    with pytest.raises(error, match=message):
      ed.vi.train(model, guide, DATA, steps=2, progress=False, **change)
  for make, message in [(lambda: ed.vi.IWAE(samples=0), "IWAE.samples=. must be"),
                        (lambda: ed.vi.IWAE(gradient="dreg"), "must be 'doubly_reparam"),
                        (lambda: ed.vi.ELBO(kl_weight=-1.), r"kl_weight=\) must be a number"),
                        (lambda: ed.vi.EarlyStopping(mode="up"), "mode=")]:
    with pytest.raises((ValueError, TypeError), match=message):
      make()


def test_doubly_reparameterized_gradient_refuses_a_guide_it_cannot_stop():
  """A guide whose distribution's parameters live in a network-built
  bijector, and a variable both programs read, are refused by name."""
  encoder, shared = tf_keras.layers.Dense(2), tf.Variable(1.)

  def model(x):
    z = ed.Normal(tf.zeros_like(x), shared, name="z")
    return ed.Normal(z, 1., name="x")

  def flow_guide(x):
    loc, raw = tf.split(encoder(x), 2, axis=-1)
    bijector = tfb_chain(loc, raw)
    return ed.TransformedDistribution(tfd.Normal(tf.zeros_like(x), 1.), bijector, name="z")

  def shared_guide(x):
    return ed.Normal(encoder(x)[:, :1], shared, name="z")

  with pytest.raises(ValueError, match="The model and the guide both read"):
    ed.vi.train(model, shared_guide, DATA, steps=1, progress=False, objective=ed.vi.IWAE())

  def fixed_model(x):
    return ed.Normal(ed.Normal(tf.zeros_like(x), 1., name="z"), 1., name="x")

  def unnamed_guide(x):
    return ed.TransformedDistribution(ed.Normal(tf.zeros_like(x), 1.).distribution,
                                      tfb_chain(x, x), name="z")

  with pytest.raises(ValueError, match="The guide draws a random variable without a name"):
    ed.vi.train(fixed_model, unnamed_guide, DATA, steps=1, progress=False)
  with pytest.raises(ValueError, match="The guide's distribution of 'z' keeps its gradient"):
    ed.vi.train(fixed_model, flow_guide, DATA, steps=1, progress=False,
                objective=ed.vi.IWAE())
  ed.vi.train(fixed_model, flow_guide, DATA, steps=1, progress=False,
              objective=ed.vi.IWAE(gradient="reparameterized"))


def tfb_chain(loc, raw):
  return tfb.Chain([tfb.Shift(loc), tfb.Scale(tf.nn.softplus(raw) + 1e-3)])


def test_repeated_calls_print_no_retracing_warning(caplog):
  """Each call makes its compiled step anew by design; TensorFlow's
  "triggered tf.function retracing" warning (issue 55) is not the user's."""
  caplog.set_level(logging.WARNING)
  for _ in range(7):
    model, guide, _ = gaussian_pair()
    ed.vi.train(model, guide, DATA, steps=1, progress=False, jit_compile=False)
  assert not [r for r in caplog.records if "retracing" in r.getMessage()]


def test_iwae_data_parallel_update_equals_single_device_update():
  """K draws per example travel with their rows: IWAE (doubly
  reparameterized) on 2 replicas equals the single-device run."""
  from conftest import LOGICAL_CPUS  # pylint: disable=import-outside-toplevel
  x = np.concatenate([X, 0.5 * X], 1)[:64]
  data = tf.data.Dataset.from_tensor_slices({"x": x}).batch(16, drop_remainder=True)

  def run(strategy):
    encoder, decoder = tf_keras.layers.Dense(4), tf_keras.layers.Dense(2)

    def model(x):
      z = ed.Normal(tf.zeros_like(x), 1., name="z")
      return ed.Normal(decoder(z), 1., name="x")

    def guide(x):
      loc, raw = tf.split(encoder(x), 2, axis=-1)
      return ed.Normal(loc, tf.nn.softplus(raw) + 1e-3, name="z")

    scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
    with scope:
      optimizer = tf_keras.optimizers.SGD(0.05)
    result = ed.vi.train(model, guide, data, steps=4, seed=3, objective=ed.vi.IWAE(samples=3),
                         optimizer=optimizer, strategy=strategy, progress=False)
    return result, [v.numpy() for v in result.variables]

  single, want = run(None)
  data_parallel, got = run(ed.distribute.strategy("mirrored", devices=LOGICAL_CPUS[:2]))
  np.testing.assert_allclose(data_parallel.history["objective"], single.history["objective"],
                             rtol=1e-5)
  for a, b in zip(got, want):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
