"""Rodas3: a stiffly accurate, L-stable Rosenbrock method, in a bounded loop.

A Rosenbrock (linearly implicit) method replaces the Newton iterations of an
implicit Runge-Kutta method by linear solves with one matrix per step,

    W = I / (gamma h) - J,    J = df/dy (t, y),    gamma = 1/2.

One step from ``(t, y)`` with step ``h`` solves, for the four stages,

    W k_i = f(t + alpha_i h, y + sum_{j<i} a_ij k_j)
            + sum_{j<i} (c_ij / h) k_j + gamma_i h df/dt (t, y),

(stage 2 reuses ``f(t, y)``: ``alpha_2 = 0``, ``a_21 = 0``) and takes

    y' = y + 2 k_1 + k_3 + k_4      (third order),
    e  = k_4                         (the difference to the embedded second
                                      order solution y + 2 k_1 + k_3).

The coefficients are those of Rodas3 in Sandu, Verwer, Blom, Spee,
Carmichael and Potra, "Benchmarking stiff ODE solvers for atmospheric
chemistry problems II: Rosenbrock solvers", Atmospheric Environment 31
(1997) 3459-3472, as tabulated in KPP's ``rosenbrock`` integrator (the
``ros_*`` arrays): a = [[], [0], [2, 0], [2, 0, 1]], c = [[], [4], [1, -1],
[1, -1, -8/3]], m = [2, 0, 1, 1], e = [0, 0, 0, 1], alpha = [0, 0, 1, 1],
gamma_i = [1/2, 3/2, 0, 0].  The method is stiffly accurate (``y'`` is the
last stage's argument plus ``k_4``) and L-stable: its stability function
vanishes at infinity, so a stiff mode that has decayed stays decayed at any
step size (the test checks ``R(-1e12) ~ 0``).

``W`` is factored once per step and the factorization is reused by the four
solves: as its inverse (``tf.linalg.inv``, an LU factorization with partial
pivoting inside; XLA has no kernel for ``tf.linalg.lu``, so the factors
cannot be kept), each solve then a matrix-vector product. ``J`` and
``df/dt`` come from automatic differentiation of ``fn`` at the step's start,
one reverse pass per row (``JACOBIAN = "rows"``: as fast as the vectorized
``GradientTape.jacobian`` on Robertson's 3 equations, and only the rows
compile under XLA when the solve is differentiated -- ``pfor``'s gradient
needs shapes XLA cannot know; RESULTS section 35), taken with ``f`` in the
same pass at each attempted step's end point and kept only when the step is
accepted (a rejected step's pass is wasted: the loop has no branch).

Error control is ``dormand_prince``'s: the scaled RMS norm of ``e`` against
``atol + rtol max(|y|, |y'|)``, a step accepted when it is at most 1, the
next step ``h min(6, max(0.2, 0.9 err^(-1/3)))`` (the local order of the
estimate is 3), a non-finite error (a singular ``W``, an overflow) rejecting
the step and dividing ``h`` by 5.  Output at requested times is the cubic
Hermite interpolant of ``y, f(y)`` and ``y', f(y')`` over each accepted step
(third order, like the method; Rodas3 has no dense output of its own).

Differentiation is reverse mode through the loop, with the step sizes and
accept decisions under ``tf.stop_gradient`` (the exact derivative of the
computed solution with the steps held fixed): it differentiates through
``J`` too, a second derivative of ``fn``.  A solve that does not reach the
last time within ``max_steps``, whose step underflows, or whose state is
not finite reports ``ok = False``.
"""

import numpy as np
import tensorflow as tf

from edward_lite.ode import dormand_prince
from edward_lite.ode import increments as increments_lib

__all__ = ["solve", "GAMMA"]

GAMMA = 0.5
JACOBIAN = "rows"  # or "pfor": how J and df/dt are taken
_error_norm = dormand_prince._error_norm  # pylint: disable=protected-access
SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 6.


def jacobian(fn, t, y):
  """``(df/dy [n, n], df/dt [n], f [n])`` at ``(t, y)``."""
  zero = tf.UnconnectedGradients.ZERO
  with tf.GradientTape(persistent=JACOBIAN == "rows") as tape:
    tape.watch([t, y])
    dy = fn(t, y)
    rows = tf.unstack(dy) if JACOBIAN == "rows" else None
  if JACOBIAN != "rows":
    j_y, j_t = tape.jacobian(dy, [y, t], unconnected_gradients=zero)
    return j_y, j_t, dy
  grads = [tape.gradient(r, [y, t], unconnected_gradients=zero) for r in rows]
  return tf.stack([g[0] for g in grads]), tf.stack([g[1] for g in grads]), dy


