"""ChEES-HMC with a thousand chains on a Bayesian logistic regression.

Many short chains are the regime ChEES-HMC (Hoffman, Radul & Sountsov 2021)
was made for: its trajectory length is adapted from all chains at once, and
every chain runs the same number of leapfrog steps, so nothing waits in
lockstep (NUTS chains wait for the longest tree of the batch in warmup, and
at the end of each round of up to 32 transitions when sampling).  The
script fits the same model with jittered HMC and NUTS for comparison and
prints each sampler's gradient evaluations, wall time, minimum bulk ESS,
nested R-hat over superchains, and the largest disagreement in posterior
means.

    python examples/chees_logistic.py [--chains 512] [--n 2000] [--d 20]

Runs in about 3 min on a 2-core CPU (2.9 min measured on a shared machine;
NUTS takes half of it).
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# edward_lite before TensorFlow: its import keeps TensorFlow's start-up logs quiet.
import edward_lite as ed  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def logistic_regression(x):
  """w ~ N(0, I); y_i ~ Bernoulli(logit = x_i . w)."""
  w = ed.Normal(tf.zeros(x.shape[1]), 1., name="w")
  return ed.Bernoulli(logits=tf.linalg.matvec(x, w), name="y")


def synthetic(n, d, seed=0):
  rng = np.random.default_rng(seed)
  x = (rng.normal(size=(n, d)) / np.sqrt(d)).astype(np.float32)
  w = rng.normal(size=d).astype(np.float32)
  y = (rng.uniform(size=n) < 1 / (1 + np.exp(-x @ w))).astype(np.int32)
  return x, y


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--chains", type=int, default=512)
  parser.add_argument("--n", type=int, default=2000)
  parser.add_argument("--d", type=int, default=20)
  parser.add_argument("--warmup", type=int, default=300)
  parser.add_argument("--draws", type=int, default=100)
  args = parser.parse_args()
  x, y = synthetic(args.n, args.d)
  means = {}
  for kernel in ("chees", "hmc", "nuts"):
    start = time.perf_counter()
    posterior = ed.mcmc.sample(logistic_regression, x, observed={"y": y}, kernel=kernel,
                               chains=args.chains, warmup=args.warmup, draws=args.draws,
                               seed=0, progress=False)
    wall = time.perf_counter() - start
    w = posterior.draws["w"]
    means[kernel] = w.mean(axis=(0, 1))
    ess = float(np.min(ed.diagnostics.ess_bulk(w)))
    nested = float(np.max(ed.diagnostics.nested_rhat(w, superchains=16)))
    extra = (f", trajectory length {posterior.trajectory_length:.2f}"
             if posterior.trajectory_length else "")
    print(f"{kernel:6s} {args.chains} chains: {wall:6.1f} s (compile, first chunks included, "
          f"{posterior.timings['compile_s']:.1f} s), "
          f"{posterior.num_gradients.mean():8.0f} gradients per chain, min bulk ESS {ess:8.0f}, "
          f"max nested R-hat {nested:.3f}, divergences {int(posterior.divergences.sum())}"
          f"{extra}")
  for kernel in ("hmc", "nuts"):
    print(f"max |mean(chees) - mean({kernel})| = "
          f"{np.max(np.abs(means['chees'] - means[kernel])):.4f}")


if __name__ == "__main__":
  main()
