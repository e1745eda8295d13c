"""Support checks of observed values (edward_lite.checks.support), at make_target."""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import edward_lite as ed  # noqa: E402
from edward_lite.checks.support import check_observed_support  # noqa: E402

tfd = tfp.distributions

X = np.random.RandomState(0).randn(20, 3).astype(np.float32)


def logistic(x):
  w = ed.Normal(tf.zeros(3), 1., name="w")
  return ed.Bernoulli(logits=tf.linalg.matvec(x, w), name="labels")


def poisson_regression(x):
  w = ed.Normal(tf.zeros(3), 1., name="w")
  return ed.Poisson(rate=tf.exp(tf.linalg.matvec(x, w)), name="counts")


def dirichlet_model():
  alpha = ed.Gamma(2. * tf.ones(3), 1., name="alpha")
  return ed.Dirichlet(alpha, sample_shape=4, name="p")


def categorical_model():
  logits = ed.Normal(tf.zeros(3), 1., name="logits")
  return ed.Categorical(logits=logits, sample_shape=5, name="label")


def half_normal_model():
  scale = ed.Gamma(2., 1., name="scale")
  return ed.HalfNormal(scale, sample_shape=4, name="size")


def outside(name, kind, expected):
  return (rf"^Observed value of random variable '{name}' is outside the support of its "
          rf"{kind} distribution, which expects {expected}")


# ---------------------------------------------------------------------------
# Invalid data: one ValueError from make_target, before any compiled work.


def test_bernoulli_labels_one_two_rejected_by_make_target():
  labels = np.where(X[:, 0] > 0, 2, 1)
  with pytest.raises(ValueError, match=outside("labels", "Bernoulli", "0 or 1") +
                     rf": {int((labels == 2).sum())} of 20 values are not, the first at index "
                     r"\[\d+\] is 2\.$"):
    ed.make_target(logistic, X, observed={"labels": labels})


def test_bernoulli_labels_one_two_rejected_by_mcmc_sample_without_compiling():
  labels = np.where(X[:, 0] > 0, 2, 1)
  start = time.perf_counter()
  with pytest.raises(ValueError, match=outside("labels", "Bernoulli", "0 or 1")):
    ed.mcmc.sample(logistic, X, observed={"labels": labels}, kernel="hmc", chains=2,
                   warmup=10, draws=10, progress=False)
  assert time.perf_counter() - start < 1.5  # nothing was compiled


def zero_inflated_counts(x):
  """A zero-inflated negative binomial as a Stan user writes it (log_mix of
  a point mass at zero and a count distribution)."""
  w = ed.Normal(tf.zeros(3), 1., name="w")
  theta = ed.Beta(1., 1., name="theta")
  weights = tf.stack([theta * tf.ones(20), (1. - theta) * tf.ones(20)], -1)
  counts = tfd.NegativeBinomial.experimental_from_mean_dispersion(
      tf.exp(tf.linalg.matvec(x, w)), 0.5)
  return ed.Mixture(cat=tfd.Categorical(probs=weights),
                    components=[tfd.Deterministic(tf.zeros(20)), counts], name="counts")


def inflated_poisson(x):
  """The same written with ``ed.Inflated``, whose ``Deterministic`` holds
  its loc broadcast to the (latent) inflation probabilities' shape: a
  constant, not a function of their values, so checked at the trace (it
  waited for the initial states' search, 5-9 s, when it counted as random)."""
  b = ed.Normal(0., 1., name="b")
  pi = ed.Beta(1., 1., name="pi")
  rate = tf.exp(b * x[:, 0])
  return ed.Inflated(tfd.Poisson(rate=rate), inflated_loc_probs=pi * tf.ones_like(rate),
                     name="counts")


@pytest.mark.parametrize("model, kind, counts", [
    (zero_inflated_counts, "Mixture", "NegativeBinomial"),
    (inflated_poisson, "Inflated", "Poisson")], ids=["mixture", "inflated"])
def test_a_mixtures_support_is_its_components_union(model, kind, counts):
  """Zeros and counts are valid; a value outside both components is refused
  before any compile."""
  values = np.arange(20, dtype=np.float32) % 4
  ed.make_target(model, X, observed={"counts": values})
  values[[5, 9]] = [-1., 2.5]
  start = time.perf_counter()
  with pytest.raises(ValueError, match=outside(
      "counts", kind, r"a value of one of its components \(Deterministic: its loc \(0\); "
      rf"{counts}: non-negative integers\)") +
                     r": 2 of 20 values are not, the first at index \[5\] is -1\.$"):
    ed.mcmc.sample(model, X, observed={"counts": values}, chains=2, warmup=10, draws=10,
                   progress=False)
  assert time.perf_counter() - start < 1.5  # refused before any compile


