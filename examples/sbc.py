"""Simulation-based calibration: is the sampler right for this model?

``ed.sbc`` draws parameters and data from the prior, runs the inference on
every simulated data set in one vectorized run, and tests that the ranks of
the true parameters among the posterior draws are uniform.  This script
checks NUTS and full-rank VI on a small hierarchical model, then shows a
failure the test catches: mean-field VI on a regression whose two
coefficients are strongly correlated in the posterior (the marginals come
out too narrow: U-shaped ranks).  Plots go to ``sbc_*.png``.

    python examples/sbc.py [--simulations 300]

Runs in about a minute on a 2-core CPU.
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# edward_lite before TensorFlow: its import keeps TensorFlow's start-up logs quiet.
import edward_lite as ed  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def hierarchical(groups, per_group):
  """Group means around a common mean with an unknown spread (non-centred)."""
  mu = ed.Normal(0., 1., name="mu")
  tau = ed.HalfNormal(1., name="tau")
  z = ed.Normal(0., 1., sample_shape=groups, name="z")
  theta = mu + tau * z
  return ed.Normal(tf.repeat(theta, per_group), 1., name="y")


def regression(x):
  w = ed.Normal(0., 1., sample_shape=2, name="w")
  return ed.Normal(tf.linalg.matvec(x, w), 1., name="y")


def report(label, result, path):
  print(f"\n{label}: {result.simulations} simulations in {result.timings['total_s']:.1f} s, "
        f"passes: {result.passes()}")
  print(result.summary().round(3).to_string())
  try:
    result.plot(path=path)
    print(f"plot: {path}")
  except ImportError as e:  # matplotlib is an optional extra
    print(f"no plot ({e})")


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--simulations", type=int, default=300)
  sims = parser.parse_args().simulations

  nuts = ed.sbc(hierarchical, 4, 5, observed=["y"], simulations=sims, kernel="nuts",
                chains=2, warmup=300, draws=150, max_rank=99, seed=0)
  report("NUTS, hierarchical model", nuts, "sbc_nuts.png")

  rng = np.random.default_rng(0)
  x = rng.normal(size=(20, 2)).astype(np.float32)
  x[:, 1] = 0.9 * x[:, 0] + 0.3 * x[:, 1]  # correlated inputs: correlated coefficients
  meanfield = ed.sbc(regression, x, observed=["y"], simulations=sims, family="meanfield",
                     steps=800, seed=0)
  report("mean-field VI, correlated regression (expected to fail)", meanfield,
         "sbc_meanfield.png")
  fullrank = ed.sbc(regression, x, observed=["y"], simulations=sims, family="fullrank",
                    steps=3000, seed=0)
  report("full-rank VI, the same regression", fullrank, "sbc_fullrank.png")


if __name__ == "__main__":
  main()
