"""A summed-out discrete latent at many chains (RESULTS section 59).

The coal-mining change point (``examples/change_point.py``: 112 years, the
switch year a ``Categorical`` summed out, 112 configurations).  Part
``gradient``: one log density and gradient of the target, compiled with
XLA, at each chain count, two ways in one process: over (chain,
configuration) pairs in one vectorized batch (the library's path,
``enumeration.pairs_value_and_gradient``) and with the configurations in a
loop, chains one after another (``per_chain_gradient``'s path for loops,
the library's before); microseconds per chain and the ratio.  Part
``run``: ``ed.mcmc.sample`` with random-walk chains at the defaults (1,000
warmup and 500 kept draws), seconds and posterior means against the exact
ones.  Seconds need an idle machine.

    .venv/bin/python benchmarks/enumeration_scale.py [--chains 4 100 1000 10000] \\
        [--run-chains 1000] [--parts gradient run]
"""

import argparse
import os
import sys
import time

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import edward_lite as ed  # pylint: disable=wrong-import-position
from edward_lite.model import per_chain_gradient  # pylint: disable=wrong-import-position
import change_point  # pylint: disable=wrong-import-position


def _per_call(fn, u, reps):
  fn(u)  # compiles
  start = time.perf_counter()
  for _ in range(reps):
    out = fn(u)
  tf.nest.map_structure(lambda t: t.numpy(), out)
  return (time.perf_counter() - start) / reps


def gradient(chain_counts):
  y = change_point.DISASTERS
  target = ed.make_target(change_point.disasters, len(y), observed={"disasters": y})
  assert target.sums_out_in_pairs
  pairs = tf.function(target.value_and_gradient_flat, jit_compile=True, autograph=False)
  loop = tf.function(lambda u: per_chain_gradient.batched_value_and_gradient(
      target.density_fn(), target.unflatten(u), loops=True), jit_compile=True, autograph=False)
  print(f"{'chains':>7} {'pairs us/chain':>15} {'loop us/chain':>14} {'loop/pairs':>10}")
  for chains in chain_counts:
    u = tf.random.stateless_normal([chains, target.dim], [0, chains]) * 0.3
    reps = max(3, int(2000 // chains))
    a = _per_call(pairs, u, reps) / chains * 1e6
    b = _per_call(loop, u, max(1, reps // 10)) / chains * 1e6
    print(f"{chains:7d} {a:15.1f} {b:14.1f} {b / a:10.1f}", flush=True)


def run(chains):
  y = change_point.DISASTERS
  start = time.perf_counter()
  post = ed.mcmc.sample(change_point.disasters, len(y), observed={"disasters": y},
                        chains=chains, kernel="rwmh", draws=500, seed=0, progress=False)
  seconds = time.perf_counter() - start
  summary = post.summary()
  print(f"{chains} random-walk chains x (1000 + 500): {seconds:.1f} s "
        f"(sampling {post.timings['sampling_s']:.1f} s)")
  for name, exact in zip(["early", "late", "switch"], change_point.exact_means(y)):
    row = summary.loc[name]
    print(f"  {name:7s} mean {row['mean']:.4f} exact {exact:.4f} "
          f"({abs(row['mean'] - exact) / row['mcse_mean']:.1f} MCSE away), "
          f"r_hat {row['r_hat']:.4f}")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--chains", type=int, nargs="+", default=[4, 100, 1000, 10000])
  parser.add_argument("--run-chains", type=int, default=1000)
  parser.add_argument("--parts", nargs="+", default=["gradient", "run"])
  args = parser.parse_args()
  if "gradient" in args.parts:
    gradient(args.chains)
  if "run" in args.parts:
    run(args.run_chains)


if __name__ == "__main__":
  main()
