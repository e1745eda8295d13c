"""The summary at 10^5 and 10^6 chains: right, and no slower than sampling
(issue 52, items 1 and 2).

The issue's target: a correlated 2-D Gaussian (mean [1, -1], sds [1, 2],
correlation 0.8, ``MultivariateNormalTriL``), random-walk Metropolis at its
defaults, 300 warmup iterations, draws kept.  For each ``--runs`` setting
(chains x draws) one ``ed.mcmc.sample`` call, then ``print_summary()``
(warnings included) and a second ``summary()`` call, timed; printed:

* the sampling call's seconds and the summary's, and their ratio;
* each scalar's summary mean and sd against the exact values, the mean's
  distance in MCSE and the sd's relative error, and the float64 mean of
  the same draws;
* what NumPy's float32 reduction over the draws' axes (the summary before)
  gives on the same draws;
* the warnings;
* the peak resident memory of the process.

``--exact`` also computes, on the first run's draws, Vehtari et al.'s
exact rank-normalized R-hat, bulk and tail ESS and MCSE
(``ed.diagnostics.convergence``, a sort of all draws: minutes) and prints
the binned / batch-means estimates' differences from them.

    python benchmarks/summary_scale.py [--runs 100000x500 1000000x100] [--exact]
"""

import argparse
import os
import resource
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import edward_lite as ed  # noqa: E402  (first: a quiet TensorFlow start-up)
from edward_lite.analysis import column_summary  # noqa: E402

import machine  # noqa: E402

MEAN = np.array([1., -1.])
SD = np.array([1., 2.])
COV = np.array([[1., 0.8 * 2.], [0.8 * 2., 4.]])


def gaussian():
  return ed.MultivariateNormalTriL(MEAN.astype(np.float32),
                                   np.linalg.cholesky(COV).astype(np.float32), name="x")


def peak_gb():
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def one(chains, draws, exact):
  start = time.perf_counter()
  post = ed.mcmc.sample(gaussian, kernel="rwmh", chains=chains, warmup=300, draws=draws,
                        seed=0, progress=False)
  sampling = time.perf_counter() - start
  start = time.perf_counter()
  post.print_summary()
  printed = time.perf_counter() - start
  start = time.perf_counter()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    table = post.summary()
  again = time.perf_counter() - start
  x = post.draws["x"]
  print(f"\n{chains:,} chains x {draws} draws: sampling {sampling:.1f} s (compile "
        f"{post.timings['compile_s']:.1f} s), print_summary {printed:.2f} s, summary "
        f"{again:.2f} s: {printed / sampling:.2f} of the sampling; peak RSS {peak_gb():.1f} GB")
  old_mean, old_sd = x.mean(axis=(0, 1)), x.std(axis=(0, 1), ddof=1)
  for i in range(2):
    row = table.loc[f"x[{i}]"]
    column = x[:, :, i].astype(np.float64)
    print(f"  x[{i}]: mean {row['mean']:.6f} (exact {MEAN[i]:g}, "
          f"{(row['mean'] - MEAN[i]) / row['mcse_mean']:+.2f} MCSE; float64 of the draws "
          f"{column.mean():.6f}), sd {row['sd']:.6f} ({100 * (row['sd'] / SD[i] - 1):+.3f}%), "
          f"r_hat {row['r_hat']:.4f}, ess_bulk {row['ess_bulk']:.0f}; float32 over the axes: "
          f"mean {old_mean[i]:.4f}, sd {old_sd[i]:.4f}")
  print("  warnings:", table.attrs["notes"] or "none")
  if exact:
    start = time.perf_counter()
    ref = {k: float(v) for k, v in ed.diagnostics.convergence(x[:, :, 0]).items()}
    seconds = time.perf_counter() - start
    got = column_summary.summarize(x[:, :, 0])
    print(f"  exact estimators of x[0] ({seconds:.0f} s): " + ", ".join(
        f"{k} {ref[k]:.6g} (binned/batch means {got[k]:.6g}, {got[k] / ref[k] - 1:+.2%})"
        for k in ("r_hat", "ess_bulk", "ess_tail", "mcse_mean")))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--runs", nargs="+", default=["100000x500", "1000000x100"])
  parser.add_argument("--exact", action="store_true")
  args = parser.parse_args()
  print(machine.machine_line())
  for i, spec in enumerate(args.runs):
    chains, draws = (int(v) for v in spec.split("x"))
    one(chains, draws, args.exact and i == 0)


if __name__ == "__main__":
  main()
