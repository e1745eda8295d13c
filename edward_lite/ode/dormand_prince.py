"""The Dormand-Prince 5(4) pair with a step-size controller, in a bounded loop.

One step from ``(t, y)`` with step ``h`` evaluates the stages

    k_1 = f(t, y)    (the last stage of the previous step: "first same as last")
    k_s = f(t + c_s h, y + h sum_{j<s} a_sj k_j),    s = 2..7,

and takes the fifth-order solution ``y' = y + h sum_s b_s k_s`` (``k_7 =
f(t + h, y')``).  The embedded fourth-order solution gives the error
estimate ``e = h sum_s (b_s - b*_s) k_s``, measured as

    err = sqrt(mean_i (e_i / (atol + rtol max(|y_i|, |y'_i|)))^2).

The step is accepted when ``err <= 1``; either way the next step is
``h min(10, max(0.2, 0.9 err^(-1/5)))`` (Hairer, Norsett and Wanner,
*Solving ODEs I*, II.4; Shampine 1986 for the coefficients).  A non-finite
``err`` (the state overflowed) rejects the step and divides ``h`` by 5.

Output at requested times uses the fourth-order dense output of the pair:
the quartic through ``y``, ``y'``, the midpoint ``y + h sum_s m_s k_s`` and
the slopes ``k_1``, ``k_7`` (the interpolant of TFP's ``DormandPrince``),
written as ``y + p(x)`` with ``p``'s coefficients from the increments, so
that ``increments=True`` (``edward_lite.ode.increments``) sums them alone.
Every accepted step from ``t`` to ``t + h`` fills the outputs at times in
``(t, t + h]``, so the output grid does not shorten the steps.

The loop is a ``tf.while_loop`` with ``maximum_iterations=max_steps``
(attempted steps, accepted or not): XLA compiles it and its gradient.  The
step sizes and the accept decisions are computed under ``tf.stop_gradient``:
a gradient through the loop is then the exact derivative of the computed
solution with the step sequence held fixed (the discrete sensitivities),
not a derivative of the controller's choices.  A solve that does not reach
the last time within ``max_steps``, whose step underflows, or whose state
is not finite ends early and reports ``ok = False``.
"""

import numpy as np
import tensorflow as tf

from edward_lite.ode import increments as increments_lib

__all__ = ["solve", "A", "B", "B_ERROR", "B_MID", "C"]

