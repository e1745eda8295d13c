"""Classical fourth-order Runge-Kutta at a fixed step, for comparison.

Between consecutive output times ``tau_{j-1} < tau_j`` it takes
``m_j = ceil((tau_j - tau_{j-1}) * steps_per_unit)`` equal steps
``h = (tau_j - tau_{j-1}) / m_j`` of

    k1 = f(t, y), k2 = f(t + h/2, y + h k1 / 2), k3 = f(t + h/2, y + h k2 / 2),
    k4 = f(t + h, y + h k3),   y' = y + h (k1 + 2 k2 + 2 k3 + k4) / 6,

so every output time is a step end.  The step counts come from the output
times (data), known when the program is traced: one ``tf.scan`` over the
steps, which XLA compiles and ``pfor`` vectorizes.  There is no error
control: the error is ``O(h^4)``.
"""

import numpy as np
import tensorflow as tf

__all__ = ["solve"]


def solve(fn, y0, times, t0, steps_per_unit, increments=False):
  """``(ys [T, n], ok)`` of ``dy/dt = fn(t, y)`` (see the module docstring);
  ``times`` must have known values.  With ``increments``, row ``j`` is
  ``y(times[j]) - y(times[j-1])`` (row 0 from ``t0``), the steps'
  increments summed between output times."""
  grid = tf.get_static_value(times)
  start = tf.get_static_value(t0)
  if grid is None or start is None:
    raise ValueError("method='rk4' needs times and t0 known when the program is traced "
                     "(NumPy values or constants).")
  knots = np.concatenate([[float(start)], np.asarray(grid, np.float64)])
  ts, hs, marks = [], [], []
  for j in range(1, len(knots)):
    span = knots[j] - knots[j - 1]
    m = int(np.ceil(span * steps_per_unit - 1e-9)) if span > 0 else 0
    for i in range(m):
      ts.append(knots[j - 1] + i * span / m)
      hs.append(span / m)
      marks.append(-1)
    if m == 0:
      ts.append(knots[j]); hs.append(0.); marks.append(-1)
    marks[-1] = j - 1
  dtype = y0.dtype

  def step(carry, th):
    y, since, ended = carry  # since: the increment since the last output
    t, h = th[0], th[1]
    k1 = fn(t, y)
    k2 = fn(t + h / 2, y + h / 2 * k1)
    k3 = fn(t + h / 2, y + h / 2 * k2)
    k4 = fn(t + h, y + h * k3)
    delta = h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y + delta, since * (1. - ended) + delta, th[2]

  ends = np.flatnonzero(np.asarray(marks) >= 0)
  schedule = np.stack([ts, hs, np.asarray(marks) >= 0], 1)  # [steps, (t, h, ends an output)]
  path, since, _ = tf.scan(step, tf.constant(schedule, dtype),
                           initializer=(y0, tf.zeros_like(y0), tf.constant(0., dtype)))
  if increments:
    path = since
  ys = tf.gather(path, ends)
  return ys, tf.reduce_all(tf.math.is_finite(ys))
