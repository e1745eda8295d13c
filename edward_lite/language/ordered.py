"""``ed.Ordered(base, size)``: ``size`` independent draws of a scalar
distribution, sorted -- the prior of Stan's ``ordered[K] mu; mu ~ base;`` in
one call.

For ``x_1 < ... < x_K`` the density is

    p(x) = K! prod_k base(x_k),

the law of the order statistics of ``K`` independent ``base`` draws, and
zero (log-probability ``-inf``) off the ordered set.  Up to the constant
``log K!`` this is what Stan's ``ordered`` type with an elementwise prior
statement adds to the target, so a posterior is the same either way (and
the same as ``ed.Flat(support="ordered")`` plus an ``ed.Factor`` of the base
log density).  Samples are sorted draws of ``base``; the event-space
bijector is Stan's ordered transform (``x_1 = u_1``, ``x_k = x_(k-1) +
exp(u_k)``, TFP's ``Ascending``) followed by ``base``'s own elementwise one,
which is increasing for the real line, a half-line and an interval.

An ordered vector of component means removes a mixture's label switching:
the K! relabellings of the posterior become one.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["Ordered"]

tfd, tfb = tfp.distributions, tfp.bijectors


class Ordered(tfd.Distribution):
  """``size`` independent draws of the scalar distribution ``base``, in
  ascending order.

  Args:
    base: a ``tfd.Distribution`` with scalar events (its batch shape is
      this distribution's).
    size: the vector's length K, a positive int.

  Event shape ``[K]``; batch shape ``base.batch_shape``.
  """

  def __init__(self, base, size, validate_args=False, allow_nan_stats=True, name="Ordered"):
    parameters = dict(locals())
    if not isinstance(base, tfd.Distribution):
      raise TypeError(f"ed.Ordered's base must be a distribution (e.g. tfd.Normal(0., 5.)); "
                      f"got {type(base).__name__}.")
    if base.event_shape.rank is None or base.event_shape.rank != 0:
      raise ValueError(f"ed.Ordered's base must have scalar events; {type(base).__name__} "
                       f"has event shape {base.event_shape}.")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
      raise ValueError(f"ed.Ordered's size must be a positive int (the vector's length); "
                       f"got {size!r}.")
    self._base, self._size = base, int(size)
    super().__init__(dtype=base.dtype, reparameterization_type=base.reparameterization_type,
                     validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                     parameters=parameters, name=name)

  @property
  def base(self):
    return self._base

  @property
  def size(self):
    return self._size

  @classmethod
  def _parameter_properties(cls, dtype, num_classes=None):
    return dict(base=tfp.util.BatchedComponentProperties())

  def _event_shape(self):
    return tf.TensorShape([self._size])

  def _event_shape_tensor(self):
    return tf.constant([self._size], tf.int32)

  def _sample_n(self, n, seed=None):
    draws = self._base.sample([self._size, n], seed=seed)  # [K, n, *batch]
    return tf.sort(tf.experimental.numpy.moveaxis(draws, 0, -1), axis=-1)

  def _log_prob(self, x):
    terms = self._base.log_prob(tf.experimental.numpy.moveaxis(x, -1, 0))  # [K, ...]
    log_factorial = tf.math.lgamma(tf.constant(self._size + 1., x.dtype))
    ordered = tf.reduce_all(x[..., 1:] >= x[..., :-1], axis=-1)
    return tf.where(ordered, tf.reduce_sum(terms, 0) + log_factorial,
                    tf.constant(-np.inf, x.dtype))

  def _default_event_space_bijector(self):
    # pylint: disable=protected-access
    inner = self._base.experimental_default_event_space_bijector()
    return tfb.Chain([inner, tfb.Ascending()]) if inner is not None else tfb.Ascending()