def step(fn, t, y, f, j_y, j_t, h):
  """One Rodas3 step: ``(y', e, y' - y)`` (the increment summed from the
  stages, not subtracted)."""
  n = int(y.shape[0])
  w_inv = tf.linalg.inv(tf.eye(n, dtype=y.dtype) / (GAMMA * h) - j_y)

  def solve_w(rhs):
    return tf.linalg.matvec(w_inv, rhs)

  k1 = solve_w(f + (0.5 * h) * j_t)
  k2 = solve_w(f + (4. / h) * k1 + (1.5 * h) * j_t)
  k3 = solve_w(fn(t + h, y + 2. * k1) + (k1 - k2) / h)
  k4 = solve_w(fn(t + h, y + 2. * k1 + k3) + (k1 - k2 - (8. / 3.) * k3) / h)
  delta = 2. * k1 + k3 + k4
  return y + delta, k4, delta


def solve(fn, y0, times, t0, rtol, atol, max_steps, increments=False):
  """The solution at ``times`` of ``dy/dt = fn(t, y)``, ``y(t0) = y0``.

  Args:
    fn: ``(t, y [n]) -> dy/dt [n]``.
    y0: ``[n]`` floating Tensor.
    times: ``[T]`` nondecreasing, ``>= t0``, in ``y0``'s dtype.
    t0: scalar, the initial time.
    rtol, atol: scalar tolerances.
    max_steps: Python int, the most attempted steps.
    increments: as ``dormand_prince.solve``'s.

  Returns:
    ``(ys [T, n], ok, steps)`` as ``dormand_prince.solve``.
  """
  dtype = y0.dtype
  t_end = times[-1]
  before = tf.reshape(times <= t0, [-1, 1])
  out0 = tf.where(before, tf.zeros_like(y0)[None] if increments else y0[None],
                  tf.constant(np.nan, dtype))
  j0, jt0, f0 = jacobian(fn, t0, y0)
  h0 = tf.stop_gradient(dormand_prince.initial_step(fn, t0, y0, f0, t_end, rtol, atol))

  def cond(i, t, y, f, j_y, j_t, h, out, acc, failed):
    del i, y, f, j_y, j_t, h, out, acc
    return (t < t_end) & ~failed

  def body(i, t, y, f, j_y, j_t, h, out, acc, failed):
    h = tf.minimum(h, t_end - t)
    y_new, e, delta = step(fn, t, y, f, j_y, j_t, h)
    err = tf.stop_gradient(_error_norm(e, y, y_new, rtol, atol))
    finite = tf.math.is_finite(err) & tf.reduce_all(tf.math.is_finite(y_new))
    accept = finite & (err <= 1.)
    factor = tf.where(finite, tf.clip_by_value(
        SAFETY * tf.pow(tf.maximum(err, 1e-10), -1. / 3.), MIN_FACTOR, MAX_FACTOR),
        MIN_FACTOR)
    t_new = t + h
    # A rejected step's y_new may be NaN: evaluate at y then (its result unused).
    y_eval = tf.where(accept, y_new, y)
    j_new, jt_new, f_new = jacobian(fn, t_new, y_eval)
    # The cubic Hermite interpolant on (t, t + h], as y(t + x h) - y(t) = p(x).
    fill = tf.reshape(accept & (times > t) & (times <= t_new), [-1, 1])
    x = tf.where(fill, tf.reshape(tf.stop_gradient((times - t) / h), [-1, 1]), 0.)
    x2, x3 = x * x, x * x * x
    delta = tf.where(accept, delta, tf.zeros_like(delta))  # NaN-free, as y_eval
    p = ((3. * x2 - 2. * x3) * delta + (x3 - 2. * x2 + x) * (h * f)
         + (x3 - x2) * (h * f_new))
    if increments:
      out, acc = increments_lib.fill(out, acc, fill, p, delta, accept)
    else:
      out = tf.where(fill, p + y, out)
    t_next = tf.where(accept, t_new, t)
    h_next = tf.stop_gradient(h * factor)
    failed = h_next <= 1e-12 * tf.maximum(tf.abs(t_next), 1.)
    return (i + 1, t_next, y_eval, tf.where(accept, f_new, f),
            tf.where(accept, j_new, j_y), tf.where(accept, jt_new, j_t), h_next, out, acc,
            failed)

  steps, t, _, _, _, _, _, out, _, failed = tf.while_loop(
      cond, body,
      (tf.constant(0), t0, y0, f0, j0, jt0, h0, out0, tf.zeros_like(y0), tf.constant(False)),
      maximum_iterations=max_steps, name="edward_lite_ode_rodas3")
  ok = (t >= t_end) & ~failed & tf.reduce_all(tf.math.is_finite(out))
  return out, ok, steps
