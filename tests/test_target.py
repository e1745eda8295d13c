"""Tests of the model target: ``ed.make_target`` and ``ed.Target``.

Every numerical check compares the library's result with a value computed
another way: NumPy formulas of the densities, TFP distributions and bijectors
applied by hand, central finite differences, or numerical integration.
"""

import math
import pathlib

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
import tf_keras

import edward_lite as ed
import zoo
from edward_lite.model.interpreter import Mode

tfd = tfp.distributions
tfb = tfp.bijectors

F64 = tf.float64

# Eight schools data.
Y_8S, SIGMA_8S = zoo.EIGHT_SCHOOLS_Y, zoo.EIGHT_SCHOOLS_SIGMA


# -- NumPy log densities (float64) --------------------------------------------

def np_normal_lp(x, loc, scale):
  return -0.5 * ((x - loc) / scale) ** 2 - np.log(scale) - 0.5 * np.log(2. * np.pi)


def np_half_cauchy_lp(x, scale):
  return np.log(2. / (np.pi * scale)) - np.log1p((x / scale) ** 2)


def np_half_normal_lp(x, scale):
  return 0.5 * np.log(2. / np.pi) - np.log(scale) - 0.5 * (x / scale) ** 2


def np_gamma_lp(x, concentration, rate):
  return (concentration * np.log(rate) + (concentration - 1.) * np.log(x) - rate * x
          - math.lgamma(concentration))


def np_beta_lp(x, a, b):
  return ((a - 1.) * np.log(x) + (b - 1.) * np.log1p(-x)
          + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b))


def np_dirichlet_lp(x, alpha):
  alpha = np.asarray(alpha, np.float64)
  return (np.sum((alpha - 1.) * np.log(x), axis=-1)
          + math.lgamma(alpha.sum()) - sum(math.lgamma(a) for a in alpha))


def np_lognormal_lp(x, loc, scale):
  return np_normal_lp(np.log(x), loc, scale) - np.log(x)


def np_softplus(u):
  return np.logaddexp(0., u)


def np_log_sigmoid(u):
  return -np.logaddexp(0., -u)


def np_sigmoid(u):
  return 1. / (1. + np.exp(-u))


# -- Models ---------------------------------------------------------------------

def eight_schools_target(dtype=tf.float32):
  np_dtype = dtype.as_numpy_dtype
  return ed.make_target(zoo.eight_schools, SIGMA_8S.astype(np_dtype), dtype=dtype,
                        observed={"y": Y_8S.astype(np_dtype)})


def eight_schools_hand_np(mu_u, tau_u, tt_u):
  """log p + log|det J| in NumPy float64; HalfCauchy(0, 5) uses x = exp(u)."""
  mu_u, tau_u, tt_u = (np.asarray(a, np.float64) for a in (mu_u, tau_u, tt_u))
  mu, tau, tt = mu_u, np.exp(tau_u), tt_u
  log_det = tau_u  # d exp(u)/du = exp(u)
  return (np_normal_lp(mu, 0., 5.) + np_half_cauchy_lp(tau, 5.) + log_det
          + np.sum(np_normal_lp(tt, 0., 1.), axis=-1)
          + np.sum(np_normal_lp(Y_8S.astype(np.float64), mu[:, None] + tau[:, None] * tt,
                                SIGMA_8S.astype(np.float64)), axis=-1))


def eight_schools_hand_tfp(mu_u, tau_u, tt_u):
  """The same with TFP distributions and the bijector applied explicitly."""
  tau_bijector = tfb.Chain([tfb.Shift(0.), tfb.Exp()])  # TFP's HalfCauchy default
  tau = tau_bijector.forward(tau_u)
  return (tfd.Normal(0., 5.).log_prob(mu_u)
          + tfd.HalfCauchy(0., 5.).log_prob(tau)
          + tau_bijector.forward_log_det_jacobian(tau_u, event_ndims=0)
          + tf.reduce_sum(tfd.Normal(0., 1.).log_prob(tt_u), axis=-1)
          + tf.reduce_sum(tfd.Normal(mu_u[:, None] + tau[:, None] * tt_u,
                                     SIGMA_8S).log_prob(Y_8S), axis=-1)).numpy()


def random_eight_schools_state(chains, seed, dtype=np.float32):
  rng = np.random.default_rng(seed)
  return {"mu": rng.normal(0., 3., size=[chains]).astype(dtype),
          "tau": rng.normal(0., 1., size=[chains]).astype(dtype),
          "theta_tilde": rng.normal(0., 1., size=[chains, 8]).astype(dtype)}


Y_CONSTRAINED = 1.3


def constrained_model():
  """float64 model with several constraining bijectors.

  tau ~ Gamma (softplus), x ~ Uniform(0, tau) (sigmoid scaled by the current
  tau), p ~ Dirichlet with sample_shape 4 (softmax-centered), s ~ HalfCauchy
  (exp), r ~ LogNormal with sample_shape 2 (exp).
  """
  tau = ed.Gamma(tf.constant(3., F64), 2., name="tau")
  x = ed.Uniform(tf.constant(0., F64), tau, name="x")
  p = ed.Dirichlet(tf.constant([1., 2., 3.], F64), sample_shape=4, name="p")
  s = ed.HalfCauchy(tf.constant(0., F64), 1., name="s")
  r = ed.LogNormal(tf.constant(0., F64), 1., sample_shape=2, name="r")
  return ed.Normal(x + tf.reduce_sum(p[:, 0]) * s + tf.reduce_sum(r), 1., name="y")


