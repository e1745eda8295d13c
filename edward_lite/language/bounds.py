"""The support transform of an interval whose ends may be infinite.

TFP's ``TruncatedNormal`` accepts ``low=-inf`` or ``high=inf`` (a normal
truncated on one side, as Stan's ``normal(mu, sigma) T[0, ]``): its density
and draws are right there, but its default event-space bijector,
``Sigmoid(low, high)``, is NaN or infinite at every point once an end is
infinite.  ``Bounds`` maps the real line onto ``(low, high)`` elementwise:
Stan's logit transform for a finite interval and, for a half line, TFP's
softplus (its transform of a ``HalfNormal``: linear far from the bound, so
a normal's tail stays a normal's tail, where Stan's exp would skew it):

    both ends finite:  y = low + (high - low) sigmoid(x)
    low only:          y = low + softplus(x)
    high only:         y = high - softplus(-x)
    neither:           y = x

with ``log |dy/dx|`` = ``log(high - low) + log sigmoid(x) + log sigmoid(-x)``,
``log sigmoid(x)``, ``log sigmoid(-x)`` and 0.  Which ends are infinite is
read when the program is traced (an infinite end is a NumPy value or a
constant; an end computed from other latents is taken as finite); every
branch is evaluated at a finite stand-in where it is not selected, so
neither values nor gradients meet a NaN.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["Bounds", "infinite"]


def infinite(end):
  """Boolean NumPy mask of the infinite elements of ``end`` (a bound),
  or None when its value is not known while tracing (an end computed from
  other variables)."""
  value = tf.get_static_value(end)
  return None if value is None else np.isinf(value)


class Bounds(tfp.bijectors.Bijector):
  """Elementwise bijection from the real line onto ``(low, high)``.

  Args:
    low, high: the ends, broadcasting against the values, ``low < high``.
      An infinite end must be known when the program is traced (a NumPy
      value or a constant); an end computed from other variables is
      taken as finite.
    dtype: the values' floating dtype.
  """

  def __init__(self, low, high, dtype, name="bounds"):
    parameters = dict(locals())
    low, high = tf.convert_to_tensor(low, dtype), tf.convert_to_tensor(high, dtype)
    # Which ends are finite, per element (static: it picks each one's branch).
    self.finite_low, self.finite_high = _finite(low), _finite(high)  # NumPy masks
    both = self.finite_low & self.finite_high
    self._both = tf.constant(both)
    self._low_only = tf.constant(self.finite_low & ~self.finite_high)
    self._high_only = tf.constant(~self.finite_low & self.finite_high)
    # The ends with 0 for an infinite one, and the width 1 where not both
    # are finite: every branch stays finite where it is not taken.
    self.low, self.high = low, high
    self._lo = tf.where(self.finite_low, low, tf.zeros([], dtype))
    self._hi = tf.where(self.finite_high, high, tf.zeros([], dtype))
    self._width = tf.where(both, self._hi - self._lo, tf.ones([], dtype))
    super().__init__(forward_min_event_ndims=0, is_constant_jacobian=False,
                     validate_args=False, dtype=dtype, parameters=parameters, name=name)

  @classmethod
  def _parameter_properties(cls, dtype):
    return {}

  def _is_increasing(self):
    return True

  def _forward(self, x):
    softplus = tf.math.softplus
    return tf.where(self._both, self._lo + self._width * tf.sigmoid(x),
                    tf.where(self._low_only, self._lo + softplus(x),
                             tf.where(self._high_only, self._hi - softplus(-x), x)))

  def _inverse(self, y):
    inverse_softplus = tfp.math.softplus_inverse
    # Stand-ins inside each branch's domain where the branch is not taken.
    y_both = tf.where(self._both, y, self._lo + 0.5 * self._width)
    y_low = tf.where(self._low_only, y, self._lo + 1.)
    y_high = tf.where(self._high_only, y, self._hi - 1.)
    return tf.where(self._both, tf.math.log(y_both - self._lo) - tf.math.log(self._hi - y_both),
                    tf.where(self._low_only, inverse_softplus(y_low - self._lo),
                             tf.where(self._high_only, -inverse_softplus(self._hi - y_high), y)))

  def _forward_log_det_jacobian(self, x):
    log_sigmoid = tf.math.log_sigmoid
    zero = tf.zeros_like(x)
    return tf.where(self._both, tf.math.log(self._width) + log_sigmoid(x) + log_sigmoid(-x),
                    tf.where(self._low_only, log_sigmoid(x),
                             tf.where(self._high_only, log_sigmoid(-x), zero)))


def _finite(end):
  """``end``'s finite elements: all but the infinities known while tracing."""
  mask = infinite(end)
  if mask is None:
    return np.ones(end.shape if end.shape.is_fully_defined() else [], bool)
  return ~mask
