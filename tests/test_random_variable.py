"""Tests of ed.RandomVariable and the generated random-variable constructors."""

import inspect
import math
import operator
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
import tf_keras  # noqa: E402

import edward_lite as ed  # noqa: E402

tfd = tfp.distributions

X = np.array([[1.5, -2.0, 0.25], [3.0, -0.5, 2.0]], np.float32)
Y = np.array([[0.5, -2.0, 4.0], [1.0, 2.0, -0.75]], np.float32)
I = np.array([5, 2, 7, 0], np.int32)
B = np.array([True, False, True, False])


def float_rv(value=X, name="x"):
  return ed.Normal(tf.zeros([3]), 1., sample_shape=2, value=value, name=name)


def int_rv(value=I, name="i"):
  return ed.Categorical(logits=tf.zeros(8), sample_shape=4, value=value, name=name)


def bool_rv(value=B, name="b"):
  return ed.Bernoulli(probs=0.5, dtype=tf.bool, sample_shape=4, value=value, name=name)


# ---------------------------------------------------------------------------
# Construction and properties.


def test_wraps_distribution_and_properties():
  dist = tfd.Normal(loc=[0., 1., 2.], scale=1.)
  rv = ed.RandomVariable(dist, sample_shape=(4,), value=np.ones([4, 3], np.float32),
                         name="z")
  assert rv.distribution is dist
  assert rv.sample_shape == tf.TensorShape([4])
  assert isinstance(rv.sample_shape, tf.TensorShape)
  assert rv.shape == tf.TensorShape([4, 3])
  assert rv.get_shape() == tf.TensorShape([4, 3])
  assert rv.dtype == tf.float32
  assert rv.name == "z"
  np.testing.assert_array_equal(rv.numpy(), np.ones([4, 3], np.float32))
  assert isinstance(rv.numpy(), np.ndarray)


def test_default_name_is_distribution_name():
  rv = ed.RandomVariable(tfd.Normal(0., 1., name="my_normal"))
  assert rv.name == "my_normal"


def test_non_distribution_rejected():
  with pytest.raises(TypeError, match="Distribution"):
    ed.RandomVariable(tf.constant(1.))


def test_value_sampled_with_sample_shape_when_not_given():
  tf.random.set_seed(7)
  rv = ed.Normal(loc=[0., 10.], scale=1., sample_shape=(3, 4))
  tf.random.set_seed(7)
  expected = tfd.Normal(loc=[0., 10.], scale=1.).sample((3, 4))
  assert rv.sample_shape == tf.TensorShape([3, 4])
  assert rv.shape == tf.TensorShape([3, 4, 2])
  np.testing.assert_array_equal(rv.numpy(), expected.numpy())
  # The two batch members really come from their own locations.
  assert np.all(np.abs(rv.numpy()[..., 1] - 10.) < 6.)
  assert np.all(np.abs(rv.numpy()[..., 0]) < 6.)


def test_int_sample_shape():
  tf.random.set_seed(1)
  rv = ed.Normal(0., 1., sample_shape=5)
  assert rv.sample_shape == tf.TensorShape([5])
  assert rv.shape == tf.TensorShape([5])


def test_given_value_used():
  value = tf.constant([[1., 2., 3.], [4., 5., 6.]])
  rv = ed.Normal(tf.zeros(3), 1., sample_shape=2, value=value, name="v")
  np.testing.assert_array_equal(rv.numpy(), value.numpy())
  np.testing.assert_array_equal(rv.value.numpy(), value.numpy())
  assert rv.value.dtype == tf.float32
  # Given values from other sources.
  rv2 = ed.Normal(0., 1., sample_shape=3, value=[1., 2., 3.])
  np.testing.assert_array_equal(rv2.numpy(), [1., 2., 3.])
  rv3 = ed.Normal(0., 1., value=2.5)
  assert rv3.numpy() == 2.5
  rv4 = ed.Normal(0., 1., value=rv3)  # a random variable's value
  assert rv4.numpy() == 2.5


def test_numpy_float64_value_cast_to_float32():
  value = np.array([0.1, 0.2, 0.3], np.float64)
  rv = ed.Normal(0., 1., sample_shape=3, value=value, name="n")
  assert rv.dtype == tf.float32
  np.testing.assert_allclose(rv.numpy(), value.astype(np.float32))


def test_integral_floats_accepted_for_bernoulli():
  rv = ed.Bernoulli(probs=0.3, sample_shape=3, value=np.array([0., 1., 1.]), name="b")
  assert rv.dtype == tf.int32
  np.testing.assert_array_equal(rv.numpy(), [0, 1, 1])
  rv2 = ed.Bernoulli(probs=0.3, sample_shape=2, value=[1.0, 0.0], name="b2")
  np.testing.assert_array_equal(rv2.numpy(), [1, 0])


# ---------------------------------------------------------------------------
# Value checks.


@pytest.mark.parametrize("value", [
    tf.zeros([3]),
    np.zeros([3], np.float32),
    [0., 0., 0.],
], ids=["tensor", "numpy", "list"])
def test_wrong_shape_raises_value_error_naming_variable(value):
  with pytest.raises(ValueError, match=r"'bad_shape'.*shape \[3\].*expected \[2\]"):
    ed.Normal(0., 1., sample_shape=2, value=value, name="bad_shape")