def constrained_target():
  return ed.make_target(constrained_model, observed={"y": Y_CONSTRAINED})


def random_constrained_state(chains, seed):
  rng = np.random.default_rng(seed)
  return {"tau": rng.normal(size=[chains]), "x": rng.normal(size=[chains]),
          "p": rng.normal(size=[chains, 4, 2]), "s": rng.normal(size=[chains]),
          "r": rng.normal(size=[chains, 2])}


def np_softmax_centered(u):
  z = np.concatenate([u, np.zeros(u.shape[:-1] + (1,))], axis=-1)
  z = np.exp(z - z.max(axis=-1, keepdims=True))
  return z / z.sum(axis=-1, keepdims=True)


def constrained_hand(u):
  """NumPy forward maps + densities; simplex log-det from tfb.SoftmaxCentered."""
  tau = np_softplus(u["tau"])
  x = tau * np_sigmoid(u["x"])
  p = np_softmax_centered(u["p"])
  s = np.exp(u["s"])
  r = np.exp(u["r"])
  lp = np_gamma_lp(tau, 3., 2.) + np_log_sigmoid(u["tau"])  # softplus' = sigmoid
  # Uniform(0, tau): density 1/tau; x = tau * sigmoid(u): dx/du = tau s (1 - s).
  lp += -np.log(tau) + np.log(tau) + np_log_sigmoid(u["x"]) + np_log_sigmoid(-u["x"])
  simplex_log_det = tfb.SoftmaxCentered().forward_log_det_jacobian(
      tf.constant(u["p"]), event_ndims=1).numpy()
  lp += np.sum(np_dirichlet_lp(p, [1., 2., 3.]) + simplex_log_det, axis=-1)
  lp += np_half_cauchy_lp(s, 1.) + u["s"]
  lp += np.sum(np_lognormal_lp(r, 0., 1.) + u["r"], axis=-1)
  mean = x + np.sum(p[:, :, 0], axis=-1) * s + np.sum(r, axis=-1)
  lp += np_normal_lp(Y_CONSTRAINED, mean, 1.)
  return lp, {"tau": tau, "x": x, "p": p, "s": s, "r": r}


# -- Static description ------------------------------------------------------------


def test_static_description():

  def program(features):
    alpha = ed.Dirichlet([1., 1., 1.], name="alpha")
    ed.Normal(0., 1., value=0.25, name="fixed_in_program")
    pis = ed.Dirichlet([1., 2., 3.], sample_shape=4, name="pis")
    with ed.condition(conditioned=2.):
      ed.HalfNormal(1., name="conditioned")
    scales = ed.HalfNormal(1., sample_shape=[2, 3], name="scales")
    beta = ed.Normal(tf.zeros([2]), 1., name="beta")
    mean = tf.linalg.matvec(features, beta) + alpha[0] + pis[0, 0] + scales[0, 0]
    return ed.Normal(mean, 1., name="y")

  features = np.ones([5, 2], np.float32)
  t = ed.make_target(program, features, observed={"y": np.zeros(5, np.float32)})

  assert t.names == ("alpha", "pis", "scales", "beta")
  assert list(t.latents) == list(t.names)
  expected = {  # name: (shape, unconstrained shape, distribution)
      "alpha": ([3], [2], "Dirichlet"),
      "pis": ([4, 3], [4, 2], "Dirichlet"),
      "scales": ([2, 3], [2, 3], "HalfNormal"),
      "beta": ([2], [2], "Normal"),
  }
  for name, (shape, unconstrained, dist) in expected.items():
    info = t.latents[name]
    assert info.name == name
    assert info.shape.as_list() == shape
    assert info.unconstrained_shape.as_list() == unconstrained
    assert info.dtype == tf.float32
    assert info.distribution == dist
  assert t.dim == 2 + 8 + 6 + 2
  assert t.dtype == tf.float32
  assert set(t.observed) == {"y"}
  np.testing.assert_array_equal(t.observed["y"].numpy(), np.zeros(5))
  assert set(t.fixed) == {"fixed_in_program", "conditioned"}
  assert t.fixed["fixed_in_program"].numpy() == pytest.approx(0.25)
  assert t.fixed["conditioned"].numpy() == pytest.approx(2.)
  flat = t.flatten({n: tf.zeros([3] + i.unconstrained_shape.as_list())
                    for n, i in t.latents.items()})
  assert flat.shape.as_list() == [3, 18]


