"""Stan's constrained parameter types as flat priors (issue 13, item 8):
``ed.Flat(support=...)``, each against a known answer.

The density is 1 with respect to Lebesgue measure on the type's free
coordinates, as in Stan; the known answers tell that convention from TFP's
(a flat ``corr_matrix`` with ``CholeskyOuterProduct``'s Jacobian is not
LKJ(1); a flat ``cov_matrix`` under a Gaussian likelihood is Inverse-Wishart
only with the Jacobian to the p(p+1)/2 free entries).
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import edward_lite as ed
from edward_lite.language.bijectors import support_bijector
from edward_lite.language.terms import ImproperUniform

tfd = tfp.distributions

VECTORS = ("ordered", "positive_ordered", "simplex")
MATRICES = ("cholesky_factor_corr", "corr_matrix", "cholesky_factor_cov", "cov_matrix")


def free_coordinates(support, k):
  """Stan's free coordinates of a value of the type."""
  if support == "simplex":
    return lambda x: x[:-1]
  if support in VECTORS:
    return lambda x: x
  below = np.tril_indices(k, 0 if support in ("cholesky_factor_cov", "cov_matrix") else -1)
  return lambda x: tf.gather_nd(x, np.stack(below, 1))


def mcse_z(draws, expected):
  """(mean - expected) / MCSE of the mean, per entry (0 where both vanish)."""
  mcse = np.asarray(ed.diagnostics.convergence(draws)["mcse_mean"])
  error = draws.mean(axis=(0, 1)) - expected
  return np.where(mcse > 0, error / np.where(mcse > 0, mcse, 1.), np.abs(error) * 1e9)


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("support", VECTORS + MATRICES)
def test_log_det_jacobian_is_the_one_to_stans_free_coordinates(support, k):
  shape = (k,) if support in VECTORS else (k, k)
  bijector = support_bijector(ImproperUniform(shape=shape, support=support, dtype=tf.float64))
  size = int(np.prod(bijector.inverse_event_shape(shape)))
  u = tf.constant(np.random.default_rng(k).normal(size=size))
  with tf.GradientTape() as tape:
    tape.watch(u)
    x = free_coordinates(support, k)(bijector.forward(u))
  jacobian = tape.jacobian(x, u).numpy()
  assert jacobian.shape == (size, size)
  np.testing.assert_allclose(bijector.forward_log_det_jacobian(u, event_ndims=1),
                             np.linalg.slogdet(jacobian)[1], atol=1e-10)


def test_latents_lie_in_the_support_with_batches_of_types():
  def model():
    ed.Flat(support="ordered", shape=(2, 3), name="o")
    ed.Flat(support="positive_ordered", shape=3, name="po")
    ed.Flat(support="simplex", shape=(2, 4), name="p")
    ed.Flat(support="cholesky_corr", shape=(3, 3), name="lc")
    ed.Flat(support="corr", shape=(2, 3, 3), name="om")
    ed.Flat(support="cholesky_cov", shape=(3, 3), name="l")
    ed.Flat(support="positive_definite", shape=(3, 3), name="s")
  target = ed.make_target(model)
  sizes = dict(zip(target.names, (6, 3, 6, 3, 6, 6, 6)))
  assert {n: i.unconstrained_shape.num_elements() for n, i in target.latents.items()} == sizes
  u = tf.constant(np.random.default_rng(0).uniform(-2, 2, (5, sum(sizes.values()))), tf.float32)
  x = {n: v.numpy() for n, v in target.constrain(target.unflatten(u)).items()}
  assert x["o"].shape == (5, 2, 3) and np.all(np.diff(x["o"], axis=-1) > 0)
  assert np.all(x["po"] > 0) and np.all(np.diff(x["po"], axis=-1) > 0)
  assert x["p"].shape == (5, 2, 4) and np.all(x["p"] > 0)
  np.testing.assert_allclose(x["p"].sum(-1), 1., rtol=1e-6)
  for name in ("lc", "l"):
    assert np.all(np.triu(x[name], 1) == 0) and np.all(np.diagonal(x[name], 0, -2, -1) > 0)
  np.testing.assert_allclose(np.sum(x["lc"]**2, -1), 1., rtol=1e-6)
  assert x["om"].shape == (5, 2, 3, 3)
  for name in ("om", "s"):
    np.testing.assert_allclose(x[name], np.swapaxes(x[name], -1, -2), rtol=1e-5, atol=1e-6)
    assert np.all(np.linalg.eigvalsh(x[name]) > 0)
  np.testing.assert_allclose(np.diagonal(x["om"], 0, -2, -1), 1., rtol=1e-6)


