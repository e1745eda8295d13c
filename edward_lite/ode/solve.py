"""``ed.ode.solve``: an ODE's solution at given times, inside programs.

    ys = ed.ode.solve(fn, y0, times, args=(beta, gamma))

solves ``dy/dt = fn(t, y, *args)``, ``y(t0) = y0``, and returns
``ys[j] = y(times[j])``, ``[T, *y0.shape]``.  ``y0`` and ``args`` may be
computed from random variables, and ``fn`` may close over them (a latent
read by name, as TFP's and NumPyro's ODE examples write it): the solution
is differentiable with respect to all of them (``tf.GradientTape``, NUTS,
VI): forward sensitivities stepped with
the states (``edward_lite.ode.sensitivities``), or reverse mode through the
solver's loop (``edward_lite.ode.dormand_prince``).  Stiff systems take
``method="rodas3"``, a Rosenbrock method (``edward_lite.ode.rosenbrock``),
differentiated in reverse mode.

Inside a program the solve is one bounded ``tf.while_loop``, so sampling
and VI compile it with XLA; the target evaluates programs with loops one
chain after another inside the compiled program
(``edward_lite.model.per_chain_gradient``), each chain with its own steps.

A solve that fails -- more than ``max_steps`` attempted steps, a step size
that underflows, a state that overflows -- returns NaN states.  The log
density is then NaN at that point, which the samplers count as a divergent
(rejected) proposal and VI skips as a non-finite step: a failing proposal
does not end the run (TFP's solvers raise ``InvalidArgumentError``).
"""

import numpy as np
import tensorflow as tf

from edward_lite.ode import dormand_prince, rk4, rosenbrock, sensitivities

__all__ = ["solve", "METHODS"]

METHODS = ("rk45", "rodas3", "rk4")


SENSITIVITIES = ("forward", "reverse")

# The most numbers fn may close over (beyond args) for forward sensitivities;
# past it, or when fn reads a variable, "rk45" is differentiated in reverse mode.
MAX_CAPTURED = 64