def test_the_target_is_the_models_description_plus_the_samplers_density():
  # Two roles, two modules: the description (names, spaces, draws) is the
  # base class; Target adds the chain-batched density (the Density protocol),
  # which ShardedTarget implements on its own, without forwarding.
  from edward_lite.distribute.sharding import ShardedTarget  # pylint: disable=g-import-not-at-top
  from edward_lite.model.description import ModelDescription  # pylint: disable=g-import-not-at-top
  from edward_lite.model.target import Density, Target  # pylint: disable=g-import-not-at-top
  assert issubclass(Target, ModelDescription)
  assert Target.__module__ == "edward_lite.model.target"
  for name in ("names", "latents", "dim", "dtype", "layout", "constrain", "unconstrain",
               "sample_prior", "simulate", "predict", "log_likelihood", "deterministic",
               "pointwise", "loop_facts", "split_constrained"):
    assert hasattr(ModelDescription, name), name
  for name in ("log_prob", "log_prob_flat", "log_joint", "value_and_gradient",
               "value_and_gradient_flat", "log_det_jacobian_flat", "log_prob_terms_flat",
               "density_fn", "with_data", "retrace"):
    assert hasattr(Target, name) and not hasattr(ModelDescription, name), name
  density = [n for n in vars(Density) if not n.startswith("_")]
  assert all(hasattr(ShardedTarget, n) for n in density if callable(getattr(Density, n)))
  assert not hasattr(ShardedTarget, "__getattr__")
  source = pathlib.Path(ed.__file__).parent
  assert not [p for p in source.rglob("*.py") if '"base"' in p.read_text()]


def test_latent_dtypes_reported_per_variable():

  def program():
    ed.Normal(tf.constant(0., F64), 1., name="a")
    ed.Gamma(2., 1., sample_shape=3, name="b")

  t = ed.make_target(program)
  assert t.latents["a"].dtype == tf.float64
  assert t.latents["b"].dtype == tf.float32
  assert t.latents["b"].shape.as_list() == [3]
  assert t.dim == 4
  assert t.dtype is None  # no common dtype


# -- Batched log density -------------------------------------------------------------


def test_eight_schools_default_bijectors_are_as_assumed_by_hand_computation():
  t = eight_schools_target()
  u = tf.constant([-2., 0., 1.5])
  np.testing.assert_allclose(t.latents["tau"].bijector.forward(u).numpy(),
                             np.exp(u.numpy()), rtol=1e-6)
  np.testing.assert_allclose(t.latents["mu"].bijector.forward(u).numpy(), u.numpy())
  np.testing.assert_allclose(t.latents["theta_tilde"].bijector.forward(u).numpy(), u.numpy())


def test_batched_log_prob_equals_single_chain_evaluations():
  t = eight_schools_target()
  state = random_eight_schools_state(5, seed=1)
  batched = t.log_prob(state).numpy()
  assert batched.shape == (5,)
  singles = np.array([t.log_prob({k: v[i:i + 1] for k, v in state.items()}).numpy()[0]
                      for i in range(5)])
  np.testing.assert_allclose(batched, singles, rtol=1e-6)
  # The chains differ, so equal values above are not an accident of broadcasting.
  assert np.ptp(batched) > 1.


def test_eager_calls_reuse_one_trace():
  # tf.vectorized_map called eagerly traces anew at every call (0.1 s, and
  # TensorFlow's retracing warning from the fifth); eager densities share
  # the target's one traced function instead.
  t = eight_schools_target()
  state = random_eight_schools_state(5, seed=1)
  first = t.log_prob(state).numpy()
  for _ in range(6):
    np.testing.assert_array_equal(t.log_prob(state).numpy(), first)
  values, grads = t.value_and_gradient(state)
  np.testing.assert_allclose(values.numpy(), first, rtol=1e-6)
  with tf.GradientTape() as tape:
    watched = {k: tf.constant(v) for k, v in state.items()}
    tape.watch(watched)
    total = tf.reduce_sum(t.log_prob(watched))
  for name, g in tape.gradient(total, watched).items():
    np.testing.assert_allclose(g.numpy(), grads[name].numpy(), rtol=1e-5)
  traced = t._shared_densities[Mode.UNCONSTRAINED]  # pylint: disable=protected-access
  assert traced.experimental_get_tracing_count() == 1


def test_batched_log_prob_matches_hand_computation():
  t = eight_schools_target()
  state = random_eight_schools_state(5, seed=2)
  lp = t.log_prob(state).numpy()
  by_numpy = eight_schools_hand_np(state["mu"], state["tau"], state["theta_tilde"])
  by_tfp = eight_schools_hand_tfp(state["mu"], state["tau"], state["theta_tilde"])
  np.testing.assert_allclose(by_tfp, by_numpy, rtol=1e-5)
  np.testing.assert_allclose(lp, by_numpy, rtol=1e-5)
  np.testing.assert_allclose(lp, by_tfp, rtol=1e-5)
  # A list in `names` order is the same state.
  as_list = t.log_prob([state["mu"], state["tau"], state["theta_tilde"]]).numpy()
  np.testing.assert_allclose(as_list, lp, rtol=1e-7)


def test_log_prob_with_simplex_sample_shape_and_dependent_support_matches_hand():
  t = constrained_target()
  state = random_constrained_state(4, seed=3)
  expected, _ = constrained_hand(state)
  np.testing.assert_allclose(t.log_prob(state).numpy(), expected, rtol=1e-10)
  # The simplex log-det used by hand is sum(log p) + 0.5 log K (TFP's convention).
  p = np_softmax_centered(state["p"])
  np.testing.assert_allclose(
      tfb.SoftmaxCentered().forward_log_det_jacobian(state["p"], event_ndims=1).numpy(),
      np.sum(np.log(p), axis=-1) + 0.5 * np.log(3.), rtol=1e-10)


def test_values_fixed_in_program_contribute_their_density():

  def program():
    mu = ed.Normal(0., 1., name="mu")
    ed.Normal(mu, 2., value=0.7, name="fixed")  # depends on the latent

  t = ed.make_target(program)
  mu = np.array([-1., 0.3, 2.], np.float32)
  expected = np_normal_lp(mu, 0., 1.) + np_normal_lp(0.7, mu, 2.)
  np.testing.assert_allclose(t.log_prob({"mu": mu}).numpy(), expected, rtol=1e-6)