COUNTS = np.array([2., 5., 0.], np.float32)
Y = np.random.default_rng(0).multivariate_normal([0., 0.], [[1., .5], [.5, 2.]], size=20)
NU = 4.


def every_type(y):
  """One model with a flat prior of each type, each with its known answer
  (one compilation for all; the blocks are independent)."""
  o = ed.Flat(support="ordered", shape=3, name="o")
  ed.Factor(tfd.Normal(0., 1.).log_prob(o), name="normal")
  po = ed.Flat(support="positive_ordered", shape=3, name="po")
  ed.Factor(tfd.Exponential(1.).log_prob(po), name="exponential")
  p = ed.Flat(support="simplex", shape=3, name="p")
  ed.Multinomial(total_count=COUNTS.sum(), probs=p, name="counts")
  ed.Flat(support="cholesky_factor_corr", shape=(3, 3), name="lc")
  ed.Flat(support="corr_matrix", shape=(3, 3), name="omega")
  s = ed.Flat(support="cov_matrix", shape=(2, 2), name="s")
  ed.Factor(tfd.MultivariateNormalTriL(scale_tril=tf.linalg.cholesky(s)).log_prob(y),
            name="gaussian")
  l = ed.Flat(support="cholesky_factor_cov", shape=(2, 2), name="l")
  ed.Factor((NU - 1) * tf.math.log(l[0, 0]) + (NU - 2) * tf.math.log(l[1, 1])
            - 0.5 * tf.reduce_sum(l**2), name="bartlett")


@pytest.fixture(scope="module")
def draws():
  post = ed.mcmc.sample(every_type, Y, observed={"counts": COUNTS}, chains=4, warmup=400,
                        draws=1000, seed=1, progress=False)
  assert post.stuck_chains() == []
  return post.draws


def assert_means(checks):
  for name, (x, mean) in checks.items():
    z = mcse_z(x, np.array(mean))
    assert np.all(np.abs(z) < 4), (name, z)


@pytest.mark.long  # the default run keeps the other constrained types
def test_vector_types_give_order_statistics_and_the_dirichlet(draws):
  """Flat ordered / positive_ordered times iid N(0, 1) / Exponential(1)
  densities: the order statistics of 3 draws, means -+3/(2 sqrt(pi)), 0 and
  1/3, 1/3 + 1/2, 1/3 + 1/2 + 1; a flat simplex with multinomial counts c:
  Dirichlet(1 + c)."""
  m = 3 / (2 * np.sqrt(np.pi))
  assert_means({"o": (draws["o"], [-m, 0., m]),
                "po": (draws["po"], [1 / 3, 1 / 3 + 1 / 2, 11 / 6]),
                "p": (draws["p"], (1 + COUNTS) / (1 + COUNTS).sum())})


def test_correlation_types_are_flat_on_the_entries_below_the_diagonal(draws):
  """A flat cholesky_factor_corr (K = 3): L21 ~ U(-1, 1) and (L31, L32)
  uniform on the unit disc, so E L21^2 = 1/3, E L31^2 = E L32^2 = 1/4.  A
  flat corr_matrix is LKJ(1): each correlation is 2 Beta(K/2, K/2) - 1,
  E r^2 = 1/(K + 1) (TFP's CholeskyOuterProduct Jacobian alone would not
  give it)."""
  below = np.tril_indices(3, -1)
  lc, omega = (draws[n][..., below[0], below[1]] for n in ("lc", "omega"))
  assert_means({"lc": (lc, 0.), "lc^2": (lc**2, [1 / 3, 1 / 4, 1 / 4]),
                "omega": (omega, 0.), "omega^2": (omega**2, 1 / 4)})
  np.testing.assert_allclose(np.diagonal(draws["omega"], 0, -2, -1), 1., rtol=1e-5)


