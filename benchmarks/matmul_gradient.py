"""Per-chain gradient of a data matrix product, two ways, vectorized over chains.

One chain's log density of a logistic regression, ``sum_n log sigmoid(+-(X w)_n)``
with ``X: [N, K]`` data, is differentiated for one chain and vectorized over
``C`` chains with ``tf.vectorized_map``, as ``edward_lite.Target`` does.  Two
ways to write the gradient, timed as a chain of dependent evaluations inside
one XLA-compiled ``tf.while_loop``:

* ``tape``: TensorFlow's own ``MatMul`` gradient (``GradientTape``), which
  vectorizes to ``X^T G`` with a ``[K, C]`` output;
* ``rows``: ``edward_lite.model.per_chain_gradient``'s row form, which
  vectorizes to ``G^T X`` with a ``[C, K]`` output.  The target uses it up
  to ``ROW_FORM_MAX_CHAINS`` chains.

Prints microseconds per batched value-and-gradient and the ratio tape / rows
(> 1: the row form is faster); checks both give the same gradient.

    python benchmarks/matmul_gradient.py [--shapes 100000x54 10000x20 2000x300] [--chains 1 2 4 8 16 64 256]
"""

import argparse
import os
import platform
import time

import edward_lite  # noqa: F401  (quiet TensorFlow start-up)
from edward_lite.model import per_chain_gradient

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def one_chain_log_density(x, y):
  def log_density(state):
    logits = tf.linalg.matvec(x, state["w"])
    return -tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
  return log_density


def timed(fn, w, steps, repeats=5):
  @tf.function(jit_compile=True)
  def loop(w):
    def body(i, w):
      _, g = tf.vectorized_map(lambda s: fn(s), {"w": w})
      return i + 1, w + 1e-6 * g["w"]
    return tf.while_loop(lambda i, _: i < steps, body, (0, w))[1]

  loop(w).numpy()
  best = np.inf
  for _ in range(repeats):
    start = time.perf_counter()
    loop(w).numpy()
    best = min(best, (time.perf_counter() - start) / steps)
  return best


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--shapes", nargs="+", default=["100000x54", "10000x20", "2000x300"])
  parser.add_argument("--chains", type=int, nargs="+", default=[1, 2, 4, 8, 16, 64, 256])
  args = parser.parse_args()
  tf.get_logger().setLevel("ERROR")  # one vectorized_map trace per shape, on purpose
  print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"TF {tf.__version__}; min of 5 timings")
  print(f"{'N x K':>12s} {'C':>5s} {'tape us':>10s} {'rows us':>10s} {'tape/rows':>9s}")
  rng = np.random.default_rng(0)
  for shape in args.shapes:
    n, k = (int(s) for s in shape.split("x"))
    x = tf.constant(rng.normal(size=(n, k)) / np.sqrt(k), tf.float32)
    y = tf.constant(rng.integers(0, 2, size=n), tf.float32)
    fn = one_chain_log_density(x, y)
    for chains in args.chains:
      w = tf.constant(rng.normal(size=(chains, k)), tf.float32)
      tape_fn = lambda s: per_chain_gradient.value_and_gradient(fn, s, rows=False)  # noqa: E731
      rows_fn = lambda s: per_chain_gradient.value_and_gradient(fn, s, rows=True)  # noqa: E731
      expect = tf.function(lambda w: tf.vectorized_map(tape_fn, {"w": w}))(w)[1]["w"]
      got = tf.function(lambda w: tf.vectorized_map(rows_fn, {"w": w}))(w)[1]["w"]
      np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-3)
      steps = max(5, int(1e8 / (n * k * max(chains, 4))))
      t_tape, t_rows = timed(tape_fn, w, steps), timed(rows_fn, w, steps)
      print(f"{shape:>12s} {chains:5d} {t_tape * 1e6:10.1f} {t_rows * 1e6:10.1f} "
            f"{t_tape / t_rows:9.2f}", flush=True)


if __name__ == "__main__":
  main()