def test_integral_float_observations_accepted_for_bernoulli():

  def program():
    p = ed.Beta(2., 3., name="p")
    return ed.Bernoulli(probs=p * tf.ones(5), name="flips")

  flips = np.array([0., 1., 1., 0., 1.])  # float64 holding integers
  t = ed.make_target(program, observed={"flips": flips})
  assert t.observed["flips"].dtype == tf.int32
  u = np.array([-1.2, 0., 0.8])
  p = np_sigmoid(u)
  expected = (np_beta_lp(p, 2., 3.) + np_log_sigmoid(u) + np_log_sigmoid(-u)
              + 3. * np.log(p) + 2. * np.log1p(-p))
  np.testing.assert_allclose(t.log_prob({"p": u.astype(np.float32)}).numpy(), expected,
                             rtol=1e-5)


# -- Gradients ---------------------------------------------------------------------


def central_differences(fn, flat, h=1e-5):
  """Central finite-difference gradient of a batched fn: [C, D] -> [C]."""
  chains, dim = flat.shape
  eye = np.eye(dim)
  plus = (flat[:, None, :] + h * eye).reshape(-1, dim)
  minus = (flat[:, None, :] - h * eye).reshape(-1, dim)
  both = fn(np.concatenate([plus, minus], axis=0)).numpy()
  lp_plus, lp_minus = both[:chains * dim], both[chains * dim:]
  return ((lp_plus - lp_minus) / (2. * h)).reshape(chains, dim)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["eight_schools", "constrained"])