def solve(fn, y0, times, args=(), t0=0., rtol=1e-6, atol=1e-20, max_steps=1000,
          method="rk45", steps_per_unit=None, sensitivity=None, increments=False):
  """The solution of ``dy/dt = fn(t, y, *args)``, ``y(t0) = y0``, at ``times``.

  Args:
    fn: ``(t, y, *args) -> dy/dt``, ``y`` and the result shaped like ``y0``;
      written with TensorFlow ops.
    y0: the initial state, a floating Tensor of any shape ``S`` (one system of
      ``prod(S)`` equations; the step size is shared by all of them).
    times: ``[T]`` output times, nondecreasing and ``>= t0`` (NumPy or a
      Tensor; cast to ``y0``'s dtype).  Not differentiated.
    args: a tuple of Tensors (or nests) passed to ``fn`` after ``y``, e.g.
      latent rates.
    t0: the initial time (default 0).
    rtol, atol: relative and absolute tolerances of the adaptive methods
      (``"rk45"``, ``"rodas3"``): a step is accepted when the RMS over
      components of ``error_i / (atol + rtol |y_i|)`` is at most 1.  The
      default ``atol`` (1e-20) makes the control relative to every state
      however small it gets: at Stan's 1e-6 a state that decays below 1e-6
      is solved to 1e-6 absolutely, a likelihood that takes its log (an
      infected count, a concentration with log-normal error) is noise
      there, and NUTS started in such a tail runs at its maximum tree
      depth for most of warmup (an SIR epidemic: 4 x (500 + 500) draws in
      31 s at 1e-20 against 75-130 s at 1e-6; RESULTS section 54).
    max_steps: the most attempted steps (accepted or rejected) of
      ``"rk45"`` and ``"rodas3"``; past it the solve fails (NaN states).
    method: ``"rk45"`` (Dormand-Prince 5(4) with error control, dense output;
      default), ``"rodas3"`` (for stiff systems -- decay rates that differ by
      orders of magnitude, chemical kinetics -- where ``"rk45"``'s step is
      held at the fastest rate's stability limit: Rodas3, a stiffly accurate,
      L-stable Rosenbrock method of order 3(2) with error control and cubic
      Hermite output, one inversion of ``I - h J / 2`` per step,
      ``edward_lite.ode.rosenbrock``; each step costs ``n`` reverse passes of
      ``fn`` for the Jacobian, so on non-stiff problems prefer ``"rk45"``)
      or ``"rk4"`` (classical Runge-Kutta at a fixed step of
      ``1 / steps_per_unit`` time units, clipped to the output times).
    steps_per_unit: the steps per unit time of ``"rk4"`` (required there).
    sensitivity: how ``"rk45"`` is differentiated: ``"forward"`` (its default;
      sensitivities integrated with the states, ``edward_lite.ode.sensitivities``;
      they reach ``y0``, the floating Tensors of ``args`` and those ``fn``
      closes over -- a latent of the enclosing program read by name --
      found by tracing ``fn`` once; when ``fn`` closes over more than
      ``MAX_CAPTURED`` numbers or reads a ``tf.Variable``, the solve is
      differentiated in reverse mode instead) or ``"reverse"`` (reverse mode
      through the solver's loop).  ``"rodas3"`` is differentiated in reverse
      mode only (its default): forward sensitivities would need the
      derivative of its Jacobian along every parameter at every step.
    increments: return ``y(times[j]) - y(times[j-1])`` in row ``j`` (row 0:
      ``y(times[0]) - y0``) instead of the states, summed from the solver's
      own step increments (``edward_lite.ode.increments``).  Use it for a
      quantity observed per interval -- new cases per day, the amount
      excreted between samples -- whenever the state is large against its
      change: in float32, ``S[:-1] - S[1:]`` of a susceptible count near 1000
      keeps about 6e-5 absolutely, so a day's 1e-3 new cases is one digit
      that jumps as the parameters move.  The increments keep the solver's
      tolerance.

  Returns:
    ``[T, *S]`` Tensor: ``y(times[j])`` (or the increments) in row ``j``;
    all NaN when the solve failed.

  Raises:
    ValueError, TypeError: bad arguments, named, before any solving.
  """
  if not callable(fn):
    raise TypeError(f"fn must be a callable (t, y, *args) -> dy/dt; got {type(fn).__name__}.")
  if method not in METHODS:
    raise ValueError(f"method must be one of {METHODS}; got {method!r}.")
  y0 = tf.convert_to_tensor(y0)
  if not y0.dtype.is_floating:
    raise TypeError(f"y0 must be floating (float32 or float64); got {y0.dtype.name}.")
  if not y0.shape.is_fully_defined():
    raise ValueError(f"y0 must have a fully defined shape; got {y0.shape}.")
  dtype = y0.dtype
  if not isinstance(args, (tuple, list)):
    raise TypeError(f"args must be a tuple of the values passed to fn after y; got "
                    f"{type(args).__name__} (write args=(x,) for one value).")
  times = _check_times(times, t0, dtype)
  for name, value in (("rtol", rtol), ("atol", atol)):
    if not np.isscalar(value) or not value > 0:
      raise ValueError(f"{name} must be a positive number; got {value!r}.")
  if not isinstance(increments, (bool, np.bool_)):
    raise TypeError(f"increments must be True or False; got {increments!r}.")
  if not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
    raise ValueError(f"max_steps must be a positive int; got {max_steps!r}.")
  if sensitivity is None:
    sensitivity = "reverse" if method == "rodas3" else "forward"
  if sensitivity not in SENSITIVITIES:
    raise ValueError(f"sensitivity must be one of {SENSITIVITIES}; got {sensitivity!r}.")
  if method == "rodas3" and sensitivity == "forward":
    raise ValueError("method='rodas3' is differentiated in reverse mode only: use "
                     "sensitivity='reverse' (its default).")
  if method == "rk4" and (steps_per_unit is None or not steps_per_unit > 0):
    raise ValueError(f"steps_per_unit must be a positive number for method='rk4'; got "
                     f"{steps_per_unit!r}.")
  t0 = tf.cast(t0, dtype)
  shape = y0.shape
  size = max(int(np.prod(shape.as_list())), 1)

  def flat_fn(t, y, fn_args=args):
    dy = fn(t, tf.reshape(y, shape), *fn_args)
    dy = tf.convert_to_tensor(dy, dtype)
    if dy.shape.is_fully_defined() and dy.shape != shape:
      raise ValueError(f"fn must return dy/dt shaped like y0 {shape.as_list()}; got "
                       f"{dy.shape.as_list()}.")
    return tf.reshape(dy, [size])

  with tf.name_scope("ode_solve"):
    flat_y0 = tf.reshape(y0, [size])
    if method == "rk45" and sensitivity == "forward":
      theta, unpack = _pack(args, dtype)
      packed_fn = lambda t, y, th: flat_fn(t, y, unpack(th))
      captured, numbers = sensitivities.captured_inputs(packed_fn, t0, flat_y0, theta)
      if numbers is not None and numbers <= MAX_CAPTURED:
        ys = sensitivities.solve(packed_fn, flat_y0, theta, times, t0, tf.cast(rtol, dtype),
                                 tf.cast(atol, dtype), int(max_steps), captured,
                                 increments=increments)
        return tf.reshape(ys, [-1] + shape.as_list())
      # fn reads a variable or many captured numbers: reverse mode reaches them
      # (forward sensitivities would carry a column per number).
    if method == "rk45":
      ys, ok, _ = dormand_prince.solve(flat_fn, flat_y0, times, t0, tf.cast(rtol, dtype),
                                       tf.cast(atol, dtype), int(max_steps),
                                       increments=increments)
    elif method == "rodas3":
      ys, ok, _ = rosenbrock.solve(flat_fn, flat_y0, times, t0, tf.cast(rtol, dtype),
                                   tf.cast(atol, dtype), int(max_steps), increments=increments)
    else:
      ys, ok = rk4.solve(flat_fn, flat_y0, times, t0, float(steps_per_unit), increments)
    ys = tf.where(ok, ys, tf.constant(np.nan, dtype))
    return tf.reshape(ys, [-1] + shape.as_list())


