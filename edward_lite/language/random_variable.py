"""RandomVariable: a TFP distribution paired with a value that acts as a Tensor.

``RandomVariable(distribution, sample_shape=(), value=None)`` holds

* ``distribution`` -- any ``tfp.distributions.Distribution``;
* ``sample_shape`` -- a ``tf.TensorShape`` ``S``;
* ``value`` -- a Tensor of shape ``S + batch_shape + event_shape`` and dtype
  ``distribution.dtype``, drawn as ``distribution.sample(S)`` when not given.

Every Python operator, ``__getitem__`` and conversion to a Tensor act on the
value, so a random variable can be used wherever TensorFlow expects a Tensor
(``tf.convert_to_tensor``, ``tf.matmul``, Keras layers).  Unlike a Tensor it is
hashable by identity (a dict key) while ``==`` still compares values
element-wise, as in Edward2.

A random variable is a ``CompositeTensor``: passed into a ``tf.function`` it
stays a random variable inside (distribution parameters and value become
graph inputs), and a new value of the same shape does not retrace.

Eagerly it also acts as its (concrete) value for Python and NumPy:
``float(rv)``, ``int(rv)``, ``complex(rv)``, ``operator.index(rv)`` (integer
scalars), ``format(rv, ".2f")``, ``np.asarray(rv)`` and NumPy ufuncs
(``np.exp(rv)`` is a NumPy array).  Random variables nested in Python lists
convert to one Tensor (``tf.concat([[mu0], [mu1]], 0)``,
``tf.convert_to_tensor([a, b])``), eagerly and inside ``tf.function``.

Inside a traced program (a ``tf.function``, ``tf.vectorized_map``) the value
is symbolic: Python control flow on it (``if rv:``, ``while rv:``, ``not rv``)
raises a ``TypeError`` naming the variable, as do ``float``/``int``/
``complex``/``index``; use ``tf.where`` or ``tf.cond``.  (An ``if`` on a
Tensor computed from a random variable, ``if rv > 0:``, is caught by
``make_target`` with ``check_python_control_flow``.)

A given value is checked and converted in ``value_conversion``; the test for
a symbolic value and the error for control flow on it are in
``symbolic_values``.
"""

import operator

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import composite_tensor  # pylint: disable=g-direct-tensorflow-import

# ``ControlFlowError`` and ``control_flow_message`` stay importable from here (``__all__``).
from edward_lite.language.symbolic_values import (ControlFlowError, control_flow_error,
                                                  control_flow_message, is_symbolic)
from edward_lite.language.value_conversion import convert_value, describe_variable
from edward_lite.runtime import console

__all__ = ["RandomVariable", "ControlFlowError", "control_flow_message"]


class DeferredValue:
  """A value computed from the random variable's own distribution.

  Internal protocol used by inference code that must see a variable's
  distribution before it can choose its value (for example to map an
  unconstrained state through the distribution's support bijector).  Passing
  ``value=DeferredValue(fn)`` to a constructor makes the random variable call
  ``fn(distribution)`` and use the result, checked like any other value.
  """

  def __init__(self, fn):
    self.fn = fn

  def __call__(self, distribution):
    return self.fn(distribution)


