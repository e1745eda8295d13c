"""The compiled part of ``ed.vi.fit``: one ELBO step and a chunk of steps.

One step ``t`` draws ``S`` reparameterized samples from the surrogate with
the stateless seed ``fold_in(seed, t)``, estimates

    ELBO(phi) ~= (1/S) sum_s [log p(x_s, y) - log q_phi(x_s)]

on the step's data (its minibatch, if any) and applies the optimizer to
``-ELBO``'s gradient only when the ELBO and every gradient are finite.  A
chunk is a ``tf.while_loop`` of such steps, compiled by the stage that runs
it (``stages.py``).

The estimate the fit reports (``VIResult.elbo``) is that mean taken in
float64: XLA sums a float32 vector one element after another, so the mean
of ``S`` float32 terms near ``-10^6`` would be off by more than its Monte
Carlo error once ``S`` reaches thousands.  The loss whose gradient the
optimizer takes is the same mean in the model's dtype (its gradient,
``-1/S`` per draw, is the same either way).
"""

import numpy as np
import tensorflow as tf

__all__ = ["elbo_and_gradients", "make_train_step", "run_chunk"]


def elbo_and_gradients(surrogate, target, seed, samples, stl, step):
  """``(elbo, gradients, state, log_q)`` of one step on ``target`` (the step's
  minibatch): the ELBO estimate (float64), its gradients with respect to the
  surrogate's variables, and the step's draws with their surrogate log
  density."""
  draw_seed = tf.random.experimental.stateless_fold_in(seed, step)
  with tf.GradientTape() as tape:
    state, log_q = surrogate.draw(samples, draw_seed, stl)
    log_p = surrogate.model_log_prob(target, state)
    loss = -tf.reduce_mean(log_p - log_q)
  grads = tape.gradient(loss, surrogate.variables,
                        unconnected_gradients=tf.UnconnectedGradients.ZERO)
  elbo = tf.reduce_mean(tf.cast(log_p, tf.float64) - tf.cast(log_q, tf.float64))
  return elbo, grads, state, log_q


def make_train_step(surrogate, target, batches, optimizer, seed, samples, stl):
  """``train_step(step, data) -> (elbo, finite)``: one optimizer update,
  applied only when the ELBO and every gradient are finite."""

  def train_step(step, data):
    step_target = batches.target_for(target, data) if batches else target
    elbo, grads, _, _ = elbo_and_gradients(surrogate, step_target, seed, samples, stl, step)
    finite = tf.math.is_finite(elbo)
    for g in grads:
      # The square too: Adam's second moment would overflow to inf (and the
      # parameters to NaN) on a finite gradient above ~1e19 in float32.
      finite &= tf.reduce_all(tf.math.is_finite(tf.square(g)))

    def apply():
      optimizer.apply_gradients(zip(grads, surrogate.variables))
      return tf.constant(True)

    tf.cond(finite, apply, lambda: tf.constant(False))
    return elbo, finite

  return train_step


def run_chunk(train_step, batches, seed, start, n, stop_on_bad, capacity, dtype):
  """Runs up to ``n`` steps from step ``start``.

  Returns ``(elbo[capacity], steps done, non-finite steps, data)``, ``data``
  the data of the last step run (an empty placeholder without minibatches).
  With ``stop_on_bad`` the loop ends at a non-finite step, which is not
  applied and not counted as done, and ``data`` is its data.
  """
  # What the batch source carries from step to step (the epoch's permutation).
  carry = batches.carry_init(seed, start) if batches else tf.zeros([0], tf.int32)
  spec = batches.data_spec if batches else tf.TensorSpec([0], tf.int32)

  def body(i, trace, bad_count, carry, data):
    step = start + i
    if batches:
      carry, data = batches.next(carry, seed, step)
    elbo, finite = train_step(step, data)
    trace = tf.tensor_scatter_nd_update(trace, [[i]], tf.reshape(elbo, [1]))
    bad_count += tf.cast(~finite, tf.int32)
    done = i + tf.where(stop_on_bad & ~finite, 0, 1)
    return done, trace, bad_count, carry, data

  def cond(i, trace, bad_count, carry, data):
    del trace, carry, data
    return (i < n) & ~(stop_on_bad & (bad_count > 0))

  loop_vars = (tf.constant(0), tf.fill([capacity], tf.constant(np.nan, dtype)),
               tf.constant(0), carry, tf.nest.map_structure(_placeholder, spec))
  # The data's shape as its spec: a dataset's batches may differ in size.
  shapes = tf.nest.map_structure(lambda v: v.shape, loop_vars[:-1] + (spec,))
  i, trace, bad_count, _, data = tf.while_loop(cond, body, loop_vars, shape_invariants=shapes)
  return trace, i, bad_count, data


def _placeholder(spec):
  """A tensor compatible with ``spec`` (its unknown dimensions 0)."""
  shape = [] if spec.shape.rank is None else [d or 0 for d in spec.shape]
  return tf.zeros(shape, spec.dtype)
