"""Post-processing against sampling at 10^4 to 10^6 chains (issue 32, item 1).

Random-walk Metropolis on the four-Gaussian mixture of
``examples/mixture_rwmh.py`` (200 discarded steps, then ``--steps`` kept,
``keep_draws=False``: constant memory), its chains split over two logical
CPU devices (``parallel="chain_groups"``).  For each chain count it times
the sampling, then ``summary()`` (its warnings included), ``save()`` and
``ed.load()``, and prints each as a fraction of the sampling time (goal:
under 10%) and the estimate's distance from the exact mean in MCSE.

    python benchmarks/postprocessing.py [--chains 10000 100000 1000000] [--steps 1000]
"""

import argparse
import os
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import edward_lite as ed  # noqa: E402  (first: a quiet TensorFlow start-up)

import machine  # noqa: E402
import mixture_rwmh  # noqa: E402


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--chains", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
  parser.add_argument("--steps", type=int, default=1000)
  args = parser.parse_args()
  print(machine.machine_line())
  devices = ed.distribute.logical_cpus(2)
  strategy = ed.distribute.strategy("mirrored", devices=devices)
  exact_mean, _ = mixture_rwmh.exact_moments()
  print(f"{'chains':>9s} {'samples':>9s} {'sampling s':>10s} {'summary s':>9s} {'save s':>7s} "
        f"{'load s':>7s} {'post/sampling':>13s} {'|mean - exact| / MCSE':>22s}", flush=True)
  for chains in args.chains:
    start = time.perf_counter()
    result = ed.mcmc.sample(mixture_rwmh.mixture, kernel=ed.mcmc.RWMH(scale=5., adapt=False),
                            chains=chains, warmup=200, draws=args.steps, seed=0,
                            keep_draws=False, adapt_metric=False, progress=False,
                            strategy=strategy, parallel="chain_groups")
    sampling = time.perf_counter() - start
    start = time.perf_counter()
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      table = result.summary()
    summary = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
      start = time.perf_counter()
      path = result.save(os.path.join(tmp, "run"))
      saved = time.perf_counter() - start
      start = time.perf_counter()
      ed.load(path)
      loaded = time.perf_counter() - start
    off = abs(table.loc["x", "mean"] - exact_mean) / table.loc["x", "mcse_mean"]
    print(f"{chains:9d} {chains * args.steps:9.1e} {sampling:10.1f} {summary:9.2f} {saved:7.2f} "
          f"{loaded:7.2f} {(summary + saved + loaded) / sampling:13.3f} {off:22.1f}", flush=True)


if __name__ == "__main__":
  main()