def test_covariance_types_give_inverse_wishart_and_bartlett(draws):
  """A flat cov_matrix with n iid N(0, S) vectors: p(S | y) ~ |S|^(-n/2)
  exp(-tr(S^-1 A)/2), A = sum y y', with respect to Lebesgue measure on the
  p(p + 1)/2 free entries: Inverse-Wishart(n - p - 1, A), mean
  A / (n - 2p - 2).  A flat cholesky_factor_cov L times Bartlett's density
  (L11, L22 chi with nu, nu - 1 degrees of freedom, L21 ~ N(0, 1), with
  respect to Lebesgue measure on L's entries): E L11^2 = nu,
  E L22^2 = nu - 1, E L21^2 = 1."""
  n, p = Y.shape
  assert_means({"s": (draws["s"], Y.T @ Y / (n - 2 * p - 2)),
                "l^2": (draws["l"]**2, [[NU, 0.], [1., NU - 1]])})


@pytest.mark.parametrize("support, shape, needs", [
    ("simplex", (), "vector shape"),
    ("ordered", (), "vector shape"),
    ("cov_matrix", 3, "square matrix shape"),
    ("corr_matrix", (2, 3), "square matrix shape"),
    ("cholesky_factor_corr", (), "square matrix shape"),
])
def test_a_shape_that_does_not_fit_the_support_names_the_variable(support, shape, needs):
  def model():
    return ed.Flat(support=support, shape=shape, name="theta")
  with pytest.raises(ValueError, match=f"'theta': support='{support}' needs a {needs}"):
    ed.make_target(model)


def test_unknown_supports_and_bounds_on_a_constrained_type_are_refused():
  with pytest.raises(ValueError, match="'theta': unknown support='unit_vector'"):
    ed.Flat(support="unit_vector", shape=3, name="theta")
  with pytest.raises(ValueError, match="'theta': low= and high= bound support='real' only"):
    ed.Flat(low=0., support="ordered", shape=3, name="theta")


def test_prior_sampling_is_refused_naming_the_variable():
  def model():
    p = ed.Flat(support="simplex", shape=3, name="p")
    return ed.Categorical(probs=p, name="z")
  target = ed.make_target(model, observed={"z": 1})
  with pytest.raises(NotImplementedError, match="'p' has an improper flat prior"):
    target.sample_prior(2, seed=0)
  with pytest.raises(NotImplementedError, match="'p' has an improper flat prior"):
    ed.Flat(support="cov_matrix", shape=(2, 2), name="p").distribution.sample()


@pytest.mark.parametrize("support, value, expected", [
    ("simplex", [0.5, 0.6, 0.1], "simplex"),
    ("simplex", [1.2, -0.2, 0.], "simplex"),
    ("ordered", [0., 2., 1.], "increasing vectors"),
    ("positive_ordered", [-1., 2., 3.], "positive increasing vectors"),
    ("cholesky_factor_corr", [[1., 0.], [0.6, 0.6]], ""),
    ("corr_matrix", [[2., 0.5], [0.5, 1.]], "correlation matrices"),
    ("corr_matrix", [[1., 0.5], [0.3, 1.]], "correlation matrices"),
    ("cholesky_factor_cov", [[1., 0.5], [0.3, 1.]], "lower-triangular matrices"),
    ("cov_matrix", [[1., 2.], [2., 1.]], "positive-definite"),
])
def test_an_observed_value_off_the_support_is_refused_naming_the_variable(support, value,
                                                                          expected):
  value = np.array(value, np.float32)

  def model():
    return ed.Flat(support=support, shape=value.shape, name="w")
  with pytest.raises(ValueError, match=f"random variable 'w' is outside the support.*{expected}"):
    ed.make_target(model, observed={"w": value})


def test_an_observed_value_in_the_support_is_accepted():
  values = {"simplex": [0.2, 0., 0.8], "ordered": [-1., 0., 3.],
            "positive_ordered": [0.5, 1., 2.],
            "cholesky_factor_corr": [[1., 0.], [0.6, 0.8]],
            "corr_matrix": [[1., 0.5], [0.5, 1.]],
            "cholesky_factor_cov": [[2., 0.], [0.3, 1.]],
            "cov_matrix": [[2., 0.5], [0.5, 1.]]}
  for support, value in values.items():
    value = np.array(value, np.float32)

    def model():
      ed.Normal(0., 1., name="mu")
      return ed.Flat(support=support, shape=value.shape, name="w")  # pylint: disable=cell-var-from-loop
    target = ed.make_target(model, observed={"w": value})
    assert target.names == ("mu",)