class RandomVariable(composite_tensor.CompositeTensor):
  """A random variable: a distribution and a value that acts as a Tensor.

  Args:
    distribution: a ``tfp.distributions.Distribution``.
    sample_shape: shape of the independent draws ``S``; the value has shape
      ``S + batch_shape + event_shape``.
    value: optional fixed value (Tensor, NumPy array, list or scalar); drawn
      from the distribution when not given.
    name: optional name; defaults to the distribution's name.  Program
      transformations identify random variables by the ``name=`` keyword
      passed to their constructor.
  """

  __array_priority__ = 100  # NumPy operators defer to ours.

  def __init__(self, distribution, sample_shape=(), value=None, name=None):
    if not hasattr(distribution, "log_prob") or not hasattr(distribution, "sample"):
      raise TypeError("RandomVariable expects a tfp.distributions.Distribution; "
                      f"got {type(distribution).__name__}.")
    console.mute_onednn_int32_note()
    _LISTS_MAY_HOLD_ONE[0] = True
    self._distribution = distribution
    self._name = name if name is not None else distribution.name
    try:
      self._sample_shape = tf.TensorShape(sample_shape)
    except (TypeError, ValueError) as e:
      raise TypeError(f"sample_shape of {describe_variable(name, distribution)} must be "
                      f"a shape (int or tuple of ints); got {sample_shape!r}.") from e
    if isinstance(value, DeferredValue):
      value = value(distribution)
    if value is None:
      value = distribution.sample(self._sample_shape)
    if isinstance(value, RandomVariable):
      value = value.value
    self._value = convert_value(value, distribution, self._sample_shape, name)

  @property
  def distribution(self):
    """The ``tfp.distributions.Distribution`` of the random variable."""
    return self._distribution

  @property
  def sample_shape(self):
    """``tf.TensorShape`` of independent draws in ``value``."""
    return self._sample_shape

  @property
  def value(self):
    """The Tensor value, of shape ``sample_shape + batch_shape + event_shape``."""
    return self._value

  @property
  def name(self):
    return self._name

  @property
  def shape(self):
    return self._value.shape

  @property
  def dtype(self):
    return self._value.dtype

  def get_shape(self):
    return self.shape

  def numpy(self):
    """The value as a NumPy array (eager mode only)."""
    if not hasattr(self._value, "numpy"):
      raise NotImplementedError(
          f"numpy() of random variable '{self._name}' is only available in "
          "eager mode; inside tf.function use its value as a Tensor.")
    return self._value.numpy()

  def sample_shape_tensor(self):
    return tf.constant(self._sample_shape.as_list(), dtype=tf.int32)

  def __repr__(self):
    value = self._value
    text = (f"<ed.RandomVariable '{self._name}' shape={self.shape} "
            f"dtype={self.dtype.name}")
    if hasattr(value, "numpy"):
      text += " numpy=" + np.array2string(value.numpy(), threshold=20)
    return text + ">"

  def __str__(self):
    value = self._value
    shown = (np.array2string(value.numpy(), threshold=20, separator=", ")
             if hasattr(value, "numpy") else "symbolic")
    return f'RandomVariable("{shown}", shape={self.shape}, dtype={self.dtype.name})'

  # Identity hash (a dict key); == and != stay element-wise, as for Tensors.
  def __hash__(self):
    return id(self)

  def __bool__(self):
    """The truth value of a concrete scalar value; inside a traced program a
    ``TypeError`` (Python control flow on a random value)."""
    if is_symbolic(self._value):
      raise control_flow_error([self._name])
    return bool(self._value)

  def __len__(self):
    return len(self._value)

  def __iter__(self):
    return iter(self._value)

  # -- acting as a concrete value (eager) -----------------------------------

  def _scalar(self, what):
    """The concrete value as a 0-d NumPy array, or a ``TypeError``."""
    if is_symbolic(self._value):
      raise ControlFlowError(
          f"{what} of random variable '{self._name}' needs its concrete value, which is "
          "symbolic inside a traced program (tf.function, inference): keep it a Tensor "
          "(tf.cast, tf.where) instead.")
    array = np.asarray(self._value)
    if array.size != 1 or array.ndim:
      raise TypeError(f"{what} needs a scalar; random variable '{self._name}' has shape "
                      f"{list(array.shape)}.")
    return array

  def __float__(self):
    return float(self._scalar("float()"))

  def __int__(self):
    return int(self._scalar("int()"))

  def __complex__(self):
    return complex(self._scalar("complex()"))

  def __index__(self):
    if not (self.dtype.is_integer or self.dtype.is_unsigned):
      raise TypeError(f"Random variable '{self._name}' has dtype {self.dtype.name}; only "
                      "an integer random variable can be used as an index.")
    return operator.index(self._scalar("Use as an index").item())

  def __format__(self, format_spec):
    if not format_spec:
      return str(self)
    return format(self._scalar(f"Formatting with '{format_spec}'")[()], format_spec)

  def __array__(self, dtype=None, copy=None):
    """The value as a NumPy array (NumPy 2 protocol); eager mode only."""
    if is_symbolic(self._value):
      raise NotImplementedError(
          f"Random variable '{self._name}' has a symbolic value inside a traced program "
          "(tf.function, inference) and cannot become a NumPy array: use TensorFlow ops.")
    array = np.asarray(self._value)  # TensorFlow's buffer, not copied where it can be
    if copy:
      return np.array(array, dtype=dtype, copy=True)
    if copy is False and dtype is not None and np.dtype(dtype) != array.dtype:
      raise ValueError(f"np.asarray(..., copy=False) of random variable '{self._name}' "
                       f"cannot cast {array.dtype} to {np.dtype(dtype)} without a copy.")
    return array if dtype is None else array.astype(dtype, copy=False)

  def __getitem__(self, slices):
    """Indexes the value; without ``sample_shape`` the distribution is sliced
    too and the result is a RandomVariable (as in Edward2), else a Tensor."""
    value = self._value[slices]
    if self._sample_shape.rank != 0:
      return value
    try:
      return RandomVariable(self._distribution[slices], value=value, name=self._name)
    except (ValueError, TypeError, NotImplementedError, tf.errors.InvalidArgumentError):
      return value  # the distribution cannot be sliced that way

  def __tf_tensor__(self, dtype=None, name=None):
    return tf.convert_to_tensor(self._value, dtype=dtype, name=name)

  @property
  def _type_spec(self):
    return RandomVariableSpec.from_value(self)


