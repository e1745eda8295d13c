"""A distribution parameter that is a constant outside its domain.

``ed.Normal(mu, -1.)`` has no finite log density at any value of the
latents: the initial-state search would try every start it is allowed and
then advise ``init=``, which cannot help.  The graph trace of
``control_flow.check_python_control_flow`` sees each random variable's
distribution with symbolic latents; a parameter whose value is known there
(``tf.get_static_value``: a literal, or an expression of literals) does not
depend on the latents or the data, so one outside the domain TFP declares
for it (positive scales, rates and concentrations, probabilities in
[0, 1]; ``nonfinite``'s check) is a mistake in the model, refused here in
one sentence before anything compiles.
"""

import numpy as np
import tensorflow as tf

__all__ = ["constant_domain_message"]


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
  from edward_lite.model import nonfinite  # pylint: disable=g-import-not-at-top  (cycle)
  while isinstance(dist, nonfinite._WRAPPERS):  # pylint: disable=protected-access
    dist = dist.distribution  # sample_shape=, Independent: the parameters are the inner's
  for pname, value in dist.parameters.items():
    if pname in nonfinite._SKIP or value is None:  # pylint: disable=protected-access
      continue
    array = _static(value)
    if array is None or array.dtype.kind != "f" or not array.size:
      continue
    try:
      with tf.init_scope():  # eagerly: the domain's bounds are Tensors
        failure = nonfinite._domain_failure(dist, pname, array)  # pylint: disable=protected-access
    except Exception:  # pylint: disable=broad-except  (no declared domain: nothing to say)
      failure = None
    if failure is None:
      continue
    bad, adjective, requirement = failure
    shown = (f"{array.reshape(-1)[0]:g}" if array.size == 1 else
             f"{nonfinite._show(array)}, {int(bad.sum())} {adjective} value(s)")  # pylint: disable=protected-access
    return (f"The {type(dist).__name__} '{name}' has the constant parameter '{pname}' = "
            f"{shown}, outside its domain ({requirement}): its log density is not finite "
            f"for any value of the latents, so no initial point or init= can help; fix the "
            f"model.")
  return None