def test_wrong_shape_for_batch_and_event():
  with pytest.raises(ValueError, match="'mvn'"):
    ed.MultivariateNormalDiag(loc=tf.zeros([2, 3]), sample_shape=4,
                              value=np.zeros([4, 3, 2], np.float32), name="mvn")


@pytest.mark.parametrize("make", [
    lambda v: ed.Categorical(logits=[0., 0.], sample_shape=2, value=v, name="cat"),
    lambda v: ed.Bernoulli(probs=0.5, sample_shape=2, value=v, name="cat"),
], ids=["Categorical", "Bernoulli"])
def test_float_tensor_for_int_distribution_raises_type_error(make):
  with pytest.raises(TypeError, match=r"'cat'.*float32.*int32"):
    make(tf.constant([1., 0.]))


def test_float64_tensor_for_float32_normal_raises_type_error():
  with pytest.raises(TypeError, match=r"'n64'.*float64.*float32"):
    ed.Normal(0., 1., sample_shape=2, value=tf.constant([1., 2.], tf.float64), name="n64")


def test_non_integral_numpy_floats_for_bernoulli_raise_type_error():
  with pytest.raises(TypeError, match="'bern'"):
    ed.Bernoulli(probs=0.5, sample_shape=3, value=np.array([0., 0.5, 1.]), name="bern")
  with pytest.raises(TypeError, match="'bern'"):
    ed.Bernoulli(probs=0.5, sample_shape=2, value=np.array([np.nan, 1.]), name="bern")


@pytest.mark.parametrize("value", ["a", tf.constant("a"), np.array("a")],
                         ids=["str", "tf_string", "numpy_str"])
def test_string_value_rejected(value):
  with pytest.raises(TypeError, match="'s'"):
    ed.Normal(0., 1., value=value, name="s")


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("value", [np.array([2**32 + 1], np.int64), [1e10], [2**31]],
                         ids=["int64", "integral_float", "python_int"])
def test_out_of_range_integer_value_rejected(value):
  with pytest.raises(TypeError, match="'count'"):
    ed.Categorical(logits=[0., 0.], sample_shape=1, value=value, name="count")


# ---------------------------------------------------------------------------
# Operators.

BINARY_OPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "truediv": operator.truediv, "floordiv": operator.floordiv,
    "mod": operator.mod, "pow": operator.pow,
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
    "eq": operator.eq, "ne": operator.ne,
}


@pytest.mark.parametrize("op", list(BINARY_OPS.values()), ids=list(BINARY_OPS))
@pytest.mark.parametrize("side", ["rv_op_scalar", "scalar_op_rv", "rv_op_tensor",
                                  "tensor_op_rv", "rv_op_rv", "numpy_op_rv"])
def test_float_binary_operators(op, side):
  x = float_rv()
  y = ed.Normal(0., 1., sample_shape=(2, 3), value=Y, name="y")
  yv = Y
  if op is operator.pow:  # keep both bases positive
    x = float_rv(value=np.abs(X) + 0.5)
    yv = np.abs(Y) + 0.5
    y = ed.Normal(0., 1., sample_shape=(2, 3), value=yv, name="y")
  xv = x.numpy()
  if side == "rv_op_scalar":
    got, via_value, expected = op(x, 2.), op(x.value, 2.), op(xv, np.float32(2.))
  elif side == "scalar_op_rv":
    got, via_value, expected = op(2., x), op(2., x.value), op(np.float32(2.), xv)
  elif side == "rv_op_tensor":
    t = tf.constant(yv)
    got, via_value, expected = op(x, t), op(x.value, t), op(xv, yv)
  elif side == "tensor_op_rv":
    t = tf.constant(yv)
    got, via_value, expected = op(t, x), op(t, x.value), op(yv, xv)
  elif side == "rv_op_rv":
    got, via_value, expected = op(x, y), op(x.value, y.value), op(xv, yv)
  else:  # NumPy defers to the random variable's reflected operator.
    got, via_value, expected = op(yv, x), op(yv, x.value), op(yv, xv)
  assert not isinstance(got, ed.RandomVariable)
  assert tf.is_tensor(got)
  assert got.dtype == via_value.dtype
  np.testing.assert_array_equal(got.numpy(), via_value.numpy())
  np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)


def test_comparisons_have_ties_and_are_elementwise():
  x = float_rv()
  eq = x == tf.constant(Y)
  assert eq.dtype == tf.bool
  np.testing.assert_array_equal(eq.numpy(), X == Y)
  assert eq.numpy().sum() == 1  # one tie at [0, 1]
  np.testing.assert_array_equal((x != Y).numpy(), X != Y)
  np.testing.assert_array_equal((x >= Y).numpy(), X >= Y)


def test_legacy_div_methods():
  x = float_rv()
  np.testing.assert_allclose(x.__div__(2.).numpy(), X / 2.)
  np.testing.assert_allclose(x.__rdiv__(2.).numpy(), 2. / X, rtol=1e-6)


@pytest.mark.parametrize("op", [operator.and_, operator.or_, operator.xor],
                         ids=["and", "or", "xor"])
