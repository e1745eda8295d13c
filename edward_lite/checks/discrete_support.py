"""The support of discrete distributions, by class, for ``support``'s check.

Integers (also float-typed counts such as ``Poisson``'s), signs, ranges
(``Bernoulli`` 0/1, ``Categorical`` labels below its number of classes,
``OrderedLogistic`` categories up to its number of cutpoints, ``Binomial``
counts up to ``total_count``), one-hot vectors, ``Multinomial`` counts
summing to ``total_count``.  ``discrete_failure`` answers
``(expected, bad, event_ndims)``: the words for the support, a boolean mask
of the values (``[*sample_and_batch]``, one entry per event) that are
outside it, and the events' rank; parameter bounds are used only when given
(``random``, see ``support``).
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["DISCRETE", "discrete_failure"]

tfd = tfp.distributions

_NONNEGATIVE_COUNTS = (tfd.Poisson, tfd.NegativeBinomial, tfd.Geometric)
_BOUNDED_COUNTS = (tfd.Binomial, tfd.BetaBinomial)
_COUNT_VECTORS = (tfd.Multinomial, tfd.DirichletMultinomial)
_ORDINAL = (tfd.OrderedLogistic, tfd.StoppingRatioLogistic)  # categories 0..K, K cutpoints
DISCRETE = (tfd.Bernoulli, tfd.Categorical, tfd.OneHotCategorical, tfd.Zipf, tfd.Skellam) + (
    _NONNEGATIVE_COUNTS + _BOUNDED_COUNTS + _COUNT_VECTORS + _ORDINAL)


def discrete_failure(dist, array, random, aligned):
  """``(expected, bad mask, event_ndims)`` or None."""
  with np.errstate(invalid="ignore"):
    if isinstance(dist, tfd.Bernoulli):
      if array.dtype.kind == "b":
        return None
      return "0 or 1", (array != 0) & (array != 1), 0
    if isinstance(dist, _NONNEGATIVE_COUNTS):
      return "non-negative integers", _not_integer(array) | (array < 0), 0
    if isinstance(dist, tfd.Zipf):
      return "positive integers", _not_integer(array) | (array < 1), 0
    if isinstance(dist, tfd.Skellam):
      return "integers", _not_integer(array), 0
    if isinstance(dist, _BOUNDED_COUNTS):
      bad = _not_integer(array) | (array < 0)
      total = _given(dist, "total_count", random, aligned)
      if total is not None:
        try:
          bad = bad | (array > total)
          return f"integers from 0 to total_count ({_number(total)})", bad, 0
        except ValueError:  # shapes do not broadcast: skip the bound
          pass
      return "non-negative integers (at most total_count)", bad, 0
    if isinstance(dist, tfd.Categorical):
      classes = _num_classes(dist)
      bad = _not_integer(array) | (array < 0)
      if classes is None:
        return "non-negative integer labels", bad, 0
      return (f"integer labels from 0 to {classes - 1} (it has {classes} classes)",
              bad | (array >= classes), 0)
    if isinstance(dist, _ORDINAL):
      bad = _not_integer(array) | (array < 0)
      try:  # the cutpoints' number is static even where their values are latent
        cuts = tf.compat.dimension_value(tf.TensorShape(dist.cutpoints.shape)[-1])
      except (ValueError, IndexError):
        cuts = None
      if cuts is None:
        return "non-negative integer categories", bad, 0
      return (f"integer categories from 0 to {cuts} (it has {cuts} cutpoints)",
              bad | (array > cuts), 0)
    if isinstance(dist, tfd.OneHotCategorical):
      if array.ndim == 0:
        return None
      entries = (array != 0) & (array != 1)
      return ("one-hot vectors (entries 0 or 1, exactly one 1)",
              entries.any(-1) | (np.sum(array, -1) != 1), 1)
    if isinstance(dist, _COUNT_VECTORS):
      if array.ndim == 0:
        return None
      bad = (_not_integer(array) | (array < 0)).any(-1)
      total = _given(dist, "total_count", random, aligned)
      if total is not None:
        try:
          bad = bad | (np.sum(array, -1) != total)
          return (f"vectors of non-negative integer counts summing to total_count "
                  f"({_number(total)})", bad, 1)
        except ValueError:
          pass
      return "vectors of non-negative integer counts", bad, 1
  return None


def _num_classes(dist):
  param = dist.logits if dist.logits is not None else dist.probs
  try:
    classes = tf.compat.dimension_value(tf.TensorShape(param.shape)[-1])
  except (ValueError, IndexError):
    return None
  return classes


def _not_integer(array):
  if array.dtype.kind in "iub":
    return np.zeros(array.shape, bool)
  with np.errstate(invalid="ignore"):
    return ~np.isfinite(array) | (np.floor(array) != array)


def _given(dist, attribute, random, aligned):
  """The value of a parameter as a NumPy array, or None if it is random,
  missing, or cannot be broadcast against the value."""
  if not aligned or random(lambda d: getattr(d, attribute)):
    return None
  try:
    param = getattr(dist, attribute)
    return None if param is None else np.asarray(param)
  except (AttributeError, TypeError, ValueError, NotImplementedError):  # absent, or symbolic
    return None


def _number(array):
  array = np.asarray(array)
  if array.size == 1:
    item = array.reshape(()).item()
    return f"{item:g}" if isinstance(item, float) else str(item)
  return "given per element"
