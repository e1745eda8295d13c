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

from edward_lite.runtime import console
from edward_lite.vi import amortized

__all__ = ["compiled_calls"]


def compiled_calls(program, objective, variables, optimizer, strategy, jit_compile):
  """``run(iterator, n, first_step) -> [n, 7]``: ``n`` optimizer steps, each
  row the step's ``log_likelihood, log_prior, log_q, factor`` (averages over
  the ``K`` draws) and objective summed over its batch, its number of rows
  (summed over the replicas) and whether its gradient was used (> 0; 0 when
  its objective or gradient was not finite and a zero gradient was applied
  instead)."""

  # One device: the whole step (ELBO, gradient, update) is one XLA program.
  # Under a strategy XLA cannot hold the all-reduce: each replica compiles its
  # ELBO and gradient.
  whole_step = strategy is None and bool(jit_compile)

  doubly = objective.doubly_reparameterized
  guide_vars = [v for v, g in zip(variables, program.in_guide) if g]
  model_vars = [v for v, g in zip(variables, program.in_guide) if not g]
  zero = tf.UnconnectedGradients.ZERO

  @console.made_per_call
  @tf.function(jit_compile=bool(jit_compile) and not whole_step, autograph=False)
  def sums_and_grads(batch, noise, global_rows, step):
    with tf.GradientTape(persistent=doubly) as tape:
      terms = program.sample_terms(batch, noise, objective.samples, stop_q=doubly)
      value = objective.per_example(terms, step)
      sums = tf.stack([tf.reduce_sum(tf.reduce_mean(terms[k], 0)) for k in amortized.TERMS]
                      + [tf.reduce_sum(value)])
      rows = tf.cast(global_rows, sums.dtype)
      loss = -sums[-1] / rows
      if doubly:
        surrogate = -tf.reduce_sum(objective.guide_surrogate(terms)) / rows
    if not doubly:
      return sums, tape.gradient(loss, variables, unconnected_gradients=zero)
    model_grads = iter(tape.gradient(loss, model_vars, unconnected_gradients=zero))
    guide_grads = iter(tape.gradient(surrogate, guide_vars, unconnected_gradients=zero))
    return sums, [next(guide_grads if g else model_grads) for g in program.in_guide]

  def replica_step(batch, noise, step):
    rows = tf.cast(tf.shape(next(iter(batch.values())))[0], tf.float32)
    context = tf.distribute.get_replica_context()
    global_rows = rows if strategy is None else context.all_reduce("sum", rows)
    sums, grads = sums_and_grads(batch, noise, global_rows, step)
    # A step whose ELBO or gradient is not finite, on any replica, has its
    # gradient replaced by zero on every replica (a tf.cond around the update
    # would hold the optimizer's all-reduce, which tf.distribute refuses).
    # (The square too: Adam's second moment would overflow on a finite gradient
    # above ~1e19 in float32.)
    bad = tf.cast(~tf.reduce_all(tf.math.is_finite(sums)), tf.float32)
    for g in grads:
      bad += tf.cast(~tf.reduce_all(tf.math.is_finite(tf.square(g))), tf.float32)
    if strategy is not None:
      bad = context.all_reduce("sum", bad)
    applied = tf.cast(bad == 0., tf.float32)
    grads = [tf.where(bad == 0., g, tf.zeros_like(g)) for g in grads]
    optimizer.apply_gradients(zip(grads, variables))
    return tf.concat([tf.cast(sums, tf.float32), [rows, applied]], 0)

  if whole_step:
    replica_step = console.made_per_call(
        tf.function(replica_step, jit_compile=True, autograph=False))

  @console.made_per_call
  @tf.function
  def run(iterator, n, first_step):
    out = tf.TensorArray(tf.float32, size=n)
    for i in tf.range(n):
      batch, noise = next(iterator)
      step = tf.cast(first_step + i, tf.float32)
      if strategy is None:
        row = replica_step(batch, noise, step)
      else:
        row = strategy.reduce("sum", strategy.run(replica_step, (batch, noise, step)), axis=None)
      out = out.write(i, row)
    return out.stack()

  return run
