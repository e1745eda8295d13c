"""Refitting a flat family by the Fisher divergence from stored (draw,
gradient) pairs.

For draws ``u_i`` with model gradients ``g_i = grad log p(u_i)`` and a flat
family's map ``u = T(v)`` (``Family.forward_and_log_det``), at
``v_i = T^{-1}(u_i)`` the pulled-back log density ``log p(T(v)) +
log|det J(v)|`` has the score

    s(v_i) = J(v_i)^T g_i + grad_v log|det J(v_i)|,

and ``T`` carries ``N(0, I)`` to the posterior exactly when ``s(v) = -v``.
The loss ``mean_i ||s(v_i) + v_i||^2`` (the Fisher divergence in the base
space, weighted by where the pairs lie) is minimized by Adam over
minibatches; each pair cost one model gradient and is reused at every step,
where an ELBO step needs fresh ones.  Measured (RESULTS section 58): pairs
from the ELBO fit's own draws tighten its flow (the 10-D funnel's gradients
per effective draw 82 -> 54) and correct its tails (a banana's sds, biased
by 6-23% through the ELBO's flow, right), because the gradients carry the
posterior's shape where ``q`` has only few draws.
"""

import numpy as np
import tensorflow as tf

from edward_lite.runtime import console

__all__ = ["fisher_refit", "draws_and_gradients", "STEPS", "BATCH", "LEARNING_RATE"]

STEPS = 2000
BATCH = 256
LEARNING_RATE = 0.005


def draws_and_gradients(target, transport, count, seed):
  """``count`` draws ``u = T(v)``, ``v ~ N(0, I)`` ``[count, D]`` of a
  ``Transport`` and the model's gradients at them, keeping only the finite
  pairs; NumPy arrays."""
  v = tf.random.stateless_normal([count, target.dim], [seed, 7], dtype=target.dtype)
  u, _ = transport.forward_and_log_det(v)
  _, g = target.value_and_gradient_flat(u)
  u, g = np.asarray(u), np.asarray(g)
  finite = np.isfinite(u).all(axis=1) & np.isfinite(g).all(axis=1)
  return u[finite], g[finite]


def fisher_refit(surrogate, u, g, seed, steps=STEPS):
  """Trains ``surrogate`` (a ``FlatSurrogate``: its one flat variable) in
  place on pairs ``u, g [N, D]``; returns the mean loss over the last tenth
  of the steps.  A step whose gradient is not finite leaves the parameters
  where they were, entry by entry."""
  family, dim, variable = surrogate.family, surrogate.dim, surrogate.variables[0]
  optimizer = tf.keras.optimizers.Adam(
      tf.keras.optimizers.schedules.CosineDecay(LEARNING_RATE, steps, 0.01))
  u, g = tf.constant(u, variable.dtype), tf.constant(g, variable.dtype)

  @console.per_call_function(jit_compile=True)  # a new step per refit
  def step(index):
    x, gx = tf.gather(u, index), tf.gather(g, index)
    with tf.GradientTape() as outer:
      params = surrogate.params()
      v = family.bijector(params, dim).inverse(x)
      with tf.GradientTape() as inner:
        inner.watch(v)
        y, log_det = family.forward_and_log_det(params, dim, v)
        pulled = tf.reduce_sum(y * tf.stop_gradient(gx)) + tf.reduce_sum(log_det)
      score = inner.gradient(pulled, v)
      loss = tf.reduce_mean(tf.reduce_sum(tf.square(score + v), -1))
    grad = outer.gradient(loss, variable)
    optimizer.apply_gradients([(tf.where(tf.math.is_finite(grad), grad, 0.), variable)])
    return loss

  step = console.first_call_quiet(step)  # a load from the compile cache logs a note
  rng = np.random.default_rng(seed)
  size = int(u.shape[0])
  losses = [float(step(tf.constant(rng.integers(0, size, BATCH), tf.int32)))
            for _ in range(steps)]
  return float(np.mean(losses[-max(1, steps // 10):]))
