"""The compiled optimizer steps of ``ed.vi.train``.

Step ``t`` on a replica: the terms of ``K`` draws per example of its rows of
the batch (``amortized.BatchProgram.sample_terms``) and the gradient of

    loss = -sum_{i in rows} objective_i / B

(``objectives.py``: the ELBO, ``K``-sample or KL-weighted, or IWAE), ``B``
the global batch (an all-reduce of the replicas' row counts); the optimizer
sums the replicas' gradients, which gives the gradient of the mean objective
over the global batch.  With IWAE's doubly reparameterized gradient the
guide's variables take the gradient of its surrogate instead (a second
backward pass of the same tape).  ``n`` steps run in one ``tf.function``
call, reading the (distributed) iterator inside it.
"""

import tensorflow as tf
import tf_keras

from edward_lite.runtime import console
from edward_lite.vi import amortized

__all__ = ["compiled_calls"]


def compiled_calls(program, objective, variables, optimizer, strategy, jit_compile, noise_seed):
  """``run(iterator, n, first_step) -> [n, 7]``: ``n`` optimizer steps, each
  row the step's ``log_likelihood, log_prior, log_q, factor`` (averages over
  the ``K`` draws) and objective summed over its batch, its number of rows
  (summed over the replicas) and whether its gradient was used (> 0; 0 when
  its objective or gradient was not finite and a zero gradient was applied
  instead).  The noise of step ``t`` is ``amortized.noise_for(...,
  noise_seed, t)`` of the global batch's rows, drawn in the step but
  outside XLA (whose generator draws other numbers from the same seed); a
  replica takes its rows' (the strategy splits a batch into consecutive
  equal parts, one per replica in order), so every example gets the draw it
  has on one device."""

  # One device: the whole step (ELBO, gradient, update) is one XLA program.
  # Under a strategy XLA cannot hold the all-reduce: each replica compiles its
  # ELBO and gradient.
  whole_step = strategy is None and bool(jit_compile)

  doubly = objective.doubly_reparameterized
  guide_vars = [v for v, g in zip(variables, program.in_guide) if g]
  model_vars = [v for v, g in zip(variables, program.in_guide) if not g]
  zero = tf.UnconnectedGradients.ZERO
  scaled = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)

  def sums_and_grads(batch, noise, global_rows, step):
    with tf.GradientTape(persistent=doubly) as tape:
      terms = program.sample_terms(batch, noise, objective.samples, stop_q=doubly)
      total = objective.total(terms, step)
      rows = tf.cast(global_rows, total.dtype)
      loss = scale(-total / rows)
      if doubly:
        surrogate = scale(-objective.guide_surrogate(terms) / rows)
    parts = tf.stack([terms[k] for k in amortized.TERMS])  # [4, K, b]
    sums = tf.concat([tf.reduce_sum(parts, [1, 2]) / objective.samples, [total]], 0)
    if not doubly:
      return sums, gradient(tape, loss, variables)
    model_grads = iter(gradient(tape, loss, model_vars))
    guide_grads = iter(gradient(tape, surrogate, guide_vars))
    return sums, [next(guide_grads if g else model_grads) for g in program.in_guide]

  def scale(loss):
    """A loss-scale optimizer's (mixed float16) scaled loss (on the tape)."""
    return optimizer.get_scaled_loss(loss) if scaled else loss

  def gradient(tape, loss, wrt):
    """``d loss / d wrt``, unscaled."""
    grads = tape.gradient(loss, wrt, unconnected_gradients=zero)
    return optimizer.get_unscaled_gradients(grads) if scaled else grads

  if jit_compile and not whole_step:  # (else inlined: a nested call costs per step)
    sums_and_grads = console.per_call_function(sums_and_grads, jit_compile=True)

  def noise_of(step, rows):
    return amortized.noise_for(program.noise_spec, noise_seed, tf.cast(step, tf.int64),
                               objective.samples)(rows)

  def replica_step(batch, noise, step):
    rows = tf.cast(tf.shape(next(iter(batch.values())))[0], tf.float32)
    context = tf.distribute.get_replica_context()
    global_rows = rows if strategy is None else context.all_reduce("sum", rows)
    sums, grads = sums_and_grads(batch, noise, global_rows, tf.cast(step, tf.float32))
    # A step whose ELBO or gradient is not finite, on any replica, has its
    # gradient replaced by zero on every replica (a tf.cond around the update
    # would hold the optimizer's all-reduce, which tf.distribute refuses).
    # (The square too: Adam's second moment would overflow on a finite gradient
    # above ~1e19 in float32.)  Each small op costs a few microseconds per
    # step on a CPU: one reduction per gradient, not five.
    # One check for all: the sum of the squares overflows, or is NaN, if any
    # term or gradient is not finite (or any gradient above ~1e19).
    # (A loss-scale optimizer sees its overflowing gradients itself: it skips
    # the step and lowers the scale.)
    squares = tf.add_n([tf.cast(tf.reduce_sum(sums), tf.float32)] + [
        tf.cast(tf.nn.l2_loss(_values(g)), tf.float32) for g in grads if not scaled])
    bad = tf.cast(~tf.math.is_finite(squares), tf.float32)
    if strategy is not None:
      bad = context.all_reduce("sum", bad)
    ok = bad == 0.
    applied = tf.cast(ok, tf.float32)
    grads = grads if scaled else [_where(ok, g) for g in grads]
    optimizer.apply_gradients(zip(grads, variables))
    return tf.concat([tf.cast(sums, tf.float32), [rows, applied]], 0)

  if whole_step:
    replica_step = console.per_call_function(replica_step, jit_compile=True)
  else:  # the user's programs run as written, not converted by AutoGraph
    replica_step = tf.autograph.experimental.do_not_convert(replica_step)

  def replica_noise_step(batch, step):
    """A replica's step: the global batch's noise, its rows of it."""
    local = tf.shape(next(iter(batch.values())))[0]
    context = tf.distribute.get_replica_context()
    noise = noise_of(step, context.all_reduce("sum", local))
    first = tf.cast(context.replica_id_in_sync_group, tf.int32) * local
    return replica_step(batch, {k: v[first:first + local] for k, v in noise.items()}, step)

  replica_noise_step = tf.autograph.experimental.do_not_convert(replica_noise_step)

  @console.per_call_function(autograph=True)  # the loop over the iterator
  def run(iterator, n, first_step):
    out = tf.TensorArray(tf.float32, size=n)
    for i in tf.range(n):
      batch, step = next(iterator), first_step + i
      if strategy is None:  # (the noise outside XLA: its generator draws other numbers)
        row = replica_step(batch, noise_of(step, tf.shape(next(iter(batch.values())))[0]), step)
      else:
        row = strategy.reduce("sum", strategy.run(replica_noise_step, (batch, step)), axis=None)
      out = out.write(i, row)
    return out.stack()

  return run


def _values(gradient):
  """A gradient's dense values (an embedding's ``IndexedSlices``: its rows)."""
  return gradient.values if isinstance(gradient, tf.IndexedSlices) else gradient


def _where(ok, gradient):
  """``gradient`` if ``ok``, else zeros like it."""
  zero = tf.constant(0., gradient.dtype)
  if isinstance(gradient, tf.IndexedSlices):
    return tf.IndexedSlices(tf.where(ok, gradient.values, zero), gradient.indices,
                            gradient.dense_shape)
  return tf.where(ok, gradient, zero)
