"""Diagnosis for ``ed.vi.fit``: where a non-finite ELBO comes from.

``diagnose`` recomputes a step whose ELBO or gradient was not finite, on
its own draws and data, and names the first non-finite value in the order
it arises (a surrogate parameter, the data, a latent's draws, a model term
via ``nonfinite.explain``, the surrogate's density, a gradient).
``check_finite_start`` refuses, before any compiled work, a fit whose
every step would be skipped.
"""

import numpy as np
import tensorflow as tf

from edward_lite.model import nonfinite
from edward_lite.runtime import console, seeds
from edward_lite.vi.elbo import elbo_and_gradients

__all__ = ["diagnose", "check_finite_start"]


def diagnose(surrogate, target, step_target, seed, samples, stl, step, jit_compile):
  """One sentence: where the first non-finite value of step ``step`` appears.

  ``step_target`` is ``target`` on the step's data (its minibatch).  The
  step's draws, ELBO and gradients are recomputed compiled as in the loop
  (``jit_compile``): XLA draws other random numbers than TensorFlow's kernels.
  """
  params = surrogate.named(surrogate.variables)
  for name, value in params.items():
    if not np.all(np.isfinite(value.numpy())):
      return f"the surrogate parameter '{name}' is not finite."
  _, kwargs, observed = step_target.data
  for name, value in [*kwargs.items(), *observed.items()]:
    if tf.is_tensor(value) and value.dtype.is_floating:
      bad = int(np.sum(~np.isfinite(value.numpy())))
      if bad:
        return (f"the data '{name}' of this step contains {bad} non-finite value(s) "
                "(NaN or inf); remove or impute them.")
  _, elbo_grads, state, log_q = console.without_cache_note(tf.function(
      lambda: elbo_and_gradients(surrogate, step_target, seed, samples, stl,
                                  tf.constant(step)),
      jit_compile=jit_compile, autograph=False))
  values = surrogate.constrained(target, state)
  for name, value in values.items():
    bad = int(np.sum(~np.all(np.isfinite(np.reshape(value.numpy(), [samples, -1])), axis=1)))
    if bad:
      return (f"the draws of latent '{name}' are not finite ({bad} of {samples} draws); "
              "the surrogate's scale may have blown up.")
  flat = target.flatten(target.unconstrain(values))
  reason = nonfinite.explain(step_target, flat, "draws")  # names the term and the cause
  if reason:
    return reason
  bad = int(np.sum(~np.isfinite(log_q.numpy())))
  if bad:
    return f"the surrogate's log density is not finite at {bad} of {samples} draws."
  _, grads = step_target.value_and_gradient(target.unflatten(flat))
  for name, grad in grads.items():
    if not np.all(np.isfinite(grad.numpy())):
      return f"the gradient of the log density with respect to '{name}' is not finite."
  for name, grad in surrogate.named(elbo_grads).items():
    grad = grad.numpy()
    if not np.all(np.isfinite(grad)):
      return f"the ELBO gradient with respect to the surrogate parameter '{name}' is not finite."
    with np.errstate(over="ignore"):
      overflows = not np.all(np.isfinite(np.square(grad)))
    if overflows:
      return (f"the ELBO gradient with respect to the surrogate parameter '{name}' is so "
              f"large ({np.max(np.abs(grad)):.3g}) that the optimizer's squared "
              "gradient overflows; rescale the model (e.g. a tiny scale parameter).")
  return "the non-finite value could not be reproduced by recomputing the step."


START_POINTS = 128  # uniform points tried when the initial location's density is not finite


def check_finite_start(target, loc, radius, seed):
  """Raises ``ValueError`` naming the non-finite term and its likely cause when
  the log density is finite neither at the initial location ``loc`` ``[D]``
  (None for a variational program) nor at any of ``START_POINTS`` points
  uniform on ``[-radius, radius]`` (unconstrained): every step would be
  skipped.  One eager run of the program normally; before compiled work."""
  points = []
  if loc is not None:
    point = np.asarray(loc, target.dtype.as_numpy_dtype)[None]
    if np.all(np.isfinite(point)) and np.isfinite(
        float(tf.add_n(list(nonfinite.terms_at(target, point[0]).values())))):
      return
    points.append(point)
  radius = radius if np.isfinite(radius) and radius > 0 else 2.
  draws = tf.random.stateless_uniform(
      [START_POINTS, target.dim], seeds.stream(seed, "vi_start_points"),
      -radius, radius, dtype=target.dtype)
  if np.isfinite(target.log_prob_flat(draws).numpy()).any():
    return
  points.append(draws.numpy())
  points = np.concatenate(points)
  reason = nonfinite.explain(target, points, "starting points")
  where = "the initial location nor at " if loc is not None else ""
  raise ValueError(
      f"The log density is finite neither at {where}any of {START_POINTS} points drawn "
      f"uniformly in [-{radius:g}, {radius:g}] on the unconstrained space, so every step "
      f"would be skipped" + (f": {reason}" if reason else ".") +
      " Check the model's support and data, or pass init= values inside the support.")