def _check_times(times, t0, dtype):
  """``times`` as a ``[T]`` Tensor; a one-sentence error for a bad one when
  its values are known."""
  static = tf.get_static_value(times) if isinstance(times, tf.Tensor) else np.asarray(times)
  if static is not None:
    static = np.asarray(static, np.float64)
    if static.ndim != 1 or static.size == 0:
      raise ValueError(f"times must be a nonempty vector; got shape {list(static.shape)}.")
    if not np.all(np.isfinite(static)) or np.any(np.diff(static) < 0):
      raise ValueError("times must be finite and nondecreasing.")
    t0_static = tf.get_static_value(t0) if isinstance(t0, tf.Tensor) else t0
    if t0_static is not None and static[0] < float(t0_static):
      raise ValueError(f"times must not precede t0={float(t0_static)}; times[0] is {static[0]}.")
    return tf.constant(static, dtype)
  times = tf.cast(times, dtype)
  if times.shape.rank != 1:
    raise ValueError(f"times must be a vector; got shape {times.shape}.")
  return times


def _pack(args, dtype):
  """``(theta [P], unpack)``: the floating Tensors of ``args`` (cast to
  ``dtype``) as one vector, and ``theta -> args`` with them put back; other
  leaves (ints, Python values) stay as they are."""
  leaves = tf.nest.flatten(args)
  parts, slots = [], []
  for i, leaf in enumerate(leaves):
    if leaf is None or isinstance(leaf, (bool, int, str, np.integer, np.bool_)):
      continue
    try:  # Tensors, random variables, NumPy arrays, floats
      value = tf.convert_to_tensor(leaf, dtype_hint=dtype)
    except (TypeError, ValueError):
      continue
    if value.dtype.is_floating and value.shape.is_fully_defined():
      parts.append(tf.reshape(tf.cast(value, dtype), [-1]))
      slots.append((i, value.shape, value.dtype))
  theta = tf.concat(parts, 0) if parts else tf.zeros([0], dtype)
  sizes = [int(np.prod(s.as_list())) for _, s, _ in slots]

  def unpack(th):
    out = list(leaves)
    for (i, shape, leaf_dtype), piece in zip(slots, tf.split(th, sizes) if slots else []):
      out[i] = tf.cast(tf.reshape(piece, shape), leaf_dtype)
    return tf.nest.pack_sequence_as(args, out)

  return theta, unpack