def test_a_mixture_is_checked_inside_a_wrapper():
  mixture = tfd.Mixture(cat=tfd.Categorical(probs=tf.fill([3, 2], 0.5)),
                        components=[tfd.Deterministic(tf.zeros(3)), tfd.Poisson(tf.ones(3))])
  with pytest.raises(ValueError, match=outside("y", "Independent", "a value of one of its") +
                     r".*: 1 of 3 values are not, the first at index \[1\] is -2\.$"):
    check_observed_support("y", tfd.Independent(mixture, 1), np.array([0., -2., 3.], np.float32))


def test_a_mixture_with_a_component_that_takes_everything_is_not_checked():
  mixture = tfd.Mixture(cat=tfd.Categorical(probs=[0.5, 0.5]),
                        components=[tfd.Poisson(3.), tfd.Normal(0., 1.)])
  check_observed_support("y", mixture, np.array([-1.5, 2.], np.float32))  # the normal's


@pytest.mark.parametrize("bad, first", [(1.5, "1.5"), (-2., "-2")], ids=["fractional", "negative"])
def test_poisson_counts_must_be_non_negative_integers(bad, first):
  counts = np.arange(20, dtype=np.float32) % 4
  counts[[3, 7]] = bad
  with pytest.raises(ValueError, match=outside("counts", "Poisson", "non-negative integers") +
                     rf": 2 of 20 values are not, the first at index \[3\] is {first}\.$"):
    ed.make_target(poisson_regression, X, observed={"counts": counts})


def test_dirichlet_value_off_the_simplex_rejected():
  p = np.full([4, 3], 1. / 3.)
  p[2] = [0.2, 0.3, 0.6]
  with pytest.raises(ValueError, match=outside("p", "Dirichlet", "vectors on the probability "
                                               "simplex") +
                     r".*: 1 of 4 vectors are not, the first at index \[2\] is \[0\.2, 0\.3, 0\.6\]"):
    ed.make_target(dirichlet_model, observed={"p": p})


@pytest.mark.parametrize("bad", [3, -1], ids=["too_large", "negative"])
def test_categorical_label_out_of_range_rejected(bad):
  labels = np.array([0, 1, bad, 2, 1])
  with pytest.raises(ValueError, match=outside("label", "Categorical",
                                               r"integer labels from 0 to 2 \(it has 3 classes\)") +
                     rf": 1 of 5 values are not, the first at index \[2\] is {bad}\.$"):
    ed.make_target(categorical_model, observed={"label": labels})


def test_negative_half_normal_observation_rejected():
  with pytest.raises(ValueError, match=outside("size", "HalfNormal", "non-negative values") +
                     r".*1 of 4 values are not, the first at index \[1\] is -0\.5\.$"):
    ed.make_target(half_normal_model, observed={"size": [1., -0.5, 0., 2.]})


# ---------------------------------------------------------------------------
# Valid data of each kind passes.


def test_valid_data_passes():
  labels = (X[:, 0] > 0).astype(np.int32)
  ed.make_target(logistic, X, observed={"labels": labels})
  ed.make_target(logistic, X, observed={"labels": X[:, 0] > 0})  # NumPy booleans
  ed.make_target(logistic, X, observed={"labels": labels.astype(np.float64)})  # 0./1.
  counts = np.random.RandomState(1).poisson(2., 20)
  ed.make_target(poisson_regression, X, observed={"counts": counts.astype(np.float32)})
  ed.make_target(poisson_regression, X, observed={"counts": counts})  # integers
  p = np.random.RandomState(2).dirichlet(np.ones(3), 4)  # float64, sums to 1
  ed.make_target(dirichlet_model, observed={"p": p})
  ed.make_target(categorical_model, observed={"label": [0, 1, 2, 2, 0]})
  ed.make_target(half_normal_model, observed={"size": [1., 0., 0.25, 2.]})  # 0 included


def test_valid_boolean_bernoulli_passes():
  def model():
    p = ed.Beta(1., 1., name="p")
    return ed.Bernoulli(probs=p, dtype=tf.bool, sample_shape=4, name="b")

  ed.make_target(model, observed={"b": [True, False, True, True]})


