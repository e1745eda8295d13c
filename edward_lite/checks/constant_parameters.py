"""A distribution parameter that is a constant outside its domain.

``ed.Normal(mu, -1.)`` has no finite log density at any value of the
latents: the initial-state search would try every start it is allowed and
then advise ``init=``, which cannot help.  The graph trace of
``control_flow.check_python_control_flow`` sees each random variable's
distribution with symbolic latents; a parameter whose value is known there
(``tf.get_static_value``: a literal, or an expression of literals) does not
depend on the latents or the data, so one outside the domain TFP declares
for it (positive scales, rates and concentrations, probabilities in
[0, 1]: ``domain_failure``, which ``nonfinite`` shares) is a mistake in
the model, refused here in one sentence before anything compiles.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["constant_domain_message", "domain_failure", "show_array", "SKIP", "WRAPPERS"]

tfd, tfb = tfp.distributions, tfp.bijectors

# Distributions whose parameters are their inner distribution's.
WRAPPERS = (tfd.Independent, tfd.Sample, tfd.BatchReshape, tfd.BatchBroadcast)
# Constructor arguments that are not parameters with a domain.
SKIP = ("name", "validate_args", "allow_nan_stats", "dtype", "force_probs_to_zero_outside_support")


def _static(value):
  """The value as a NumPy array if it is a literal of the program: a
  Python or NumPy number or array, or a graph Tensor computed from
  literals.  Not an eager Tensor or a captured one: the program's arguments
  (data) reach it so, and their errors name the argument
  (``nonfinite.explain``)."""
  if isinstance(value, (float, int, np.ndarray, np.generic, list, tuple)):
    try:
      return np.asarray(value)
    except Exception:  # pylint: disable=broad-except
      return None
  if tf.is_tensor(value) and hasattr(value, "graph"):  # an eager Tensor has no graph
    if value.op.type == "Placeholder":
      return None
    try:
      return tf.get_static_value(value)
    except Exception:  # pylint: disable=broad-except
      return None
  return None


def constant_domain_message(name, dist):
  """The sentence for the first constant parameter of random variable
  ``name``'s distribution ``dist`` outside its domain, or None."""
  while isinstance(dist, WRAPPERS):
    dist = dist.distribution  # sample_shape=, Independent: the parameters are the inner's
  for pname, value in dist.parameters.items():
    if pname in SKIP or value is None:
      continue
    array = _static(value)
    if array is None or array.dtype.kind != "f" or not array.size:
      continue
    try:
      with tf.init_scope():  # eagerly: the domain's bounds are Tensors
        failure = domain_failure(dist, pname, array)
    except Exception:  # pylint: disable=broad-except  (no declared domain: nothing to say)
      failure = None
    if failure is None:
      continue
    bad, adjective, requirement = failure
    shown = (f"{array.reshape(-1)[0]:g}" if array.size == 1 else
             f"{show_array(array)}, {int(bad.sum())} {adjective} value(s)")
    return (f"The {type(dist).__name__} '{name}' has the constant parameter '{pname}' = "
            f"{shown}, outside its domain ({requirement}): its log density is not finite "
            f"for any value of the latents, so no initial point or init= can help; fix the "
            f"model.")
  return None


def domain_failure(dist, pname, array):
  """``(bad mask, adjective, requirement)`` if a scalar-event parameter with a positive or
  unit-interval domain (TFP's parameter properties) has values outside it."""
  try:
    props = type(dist).parameter_properties(tf.as_dtype(array.dtype))[pname]
    if props.event_ndims not in (0, None):
      return None
    bijector = props.default_constraining_bijector_fn()
  except Exception:  # pylint: disable=broad-except
    return None
  finite = np.isfinite(array)
  if isinstance(bijector, (tfb.Softplus, tfb.Exp)):
    low = float(np.asarray(getattr(bijector, "low", None) or 0.))
    if low <= 2 * np.finfo(array.dtype).eps:
      bad = finite & (array <= 0)
      adjective, requirement = "non-positive", f"'{pname}' must be positive"
    else:
      bad = finite & (array <= low)
      adjective, requirement = "too small", f"'{pname}' must be greater than {low:g}"
  elif isinstance(bijector, tfb.Sigmoid) and getattr(bijector, "low", None) is None:
    bad = finite & ((array < 0) | (array > 1))
    adjective, requirement = "out-of-range", f"'{pname}' is a probability, in [0, 1]"
  else:
    return None
  return (bad, adjective, requirement) if bad.any() else None


def show_array(array):
  """A short one-line rendering of ``array``."""
  return " ".join(np.array2string(np.asarray(array), threshold=6, precision=4, separator=", ",
                                  max_line_width=10**6).split())