class RandomVariableSpec(tf.TypeSpec):
  """TypeSpec of a RandomVariable: components (distribution, value).

  A distribution that is itself a ``CompositeTensor`` (most TFP distributions)
  contributes its parameters as components; any other distribution is held
  by a ``_StaticDistributionSpec`` with no components, so a new distribution
  object retraces a ``tf.function``.
  """

  __slots__ = ("_distribution_spec", "_value_spec", "_sample_shape", "_name")

  def __init__(self, distribution_spec, value_spec, sample_shape, name):
    self._distribution_spec = distribution_spec
    self._value_spec = value_spec
    self._sample_shape = tf.TensorShape(sample_shape)
    self._name = name

  @classmethod
  def from_value(cls, rv):
    dist = rv.distribution
    if isinstance(dist, composite_tensor.CompositeTensor):
      spec = dist._type_spec  # pylint: disable=protected-access
    else:
      spec = _StaticDistributionSpec(dist)
    return cls(spec, tf.TensorSpec.from_tensor(rv.value), rv.sample_shape, rv.name)

  @property
  def value_type(self):
    return RandomVariable

  def _serialize(self):
    return (self._distribution_spec, self._value_spec, self._sample_shape, self._name)

  @property
  def _component_specs(self):
    return (self._distribution_spec, self._value_spec)

  def _to_components(self, value):
    return (value.distribution, value.value)

  def _from_components(self, components):
    dist, value = components
    return RandomVariable(dist, self._sample_shape, value=value, name=self._name)


class _StaticDistributionSpec(tf.TypeSpec):
  """Spec of a distribution that is not a CompositeTensor: the object itself,
  with no Tensor components, equal only to a spec of the same object."""

  __slots__ = ("_distribution",)

  def __init__(self, distribution):
    self._distribution = distribution

  @property
  def value_type(self):
    return type(self._distribution)

  def _serialize(self):
    return (id(self._distribution),)

  @property
  def _component_specs(self):
    return ()

  def _to_components(self, value):
    return ()

  def _from_components(self, components):
    return self._distribution

  def _without_tensor_names(self):
    return self

  def is_subtype_of(self, other):
    return isinstance(other, _StaticDistributionSpec) and other._distribution is self._distribution

  def most_specific_common_supertype(self, others):
    return self if all(self.is_subtype_of(o) for o in others) else None


def _overload(operator):
  tensor_method = getattr(tf.Tensor, operator)

  def method(self, *args):
    return tensor_method(self.value, *args)

  method.__name__ = operator
  method.__doc__ = f"``{operator}`` applied to the value."
  setattr(RandomVariable, operator, method)


for _op in sorted(tf.Tensor.OVERLOADABLE_OPERATORS - {"__getitem__"}):
  _overload(_op)


def _to_tensor(rv, dtype=None, name=None, as_ref=False):
  del as_ref  # Random variables are never references.
  return tf.convert_to_tensor(rv.value, dtype=dtype, name=name)


tf.register_tensor_conversion_function(RandomVariable, _to_tensor)


# Set by the first RandomVariable of the process: until then no list can
# hold one, and the conversion below steps aside at once.
_LISTS_MAY_HOLD_ONE = [False]


def _has_random_variable(values):
  """True if a (nested) list or tuple holds a RandomVariable: the types of
  its elements, and for nested ones of its flattened leaves (in C)."""
  types = set(map(type, values))
  if any(issubclass(t, RandomVariable) for t in types):
    return True
  if not any(issubclass(t, (list, tuple)) for t in types):
    return False
  return any(issubclass(t, RandomVariable) for t in set(map(type, tf.nest.flatten(values))))


def _replace_random_variables(values):
  if isinstance(values, RandomVariable):
    return values.value
  if isinstance(values, (list, tuple)):
    return [_replace_random_variables(v) for v in values]
  return values


def _nested_list_to_tensor(values, dtype=None, name=None, as_ref=False):
  """Lists holding random variables: each random variable becomes its value
  and TensorFlow packs the list as it packs lists of Tensors.

  TensorFlow's own packing only recognises ``tf.Tensor`` elements; any other
  element goes to NumPy, which reads a random variable as a sequence
  (``len()``), so ``tf.concat([[mu0], [mu1]], 0)`` failed on scalars.  This
  runs just before TensorFlow's packing (priority 99) and otherwise costs a
  pass over the element types (none before the process's first random
  variable).  A 10 x 3 nested list of floats converts in 24.3 us without
  edward_lite, 22.6 after the import, 29.8 once random variables exist (a
  recursive check of every level took 43.3).
  """
  if as_ref or not _LISTS_MAY_HOLD_ONE[0] or not _has_random_variable(values):
    return NotImplemented
  return tf.convert_to_tensor(_replace_random_variables(values), dtype=dtype, name=name)


tf.register_tensor_conversion_function((list, tuple), _nested_list_to_tensor, priority=98)