def test_large_bernoulli_observation_checked_quickly():
  n = 100_000
  labels = tf.constant((np.random.RandomState(3).rand(n, 54) < 0.5).astype(np.int32))
  dist = tfd.Bernoulli(logits=tf.zeros([n, 54]))
  check_observed_support("y", dist, labels)  # warm up
  start = time.perf_counter()
  check_observed_support("y", dist, labels)
  assert time.perf_counter() - start < 2.0
  x = np.random.RandomState(4).randn(n, 3).astype(np.float32)
  rows = (x[:, 0] > 0).astype(np.int32)
  ed.make_target(logistic, x, observed={"labels": rows})
  start = time.perf_counter()
  ed.make_target(logistic, x, observed={"labels": rows})
  assert time.perf_counter() - start < 3.0
  rows[-1] = 2
  with pytest.raises(ValueError, match=r"1 of 100000 values are not, the first at index "
                                       r"\[99999\] is 2"):
    ed.make_target(logistic, x, observed={"labels": rows})


# ---------------------------------------------------------------------------
# Bounds given by data are checked; bounds drawn from latents are not.


def test_binomial_total_count_from_data_is_checked():
  def model(n):
    logits = ed.Normal(0., 1., name="logits")
    return ed.Binomial(total_count=n, logits=logits, name="k")

  n = np.array([5., 10., 3.], np.float32)
  ed.make_target(model, n, observed={"k": [5., 0., 3.]})
  with pytest.raises(ValueError, match=outside("k", "Binomial", "integers from 0 to "
                                               r"total_count \(given per element\)") +
                     r": 1 of 3 values are not, the first at index \[2\] is 4\.$"):
    ed.make_target(model, n, observed={"k": [5., 0., 4.]})


def test_bounds_computed_from_latents_are_not_checked():
  def uniform_model():
    theta = ed.Gamma(1., 10., name="theta")  # prior draws around 0.1
    return ed.Uniform(0., theta, sample_shape=3, name="y")

  def binomial_model():
    n = ed.Uniform(20., 30., name="n")  # prior draws 20..30: total_count is random
    return ed.Binomial(total_count=n, probs=0.5, sample_shape=3, name="k")

  ed.make_target(uniform_model, observed={"y": [4., 5., 0.5]})
  ed.make_target(binomial_model, observed={"k": [29., 29., 25.]})
  with pytest.raises(ValueError, match=outside("k", "Binomial", "non-negative integers")):
    ed.make_target(binomial_model, observed={"k": [29., 1.5, 25.]})  # structure still checked


def test_fixed_bounds_with_latent_location_are_checked():
  def model():
    loc = ed.Normal(0., 1., name="loc")
    return ed.TruncatedNormal(loc, 1., low=0., high=10., sample_shape=3, name="y")

  ed.make_target(model, observed={"y": [1., 9., 0.5]})
  with pytest.raises(ValueError, match=outside("y", "TruncatedNormal", r"values in \[0, 10\]")):
    ed.make_target(model, observed={"y": [1., 11., 0.5]})


# ---------------------------------------------------------------------------
# The check itself, distribution by distribution.

