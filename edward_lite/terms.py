"""Terms of the log joint that are not proper random draws.

* ``ed.Factor(log_density, name=...)`` adds ``log_density`` to the log joint:
  Stan's ``target +=``, NumPyro's ``factor``, PyMC's ``Potential``.  It is a
  random variable with a fixed, empty value whose log-probability is the
  term (TFP's ``IncrementLogProb``), so every tracer, ``make_log_joint_fn``,
  the targets, MCMC and VI count it; it is summed when not a scalar.
* ``ed.Flat(low=None, high=None, shape=(), name=...)`` is an improper flat
  prior over the real line, a half-line or an interval -- Stan's ``real x;``,
  ``real<lower=0> s;``, ``real<lower=a, upper=b> p;`` with no prior
  statement.  Its bounds may be other latents.  Its density is 1 on the
  support, so the posterior is proper only if the likelihood makes it so.
  It has no draws: inference starts it from ``init`` (``"uniform"`` works),
  and prior predictive sampling refuses it with an error naming it.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite import dtypes
from edward_lite.random_variable import RandomVariable
from edward_lite.tracing import traceable

__all__ = ["Factor", "Flat", "ImproperUniform"]

tfd, tfb = tfp.distributions, tfp.bijectors


def _factor(log_density, value=None, name=None):
  dist = tfp.experimental.distributions.IncrementLogProb(log_density, name=name or "factor")
  return RandomVariable(dist, value=value, name=name)


_traceable_factor = traceable(_factor)


def Factor(log_density, name=None):  # pylint: disable=invalid-name
  """Adds ``log_density`` (a Tensor, summed if not scalar) to the log joint.

  Args:
    log_density: the term, computed from the program's random variables.
    name: required when the program is used for inference (like every
      random variable's).

  Returns:
    A ``RandomVariable`` whose value is fixed and empty (shape
    ``log_density.shape + [0]``), so tracers see it as fixed, never as a
    latent; its ``distribution.log_prob`` is the term.
  """
  log_density = tf.convert_to_tensor(log_density,
                                     dtype_hint=dtypes.float_dtype() or tf.float32)
  if not log_density.dtype.is_floating:
    raise TypeError(f"ed.Factor '{name}': the log density must be a floating Tensor; got "
                    f"{log_density.dtype.name}.")
  value = tf.zeros(log_density.shape.as_list() + [0], log_density.dtype)
  return _traceable_factor(log_density, value=value, name=name)


class ImproperUniform(tfd.Distribution):
  """Improper uniform density on ``(low, high)`` (either end may be None).

  ``log_prob(x) = 0`` inside the support, ``-inf`` outside.  Its default
  event-space bijector is Stan's transform of a bounded ``real``: identity;
  ``low + exp(u)``; ``high - exp(u)``; ``low + (high - low) sigmoid(u)``.
  Sampling raises: an improper density has no draws.
  """

  def __init__(self, low=None, high=None, shape=(), dtype=tf.float32, validate_args=False,
               allow_nan_stats=True, name="ImproperUniform"):
    parameters = dict(locals())
    with tf.name_scope(name) as name:
      self._low = None if low is None else tf.convert_to_tensor(low, dtype)
      self._high = None if high is None else tf.convert_to_tensor(high, dtype)
      self._shape = tf.TensorShape(shape)
      super().__init__(dtype=dtype, reparameterization_type=tfd.FULLY_REPARAMETERIZED,
                       validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                       parameters=parameters, name=name)

  @classmethod
  def _parameter_properties(cls, dtype, num_classes=None):
    return {}

  @property
  def low(self):
    return self._low

  @property
  def high(self):
    return self._high

  def _batch_shape(self):
    shape = self._shape
    for bound in (self._low, self._high):
      if bound is not None:
        shape = tf.broadcast_static_shape(shape, bound.shape)
    return shape

  def _event_shape(self):
    return tf.TensorShape([])

  def _log_prob(self, x):
    x = tf.convert_to_tensor(x, self.dtype)
    inside = tf.ones_like(x, tf.bool)
    if self._low is not None:
      inside &= x > self._low
    if self._high is not None:
      inside &= x < self._high
    zero = tf.zeros_like(x)
    return tf.broadcast_to(tf.where(inside, zero, -np.inf * tf.ones_like(x)),
                           tf.broadcast_dynamic_shape(tf.shape(x), self._batch_shape_tensor()))

  def _batch_shape_tensor(self):
    return tf.constant(self._batch_shape().as_list(), tf.int32)

  def _sample_n(self, n, seed=None):
    raise NotImplementedError(
        f"'{self.name}' has an improper flat prior (ed.Flat), which has no draws: prior "
        "(predictive) sampling and init='prior' cannot use it; use init='uniform' or "
        "give init= values.")

  def _default_event_space_bijector(self):
    low, high = self._low, self._high
    if low is None and high is None:
      return tfb.Identity()
    if high is None:
      return tfb.Chain([tfb.Shift(low), tfb.Exp()])
    if low is None:
      return tfb.Chain([tfb.Shift(high), tfb.Scale(-tf.ones([], self.dtype)), tfb.Exp()])
    return tfb.Sigmoid(low=low, high=high)

  def placeholder(self, sample_shape=()):
    """A point inside the support (the value while a program is traced)."""
    shape = tf.TensorShape(sample_shape).concatenate(self.batch_shape)
    low, high = self._low, self._high
    zero = tf.zeros(shape, self.dtype)
    if low is None and high is None:
      return zero
    if high is None:
      return zero + low + 1.
    if low is None:
      return zero + high - 1.
    return zero + 0.5 * (low + high)


def _flat(low=None, high=None, shape=(), dtype=None, sample_shape=(), value=None, name=None):
  dtype = dtype or dtypes.float_dtype() or tf.float32
  low, high = (dtypes.cast_literal(b) if isinstance(b, float) else b for b in (low, high))
  dist = ImproperUniform(low, high, shape=shape, dtype=dtype, name=name or "Flat")
  if value is None:
    value = dist.placeholder(sample_shape)
  return RandomVariable(dist, sample_shape=sample_shape, value=value, name=name)


_traceable_flat = traceable(_flat)


def Flat(low=None, high=None, shape=(), dtype=None, sample_shape=(), value=None, name=None):  # pylint: disable=invalid-name
  """An improper flat prior on ``(low, high)``: Stan's unbounded or bounded ``real``.

  Args:
    low, high: bounds (None: unbounded on that side); Tensors, which may be
      other random variables.
    shape: the variable's shape (broadcast with the bounds').
    dtype: floating dtype (default: the model's).
    sample_shape, value, name: as for every random variable.

  Returns:
    A ``RandomVariable`` of ``ImproperUniform``; its value, when not given,
    is a point inside the support (the variable has no draws).
  """
  return _traceable_flat(low=low, high=high, shape=shape, dtype=dtype,
                         sample_shape=sample_shape, value=value, name=name)
