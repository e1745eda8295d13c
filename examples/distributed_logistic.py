"""Data-parallel NUTS: a Bayesian logistic regression with the data sharded
across devices (the Edward2 paper's multi-GPU NUTS workload).

    w ~ N(0, I_D),   y_i ~ Bernoulli(logit = x_i . w),   i = 1..N,

with covertype's shape by default when run at full size (N = 581,012,
D = 54; synthetic data from a fixed seed: the real covertype needs a
download).  Each of the R replicas (GPUs, TPU cores, or logical CPU devices
here) holds N / R rows and evaluates their log-likelihood and its gradient;
the sums are all-reduced and the prior counted once.  The sampler's own
arithmetic runs on the host.  ``--compare`` also runs the single-device
sampler (without XLA, so it draws the same random numbers), in float64, and
prints the largest difference in the draws: zero up to round-off.  (In
float32 the round-off of the replicas' sums is amplified by the chaotic
leapfrog trajectories until the chains part ways, so there the two runs
agree only in distribution.)

    python examples/distributed_logistic.py                      # N=20,000, 2 logical CPUs
    python examples/distributed_logistic.py --n 581012 --replicas 4 --compare
    python examples/distributed_logistic.py --parallel chains --chains 8

Defaults: 4 chains x (300 warmup + 1000 draws).  NUTS's draws here are
antithetic for the means (bulk ESS > draws) but not for the spread, and
R-hat is the larger of the bulk and the folded (scale) R-hat: with 300
draws per chain, 1-4 of the 54 weights had a folded R-hat of 1.01-1.02 by
chance (seeds 0-2; more warmup did not help), with 1000 draws every R-hat
is below 1.006.  Progress lines go to stderr (a bar on a terminal).

Runs in about 30 s on a 2-core CPU (the defaults; the full covertype size
``--n 581012`` takes ~15 min there).
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# edward_lite before TensorFlow: its import keeps TensorFlow's start-up logs quiet.
import edward_lite as ed  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


__all__ = ["logistic_regression", "synthetic", "run", "main"]


def logistic_regression(x):
  """``w [D] ~ N(0, I)``; ``y [N] ~ Bernoulli(logits = x w)``."""
  w = ed.Normal(tf.zeros(x.shape[1], x.dtype), tf.constant(1., x.dtype), name="w")
  return ed.Bernoulli(logits=tf.linalg.matvec(x, w), name="y")


def synthetic(n, d, seed=0, dtype=np.float32):
  """Standardized features ``[n, d]`` (first column 1: an intercept) and labels."""
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, d))
  x[:, 0] = 1.
  w = rng.normal(size=d) / np.sqrt(d)
  y = (rng.uniform(size=n) < 1 / (1 + np.exp(-x @ w))).astype(np.int32)
  return x.astype(dtype), y


def run(strategy, n=20_000, d=54, chains=4, warmup=300, draws=1000, parallel="data", seed=0,
        compare=False, dtype=np.float32, progress=True, pooled=None):
  """Fits the model with ``strategy``; returns a dict of results and timings.

  Keys: ``posterior`` (the ``MCMCResult``), ``wall_s``, ``grads_per_s``
  (per-chain gradient evaluations per second over the whole run),
  ``replicas``, and with ``compare``: ``single_wall_s`` and ``max_abs_diff``
  (draws against the single-device sampler; equal to float64 round-off with
  ``pooled=True``, in distribution with per-chain adaptation, which feeds
  back each chain's round-off).
  """
  x, y = synthetic(n, d, seed, dtype)
  kwargs = dict(observed={"y": y}, chains=chains, warmup=warmup, draws=draws, seed=seed,
                progress=progress, pooled=pooled)
  start = time.perf_counter()
  posterior = ed.mcmc.sample(logistic_regression, x, strategy=strategy, parallel=parallel,
                             **kwargs)
  wall = time.perf_counter() - start
  out = dict(posterior=posterior, wall_s=wall, replicas=strategy.num_replicas_in_sync,
             grads_per_s=float(np.sum(posterior.num_gradients)) / wall)
  if compare:
    start = time.perf_counter()
    single = ed.mcmc.sample(logistic_regression, x, jit_compile=False, **kwargs)
    out["single_wall_s"] = time.perf_counter() - start
    out["max_abs_diff"] = float(np.max(np.abs(single.draws["w"] - posterior.draws["w"])))
  return out


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--n", type=int, default=20_000)
  parser.add_argument("--d", type=int, default=54)
  parser.add_argument("--chains", type=int, default=4)
  parser.add_argument("--warmup", type=int, default=300)
  parser.add_argument("--draws", type=int, default=1000,
                      help="draws per chain (300 leave the folded R-hat of a few of the 54 "
                           "weights above 1.01 by chance)")
  parser.add_argument("--replicas", type=int, default=2,
                      help="logical CPU devices when there is no GPU")
  parser.add_argument("--parallel", default="data", choices=["data", "chains"])
  parser.add_argument("--compare", action="store_true")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  if not tf.config.list_physical_devices("GPU"):
    ed.distribute.logical_cpus(args.replicas)
  strategy = ed.distribute.strategy("mirrored")
  print(f"{strategy.num_replicas_in_sync} replicas on "
        f"{', '.join(strategy.extended.worker_devices)}; N={args.n}, D={args.d}, "
        f"{args.parallel}-parallel")
  out = run(strategy, args.n, args.d, args.chains, args.warmup, args.draws, args.parallel,
            args.seed, args.compare, dtype=np.float64 if args.compare else np.float32,
            progress=True)
  out["posterior"].print_summary()
  print(f"wall {out['wall_s']:.1f} s, {out['grads_per_s']:.0f} gradient evaluations/s "
        "(per chain, summed over chains)")
  if args.compare:
    print(f"single device: {out['single_wall_s']:.1f} s; largest difference in the draws "
          f"{out['max_abs_diff']:.2e}")
  return out


if __name__ == "__main__":
  main()
