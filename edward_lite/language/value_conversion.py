"""A random variable's given value, checked and converted for its distribution.

``convert_value(value, distribution, sample_shape)`` returns a Tensor of shape
``sample_shape + batch_shape + event_shape`` (``expected_value_shape``) and
the distribution's dtype: a Tensor (or variable) must already have that
dtype; NumPy arrays, Python scalars and lists are cast only when no
information is lost.  Otherwise a ``TypeError`` or ``ValueError`` in one
sentence naming the random variable.
"""

import numpy as np
import tensorflow as tf

__all__ = ["convert_value", "expected_value_shape", "describe_variable"]


def describe_variable(name, distribution):
  label = f"'{name}'" if name else f"of type {type(distribution).__name__}"
  return f"random variable {label}"


def expected_value_shape(distribution, sample_shape):
  """Static shape ``sample_shape + batch_shape + event_shape``."""
  return tf.TensorShape(sample_shape).concatenate(
      distribution.batch_shape).concatenate(distribution.event_shape)


def convert_value(value, distribution, sample_shape, name=None):
  """Converts ``value`` to a Tensor valid for ``distribution``, or raises.

  Tensors (and variables) must already have the distribution's dtype.  NumPy
  arrays, Python scalars and lists are cast when no information is lost: any
  real number to a floating dtype, integer-valued numbers to an integer dtype,
  booleans to bool.  The shape must be compatible with
  ``sample_shape + batch_shape + event_shape``.

  Args:
    value: Tensor-like value (a random variable's value, not the variable).
    distribution: the ``tfd.Distribution`` the value belongs to.
    sample_shape: ``tf.TensorShape`` of the random variable.
    name: the random variable's name, used in error messages.

  Returns:
    A ``tf.Tensor`` (or the given ``tf.Variable``).

  Raises:
    TypeError: the dtype cannot hold the distribution's values.
    ValueError: the shape does not match.
  """
  what = describe_variable(name, distribution)
  dtype = tf.as_dtype(distribution.dtype)
  is_tensor = tf.is_tensor(value) or isinstance(value, tf.Variable)
  shape = value.shape if is_tensor else np.shape(value) if _is_regular(value) else None
  expected = expected_value_shape(distribution, sample_shape)
  if shape is not None and not expected.is_compatible_with(shape):
    raise ValueError(
        f"Value for {what} has shape {list(tf.TensorShape(shape).as_list())}; expected "
        f"{expected.as_list()} (sample_shape {list(sample_shape)} + batch_shape "
        f"{distribution.batch_shape.as_list()} + event_shape "
        f"{distribution.event_shape.as_list()}).")
  if is_tensor:
    if value.dtype.base_dtype != dtype:
      raise TypeError(
          f"Value for {what} has dtype {value.dtype.base_dtype.name}; its "
          f"{type(distribution).__name__} distribution expects {dtype.name}.")
    return value
  return tf.convert_to_tensor(_cast_numpy(value, dtype, what, distribution))


def _is_regular(value):
  """True if NumPy can take the shape of ``value`` (not a ragged list)."""
  try:
    np.shape(value)
    return True
  except ValueError:
    return False


def _cast_numpy(value, dtype, what, distribution):
  """Casts a NumPy-convertible value to ``dtype`` only when nothing is lost."""
  try:
    array = np.asarray(value)
  except Exception as e:  # ragged lists and the like
    raise TypeError(f"Value for {what} cannot be converted to an array: {e}") from e
  kind = array.dtype.kind
  target = dtype.as_numpy_dtype
  dist = type(distribution).__name__
  if dtype.is_floating:
    ok = kind in "fiub"
  elif dtype.is_integer:
    ok = kind in "iub" or (kind == "f" and np.all(np.isfinite(array)) and
                           np.all(array == np.round(array)))
    if ok and kind in "iuf" and array.size:  # no silent wrap-around
      info = np.iinfo(target)
      ok = bool(array.min() >= info.min and array.max() <= info.max)
  elif dtype.is_bool:
    ok = kind == "b"
  elif dtype.is_complex:
    ok = kind in "fiubc"
  else:
    ok = False
  if not ok and dtype.is_integer and kind == "f":
    fractional = np.isfinite(array) & (array != np.round(array))
    if fractional.any():  # labels of 0.5: a value outside the support, not a dtype
      index = np.argwhere(fractional)[0] if array.ndim else []
      at = f" at index {[int(i) for i in index]}" if array.ndim else ""
      raise TypeError(
          f"Value for {what} holds {array[tuple(index)]:g}{at}, not an integer: a {dist} "
          f"variable takes integer values ({dtype.name}), so it is outside its support"
          + (f" ({int(fractional.sum())} such values)" if fractional.sum() > 1 else "") + ".")
  if not ok:
    raise TypeError(
        f"Value for {what} has NumPy dtype {array.dtype}; its {dist} "
        f"distribution expects {dtype.name} and the cast would lose information.")
  return array.astype(target)