def test_bitwise_on_int(op):
  i = int_rv()
  j = ed.Categorical(logits=tf.zeros(8), sample_shape=4, value=[3, 3, 6, 1], name="j")
  np.testing.assert_array_equal(op(i, 3).numpy(), op(I, 3))
  np.testing.assert_array_equal(op(3, i).numpy(), op(3, I))
  np.testing.assert_array_equal(op(i, j).numpy(), op(I, np.array([3, 3, 6, 1])))
  np.testing.assert_array_equal(op(i, 3).numpy(), op(i.value, 3).numpy())
  np.testing.assert_array_equal(op(3, i).numpy(), op(3, i.value).numpy())


@pytest.mark.parametrize("op", [operator.and_, operator.or_, operator.xor],
                         ids=["and", "or", "xor"])
def test_bitwise_on_bool(op):
  b = bool_rv()
  other = np.array([True, True, False, False])
  np.testing.assert_array_equal(op(b, tf.constant(other)).numpy(), op(B, other))
  np.testing.assert_array_equal(op(True, b).numpy(), op(True, B))
  np.testing.assert_array_equal(op(b, False).numpy(), op(B, False))
  assert op(b, True).dtype == tf.bool


def test_int_arithmetic():
  i = int_rv()
  np.testing.assert_array_equal((i // 2).numpy(), I // 2)
  np.testing.assert_array_equal((i % 3).numpy(), I % 3)
  np.testing.assert_array_equal((10 - i).numpy(), 10 - I)
  assert (i * 2).dtype == tf.int32


def test_unary_operators():
  x = float_rv()
  np.testing.assert_array_equal((-x).numpy(), -X)
  np.testing.assert_array_equal(abs(x).numpy(), np.abs(X))
  np.testing.assert_array_equal((-x).numpy(), (-x.value).numpy())
  np.testing.assert_array_equal((~int_rv()).numpy(), ~I)
  np.testing.assert_array_equal((~bool_rv()).numpy(), ~B)
  assert not isinstance(-x, ed.RandomVariable)


@pytest.mark.parametrize("index", [
    0, (1, 2), (slice(None), 1), (Ellipsis, slice(None, None, -1)),
    (tf.newaxis, 1, slice(1, None)),
], ids=["int", "pair", "column", "reverse", "newaxis"])
def test_getitem(index):
  x = float_rv()
  got = x[index]
  assert tf.is_tensor(got)
  np.testing.assert_array_equal(np.asarray(got), X[index])
  np.testing.assert_array_equal(np.asarray(got), np.asarray(x.value[index]))


def test_getitem_slices_distribution_without_sample_shape():
  loc = np.array([[0., 1., 2.], [3., 4., 5.]], np.float32)
  x = ed.Normal(loc, 2., value=X, name="x")  # batch shape [2, 3], no sample_shape
  row = x[1]
  assert isinstance(row, ed.RandomVariable) and row.name == "x"
  np.testing.assert_array_equal(row.value.numpy(), X[1])
  np.testing.assert_array_equal(row.distribution.loc.numpy(), loc[1])
  np.testing.assert_allclose(row.distribution.log_prob(row).numpy(),
                             tfd.Normal(loc[1], 2.).log_prob(X[1]).numpy())
  # A Dirichlet cannot be sliced along its event: the value comes back.
  p = ed.Dirichlet([1., 2., 3.], name="p")
  first = p[..., 0]
  assert not isinstance(first, ed.RandomVariable)
  assert first.numpy() == p.numpy()[0]


def test_matmul_operator():
  x = float_rv()  # [2, 3]
  w = ed.Normal(0., 1., sample_shape=(3, 2), value=Y.T, name="w")  # [3, 2]
  m = np.arange(6, dtype=np.float32).reshape(3, 2)
  np.testing.assert_allclose((x @ w).numpy(), X @ Y.T, rtol=1e-6)
  np.testing.assert_allclose((x @ tf.constant(m)).numpy(), X @ m, rtol=1e-6)
  np.testing.assert_allclose((tf.constant(m.T) @ w).numpy(), m.T @ Y.T, rtol=1e-6)
  np.testing.assert_allclose((m.T @ w).numpy(), m.T @ Y.T, rtol=1e-6)  # __rmatmul__
  np.testing.assert_array_equal((x @ w).numpy(), (x.value @ w.value).numpy())


# ---------------------------------------------------------------------------
# Acting as a Tensor.


def test_convert_to_tensor():
  x = float_rv()
  t = tf.convert_to_tensor(x)
  assert isinstance(t, tf.Tensor) and not isinstance(t, ed.RandomVariable)
  assert t.dtype == tf.float32
  np.testing.assert_array_equal(t.numpy(), X)
  np.testing.assert_array_equal(tf.convert_to_tensor(x, dtype=tf.float32).numpy(), X)
  np.testing.assert_array_equal(np.asarray(x), X)
  np.testing.assert_allclose(tf.reduce_sum(x).numpy(), X.sum(), rtol=1e-6)
  np.testing.assert_array_equal(tf.add(x, 1.).numpy(), X + 1.)


def test_tf_matmul_and_matvec():
  x = float_rv()
  w = ed.Normal(0., 1., sample_shape=(3, 2), value=Y.T, name="w")
  np.testing.assert_allclose(tf.matmul(x, w).numpy(), X @ Y.T, rtol=1e-6)
  np.testing.assert_allclose(tf.matmul(x, x, transpose_b=True).numpy(), X @ X.T,
                             rtol=1e-6)
  v = ed.Normal(0., 1., sample_shape=3, value=[1., 2., 3.], name="v")
  np.testing.assert_allclose(tf.linalg.matvec(x, v).numpy(), X @ np.array([1., 2., 3.]),
                             rtol=1e-6)


def test_keras_dense_layer_on_random_variable():
  kernel = np.array([[1., -1.], [0.5, 2.], [-3., 0.25]], np.float32)
  bias = np.array([0.1, -0.2], np.float32)
  layer = tf_keras.layers.Dense(
      2, kernel_initializer=tf_keras.initializers.Constant(kernel),
      bias_initializer=tf_keras.initializers.Constant(bias))
  x = float_rv()
  out = layer(x)
  assert out.shape == (2, 2)
  np.testing.assert_allclose(out.numpy(), X @ kernel + bias, rtol=1e-5, atol=1e-6)


def test_hash_by_identity_eq_elementwise():
  a = ed.Normal(0., 1., value=1., name="a")
  b = ed.Normal(0., 1., value=1., name="b")
  assert hash(a) == hash(a)
  assert hash(a) != hash(b)
  d = {a: "first", b: "second"}
  assert len(d) == 2
  assert d[a] == "first" and d[b] == "second"
  assert len({a, b}) == 2
  eq = a == b
  assert tf.is_tensor(eq) and eq.dtype == tf.bool
  assert bool(eq.numpy()) is True
  ne = a != b
  assert tf.is_tensor(ne) and bool(ne.numpy()) is False
  v = ed.Normal(0., 1., sample_shape=3, value=[1., 2., 3.], name="v")
  np.testing.assert_array_equal((v == [1., 0., 3.]).numpy(), [True, False, True])


def test_repr():
  x = float_rv(name="my_x")
  text = repr(x)
  assert "'my_x'" in text
  assert "shape=(2, 3)" in text
  assert "dtype=float32" in text
  assert "1.5" in text  # the value
  # str follows Edward2: RandomVariable("<value>", shape=..., dtype=...)
  assert str(x).startswith('RandomVariable("[[ 1.5 ')
  assert str(x).endswith('", shape=(2, 3), dtype=float32)')
  i = int_rv(name="counts")
  assert "'counts'" in repr(i) and "shape=(4,)" in repr(i) and "dtype=int32" in repr(i)


def test_len_iter_bool():
  x = float_rv()
  assert len(x) == 2
  rows = list(x)
  assert len(rows) == 2
  np.testing.assert_array_equal(rows[1].numpy(), X[1])
  assert bool(ed.Normal(0., 1., value=3., name="s"))
  assert not bool(ed.Normal(0., 1., value=0., name="s"))


# ---------------------------------------------------------------------------
# tf.function.


def test_random_variable_in_tf_function_stays_random_variable_no_retrace():
  seen = []

  @tf.function
  def f(rv):
    seen.append(type(rv))
    assert isinstance(rv, ed.RandomVariable)
    return rv.distribution.log_prob(rv), rv.distribution.loc, rv + 1.

  a = ed.Normal(0., 1., sample_shape=3, value=[0.5, -1., 2.], name="z")
  b = ed.Normal(1., 2., sample_shape=3, value=[3., 0., -2.], name="z")
  lp_a, loc_a, plus_a = f(a)
  assert f.experimental_get_tracing_count() == 1
  lp_b, loc_b, plus_b = f(b)
  assert f.experimental_get_tracing_count() == 1
  assert seen == [ed.RandomVariable]
  np.testing.assert_allclose(lp_a.numpy(),
                             tfd.Normal(0., 1.).log_prob([0.5, -1., 2.]).numpy(), rtol=1e-6)
  np.testing.assert_allclose(lp_b.numpy(),
                             tfd.Normal(1., 2.).log_prob([3., 0., -2.]).numpy(), rtol=1e-6)
  assert loc_a.numpy() == 0. and loc_b.numpy() == 1.
  np.testing.assert_allclose(plus_b.numpy(), [4., 1., -1.])


def test_numpy_inside_tf_function_raises_naming_variable():
  @tf.function
  def f(rv):
    return rv.numpy()

  with pytest.raises(NotImplementedError, match="'graph_rv'"):
    f(ed.Normal(0., 1., value=1., name="graph_rv"))


def test_non_composite_distribution_in_tf_function():
  rv = ed.HiddenMarkovModel(
      initial_distribution=tfd.Categorical(logits=[0., 0.]),
      transition_distribution=tfd.Categorical(logits=[[0., 0.], [0., 0.]]),
      observation_distribution=tfd.Normal([0., 1.], 1.), num_steps=3,
      value=[0., 1., 0.5], name="hmm")

  @tf.function
  def f(r):
    assert isinstance(r, ed.RandomVariable)
    return r.distribution.log_prob(r)

  np.testing.assert_allclose(f(rv).numpy(), rv.distribution.log_prob(rv.value).numpy(),
                             rtol=1e-5)


# ---------------------------------------------------------------------------
# Generated constructors.


def _expected_constructor_names():
  names = set()
  for attr in dir(tfd):
    cls = getattr(tfd, attr)
    if not inspect.isclass(cls) or not issubclass(cls, tfd.Distribution):
      continue
    if cls in (tfd.Distribution, tfd.AutoCompositeTensorDistribution):
      continue
    if inspect.isabstract(cls) or issubclass(cls, tfd.JointDistribution):
      continue
    names.add(attr)
  return names


def test_constructors_cover_every_concrete_distribution():
  expected = _expected_constructor_names()
  assert len(expected) > 80  # sanity: the introspection found TFP's classes
  assert {"Normal", "Dirichlet", "Mixture", "HiddenMarkovModel"} <= expected
  got = set(ed.distributions.CONSTRUCTORS)
  assert expected - got == set()
  for name in got:  # no joint distributions, only real distribution classes
    cls = getattr(tfd, name)
    assert issubclass(cls, tfd.Distribution)
    assert not issubclass(cls, tfd.JointDistribution)
  for name in expected:
    assert getattr(ed, name) is ed.distributions.CONSTRUCTORS[name]


def test_constructor_docstrings_contain_tfp_docstring():
  for name, ctor in ed.distributions.CONSTRUCTORS.items():
    first_line = inspect.getdoc(getattr(tfd, name)).strip().splitlines()[0]
    assert first_line in ctor.__doc__, name
    assert ctor.__name__ == name


def _shape(*parts):
  return tf.TensorShape([d for p in parts for d in p])


CONSTRUCTOR_CASES = {
    "Normal": (lambda **kw: ed.Normal(loc=tf.zeros([3]), scale=2., **kw),
               tfd.Normal, (2,), (3,), ()),
    "MultivariateNormalTriL": (
        lambda **kw: ed.MultivariateNormalTriL(loc=tf.zeros([2, 3]),
                                               scale_tril=tf.eye(3), **kw),
        tfd.MultivariateNormalTriL, (4,), (2,), (3,)),
    "Categorical": (lambda **kw: ed.Categorical(logits=tf.zeros([2, 5]), **kw),
                    tfd.Categorical, (3,), (2,), ()),
    "Dirichlet": (lambda **kw: ed.Dirichlet(concentration=tf.ones([2, 4]), **kw),
                  tfd.Dirichlet, (5,), (2,), (4,)),
    "Mixture": (lambda **kw: ed.Mixture(
        cat=tfd.Categorical(probs=[0.3, 0.7]),
        components=[tfd.Normal(0., 1.), tfd.Normal(2., 1.)], **kw),
                tfd.Mixture, (6,), (), ()),
    "Independent": (lambda **kw: ed.Independent(
        tfd.Normal(tf.zeros([2, 3]), 1.), reinterpreted_batch_ndims=1, **kw),
                    tfd.Independent, (2, 2), (2,), (3,)),
    "MixtureSameFamily": (lambda **kw: ed.MixtureSameFamily(
        mixture_distribution=tfd.Categorical(probs=[0.3, 0.7]),
        components_distribution=tfd.Normal(loc=[-1., 1.], scale=[0.1, 0.5]), **kw),
                          tfd.MixtureSameFamily, (7,), (), ()),
    "Gamma": (lambda **kw: ed.Gamma(concentration=[1., 2.], rate=1., **kw),
              tfd.Gamma, (3,), (2,), ()),
}


@pytest.mark.parametrize("case", list(CONSTRUCTOR_CASES))
def test_constructor_builds_random_variable(case):
  make, cls, sample_shape, batch, event = CONSTRUCTOR_CASES[case]
  tf.random.set_seed(3)
  rv = make(sample_shape=sample_shape, name="rv_" + case)
  assert isinstance(rv, ed.RandomVariable)
  assert type(rv.distribution) is cls
  assert rv.distribution.batch_shape == tf.TensorShape(batch)
  assert rv.distribution.event_shape == tf.TensorShape(event)
  assert rv.shape == _shape(sample_shape, batch, event)
  assert rv.sample_shape == tf.TensorShape(sample_shape)
  assert rv.name == "rv_" + case
  assert rv.dtype == rv.distribution.dtype
  # The drawn value is in the support: finite log density.
  assert np.all(np.isfinite(rv.distribution.log_prob(rv.value).numpy()))
  # Without sample_shape the value is batch + event.
  assert make().shape == _shape(batch, event)


def test_constructor_passes_arguments_to_distribution():
  rv = ed.Normal(1.5, scale=0.25, name="n")
  assert rv.distribution.loc.numpy() == 1.5
  assert rv.distribution.scale.numpy() == 0.25
  rv = ed.Dirichlet([1., 2., 3.], value=[0.2, 0.3, 0.5], name="p")
  np.testing.assert_allclose(
      rv.distribution.log_prob(rv.value).numpy(),
      tfd.Dirichlet([1., 2., 3.]).log_prob([0.2, 0.3, 0.5]).numpy(), rtol=1e-6)
  rv = ed.Dirichlet([1., 2., 3.], value=[0.2, 0.3, 0.5])
  np.testing.assert_allclose(rv.distribution.concentration.numpy(), [1., 2., 3.])


def test_name_honoured_even_when_not_scope_safe():
  rv = ed.Normal(0., 1., name="my var/1")
  assert rv.name == "my var/1"
  assert ed.Normal(0., 1., name="w").name == "w"


def test_make_random_variable():
  ctor = ed.make_random_variable(tfd.Normal)
  with ed.tape() as rvs:
    rv = ctor(1., 2., sample_shape=3, value=[0., 1., 2.], name="n")
  assert isinstance(rv, ed.RandomVariable)
  assert type(rv.distribution) is tfd.Normal
  assert rv.name == "n" and rv.shape == tf.TensorShape([3])
  assert list(rvs) == ["n"] and rvs["n"] is rv
  np.testing.assert_allclose(rv.distribution.log_prob(rv).numpy(),
                             tfd.Normal(1., 2.).log_prob([0., 1., 2.]).numpy())
  assert tfd.Normal.__doc__.strip().splitlines()[0] in ctor.__doc__


def test_as_random_variable_is_traced():
  dist = tfd.Normal(0., 1.)
  with ed.tape() as rvs:
    z = ed.as_random_variable(dist, name="z")
    w = ed.as_random_variable(tfd.Gamma(2., 1., name="gamma_w"), sample_shape=2)
  assert list(rvs) == ["z", "gamma_w"]
  assert rvs["z"] is z and rvs["gamma_w"] is w
  assert z.distribution is dist
  assert z.name == "z" and w.shape == tf.TensorShape([2])
  fixed = ed.as_random_variable(dist, value=0.5, name="f")
  assert fixed.numpy() == 0.5


# ---------------------------------------------------------------------------
# Acting as its value: Python numbers, NumPy, formatting, nested lists.


def scalar_rv(value=1.5, name="mu"):
  return ed.Normal(0., 1., value=value, name=name)


def test_python_numbers_of_scalar_random_variable():
  mu = scalar_rv()
  assert float(mu) == 1.5 and isinstance(float(mu), float)
  assert int(mu) == 1 and isinstance(int(mu), int)
  assert complex(mu) == 1.5 + 0j
  k = ed.Poisson(3., value=4., name="k")
  assert int(k) == 4 and float(k) == 4.
  c = ed.Categorical(logits=[0., 0., 0.], value=2, name="c")
  assert int(c) == 2
  assert [10, 20, 30][c] == 30  # __index__
  assert list(range(c)) == [0, 1]
  assert operator.index(c) == 2
  assert np.arange(5)[c] == 2


def test_python_numbers_name_the_variable_when_not_scalar():
  v = ed.Normal(0., 1., sample_shape=3, value=[1., 2., 3.], name="vec")
  for convert in (float, int, complex):
    with pytest.raises(TypeError, match=r"scalar.*'vec' has shape \[3\]"):
      convert(v)
  with pytest.raises(TypeError, match=r"'mu' has dtype float32.*integer"):
    [1, 2][scalar_rv()]  # pylint: disable=expression-not-assigned


def test_np_asarray_with_dtype_and_copy():
  mu = scalar_rv()
  a = np.asarray(mu)
  assert isinstance(a, np.ndarray) and a.shape == () and a.dtype == np.float32
  assert a == 1.5
  x = float_rv()
  np.testing.assert_array_equal(np.asarray(x), X)
  b = np.asarray(x, dtype=np.float64)
  assert b.dtype == np.float64
  np.testing.assert_array_equal(b, X)
  c = np.array(x, copy=True)
  c[0, 0] = 99.  # a copy: the random variable is unchanged
  assert x.numpy()[0, 0] == X[0, 0]
  np.testing.assert_array_equal(np.asarray(x, copy=False), X)
  with pytest.raises(ValueError, match="'x'.*copy"):
    np.asarray(x, dtype=np.float64, copy=False)
  np.testing.assert_array_equal(np.array([scalar_rv(1.), scalar_rv(2.)]), [1., 2.])


def test_numpy_ufuncs_return_numpy_arrays():
  x = float_rv()
  e = np.exp(x)
  assert isinstance(e, np.ndarray)
  np.testing.assert_allclose(e, np.exp(X), rtol=1e-6)
  np.testing.assert_allclose(np.exp(scalar_rv()), np.exp(np.float32(1.5)), rtol=1e-6)
  assert isinstance(np.add(x, 1.), np.ndarray)
  np.testing.assert_array_equal(np.maximum(x, 0.), np.maximum(X, 0.))
  np.testing.assert_allclose(np.sum(x), X.sum(), rtol=1e-6)
  assert np.mean(int_rv()) == I.mean()


def test_format_and_f_strings():
  mu = scalar_rv(1.23456)
  assert format(mu, ".2f") == "1.23"
  assert f"{mu:.3f}" == "1.235"
  assert f"{mu:8.1e}" == " 1.2e+00"
  assert f"{ed.Poisson(3., value=4., name='k'):.0f}" == "4"
  assert f"{ed.Categorical(logits=[0., 0., 0.], value=2, name='c'):03d}" == "002"
  assert f"{mu}" == str(mu)  # no format spec: str()
  with pytest.raises(TypeError, match=r"'vec' has shape \[3\]"):
    f"{ed.Normal(0., 1., sample_shape=3, value=[1., 2., 3.], name='vec'):.2f}"  # pylint: disable=expression-not-interpolated


def _as_lists(mu0, mu1, v):
  return {
      "concat_nested": tf.concat([[mu0], [mu1]], 0),
      "stack": tf.stack([mu0, mu1]),
      "convert_list": tf.convert_to_tensor([mu0, mu1]),
      "convert_tuple": tf.convert_to_tensor((mu0, mu1)),
      "convert_dtype": tf.convert_to_tensor([mu0, mu1], dtype=tf.float32),
      "mixed_nested": tf.convert_to_tensor([[mu0, 1.], [mu1, 2.]]),
      "with_tensor": tf.convert_to_tensor([tf.constant(0.), mu0]),
      "vectors": tf.convert_to_tensor([v, v + 1.]),
      "op_argument": tf.add([mu0, mu1], 1.),
      "matmul_rows": tf.matmul([[mu0, mu1]], [[1.], [2.]]),
  }


def _expected_lists(m0, m1, vv):
  return {
      "concat_nested": [m0, m1], "stack": [m0, m1], "convert_list": [m0, m1],
      "convert_tuple": [m0, m1], "convert_dtype": [m0, m1],
      "mixed_nested": [[m0, 1.], [m1, 2.]], "with_tensor": [0., m0],
      "vectors": [vv, vv + 1.], "op_argument": [m0 + 1., m1 + 1.],
      "matmul_rows": [[m0 + 2. * m1]],
  }


def test_random_variables_inside_nested_lists_eagerly():
  mu0, mu1 = scalar_rv(1.5, "mu0"), scalar_rv(-2., "mu1")
  v = ed.Normal(0., 1., sample_shape=3, value=[1., 2., 3.], name="v")
  got = _as_lists(mu0, mu1, v)
  expected = _expected_lists(1.5, -2., np.array([1., 2., 3.], np.float32))
  for key, value in got.items():
    assert tf.is_tensor(value) and value.dtype == tf.float32, key
    np.testing.assert_allclose(value.numpy(), expected[key], err_msg=key)
  # Lists without random variables convert as before.
  np.testing.assert_array_equal(tf.convert_to_tensor([[1, 2], [3, 4]]).numpy(), [[1, 2], [3, 4]])
  assert tf.convert_to_tensor([1., 2.], dtype=tf.float64).dtype == tf.float64


def test_random_variables_inside_nested_lists_in_tf_function():
  @tf.function
  def given(mu0, mu1, v):
    return _as_lists(mu0, mu1, v)

  @tf.function
  def built_inside():
    mu0 = ed.Normal(0., 1., value=1.5, name="mu0")
    mu1 = ed.Normal(0., 1., name="mu1")
    v = ed.Normal(0., 1., sample_shape=3, value=[1., 2., 3.], name="v")
    return _as_lists(mu0, mu1, v), mu1.value

  expected = _expected_lists(1.5, -2., np.array([1., 2., 3.], np.float32))
  got = given(scalar_rv(1.5, "mu0"), scalar_rv(-2., "mu1"),
              ed.Normal(0., 1., sample_shape=3, value=[1., 2., 3.], name="v"))
  for key, value in got.items():
    np.testing.assert_allclose(value.numpy(), expected[key], err_msg=key)
  inside, mu1 = built_inside()
  expected = _expected_lists(1.5, mu1.numpy(), np.array([1., 2., 3.], np.float32))
  for key, value in inside.items():
    np.testing.assert_allclose(value.numpy(), expected[key], rtol=1e-6, err_msg=key)


def test_random_variables_in_lists_inside_vectorized_map():
  def one(loc):
    a = ed.Normal(loc, 1., value=loc + 1., name="a")
    b = ed.Normal(loc, 1., value=loc - 1., name="b")
    return tf.concat([[a], [b]], 0)

  out = tf.vectorized_map(one, tf.constant([0., 10.]))
  np.testing.assert_array_equal(out.numpy(), [[1., -1.], [11., 9.]])


# ---------------------------------------------------------------------------
# Python control flow on a symbolic value.

CONTROL_FLOW_MATCH = (r"^Python control flow on the value of random variable 'z'.*not allowed "
                      r"inside a model.*tf\.where.*tf\.cond")


def _if(z):
  if z:
    return 1.
  return 0.


def _while(z):
  while z:
    return 1.
  return 0.


def _not(z):
  return 0. if not z else 1.


@pytest.mark.parametrize("use", [_if, _while, _not, bool], ids=["if", "while", "not", "bool"])
@pytest.mark.parametrize("autograph", [True, False], ids=["autograph", "no_autograph"])
def test_control_flow_on_random_variable_in_tf_function_raises_type_error(use, autograph):
  @tf.function(autograph=autograph)
  def f():
    z = ed.Normal(0., 1., name="z")
    return use(z)

  with pytest.raises(TypeError, match=CONTROL_FLOW_MATCH) as info:
    f()
  assert "\n" not in str(info.value)  # one sentence, not AutoGraph's staging report


def test_control_flow_on_random_variable_in_vectorized_map_raises_type_error():
  def one(loc):
    z = ed.Normal(loc, 1., name="z")
    return 1. if z else 0.

  with pytest.raises(TypeError, match=CONTROL_FLOW_MATCH):
    tf.vectorized_map(one, tf.zeros(3))


@pytest.mark.parametrize("convert", [float, int, complex, lambda z: f"{z:.2f}"],
                         ids=["float", "int", "complex", "format"])
def test_python_numbers_of_symbolic_value_raise_type_error(convert):
  @tf.function
  def f():
    return convert(ed.Normal(0., 1., name="z"))

  with pytest.raises(TypeError, match=r"random variable 'z' needs its concrete value"):
    f()


def test_numpy_of_symbolic_value_names_the_variable():
  @tf.function
  def f():
    return np.exp(ed.Normal(0., 1., name="z"))

  with pytest.raises(NotImplementedError, match="'z'"):
    f()


def python_if_model():
  x = ed.Normal(0., 1., name="x")
  if x > 0:
    y = ed.Normal(x, 1., name="y")
  else:
    y = ed.Normal(-x, 1., name="y")
  return y


def test_make_target_rejects_python_if_on_latent_before_compiling():
  with pytest.raises(TypeError, match=r"random variable 'x' at test_random_variable.py:\d+ "
                                      r"\(if x > 0:\) is not allowed inside a model"):
    ed.make_target(python_if_model, observed={"y": 0.5})


def _model_if_rv():
  x = ed.Normal(0., 1., name="x")
  if x:
    pass
  return ed.Normal(x, 1., name="y")


def _model_while_computed():
  x = ed.Normal(0., 1., sample_shape=3, name="x")
  s = ed.Gamma(2., 2., name="s")
  total = tf.constant(0.)
  while total < tf.reduce_sum(tf.exp(x)) * s:
    total += 1.
  return ed.Normal(total, 1., name="y")


def _model_if_in_loop_body():
  x = ed.Normal(0., 1., name="x")

  def body(i, acc):
    if acc > x:
      acc = acc + 1.
    return i + 1, acc

  _, acc = tf.while_loop(lambda i, acc: i < 3, body, (0, 0.))
  return ed.Normal(acc, 1., name="y")


@pytest.mark.parametrize("model, names", [
    (_model_if_rv, "random variable 'x'"),
    (_model_while_computed, "random variables 's', 'x'"),
    (_model_if_in_loop_body, "random variable 'x'"),
], ids=["if_rv", "while_computed", "if_in_while_loop_body"])
def test_make_target_rejects_control_flow_on_latents(model, names):
  with pytest.raises(TypeError, match=f"on the value of {names} at test_random_variable.py"):
    ed.make_target(model, observed={"y": 0.5})


def test_make_target_rejects_python_if_in_mcmc_sample_quickly():
  import time  # pylint: disable=import-outside-toplevel
  start = time.perf_counter()
  with pytest.raises(TypeError, match="random variable 'x'"):
    ed.mcmc.sample(python_if_model, observed={"y": 0.5}, kernel="hmc", chains=2, warmup=10,
                   draws=10, progress=False)
  assert time.perf_counter() - start < 1.0  # nothing was compiled


def test_make_target_allows_control_flow_on_data_and_observed_values():
  def model(data, flag):
    x = ed.Normal(0., 1., name="x")
    if flag and tf.reduce_sum(data) > 0:  # program arguments: data, not random
      x = x + 1.
    y = ed.Normal(x, 1., sample_shape=3, name="y")
    if tf.reduce_all(y > -100.):  # an observed value is data too
      return y
    return y

  t = ed.make_target(model, np.ones(3, np.float32), True, observed={"y": [0., 1., 2.]})
  assert t.names == ("x",)


def test_make_target_rejects_python_if_in_a_float64_model():
  with pytest.raises(TypeError, match=r"random variable 'x' at test_random_variable.py:\d+ "
                                      r"\(if x > 0:\)"):
    ed.make_target(python_if_model, observed={"y": 0.5}, dtype=tf.float64)


@pytest.mark.parametrize("logit", [-1.2, 0.3, 2.])
def test_inflated_with_logits_has_the_exact_log_density(logit):
  # TFP 0.25's Inflated is wrong through inflated_loc_logits (tfp_fixes.py).
  rate = 2.
  rv = ed.Inflated(ed.distributions.tfd.Poisson(rate), inflated_loc_logits=logit, name="k")
  p = 1. / (1. + np.exp(-logit))
  for k in (0., 1., 3.):
    poisson = k * np.log(rate) - rate - math.lgamma(k + 1.)
    exact = np.log(p + (1. - p) * np.exp(poisson)) if k == 0 else np.log1p(-p) + poisson
    np.testing.assert_allclose(float(rv.distribution.log_prob(k)), exact, rtol=1e-5)
  with pytest.raises(ValueError, match="not both"):
    ed.Inflated(ed.distributions.tfd.Poisson(rate), inflated_loc_logits=logit,
                inflated_loc_probs=0.5, name="k")


def test_a_random_variable_where_a_distribution_goes_is_one_sentence():
  """``ed.TransformedDistribution(ed.Normal(...), ...)``: TFP's AttributeError
  before; a random variable as a value parameter (``loc=``) still works."""
  with pytest.raises(TypeError, match=r"Random variable 'z' \(TransformedDistribution\) was "
                     r"given a random variable as its distribution=; build that distribution "
                     r"with tfp.distributions"):
    ed.TransformedDistribution(ed.Normal(0., 1.), tfp.bijectors.Exp(), name="z")
  with pytest.raises(TypeError, match=r"its distribution="):
    ed.Independent(distribution=ed.Normal(tf.zeros(3), 1.), reinterpreted_batch_ndims=1)
  inner = ed.Normal(0., 1.)
  assert float(ed.Normal(loc=inner, scale=1.).distribution.loc) == float(inner.value)
  wrapped = ed.TransformedDistribution(tfp.distributions.Normal(0., 1.), tfp.bijectors.Exp())
  assert float(wrapped.value) > 0.
