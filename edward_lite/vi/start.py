"""Where a flat family starts: the location that maximizes the starting
surrogate's ELBO, found by L-BFGS.

Adam moves each parameter by about its learning rate per step, so a fit
that starts near 0 on the unconstrained space needs ``|m| / rate`` steps
just to reach a posterior mean ``m``: an intercept near 243 at the mean-field
rate 0.02 is 12,000 steps away, and a fit of 5,000 steps ended at 38.
``init="auto"`` (the default) moves the start there first.  With the
surrogate's starting scale ``sigma`` (the family's ``init_scale``) held
fixed, its ELBO as a function of the location ``m`` is, up to a constant,

    f(m) = (1/S) sum_s log p(m + sigma eps_s),   eps_s ~ N(0, I), S = SAMPLES,

with the draws ``eps_s`` fixed (common random numbers, in antithetic pairs
``+-eps``, so that for a Gaussian ``p`` the maximum is exactly its mean and
not one shifted by the draws' own mean), so ``f`` is a smooth
deterministic function of ``m`` and a quasi-Newton method finds its maximum
whatever the scale of ``m``.  The blur ``sigma`` also keeps the search out
of the neck of a hierarchical model's funnel, where ``log p`` itself grows
without bound as a group scale goes to 0 (its maximum, the MAP, does not
exist) but ``f`` does not.

The search: L-BFGS (Nocedal and Wright 2006, Algorithm 7.4, memory
``MEMORY``) with a diagonal initial inverse Hessian and a backtracking
Armijo line search, on the host in float64,
from the first of ``START_POINTS`` points uniform in ``(-radius, radius)^D``
where ``f`` is finite, for at most ``ITERATIONS`` iterations; each
evaluation of ``f`` and its gradient is one graph-compiled call over the
``S`` draws.  A step where ``f`` is not finite is shortened.
"""

import numpy as np
import tensorflow as tf

from edward_lite.runtime import console, seeds

__all__ = ["elbo_start", "START_POINTS", "SAMPLES", "BLUR", "ITERATIONS", "MEMORY"]

START_POINTS = 10   # uniform points tried for a finite start
SAMPLES = 16        # the fixed draws eps_s
BLUR = 1.           # sigma of the first search (then the family's init_scale)
ITERATIONS = 200    # L-BFGS iterations at most
MEMORY = 10         # L-BFGS correction pairs
_TOLERANCE = 1e-10  # stop when a step changes f by less than this, relatively


def elbo_start(target, radius, scale, seed, spent=None):
  """The start ``[D]`` (NumPy, the target's dtype; module docstring).

  Args:
    target: the model's ``Target``.
    radius: half-width of the uniform first points (``init_radius``).
    scale: the family's initial marginal scale ``sigma``.
    seed: ``[2]`` int32 seed.
    spent: optional dict whose ``"gradients"`` entry is increased by the
      model gradients evaluated (``SAMPLES`` per evaluation of ``f``).
  """
  spent = {} if spent is None else spent
  dtype = target.dtype
  half = tf.random.stateless_normal([SAMPLES // 2, target.dim],
                                    seeds.stream(seed, "vi_start_draws"), dtype=dtype)
  eps = tf.concat([half, -half], 0)  # antithetic: mean 0, so a Gaussian's f peaks at its mean
  blurred = console.per_call_function(
      lambda m, s: _value_and_gradient(target, m, s * eps))

  def objective(blur):  # -f and its gradient, float64 NumPy
    def fn(m):
      spent["gradients"] = spent.get("gradients", 0) + SAMPLES
      value, grad = blurred(tf.constant(m, dtype), tf.constant(blur, dtype))
      return -float(value), -np.asarray(grad, np.float64)
    return fn

  points = tf.random.stateless_uniform([START_POINTS, target.dim],
                                       seeds.stream(seed, "vi_start_points"),
                                       -radius, radius, dtype=dtype).numpy()
  for point in points:
    x = point.astype(np.float64)
    value, grad = objective(max(BLUR, scale))(x)
    if np.isfinite(value) and np.all(np.isfinite(grad)):
      x = lbfgs(objective(max(BLUR, scale)), x, value, grad)
      if scale < BLUR:  # then refined at the surrogate's own scale
        fn = objective(scale)
        value, grad = fn(x)
        if np.isfinite(value) and np.all(np.isfinite(grad)):
          x = lbfgs(fn, x, value, grad)
      return x.astype(points.dtype)
  return points[0]  # nothing finite: check_finite_start names the cause


def _value_and_gradient(target, m, noise):
  """``f(m)`` and its gradient ``[D]`` for draws ``m + noise`` ``[S, D]``."""
  with tf.GradientTape() as tape:
    tape.watch(m)
    value = tf.reduce_mean(target.log_prob_flat(m[None] + noise))
  return value, tape.gradient(value, m)


def lbfgs(objective, x, value, grad, iterations=ITERATIONS, memory=MEMORY):
  """Minimizes ``objective(x) -> (value, gradient)`` from ``x`` (with its
  ``value`` and ``grad``): L-BFGS whose initial inverse Hessian is diagonal,
  ``H0_i = s_i y_i / y_i^2`` from the newest pair (per coordinate, so that
  scales from 1e-3 to 1e3 do not stall it; the scalar ``s^T y / y^T y``
  where that is not positive), with a backtracking Armijo line search; a
  failed search forgets the pairs and tries steepest descent.  Returns the
  last point (NumPy float64)."""
  pairs = []  # (s, y, 1 / y^T s), newest last
  for _ in range(iterations):
    direction = -_two_loop(grad, pairs)
    slope = float(direction @ grad)
    if not slope < 0.:  # not a descent direction: steepest descent
      pairs, direction = [], -grad
      slope = float(direction @ grad)
    step = 1. if pairs else min(1., 1. / max(np.abs(grad).max(), 1e-12))
    for _ in range(40):
      new_x = x + step * direction
      new_value, new_grad = objective(new_x)
      if np.isfinite(new_value) and np.all(np.isfinite(new_grad)) and \
          new_value <= value + 1e-4 * step * slope:
        break
      step *= 0.5
    else:
      if not pairs:
        return x  # not even steepest descent makes progress
      pairs = []
      continue
    s, y = new_x - x, new_grad - grad
    if float(y @ s) > 1e-10 * float(s @ s):
      pairs = (pairs + [(s, y, 1. / float(y @ s))])[-memory:]
    done = abs(value - new_value) <= _TOLERANCE * max(abs(value), 1.)
    x, value, grad = new_x, new_value, new_grad
    if done:
      break
  return x


def _two_loop(grad, pairs):
  """``H grad`` for the L-BFGS inverse Hessian ``H`` of ``pairs``, from the
  diagonal ``H0`` of ``lbfgs``."""
  q, alphas = grad.copy(), []
  for s, y, rho in reversed(pairs):
    alpha = rho * float(s @ q)
    q -= alpha * y
    alphas.append(alpha)
  if pairs:
    s, y, _ = pairs[-1]
    scalar = float(s @ y) / float(y @ y)
    with np.errstate(divide="ignore", invalid="ignore"):
      diagonal = s * y / (y * y)
    q *= np.where(np.isfinite(diagonal) & (diagonal > 0.), diagonal, scalar)
  for (s, y, rho), alpha in zip(pairs, reversed(alphas)):
    q += (alpha - rho * float(y @ q)) * s
  return q
