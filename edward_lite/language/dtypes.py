"""The floating dtype a model runs in, and conversion of data to it.

NumPy's default float is float64 and TensorFlow's float32.  A model's data
(program arguments, observed values, ``init``) given as NumPy or Python
floating numbers is converted to the model's floating dtype -- float32 unless
``dtype=tf.float64`` is asked of ``make_target``, ``ed.mcmc.sample`` or
``ed.vi.fit`` -- as NumPyro does without x64.  Data already in a Tensor keeps
its dtype: a Tensor is an explicit choice.

In a float64 run, Python float literals given to a random-variable
constructor inside the program (``ed.Normal(0., 5.)``) become float64 too,
so a program written for float32 runs unchanged in float64; Tensors the
program makes itself (``tf.zeros(8)``) must be given the dtype by the
program.  NumPy floating numbers given to a constructor inside the program
(``ed.LogNormal(np.log(0.5), 0.5)``, whose ``np.log`` gives a float64
scalar) are converted like data, to float32 unless the run is float64.
"""

import contextlib
import threading

import numpy as np
import tensorflow as tf

__all__ = ["float_dtype", "float_scope", "cast_data", "cast_literal", "cast_parameter"]

_STATE = threading.local()


def float_dtype():
  """The floating dtype of the model being run (None outside a model run)."""
  return getattr(_STATE, "dtype", None)


def in_model_run():
  """Whether program code runs for a model (inside ``float_scope``)."""
  return getattr(_STATE, "in_run", False)


@contextlib.contextmanager
def float_scope(dtype):
  """Runs the enclosed program code for a model in floating dtype ``dtype``
  (None: the data's, see ``trace_model``)."""
  previous = float_dtype(), in_model_run()
  _STATE.dtype = None if dtype is None else tf.as_dtype(dtype)
  _STATE.in_run = True
  try:
    yield
  finally:
    _STATE.dtype, _STATE.in_run = previous


def check_float_dtype(dtype):
  """``tf.float32`` for None, else ``dtype`` if it is a floating dtype."""
  if dtype is None:
    return tf.float32
  given = dtype
  try:
    dtype = tf.as_dtype(dtype)
  except TypeError:
    dtype = None
  if dtype is None or not dtype.is_floating:
    raise TypeError(f"dtype must be a floating dtype such as tf.float32 or tf.float64; "
                    f"got {given!r}.")
  return dtype


def cast_data(value, dtype):
  """NumPy floating arrays and scalars -> ``dtype``; anything else unchanged."""
  if isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind == "f":
    return value.astype(dtype.as_numpy_dtype, copy=False)
  return value


def cast_literal(value):
  """In a float64 run: a Python float (or a flat list of numbers holding a
  float) as a float64 Tensor, a NumPy floating array likewise; else unchanged."""
  dtype = float_dtype()
  if dtype is None or dtype == tf.float32:
    return value
  if isinstance(value, float) or (
      isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind == "f"):
    return tf.constant(value, dtype)
  if isinstance(value, (list, tuple)) and value and all(
      isinstance(v, (int, float)) and not isinstance(v, bool) for v in value) and any(
          isinstance(v, float) for v in value):
    return tf.constant(value, dtype)
  return value


def cast_parameter(value):
  """A value given to a random-variable constructor in a model run: NumPy
  floating arrays and scalars in the model's floating dtype (float32 unless
  the run is float64), as data are; in a float64 run Python float literals
  too (``cast_literal``); half-precision tensors (a mixed-precision Keras
  network's outputs) in the run's dtype.  Unchanged outside a model run."""
  if not in_model_run():
    return value
  if tf.is_tensor(value) and value.dtype in (tf.float16, tf.bfloat16):
    # A network under Keras's mixed-precision policy computes in half precision;
    # its outputs parameterize distributions in the run's dtype.
    return tf.cast(value, float_dtype() or tf.float32)
  if float_dtype() not in (None, tf.float32):
    return cast_literal(value)
  return cast_data(value, tf.float32)