C = np.array([0., 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1., 1.])
A = [
    [],
    [1 / 5],
    [3 / 40, 9 / 40],
    [44 / 45, -56 / 15, 32 / 9],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
    [35 / 384, 0., 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
]
B = np.array([35 / 384, 0., 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.])
# b - b*: the fifth- minus the fourth-order weights.
B_ERROR = B - np.array([5179 / 57600, 0., 7571 / 16695, 393 / 640, -92097 / 339200,
                        187 / 2100, 1 / 40])
# The midpoint of the dense output, y(t + h/2) ~ y + h sum_s B_MID_s k_s.
B_MID = np.array([6025192743 / 30085553152, 0., 51252292925 / 65400821598,
                  -2691868925 / 45128329728, 187940372067 / 1594534317056,
                  -1776094331 / 19743644256, 11237099 / 235043384]) / 2

SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.


def _combine(weights, ks):
  """``sum_s w_s k_s`` over the nonzero weights (Python floats)."""
  terms = [w * k for w, k in zip(weights, ks) if w != 0.]
  return tf.add_n(terms) if len(terms) > 1 else terms[0]


def _error_norm(e, y, y_new, rtol, atol):
  """The scaled RMS error of the states (column 0 of an augmented ``[n, k]``
  state: sensitivities, in the other columns, do not choose the steps)."""
  if y.shape.rank == 2:
    e, y, y_new = e[:, 0], y[:, 0], y_new[:, 0]
  scale = atol + rtol * tf.maximum(tf.abs(y), tf.abs(y_new))
  return tf.sqrt(tf.reduce_mean(tf.square(e / scale)))


def initial_step(fn, t0, y0, f0, t_end, rtol, atol):
  """Hairer's starting step: ``h = 0.01 |y0| / |f0|`` (scaled norms), refined
  by one Euler trial so that ``h^5 |f''| ~ 0.01``, at most ``t_end - t0``."""
  scale = atol + rtol * tf.abs(y0)
  d0 = tf.sqrt(tf.reduce_mean(tf.square(y0 / scale)))
  d1 = tf.sqrt(tf.reduce_mean(tf.square(f0 / scale)))
  tiny = tf.constant(1e-5, y0.dtype)
  h0 = tf.where((d0 < tiny) | (d1 < tiny), tf.constant(1e-6, y0.dtype), 0.01 * d0 / d1)
  f1 = fn(t0 + h0, y0 + h0 * f0)
  d2 = tf.sqrt(tf.reduce_mean(tf.square((f1 - f0) / scale))) / h0
  big = tf.maximum(d1, d2)
  h1 = tf.where(big <= 1e-15, tf.maximum(tf.constant(1e-6, y0.dtype), h0 * 1e-3),
                tf.pow(0.01 / big, 0.2))
  h = tf.minimum(tf.minimum(100. * h0, h1), t_end - t0)
  return tf.where(tf.math.is_finite(h) & (h > 0.), h, t_end - t0)


def solve(fn, y0, times, t0, rtol, atol, max_steps, state_fn=None, increments=False):
  """The solution at ``times`` of ``dy/dt = fn(t, y)``, ``y(t0) = y0``.

  Args:
    fn: ``(t, y [n]) -> dy/dt [n]``, or, for a state augmented with
      sensitivities, ``(t, Y [n, k]) -> dY/dt [n, k]`` whose column 0 are the
      states (only they enter the error norm).
    y0: ``[n]`` or ``[n, k]`` floating Tensor.
    times: ``[T]`` nondecreasing, ``>= t0``, in ``y0``'s dtype.
    t0: scalar, the initial time.
    rtol, atol: scalar tolerances.
    max_steps: Python int, the most attempted steps.
    state_fn: for an augmented state, ``(t, y [n]) -> dy/dt [n]`` (the
      states' right-hand side alone, for the starting step).
    increments: return ``y(times[j]) - y(times[j-1])`` (row 0 from ``t0``)
      summed from the steps (``edward_lite.ode.increments``), not states.

  Returns:
    ``(ys [T, n] (or [T, n, k]), ok, steps)``: the states at ``times`` (unfilled rows are
    NaN when the solve failed), whether it reached ``times[-1]`` with finite
    states, and the attempted steps (an int32 scalar).
  """
  dtype = y0.dtype
  t_end = times[-1]
  before = tf.reshape(times <= t0, [-1] + [1] * y0.shape.rank)
  out0 = tf.where(before, tf.zeros_like(y0)[None] if increments else y0[None],
                  tf.constant(np.nan, dtype))
  f0 = fn(t0, y0)
  if y0.shape.rank == 2:
    h0 = initial_step(state_fn, t0, y0[:, 0], f0[:, 0], t_end, rtol, atol)
  else:
    h0 = initial_step(fn, t0, y0, f0, t_end, rtol, atol)
  h0 = tf.stop_gradient(h0)

  def cond(t, y, f, h, out, acc, failed):
    del y, f, h, out, acc
    return (t < t_end) & ~failed

  def body(t, y, f, h, out, acc, failed):
    h = tf.minimum(h, t_end - t)
    ks = [f]
    for s in range(1, 7):
      ks.append(fn(t + C[s] * h, y + h * _combine(A[s], ks)))
    delta = h * _combine(B[:6], ks[:6])
    y_new = y + delta  # equals the 7th stage's argument
    err = tf.stop_gradient(_error_norm(h * _combine(B_ERROR, ks), y, y_new, rtol, atol))
    finite = tf.math.is_finite(err)
    accept = finite & (err <= 1.)
    factor = tf.where(finite, tf.clip_by_value(
        SAFETY * tf.pow(tf.maximum(err, 1e-10), -0.2), MIN_FACTOR, MAX_FACTOR), MIN_FACTOR)
    t_new = t + h
    # Dense output on (t, t + h]: y(t + x h) - y(t) = p(x), the quartic
    # through 0, the midpoint's and the step's increments, and the slopes f,
    # k7 (its coefficients from increments, not states: nothing cancels).
    delta_mid = h * _combine(B_MID, ks)
    f_new = ks[6]
    a = -2. * h * f + 2. * h * f_new - 8. * delta + 16. * delta_mid
    b = 5. * h * f - 3. * h * f_new + 14. * delta - 32. * delta_mid
    c = -4. * h * f + h * f_new - 5. * delta + 16. * delta_mid
    fill = tf.reshape(accept & (times > t) & (times <= t_new), [-1] + [1] * y.shape.rank)
    # x in (0, 1] where filled, 0 elsewhere: a huge x outside the step would
    # give inf * 0 = NaN in the reverse-mode gradient of the unselected branch.
    x = tf.where(fill, tf.reshape(tf.stop_gradient((times - t) / h), fill.shape), 0.)
    p = (((a * x + b) * x + c) * x + h * f) * x
    if increments:
      out, acc = increments_lib.fill(out, acc, fill, p, delta, accept)
    else:
      out = tf.where(fill, p + y, out)
    t_next = tf.where(accept, t_new, t)
    h_next = tf.stop_gradient(h * factor)
    failed = h_next <= 1e-12 * tf.maximum(tf.abs(t_next), 1.)
    return (t_next, tf.where(accept, y_new, y), tf.where(accept, f_new, f), h_next, out,
            acc, failed)

  steps = tf.constant(0)

  def counted_cond(i, *state):
    del i
    return cond(*state)

  def counted_body(i, *state):
    return (i + 1,) + tuple(body(*state))

  steps, t, y, _, _, out, _, failed = tf.while_loop(
      counted_cond, counted_body,
      (steps, t0, y0, f0, h0, out0, tf.zeros_like(y0), tf.constant(False)),
      maximum_iterations=max_steps, name="edward_lite_ode_dormand_prince")
  ok = (t >= t_end) & ~failed & tf.reduce_all(tf.math.is_finite(out))
  del y
  return out, ok, steps