CASES = {
    "bernoulli_negative": (tfd.Bernoulli(logits=0.), [0, -1], "0 or 1"),
    "binomial_over": (tfd.Binomial(total_count=5., probs=.5), [1., 6.], r"integers from 0 to "
                      r"total_count \(5\)"),
    "negative_binomial_fraction": (tfd.NegativeBinomial(3., probs=.5), [1., 0.5],
                                   "non-negative integers"),
    "geometric_negative": (tfd.Geometric(probs=.5), [-1., 2.], "non-negative integers"),
    "zipf_zero": (tfd.Zipf(2.), [1, 0], "positive integers"),
    "one_hot_two_ones": (tfd.OneHotCategorical(logits=tf.zeros(3)), [[0, 1, 0], [1, 1, 0]],
                         "one-hot vectors"),
    "multinomial_sum": (tfd.Multinomial(4., logits=tf.zeros(3)), [[1., 2., 1.], [1., 2., 2.]],
                        r"vectors of non-negative integer counts summing to total_count \(4\)"),
    "beta_above_one": (tfd.Beta(2., 2.), [0.5, 1.5], r"values in \[0, 1\]"),
    "beta_at_one": (tfd.Beta(2., 2.), [0.5, 1.], r"values in \[0, 1\]"),  # density 0 there
    "gamma_negative": (tfd.Gamma(2., 1.), [1., -1.], "non-negative values"),
    "gamma_zero": (tfd.Gamma(2., 1.), [1., 0.], "non-negative values"),  # density 0 there
    "exponential_negative": (tfd.Exponential(1.), [1., -1e-3], "non-negative values"),
    "lognormal_zero": (tfd.LogNormal(0., 1.), [1., 0.], "non-negative values"),
    "uniform_outside": (tfd.Uniform(0., 3.), [0.5, 3.5], r"values in \[0, 3\]"),
    "pareto_below_scale": (tfd.Pareto(2., 1.), [2., 0.5], "values of at least 1"),
    "dirichlet_negative": (tfd.Dirichlet(tf.ones(3)), [[1.2, -0.2, 0.]], "vectors on the probability simplex"),
    "lkj_diagonal": (tfd.LKJ(3, 2.), [[[1., .5, 0.], [.5, 1., 0.], [0., 0., 2.]]],
                     "correlation matrices"),
    "lkj_not_positive_definite": (tfd.LKJ(3, 2.), [[[1., .9, -.9], [.9, 1., .9], [-.9, .9, 1.]]],
                                  "correlation matrices"),
    "wishart_not_positive_definite": (tfd.WishartTriL(4., tf.eye(2)),
                                      [[[1., 2.], [2., 1.]], [[1., 0.], [0., 1.]]],
                                      "symmetric positive-definite matrices"),
    "wishart_not_symmetric": (tfd.WishartTriL(4., tf.eye(2)), [[[1., .5], [0., 1.]]],
                              "symmetric positive-definite matrices"),
    "independent_half_normal": (tfd.Independent(tfd.HalfNormal(tf.ones(3)), 1),
                                [[1., 2., -3.]], "non-negative values"),
    "sample_poisson": (tfd.Sample(tfd.Poisson(2.), 3), [[1., 2., 3.5]], "non-negative integers"),
    "log_prob_mixture_of_gammas": (
        tfd.MixtureSameFamily(tfd.Categorical(logits=[0., 0.]), tfd.Gamma([2., 1.], 1.)),
        [5., -1.], r"values of non-zero probability \(log_prob is -inf or NaN\)"),
    "ordered_logistic_above": (tfd.OrderedLogistic(cutpoints=[-1., 0., 1.], loc=0.), [3, 4],
                               r"integer categories from 0 to 3 \(it has 3 cutpoints\)"),
    "stopping_ratio_negative": (tfd.StoppingRatioLogistic(cutpoints=[-1., 1.], loc=0.), [0, -1],
                                r"integer categories from 0 to 2"),
    "log_prob_finite_discrete": (tfd.FiniteDiscrete([1., 2., 4.], probs=[.2, .3, .5]), [1., 3.],
                                 "values of non-zero probability"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_rejects(case):
  dist, value, expected = CASES[case]
  value = tf.constant(value, dtype=dist.dtype)
  with pytest.raises(ValueError, match=outside("v", type(dist).__name__, expected) +
                     r".*: 1 of \d+ \w+ are not, the first.*\.$"):
    check_observed_support("v", dist, value)


VALID = {
    "bernoulli": (tfd.Bernoulli(logits=0.), [0, 1, 1]),
    "binomial": (tfd.Binomial(total_count=5., probs=.5), [0., 5., 3.]),
    "categorical": (tfd.Categorical(logits=tf.zeros(3)), [0, 2, 1]),
    "one_hot": (tfd.OneHotCategorical(logits=tf.zeros(3)), [[0, 1, 0], [1, 0, 0]]),
    "multinomial": (tfd.Multinomial(4., logits=tf.zeros(3)), [[1., 2., 1.], [0., 0., 4.]]),
    "beta": (tfd.Beta(2., 2.), [0.5, 1e-6]),
    "beta_at_zero_with_finite_density": (tfd.Beta(1., 2.), [0., 0.5]),
    "exponential_at_zero": (tfd.Exponential(1.), [0., 2.]),
    "half_normal_at_zero": (tfd.HalfNormal(1.), [0., 2.]),
    "uniform_at_low": (tfd.Uniform(0., 3.), [0., 2.99]),
    "dirichlet_float32_rounding": (tfd.Dirichlet(tf.ones(3)), [[0.1, 0.2, 0.7000001]]),
    "dirichlet_zero_with_unit_concentration": (tfd.Dirichlet(tf.ones(3)), [[0., 0.5, 0.5]]),
    "lkj": (tfd.LKJ(3, 2.), [np.eye(3)]),
    "wishart": (tfd.WishartTriL(4., tf.eye(2)), [[[2., .5], [.5, 1.]]]),
    "normal_anything": (tfd.Normal(0., 1.), [-1e30, 1e30]),
    "mixture_of_normals": (tfd.MixtureSameFamily(tfd.Categorical(logits=[0., 0.]),
                                                 tfd.Normal([0., 1.], 1.)), [50., -100.]),
    "poisson_float_integers": (tfd.Poisson(3.), [0., 1., 17.]),
    "ordered_logistic": (tfd.OrderedLogistic(cutpoints=[-1., 0., 1.], loc=0.), [0, 3, 2]),
}


def test_ordinal_category_checked_when_the_cutpoints_are_latent():
  """The number of categories is the cutpoints' static length, known before
  any of their values is: a rating of 5 on a 0-4 scale is named at once."""
  def ordinal():
    c0 = ed.Normal(-1., 1., name="c0")
    gaps = ed.HalfNormal(1., sample_shape=3, name="gaps")
    cut = tf.concat([c0[None], c0 + tf.cumsum(gaps)], 0)
    return ed.OrderedLogistic(cutpoints=cut, loc=0., sample_shape=3, name="rating")
  ed.make_target(ordinal, observed={"rating": np.array([0, 4, 2])})
  with pytest.raises(ValueError, match=outside("rating", "OrderedLogistic",
                                               "integer categories from 0 to 4") +
                     r".*the first at index \[1\] is 5"):
    ed.make_target(ordinal, observed={"rating": np.array([0, 5, 2])})


@pytest.mark.parametrize("case", sorted(VALID))
def test_check_accepts(case):
  dist, value = VALID[case]
  check_observed_support("v", dist, tf.constant(value, dtype=dist.dtype))


def test_symbolic_values_are_not_checked():
  @tf.function
  def f(value):
    check_observed_support("v", tfd.Bernoulli(logits=0.), value)
    return value

  f(tf.constant([2, 3]))  # no error: the value is symbolic inside


def test_what_a_check_cannot_read_is_skipped_not_raised():
  from edward_lite.checks.continuous_support import support_text  # pylint: disable=import-outside-toplevel
  from edward_lite.model.data import check_finite  # pylint: disable=import-outside-toplevel

  check_finite("Argument 'x'", [[1., float("nan")], [2.]])  # ragged: NumPy cannot read it

  @tf.function
  def words(low):  # symbolic bounds have no number to name
    return support_text(tfp.bijectors.Sigmoid(low=low, high=low + 1.))

  assert words(tf.constant(0.)) == "values between its low and high"


def test_random_parameters_skip_parameter_bounds():
  dist = tfd.Uniform(0., 1.)
  with pytest.raises(ValueError):
    check_observed_support("v", dist, tf.constant([2.]))
  check_observed_support("v", dist, tf.constant([2.]), random=lambda fn: True)
  binomial = tfd.Binomial(total_count=5., probs=.5)
  with pytest.raises(ValueError, match="non-negative integers"):
    check_observed_support("v", binomial, tf.constant([6., 1.5]), random=lambda fn: True)
  check_observed_support("v", binomial, tf.constant([6., 1.]), random=lambda fn: True)


def dirichlet_literal_model():
  alpha = ed.Gamma([2., 2., 2.], 1., name="alpha")  # Python floats follow dtype=
  return ed.Dirichlet(alpha, sample_shape=4, name="p")


def test_float64_model_is_checked():
  ed.make_target(dirichlet_literal_model, observed={"p": np.full([4, 3], 1. / 3.)}, dtype=tf.float64)
  with pytest.raises(ValueError, match=outside("size", "HalfNormal", "non-negative values")):
    ed.make_target(half_normal_model, observed={"size": [1., -0.5, 0., 2.]}, dtype=tf.float64)
  p = np.full([4, 3], 1. / 3.)
  p[0] = [0.3334, 0.3334, 0.3333]  # off the simplex by 1e-4: fine in float32, not in float64
  ed.make_target(dirichlet_literal_model, observed={"p": p})
  with pytest.raises(ValueError, match=outside("p", "Dirichlet", "vectors on the probability")):
    ed.make_target(dirichlet_literal_model, observed={"p": p}, dtype=tf.float64)
