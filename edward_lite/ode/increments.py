"""Increments between output times, accumulated from the solver's steps.

``ed.ode.solve(..., increments=True)`` returns ``d_j = y(tau_j) - y(tau_{j-1})``
(``tau_{-1} = t0``) rather than ``y(tau_j)``.  Subtracting computed states
loses the digits the states share: in float32 a susceptible count near 995
holds about 6e-5 absolutely, so a day's new cases of 1e-3 keep one digit
and vary in steps as the parameters move.  Here the increments are summed
from quantities of their own size:

- an accepted step from ``t`` to ``t + h`` has the increment
  ``Delta = h sum_s b_s k_s`` (not ``y' - y``);
- the step's dense output is written as ``y(t + x h) - y(t) = p(x)``, a
  polynomial in ``x`` whose coefficients are slopes and increments (no
  state enters);
- ``acc`` carries ``y(t) - y(tau_prev)`` across steps: an output ``tau_j``
  in the step gets ``acc + p(x_j)``, or ``p(x_j) - p(x_{j-1})`` when
  ``tau_{j-1}`` is in the same step, and after it ``acc = Delta - p(x_last)``.
"""

import tensorflow as tf

__all__ = ["fill"]


def fill(out, acc, filled, p, delta, accept):
  """``(out, acc)`` after one step of the solver's loop.

  Args:
    out: ``[T, *S]`` the increments so far.
    acc: ``[*S]`` ``y(t) - y(tau_prev)`` at the step's start.
    filled: ``[T, 1, ...]`` bool, the output times in the accepted step's
      ``(t, t + h]`` (all false when it is rejected).
    p: ``[T, *S]`` ``y(tau_j) - y(t)`` where ``filled`` (zero elsewhere).
    delta: ``[*S]`` the step's increment.
    accept: scalar bool.
  """
  no = tf.zeros_like(filled[:1])
  before = tf.concat([no, filled[:-1]], 0)
  after = tf.concat([filled[1:], no], 0)
  p_before = tf.concat([tf.zeros_like(p[:1]), p[:-1]], 0)
  out = tf.where(filled, tf.where(before, p - p_before, acc[None] + p), out)
  p_last = tf.reduce_sum(tf.where(filled & ~after, p, tf.zeros_like(p)), 0)
  any_filled = tf.reduce_any(filled)
  acc = tf.where(accept, tf.where(any_filled, delta - p_last, acc + delta), acc)
  return out, acc
