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

Values ``f`` closes over (a latent rate read from the enclosing program
rather than passed in ``theta``) are parameters too: ``captured_inputs``
finds the floating Tensors a trace of ``f`` captures, and their columns
follow ``theta``'s (``J_c = df/dc`` taken by watching the captured Tensor
itself: each use inside the solver's loop records the capture on the tape).

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

__all__ = ["solve", "differentiable", "captured_inputs"]

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


def captured_inputs(fn, t0, y0, theta):
  """The floating Tensors that ``fn(t, y, theta)`` closes over and that a
  gradient may be asked of (``differentiable``), in a list without repeats:
  the external captures of one trace of ``fn`` with ``t``, ``y`` and
  ``theta`` as its inputs (so values passed through ``theta`` are not
  among them).  Also returns how many numbers they hold, ``None`` when
  forward sensitivities cannot reach them all: ``fn`` reads a variable (a
  resource capture) or a captured Tensor's shape is not known."""
  probe = tf.function(fn, autograph=False).get_concrete_function(
      tf.TensorSpec(t0.shape, t0.dtype), tf.TensorSpec(y0.shape, y0.dtype),
      tf.TensorSpec(theta.shape, theta.dtype))
  captured, seen, size = [], set(), 0
  for value in probe.graph.external_captures:
    if value.dtype == tf.resource:
      size = None
    elif value.dtype.is_floating and id(value) not in seen and differentiable(value):
      seen.add(id(value))
      captured.append(value)
      if size is not None:
        size = (int(np.prod(value.shape.as_list())) + size
                if value.shape.is_fully_defined() else None)
  return captured, size


def _jacobians(fn, t, y, theta, captured):
  """``(df/dy [n, n], df/dtheta [n, P], df/dc [n, Q], f [n])`` at ``(t, y,
  theta)``, ``c`` the ``captured`` Tensors flattened: one reverse pass per
  row when ``JACOBIAN == "rows"``, else ``GradientTape.jacobian`` (the
  passes vectorized by ``pfor``)."""
  sources = [y, theta] + list(captured)
  n = int(y.shape[0])
  with tf.GradientTape(persistent=JACOBIAN == "rows") as tape:
    tape.watch(sources)
    dy = fn(t, y, theta)
    rows = tf.unstack(dy) if JACOBIAN == "rows" else None
  zero = tf.UnconnectedGradients.ZERO
  if JACOBIAN != "rows":
    js = tape.jacobian(dy, sources, unconnected_gradients=zero)
  else:
    grads = [tape.gradient(r, sources, unconnected_gradients=zero) for r in rows]
    js = [tf.stack([g[k] for g in grads]) for k in range(len(sources))]
  j_c = tf.concat([tf.cast(tf.reshape(j, [n, -1]), y.dtype) for j in js[2:]], 1) if (
      captured) else None
  return js[0], js[1], j_c, dy


def solve(fn, y0, theta, times, t0, rtol, atol, max_steps, captured=(), increments=False):
  """``ys [T, n]`` of ``dy/dt = fn(t, y, theta)`` (``y0 [n]``, ``theta [P]``)
  with forward sensitivities as its gradient, also to the ``captured``
  Tensors ``fn`` closes over (``captured_inputs``); NaN where the solve
  failed.  With ``increments``, ``y(times[j]) - y(times[j-1])`` and their
  sensitivities (``dormand_prince.solve``'s)."""
  n, p = int(y0.shape[0]), int(theta.shape[0])
  wrt_y0, wrt_theta = differentiable(y0), p > 0 and differentiable(theta)
  captured = list(captured)
  q = sum(int(np.prod(c.shape.as_list())) for c in captured)
  dtype = y0.dtype

  @tf.custom_gradient
  def solution(y0, theta, *captured_values):
    del captured_values  # fn reads them by closure; inputs here for their gradient
    columns = ([tf.eye(n, dtype=dtype)] if wrt_y0 else []) + (
        [tf.zeros([n, p], dtype)] if wrt_theta else []) + (
            [tf.zeros([n, q], dtype)] if captured else [])
    if not columns:
      ys, ok, _ = dormand_prince.solve(lambda t, y: fn(t, y, theta), y0, times, t0, rtol,
                                       atol, max_steps, increments=increments)
      return tf.where(ok, ys, tf.constant(np.nan, dtype)), lambda g: (tf.zeros_like(y0),
                                                                       tf.zeros_like(theta))
    start = n if wrt_y0 else 0

    def augmented(t, z):
      y, s = z[:, 0], z[:, 1:]
      j_y, j_theta, j_c, dy = _jacobians(fn, t, y, theta, captured)
      forcing = ([j_theta] if wrt_theta else []) + ([j_c] if captured else [])
      ds = tf.linalg.matmul(j_y, s)
      if forcing:
        ds += tf.pad(tf.concat(forcing, 1), [[0, 0], [start, 0]])
      return tf.concat([dy[:, None], ds], 1)

    z0 = tf.concat([y0[:, None]] + columns, 1)
    out, ok, _ = dormand_prince.solve(augmented, z0, times, t0, rtol, atol, max_steps,
                                      state_fn=lambda t, y: fn(t, y, theta),
                                      increments=increments)
    ys = tf.where(ok, out[:, :, 0], tf.constant(np.nan, dtype))
    sens = out[:, :, 1:]

    def grad(upstream):
      total = tf.einsum("ti,tim->m", upstream, sens)
      g_y0 = total[:n] if wrt_y0 else tf.zeros_like(y0)
      g_theta = total[start:start + p] if wrt_theta else tf.zeros_like(theta)
      if not captured:
        return g_y0, g_theta
      rest = total[start + (p if wrt_theta else 0):]
      pieces = tf.split(rest, [int(np.prod(c.shape.as_list())) for c in captured])
      return (g_y0, g_theta) + tuple(tf.cast(tf.reshape(piece, c.shape), c.dtype)
                                     for c, piece in zip(captured, pieces))

    return ys, grad

  return solution(y0, theta, *captured)
