"""The compiled optimizer steps of ``ed.vi.train``.

Step ``t`` on a replica: the ELBO terms of its rows of the batch
(``amortized.BatchProgram.terms``) and the gradient of

    loss = -sum_{i in rows} [log p(x_i | z_i) + log p(z_i) - log q(z_i | x_i)] / B,

``B`` the global batch (an all-reduce of the replicas' row counts); the
optimizer sums the replicas' gradients, which gives the gradient of the mean
ELBO over the global batch.  ``n`` steps run in one ``tf.function`` call,
reading the (distributed) iterator inside it.
"""

import tensorflow as tf

from edward_lite.vi import amortized

__all__ = ["compiled_calls"]


def compiled_calls(program, variables, optimizer, strategy, jit_compile):
  """``run(iterator, n) -> [n, 5]``: ``n`` optimizer steps, each row the
  step's ``log_likelihood, log_prior, log_q`` summed over its batch, its
  number of rows (summed over the replicas) and whether its gradient was
  used (> 0; 0 when its ELBO or gradient was not finite and a zero gradient
  was applied instead)."""

  # One device: the whole step (ELBO, gradient, update) is one XLA program.
  # Under a strategy XLA cannot hold the all-reduce: each replica compiles its
  # ELBO and gradient.
  whole_step = strategy is None and bool(jit_compile)

  @tf.function(jit_compile=bool(jit_compile) and not whole_step, autograph=False)
  def sums_and_grads(batch, noise, global_rows):
    with tf.GradientTape() as tape:
      terms = program.terms(batch, noise)
      sums = tf.stack([tf.reduce_sum(terms[k]) for k in amortized.TERMS])
      loss = -(sums[0] + sums[1] - sums[2]) / tf.cast(global_rows, sums.dtype)
    grads = tape.gradient(loss, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return sums, grads

  def replica_step(batch, noise):
    rows = tf.cast(tf.shape(next(iter(batch.values())))[0], tf.float32)
    context = tf.distribute.get_replica_context()
    global_rows = rows if strategy is None else context.all_reduce("sum", rows)
    sums, grads = sums_and_grads(batch, noise, global_rows)
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
    replica_step = tf.function(replica_step, jit_compile=True, autograph=False)

  @tf.function
  def run(iterator, n):
    out = tf.TensorArray(tf.float32, size=n)
    for i in tf.range(n):
      batch, noise = next(iterator)
      if strategy is None:
        row = replica_step(batch, noise)
      else:
        row = strategy.reduce("sum", strategy.run(replica_step, (batch, noise)), axis=None)
      out = out.write(i, row)
    return out.stack()

  return run
