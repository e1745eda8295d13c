"""Forward sensitivities: the solver's steps differentiated alongside them.

For ``dy/dt = f(t, y, theta)`` the sensitivities ``S = dy/d(y0, theta)``
(``[n, m]``) solve

    dS/dt = J_y S + [0 | J_theta],    S(t0) = [I | 0],

``J_y = df/dy`` ``[n, n]``, ``J_theta = df/dtheta`` ``[n, P]``.  The
Dormand-Prince steps are taken on the augmented state ``[y | S]``
(``[n, 1 + m]``) with the step sizes chosen from ``y`` alone: a Runge-Kutta
method applied to the augmented system is exactly the derivative of the
same method applied to ``y`` (internal differentiation, Hairer et al.,
*Solving ODEs I*, II.9), so the gradient is the exact derivative of the
computed solution with the steps held fixed.  Each stage evaluates the
Jacobians by reverse mode (``GradientTape.jacobian``: ``n`` backward passes
of ``f``, vectorized).

The solution is returned under ``tf.custom_gradient``: the gradient of a
loss with upstream ``g [T, n]`` is ``sum_{j,i} g_ji S_j[i, :]``, a
contraction, with no loop in the backward pass (the reverse-mode gradient of
a ``tf.while_loop`` instead stores every step's intermediates and runs a
second loop).  Columns are kept only for the inputs that can be
differentiated (not constants).
"""

import numpy as np
import tensorflow as tf

from edward_lite.ode import dormand_prince

__all__ = ["solve", "differentiable"]

JACOBIAN = "rows"  # or "pfor": how each stage's Jacobians are taken


def differentiable(x):
  """Whether a gradient may be asked of ``x``: eagerly, whether a tape
  watches it; in a graph, whether it is not a constant."""
  if tf.executing_eagerly():
    try:
      # pylint: disable=g-direct-tensorflow-import,import-outside-toplevel
      from tensorflow.python.eager import record
      return bool(record.should_record_backprop([x]))
    except (ImportError, AttributeError):  # pragma: no cover
      return True
  return tf.get_static_value(x) is None


def _jacobians(fn, t, y, theta):
  """``(df/dy [n, n], df/dtheta [n, P], f [n])`` at ``(t, y, theta)``: one
  reverse pass per row when ``JACOBIAN == "rows"``, else
  ``GradientTape.jacobian`` (the passes vectorized by ``pfor``)."""
  with tf.GradientTape(persistent=JACOBIAN == "rows") as tape:
    tape.watch([y, theta])
    dy = fn(t, y, theta)
    rows = tf.unstack(dy) if JACOBIAN == "rows" else None
  zero = tf.UnconnectedGradients.ZERO
  if JACOBIAN != "rows":
    j_y, j_theta = tape.jacobian(dy, [y, theta], unconnected_gradients=zero)
    return j_y, j_theta, dy
  grads = [tape.gradient(r, [y, theta], unconnected_gradients=zero) for r in rows]
  return tf.stack([g[0] for g in grads]), tf.stack([g[1] for g in grads]), dy


def solve(fn, y0, theta, times, t0, rtol, atol, max_steps):
  """``ys [T, n]`` of ``dy/dt = fn(t, y, theta)`` (``y0 [n]``, ``theta [P]``)
  with forward sensitivities as its gradient; NaN where the solve failed."""
  n, p = int(y0.shape[0]), int(theta.shape[0])
  wrt_y0, wrt_theta = differentiable(y0), p > 0 and differentiable(theta)
  dtype = y0.dtype

  @tf.custom_gradient
  def solution(y0, theta):
    columns = ([tf.eye(n, dtype=dtype)] if wrt_y0 else []) + (
        [tf.zeros([n, p], dtype)] if wrt_theta else [])
    if not columns:
      ys, ok, _ = dormand_prince.solve(lambda t, y: fn(t, y, theta), y0, times, t0, rtol,
                                       atol, max_steps)
      return tf.where(ok, ys, tf.constant(np.nan, dtype)), lambda g: (tf.zeros_like(y0),
                                                                       tf.zeros_like(theta))

    def augmented(t, z):
      y, s = z[:, 0], z[:, 1:]
      j_y, j_theta, dy = _jacobians(fn, t, y, theta)
      ds = tf.linalg.matmul(j_y, s)
      if wrt_theta:
        ds += tf.pad(j_theta, [[0, 0], [n if wrt_y0 else 0, 0]])
      return tf.concat([dy[:, None], ds], 1)

    z0 = tf.concat([y0[:, None]] + columns, 1)
    out, ok, _ = dormand_prince.solve(augmented, z0, times, t0, rtol, atol, max_steps,
                                      state_fn=lambda t, y: fn(t, y, theta))
    ys = tf.where(ok, out[:, :, 0], tf.constant(np.nan, dtype))
    sens = out[:, :, 1:]

    def grad(upstream):
      total = tf.einsum("ti,tim->m", upstream, sens)
      g_y0 = total[:n] if wrt_y0 else tf.zeros_like(y0)
      g_theta = total[n if wrt_y0 else 0:] if wrt_theta else tf.zeros_like(theta)
      return g_y0, g_theta

    return ys, grad

  return solution(y0, theta)