def test_gradients_match_central_finite_differences(model):
  if model == "eight_schools":
    t = eight_schools_target(F64)
    state = random_eight_schools_state(3, seed=4, dtype=np.float64)
  else:
    t = constrained_target()
    state = random_constrained_state(3, seed=5)
  assert t.dtype == tf.float64
  flat = t.flatten(state).numpy()
  expected = central_differences(t.log_prob_flat, flat)

  lp_flat, grad_flat = t.value_and_gradient_flat(flat)
  np.testing.assert_allclose(grad_flat.numpy(), expected, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(lp_flat.numpy(), t.log_prob(state).numpy(), rtol=1e-12)

  lp, grads = t.value_and_gradient(state)
  assert set(grads) == set(t.names)
  for name in t.names:
    assert grads[name].shape.as_list() == list(np.shape(state[name]))
  np.testing.assert_allclose(t.flatten(grads).numpy(), expected, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(lp.numpy(), lp_flat.numpy(), rtol=1e-12)


# -- Jacobian correction --------------------------------------------------------------


def test_gamma_unconstrained_density_integrates_to_one():
  a, b = 2.5, 1.5
  t = ed.make_target(lambda: ed.Gamma(tf.constant(a, F64), b, name="x"))
  u = np.linspace(-25., 25., 10001)
  lp = t.log_prob({"x": u}).numpy()
  # Gamma's default bijector is softplus: p_U(u) = p_X(softplus(u)) * sigmoid(u).
  expected = np_gamma_lp(np_softplus(u), a, b) + np_log_sigmoid(u)
  np.testing.assert_allclose(lp, expected, rtol=1e-10, atol=1e-10)
  assert np.trapezoid(np.exp(lp), u) == pytest.approx(1., abs=1e-6)


def test_lognormal_unconstrained_density_integrates_to_one():
  loc, scale = 0.3, 0.7
  t = ed.make_target(lambda: ed.LogNormal(tf.constant(loc, F64), scale, name="x"))
  u = np.linspace(-6., 7., 5001)
  lp = t.log_prob({"x": u}).numpy()
  # x = exp(u): p_U(u) = p_X(exp(u)) * exp(u), which is the Normal(loc, scale) density.
  np.testing.assert_allclose(lp, np_lognormal_lp(np.exp(u), loc, scale) + u,
                             rtol=1e-10, atol=1e-10)
  np.testing.assert_allclose(lp, np_normal_lp(u, loc, scale), rtol=1e-10, atol=1e-10)
  assert np.trapezoid(np.exp(lp), u) == pytest.approx(1., abs=1e-6)


def test_uniform_with_latent_upper_bound_uses_bijector_of_current_tau():

  def program():
    tau = ed.Gamma(tf.constant(3., F64), 2., name="tau")
    x = ed.Uniform(tf.constant(0., F64), tau, name="x")
    return ed.Normal(x, 0.5, name="obs")

  t = ed.make_target(program, observed={"obs": 0.4})
  u_tau = np.array([-0.5, 1.7])  # tau = 0.47 and 1.87
  u_x = np.array([0.3, -1.2])
  tau = np_softplus(u_tau)
  x = tau * np_sigmoid(u_x)
  expected = (np_gamma_lp(tau, 3., 2.) + np_log_sigmoid(u_tau)  # tau and its Jacobian
              - np.log(tau)  # Uniform(0, tau) density
              + np.log(tau) + np_log_sigmoid(u_x) + np_log_sigmoid(-u_x)  # d x / d u_x
              + np_normal_lp(0.4, x, 0.5))
  state = {"tau": u_tau, "x": u_x}
  np.testing.assert_allclose(t.log_prob(state).numpy(), expected, rtol=1e-12)
  constrained = t.constrain(state)
  np.testing.assert_allclose(constrained["x"].numpy(), x, rtol=1e-12)
  np.testing.assert_allclose(constrained["tau"].numpy(), tau, rtol=1e-12)
  # Also in one-chain calls: the bijector is rebuilt for each tau.
  for i in range(2):
    single = t.log_prob({"tau": u_tau[i:i + 1], "x": u_x[i:i + 1]}).numpy()
    np.testing.assert_allclose(single, expected[i:i + 1], rtol=1e-12)


# -- constrain / unconstrain, flatten / unflatten -----------------------------------------


def test_constrain_maps_into_support_and_matches_forward_bijectors():
  t = constrained_target()
  state = random_constrained_state(6, seed=6)
  _, expected = constrained_hand(state)
  x = {k: v.numpy() for k, v in t.constrain(state).items()}
  assert set(x) == set(t.names)
  for name in t.names:
    np.testing.assert_allclose(x[name], expected[name], rtol=1e-12, atol=1e-15)
  assert np.all(x["tau"] > 0.) and np.all(x["s"] > 0.) and np.all(x["r"] > 0.)
  assert np.all(x["x"] > 0.) and np.all(x["x"] < x["tau"])
  assert x["p"].shape == (6, 4, 3)
  assert np.all(x["p"] > 0.)
  np.testing.assert_allclose(x["p"].sum(axis=-1), np.ones([6, 4]), rtol=1e-12)
  back = t.unconstrain(x)
  for name in t.names:
    np.testing.assert_allclose(back[name].numpy(), state[name], rtol=1e-9, atol=1e-9)


def test_unconstrain_matches_inverse_bijectors_and_round_trips():
  t = constrained_target()
  rng = np.random.default_rng(7)
  chains = 5
  tau = rng.gamma(3., 0.5, size=chains)
  values = {"tau": tau, "x": tau * rng.uniform(0.05, 0.95, size=chains),
            "p": rng.dirichlet([1., 2., 3.], size=[chains, 4]),
            "s": np.abs(rng.standard_cauchy(size=chains)),
            "r": rng.lognormal(size=[chains, 2])}
  u = {k: v.numpy() for k, v in t.unconstrain(values).items()}
  np.testing.assert_allclose(u["tau"], np.log(np.expm1(tau)), rtol=1e-10)
  ratio = values["x"] / tau
  np.testing.assert_allclose(u["x"], np.log(ratio / (1. - ratio)), rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(u["p"], np.log(values["p"][..., :2] / values["p"][..., 2:]),
                             rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(u["s"], np.log(values["s"]), rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(u["r"], np.log(values["r"]), rtol=1e-10, atol=1e-12)
  again = t.constrain(u)
  for name in t.names:
    np.testing.assert_allclose(again[name].numpy(), values[name], rtol=1e-10)


@pytest.mark.slow
def test_flatten_unflatten_round_trip_and_log_prob_flat():
  t = constrained_target()
  state = random_constrained_state(4, seed=8)
  flat = t.flatten(state).numpy()
  assert flat.shape == (4, t.dim) and t.dim == 13
  expected = np.concatenate([np.reshape(state[n], [4, -1]) for n in t.names], axis=-1)
  np.testing.assert_array_equal(flat, expected)
  back = t.unflatten(flat)
  assert set(back) == set(t.names)
  for name in t.names:
    assert back[name].shape.as_list() == [4] + t.latents[name].unconstrained_shape.as_list()
    np.testing.assert_array_equal(back[name].numpy(), state[name])
  np.testing.assert_allclose(t.log_prob_flat(flat).numpy(), t.log_prob(state).numpy(),
                             rtol=1e-14)
  np.testing.assert_allclose(t.log_prob_flat(flat).numpy(), constrained_hand(state)[0],
                             rtol=1e-10)


# -- XLA -------------------------------------------------------------------------------------


@pytest.mark.parametrize("chains", [1, 1000])
def test_value_and_gradient_flat_under_xla_matches_eager(chains):
  t = eight_schools_target()
  traces = []

  @tf.function(jit_compile=True)
  def compiled(flat):
    traces.append(1)
    return t.value_and_gradient_flat(flat)

  for seed in (10, 11):
    state = random_eight_schools_state(chains, seed=seed)
    flat = tf.constant(t.flatten(state))
    lp_xla, grad_xla = compiled(flat)
    lp_eager, grad_eager = t.value_and_gradient_flat(flat)
    assert lp_xla.shape.as_list() == [chains]
    assert grad_xla.shape.as_list() == [chains, 10]
    np.testing.assert_allclose(lp_xla.numpy(), lp_eager.numpy(), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(grad_xla.numpy(), grad_eager.numpy(), rtol=1e-4, atol=1e-4)
    expected = eight_schools_hand_np(state["mu"], state["tau"], state["theta_tilde"])
    np.testing.assert_allclose(lp_xla.numpy(), expected, rtol=1e-4, atol=1e-3)
  assert len(traces) == 1


# -- Keras ----------------------------------------------------------------------------------


def test_keras_dense_layer_as_regression_mean():
  kernel = np.array([[0.5], [-1.], [2.]], np.float32)
  bias = 0.25
  layer = tf_keras.layers.Dense(
      1, kernel_initializer=tf_keras.initializers.Constant(kernel),
      bias_initializer=tf_keras.initializers.Constant(bias))
  rng = np.random.default_rng(12)
  features = rng.normal(size=[6, 3]).astype(np.float32)
  y = rng.normal(size=[6]).astype(np.float32)

  def program(features):
    w = ed.Normal(0., 1., sample_shape=3, name="w")
    s = ed.HalfNormal(1., name="s")
    mean = layer(features * w)[:, 0]
    return ed.Normal(mean, s, name="y")

  t = ed.make_target(program, features, observed={"y": y})
  assert t.names == ("w", "s")
  state = {"w": rng.normal(size=[4, 3]).astype(np.float32),
           "s": rng.normal(size=[4]).astype(np.float32)}
  w, u_s = state["w"].astype(np.float64), state["s"].astype(np.float64)
  scale = np_softplus(u_s)  # HalfNormal's default bijector is softplus
  mean = np.einsum("nf,cf,fo->cn", features, w, kernel) + bias
  expected = (np.sum(np_normal_lp(w, 0., 1.), axis=-1)
              + np_half_normal_lp(scale, 1.) + np_log_sigmoid(u_s)
              + np.sum(np_normal_lp(y, mean, scale[:, None]), axis=-1))
  np.testing.assert_allclose(t.log_prob(state).numpy(), expected, rtol=1e-5)


# -- Errors ----------------------------------------------------------------------------------


def regression(x):
  w = ed.Normal(0., 1., name="w")
  return ed.Normal(w * x, 1., name="y")


X3 = np.array([0., 1., 2.], np.float32)


def coin():
  p = ed.Beta(1., 1., name="p")
  return ed.Bernoulli(probs=p * tf.ones(3), name="flips")


def with_discrete_latent(kind):

  def program():
    if kind == "Poisson":
      k = ed.Poisson(3., name="k")
    elif kind == "Bernoulli":
      k = ed.Bernoulli(probs=0.3, name="k")
    else:
      k = ed.Categorical(probs=[0.2, 0.8], name="k")
    return ed.Normal(tf.cast(k, tf.float32), 1., name="y")

  return program


def alternating_program():
  calls = []

  def program():
    calls.append(1)
    if len(calls) % 2:
      return ed.Normal(0., 1., name="a")
    return ed.Normal(0., 1., name="b")

  return program


def random_shape_program():
  rs = np.random.RandomState(0)  # draws 45 then 48

  def program():
    return ed.Normal(0., 1., sample_shape=int(rs.randint(1, 100)), name="z")

  return program


def unnamed_program():
  return ed.Normal(0., 1.)


def duplicate_program():
  ed.Normal(0., 1., name="z")
  return ed.Normal(0., 1., name="z")


NAN_X3 = np.array([1., np.nan, 2.], np.float32)

ERROR_CASES = {
    "unknown_observed_name": (
        lambda: ed.make_target(regression, X3, observed={"yy": X3}),
        ValueError, r"\['yy'\] are not random variables"),
    "observed_wrong_shape": (
        lambda: ed.make_target(regression, X3, observed={"y": np.zeros(4, np.float32)}),
        ValueError, r"random variable 'y' has shape \[4\]; expected \[3\]"),
    "observed_non_integral_float_for_bernoulli": (
        lambda: ed.make_target(coin, observed={"flips": np.array([0.5, 1., 0.])}),
        TypeError, r"'flips'.*int32"),
    "observed_float64_tensor_for_float32": (
        lambda: ed.make_target(regression, X3, observed={"y": tf.constant(X3, F64)}),
        TypeError, r"'y' has dtype float64.*float32"),
    "observed_nan_numpy": (
        lambda: ed.make_target(regression, X3, observed={"y": np.array([1., np.nan, 2.])}),
        ValueError, r"random variable 'y' contains 1 non-finite"),
    "observed_inf_numpy": (
        lambda: ed.make_target(regression, X3,
                               observed={"y": np.array([np.inf, 0., -np.inf])}),
        ValueError, r"random variable 'y' contains 2 non-finite"),
    "observed_nan_tensor": (
        lambda: ed.make_target(regression, X3, observed={"y": tf.constant(NAN_X3)}),
        ValueError, r"random variable 'y' contains 1 non-finite"),
    "observed_inf_tensor": (
        lambda: ed.make_target(regression, X3,
                               observed={"y": tf.constant([1., np.inf, 2.])}),
        ValueError, r"random variable 'y' contains 1 non-finite"),
    "argument_nan_numpy": (
        lambda: ed.make_target(regression, NAN_X3, observed={"y": X3}),
        ValueError, r"Argument 'x' of the program contains 1 non-finite"),
    "argument_nan_tensor": (
        lambda: ed.make_target(regression, tf.constant(NAN_X3), observed={"y": X3}),
        ValueError, r"Argument 'x' of the program contains 1 non-finite"),
    "argument_inf_keyword": (
        lambda: ed.make_target(regression, x=np.array([1., 2., np.inf], np.float32),
                               observed={"y": X3}),
        ValueError, r"Argument 'x' of the program contains 1 non-finite"),
    "discrete_latent_poisson": (
        lambda: ed.make_target(with_discrete_latent("Poisson"), observed={"y": 1.}),
        ValueError, r"'k' \(Poisson.*discrete support"),
    "only_summed_out_latents": (
        lambda: ed.mcmc.sample(with_discrete_latent("Bernoulli"), observed={"y": 1.}),
        ValueError, r"\['k'\] are discrete and summed out"),
    "stochastic_control_flow_variable": (
        lambda: ed.make_target(alternating_program()),
        ValueError, r"stochastic control flow.*'a'.*then absent.*'b'"),
    "stochastic_control_flow_shape": (
        lambda: ed.make_target(random_shape_program()),
        ValueError, r"stochastic control flow.*'z': latent \[45\] float32 then latent \[48\]"),
    "unnamed_random_variable": (
        lambda: ed.make_target(unnamed_program),
        ValueError, r"random variable with Normal and no name="),
    "duplicate_name": (
        lambda: ed.make_target(duplicate_program),
        ValueError, r"name 'z' is used twice"),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_make_target_errors_name_the_culprit(case):
  build, error, match = ERROR_CASES[case]
  with pytest.raises(error, match=match):
    build()


@pytest.mark.parametrize("as_list", [False, True])
def test_state_with_wrong_shape_names_the_latent(as_list):
  t = eight_schools_target()
  state = random_eight_schools_state(3, seed=13)
  state["theta_tilde"] = state["theta_tilde"][:, :7]
  if as_list:
    state = [state[n] for n in t.names]
  with pytest.raises(ValueError, match=r"latent 'theta_tilde' has shape \[3, 7\]"):
    t.log_prob(state)
  with pytest.raises(ValueError, match=r"latent 'theta_tilde'"):
    t.value_and_gradient(state)


def test_non_finite_python_float_argument_is_rejected():

  def program(scale):
    return ed.Normal(0., scale, name="z")

  # The NumPy scalar of the same value is rejected ...
  with pytest.raises(ValueError, match=r"Argument 'scale' of the program"):
    ed.make_target(program, np.float64("nan"))
  # ... and so should the Python float be.
  with pytest.raises(ValueError, match=r"Argument 'scale' of the program"):
    ed.make_target(program, float("nan"))


def test_gradient_reaches_keras_weights_read_by_the_program():
  """log_prob differentiates per chain inside the vectorized program (custom
  gradient); weights the program reads still get their exact gradient."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(5)
  x = rng.normal(size=(6, 3)).astype(np.float32)
  y = rng.normal(size=6).astype(np.float32)
  layer = tf_keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros")
  layer.build((None, 3))

  def program():
    w = ed.Normal(0., 1., name="w")
    return ed.Normal(layer(x)[:, 0] * w, 1., name="y")

  t = ed.make_target(program, observed={"y": y})
  w = tf.constant([0.5, 1.5, -1.0])
  with tf.GradientTape() as tape:
    total = tf.reduce_sum(t.log_prob({"w": w}) * tf.constant([1., 2., 3.]))
  got = tape.gradient(total, layer.kernel).numpy()[:, 0]
  # By hand: d/dk sum_c a_c sum_i -0.5 (y_i - w_c x_i.k)^2 = sum_c a_c w_c sum_i (y_i - w_c x_i.k) x_i
  k = np.ones(3)
  expected = sum(a * wc * ((y - wc * (x @ k))[:, None] * x).sum(0)
                 for a, wc in zip([1., 2., 3.], [0.5, 1.5, -1.0]))
  np.testing.assert_allclose(got, expected, rtol=1e-4)


def test_bernoulli_logits_term_equals_tfp_log_prob():
  from edward_lite.model.interpreter import log_prob_term
  tfd = ed.distributions.tfd
  rng = np.random.default_rng(3)
  logits = rng.normal(scale=30., size=(5, 4))  # large |logits|: the stable branch
  labels = (rng.uniform(size=(5, 4)) < 0.5).astype(np.int32)
  for dtype in (np.float32, np.float64):
    for l, y in [(logits, labels), (logits[0], labels), (logits[0, 0], labels),
                 (logits, labels[0])]:
      dist = tfd.Bernoulli(logits=l.astype(dtype))
      np.testing.assert_allclose(log_prob_term(dist, y), dist.log_prob(y),
                                 rtol=1e-6 if dtype == np.float32 else 1e-12, atol=1e-6)
  by_probs = tfd.Bernoulli(probs=0.3)
  np.testing.assert_allclose(log_prob_term(by_probs, labels), by_probs.log_prob(labels))


# -- per-chain gradients of matrix products ---------------------------------------------------


@pytest.mark.parametrize("transpose_a,transpose_b", [(False, False), (False, True),
                                                     (True, False), (True, True)])
def test_row_form_matmul_gradient_equals_tensorflows(transpose_a, transpose_b):
  from edward_lite.model import per_chain_gradient
  rng = np.random.default_rng(4)
  data = tf.constant(rng.normal(size=(6, 3)), tf.float32)

  def one_chain(s):  # both operands depend on the chain, so both gradients are used
    a = data * s["u"] if not transpose_a else tf.transpose(data * s["u"])
    b = s["w"][:, None] * tf.ones([1, 2]) if not transpose_b else tf.ones([2, 1]) * s["w"]
    return tf.reduce_sum(tf.sin(tf.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)))

  state = {"u": tf.constant(rng.normal(size=(4,)), tf.float32),
           "w": tf.constant(rng.normal(size=(4, 3)), tf.float32)}

  @tf.function
  def both(state):
    return [tf.vectorized_map(lambda s: per_chain_gradient.value_and_gradient(one_chain, s, rows=r),
                              state) for r in (True, False)]

  (lp_rows, g_rows), (lp_tape, g_tape) = both(state)
  np.testing.assert_allclose(lp_rows, lp_tape, rtol=1e-6)
  for name in state:
    np.testing.assert_allclose(g_rows[name], g_tape[name], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("chains", [3, 16])  # the row form (<= 8 chains) and TensorFlow's
def test_logistic_regression_gradient_matches_the_closed_form(chains):
  rng = np.random.default_rng(5)
  x = rng.normal(size=(200, 7)).astype(np.float32)
  y = (rng.uniform(size=200) < 0.5).astype(np.int32)

  def model(x):
    w = ed.Normal(tf.zeros(7), 1., name="w")
    return ed.Bernoulli(logits=tf.linalg.matvec(x, w), name="y")

  t = ed.make_target(model, x, observed={"y": y})
  w = rng.normal(size=(chains, 7)).astype(np.float32)
  lp, grad = tf.function(t.value_and_gradient_flat, jit_compile=True)(tf.constant(w))
  logits = w.astype(np.float64) @ x.T.astype(np.float64)
  expected_lp = (-0.5 * (w.astype(np.float64)**2).sum(1) - 3.5 * np.log(2 * np.pi) +
                 (y * logits - np.logaddexp(0., logits)).sum(1))
  expected_grad = -w + (y - 1. / (1. + np.exp(-logits))) @ x.astype(np.float64)
  np.testing.assert_allclose(lp, expected_lp, rtol=1e-5)
  np.testing.assert_allclose(grad, expected_grad, rtol=1e-4, atol=1e-3)


def test_pandas_columns_are_data_like_numpy_arrays():
  pd = pytest.importorskip("pandas")
  rng = np.random.default_rng(6)
  frame = pd.DataFrame({"x": rng.normal(size=30), "y": rng.normal(size=30)})  # float64

  def regression(x):
    b = ed.Normal(0., 1., name="b")
    return ed.Normal(x * tf.exp(0. * b) * b, 1., name="y")  # the column on the left

  state = {"b": tf.constant([0.3, -1.2])}
  from_pandas = ed.make_target(regression, frame.x, observed={"y": frame["y"]})
  from_numpy = ed.make_target(regression, frame.x.to_numpy(np.float32),
                              observed={"y": frame["y"].to_numpy(np.float32)})
  np.testing.assert_allclose(from_pandas.log_prob(state), from_numpy.log_prob(state), rtol=1e-6)
  expected = [np.sum(-0.5 * (frame.y - b * frame.x)**2) - 0.5 * b**2 - 31 * 0.5 * np.log(2 * np.pi)
              for b in (0.3, -1.2)]
  np.testing.assert_allclose(from_pandas.log_prob(state), expected, rtol=1e-5)


def test_one_run_modes_against_hand_computation():
  """interpreter.run at one chain: the unconstrained mode adds the Jacobian
  of x = exp(u) (log|dx/du| = u), the constrained mode is the log joint; the
  Density protocol is what both Target and ShardedTarget declare."""
  from scipy import stats
  def model():
    s = ed.LogNormal(0., 1., name="s")
    return ed.Normal(0., s, name="y")
  target = ed.make_target(model, observed={"y": 1.5})
  u = 0.3
  joint = stats.lognorm(1.).logpdf(math.exp(u)) + stats.norm(0., math.exp(u)).logpdf(1.5)
  unc = target.run({"s": tf.constant(u)}, Mode.UNCONSTRAINED)
  con = target.run({"s": tf.constant(math.exp(u))}, Mode.CONSTRAINED)
  assert unc.log_prob.numpy() == pytest.approx(joint + u, rel=1e-5)
  assert con.log_prob.numpy() == pytest.approx(joint, rel=1e-5)
  assert unc.terms["s (Jacobian)"].numpy() == pytest.approx(u, rel=1e-5)
  assert "s (Jacobian)" not in con.terms
  assert con.unconstrained["s"].numpy() == pytest.approx(u, rel=1e-5)
  assert set(unc.variables) == {"s", "y"}
  scaled = target.with_data(likelihood_scale=3., prior_scale=.5)
  terms = scaled.run({"s": tf.constant(u)}).terms
  assert terms["y"].numpy() == pytest.approx(3. * stats.norm(0., math.exp(u)).logpdf(1.5),
                                             rel=1e-5)
  assert terms["s (Jacobian)"].numpy() == pytest.approx(.5 * u, rel=1e-5)
  assert isinstance(target, ed.model.Density)


def test_a_program_autograph_cannot_convert_runs_as_written():
  def model():  # for/else: AutoGraph's UnsupportedLanguageElementError, not a ConversionError
    for _ in range(1):
      z = ed.Normal(0., 1., name="z")
    else:  # pylint: disable=useless-else-on-loop
      pass
    return ed.Normal(z, 1., name="y")

  from scipy import stats  # pylint: disable=import-outside-toplevel
  target = ed.make_target(model, observed={"y": 0.5})
  log_prob = tf.function(target.log_prob_flat)(tf.zeros([2, 1]))  # traced: converted, or not
  expected = stats.norm.logpdf(0.) + stats.norm.logpdf(0.5)
  np.testing.assert_allclose(log_prob, [expected, expected], rtol=1e-5)
