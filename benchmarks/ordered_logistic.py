"""An ordered logistic regression's value and gradient at many chains, with
``interpreter.log_prob_term``'s two-cutpoint formula and with TFP's
``OrderedLogistic.log_prob`` (RESULTS section 52), side by side in one
process, alternated.

300 rows, 3 predictors, 5 categories (cutpoints ``ed.Flat(support=
"ordered")``), as RESULTS section 49's new user wrote it.  Per chain count:
the seconds of ten XLA-compiled value-and-gradient calls on ``[C, D]``
states, the median of ``--reps`` alternated rounds, as microseconds per
chain-gradient, and the ratio TFP / ours.  Also the largest difference of
the two log densities over the chains.

    python benchmarks/ordered_logistic.py [--chains 4 1000 10000] [--reps 5]
"""

import argparse
import time
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import edward_lite as ed
from edward_lite.model import interpreter


def ordinal_regression(x):
  beta = ed.Normal(tf.zeros(3), 2., name="beta")
  cutpoints = ed.Flat(support="ordered", shape=4, name="cutpoints")
  return ed.OrderedLogistic(cutpoints, tf.linalg.matvec(x, beta), name="y")


def timed_gradient(target, chains):
  """A compiled function: ten value-and-gradient calls on ``[C, D]``,
  returning the sums of the values ``[C]`` and of the gradients ``[C, D]``
  (both outputs, so XLA cannot drop either computation)."""
  @tf.function(jit_compile=True, autograph=False)
  def ten(u):
    total, grads = tf.zeros([chains], target.dtype), tf.zeros_like(u)
    for _ in range(10):
      value, grad = tfp.math.value_and_gradient(target.log_prob_flat, u)
      total, grads = total + value, grads + grad
      u = u + 1e-6
    return total, grads
  return ten


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--chains", type=int, nargs="+", default=[4, 1000, 10000])
  parser.add_argument("--reps", type=int, default=5)
  args = parser.parse_args()
  rng = np.random.default_rng(0)
  x = rng.normal(size=(300, 3)).astype(np.float32)
  eta = x @ np.array([1., -0.5, 0.3])
  cuts = np.array([-1.5, -0.3, 0.4, 1.6])
  y = (eta[:, None] + rng.logistic(size=300)[:, None] > cuts).sum(1).astype(np.int32)
  ours = ed.make_target(ordinal_regression, x, observed={"y": y})
  with mock.patch.object(interpreter, "_ordered_logistic_log_prob", lambda *a: None):
    tfps = ed.make_target(ordinal_regression, x, observed={"y": y})
  print(f"{'chains':>7} {'ours us':>9} {'TFP us':>9} {'TFP/ours':>9} {'max |diff|':>11}")
  for chains in args.chains:
    u = tf.constant(rng.normal(scale=0.5, size=(chains, ours.dim)), tf.float32)
    fns = {"ours": timed_gradient(ours, chains)}
    with mock.patch.object(interpreter, "_ordered_logistic_log_prob", lambda *a: None):
      fns["tfp"] = timed_gradient(tfps, chains)
      values = {"tfp": fns["tfp"](u)[0].numpy()}  # traced (and compiled) without the formula
    values["ours"] = fns["ours"](u)[0].numpy()
    seconds = {k: [] for k in fns}
    for _ in range(args.reps):
      for name, fn in fns.items():
        t0 = time.perf_counter()
        [out.numpy() for out in fn(u)]
        seconds[name].append(time.perf_counter() - t0)
    per = {k: 1e6 * np.median(v) / (10 * chains) for k, v in seconds.items()}
    diff = np.max(np.abs(values["ours"] - values["tfp"])) / 10
    print(f"{chains:>7} {per['ours']:>9.2f} {per['tfp']:>9.2f} {per['tfp'] / per['ours']:>9.2f} "
          f"{diff:>11.2e}", flush=True)


if __name__ == "__main__":
  main()
