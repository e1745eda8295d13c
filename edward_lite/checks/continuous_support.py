"""The support of continuous distributions, by their event-space bijector, and its words.

TFP describes the support by a default event-space bijector ``b``
(unconstrained -> support): a value ``x`` lies in the closure of the support
iff ``b.forward(b.inverse(x))`` equals ``x`` to ``sqrt(eps)`` of its dtype
(off-support values come back as NaN or as another point: a Dirichlet value
is renormalised, a non-symmetric matrix symmetrised).  A point of the
boundary (``b.inverse(x)`` infinite: ``Gamma`` at 0) is accepted iff its log
density is finite there.  Values TensorFlow cannot invert (a Cholesky
factorisation fails) are tested for symmetric positive-definiteness with
NumPy.  ``bijector_failure`` answers ``(expected, bad, event_ndims)`` as
``discrete_support.discrete_failure`` does; ``support_text`` words the
support (``"vectors on the probability simplex ..."``) for the messages.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.language.bounds import Bounds

__all__ = ["bijector_failure", "support_text", "UNEVALUATED"]

tfb = tfp.bijectors

# What TFP and NumPy raise when a distribution or bijector cannot be evaluated
# at a value (its shape or dtype, a method it lacks, a symbolic Tensor, an op
# that fails): the check is skipped, and the target's own evaluation reports
# whatever is wrong.
UNEVALUATED = (TypeError, ValueError, NotImplementedError, tf.errors.OpError)


def _tolerance(dtype):
  return float(np.sqrt(np.finfo(dtype).eps))


def bijector_failure(dist, bijector, value, array):
  """``(expected, bad mask, event_ndims)`` or None, by the bijector round trip."""
  event_ndims = bijector.inverse_min_event_ndims
  u_event_ndims = bijector.forward_min_event_ndims
  if not isinstance(event_ndims, (int, np.integer)) or not isinstance(
      u_event_ndims, (int, np.integer)) or array.ndim < event_ndims:
    return None  # structured (JointMap) bijectors
  event_ndims, u_event_ndims = int(event_ndims), int(u_event_ndims)
  expected = support_text(bijector)
  x = tf.convert_to_tensor(value)
  try:
    u = bijector.inverse(x)
    # A new tensor: TFP's bijector cache would hand back ``x`` for ``u``.
    back = np.asarray(bijector.forward(tf.identity(u)))
    u = np.asarray(u)
  except tf.errors.InvalidArgumentError:  # a failed Cholesky: not positive definite
    if event_ndims != 2:
      return None
    return "symmetric positive-definite matrices", _not_positive_definite(array), 2
  except UNEVALUATED:  # the bijector cannot round-trip this value (shape, dtype): not checkable
    return None
  if back.shape != array.shape:
    return None
  event_axes = tuple(range(array.ndim - event_ndims, array.ndim))
  tol = _tolerance(array.dtype)
  with np.errstate(invalid="ignore", over="ignore"):
    exterior = ~np.isclose(back, array, rtol=tol, atol=tol).all(axis=event_axes)
    u_axes = tuple(range(u.ndim - u_event_ndims, u.ndim))
    boundary = ~np.isfinite(u).all(axis=u_axes)
  if boundary.shape != exterior.shape:
    boundary = np.zeros_like(exterior)
  boundary &= ~exterior
  bad = exterior
  if boundary.any():  # on the boundary: fine iff the density is finite there
    try:
      log_prob = np.asarray(dist.log_prob(x))
    except UNEVALUATED:  # no log_prob here: the boundary values are not judged
      log_prob = None
    if log_prob is not None:
      extra = exterior.ndim - log_prob.ndim
      infinite = ~np.isfinite(log_prob).reshape(log_prob.shape + (1,) * max(extra, 0))
      try:
        bad = exterior | (boundary & infinite)
      except ValueError:
        pass
  return expected, bad, event_ndims


def _not_positive_definite(array):
  symmetric = np.isclose(array, np.swapaxes(array, -1, -2),
                         rtol=_tolerance(array.dtype), atol=_tolerance(array.dtype)).all((-2, -1))
  with np.errstate(invalid="ignore"):
    finite = np.isfinite(array).all((-2, -1))
    safe = np.where(finite[..., None, None], array, 0.)
    smallest = np.linalg.eigvalsh((safe + np.swapaxes(safe, -1, -2)) / 2)[..., 0]
  return ~(symmetric & finite & (smallest > 0))


def _scalar_text(param):
  try:
    array = np.asarray(param)
  except (TypeError, ValueError, NotImplementedError):  # symbolic (in a trace), or not numeric
    return None
  return f"{array.reshape(()).item():g}" if array.size == 1 else None


def support_text(bijector):
  """Words for the support a default event-space bijector maps onto."""
  if isinstance(bijector, tfb.FillScaleTriL):
    return "lower-triangular matrices with a positive diagonal (Cholesky factors)"
  parts = list(bijector.bijectors) if isinstance(bijector, tfb.Chain) else [bijector]
  kinds = {type(b) for b in parts}
  if tfb.Ascending in kinds:
    return "increasing vectors (each entry above the one before it)"
  if kinds == {tfb.Cumsum, tfb.Exp}:
    return "positive increasing vectors (each entry above the one before it)"
  if tfb.CholeskyOuterProduct in kinds:
    if tfb.CorrelationCholesky in kinds:
      return "correlation matrices (symmetric positive-definite with unit diagonal)"
    return "symmetric positive-definite matrices"
  if kinds == {tfb.CorrelationCholesky}:
    return "Cholesky factors of correlation matrices"
  if kinds & {tfb.SoftmaxCentered}:
    return "vectors on the probability simplex (non-negative entries summing to 1)"
  if isinstance(bijector, Bounds):
    if bijector.finite_low.all() and not bijector.finite_high.any():
      text = _scalar_text(bijector.low)
      return f"values of at least {text}" if text is not None else "values above its lower bound"
    if not bijector.finite_low.any() and bijector.finite_high.all():
      text = _scalar_text(bijector.high)
      return f"values of at most {text}" if text is not None else "values below its upper bound"
    return "values between its low and high (either may be infinite)"
  if isinstance(bijector, tfb.Sigmoid):
    low, high = getattr(bijector, "low", None), getattr(bijector, "high", None)
    if low is None and high is None:
      return "values in [0, 1] (with a finite density)"
    low, high = _scalar_text(low), _scalar_text(high)
    if low is not None and high is not None:
      return f"values in [{low}, {high}] (with a finite density)"
    return "values between its low and high"
  if kinds <= {tfb.Softplus, tfb.Exp, tfb.Reciprocal}:
    return "non-negative values (with a finite density)"
  shifts = [b for b in parts if isinstance(b, tfb.Shift)]
  if shifts and kinds - {tfb.Shift} <= {tfb.Softplus, tfb.Exp}:
    low = _scalar_text(shifts[0].shift)
    return f"values of at least {low}" if low is not None else "values above its lower bound"
  return f"values in its support (the range of TFP's {bijector.name} bijector)"
