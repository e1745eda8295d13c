"""Convergence diagnostics at scale: edward_lite vs ArviZ, same draws.

Times ``ed.diagnostics.convergence`` (bulk and tail ESS, rank-normalized
R-hat, MCSE of the mean, in one pass over blocks of parameters) against
ArviZ's ``ess(method="bulk")``, ``ess(method="tail")``, ``rhat`` and
``mcse`` on ``[draws, chains, P]`` standard normal draws (float64), checks
that the values agree, and prints the time ratio.  ArviZ is skipped above
``--arviz-max`` parameters.

    PYTHONPATH=. python benchmarks/diagnostics.py [--params 10000 100000]
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from edward_lite.analysis import diagnostics  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402

try:
  import arviz as az  # noqa: E402
except ImportError:  # pragma: no cover
  az = None


def time_arviz(x):
  """ArviZ's four statistics on ``x [draws, chains, P]``: (seconds, dict)."""
  data = az.convert_to_dataset(np.moveaxis(x, 1, 0))  # ArviZ wants [chains, draws, ...]
  start = time.perf_counter()
  out = dict(ess_bulk=az.ess(data, method="bulk"), ess_tail=az.ess(data, method="tail"),
             r_hat=az.rhat(data), mcse_mean=az.mcse(data))
  seconds = time.perf_counter() - start
  return seconds, {k: np.asarray(v["x"]) for k, v in out.items()}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--params", type=int, nargs="+", default=[10_000, 100_000])
  parser.add_argument("--draws", type=int, default=500)
  parser.add_argument("--chains", type=int, default=4)
  parser.add_argument("--arviz-max", type=int, default=10_000)
  args = parser.parse_args()
  print(machine.machine_line())
  print(f"# arviz {machine.version('arviz')}; {args.draws} draws x {args.chains} chains")
  rng = np.random.default_rng(0)
  diagnostics.convergence(rng.normal(size=(args.draws, args.chains, 8)))  # warm up
  for p in args.params:
    x = rng.normal(size=(args.draws, args.chains, p))
    start = time.perf_counter()
    ours = {k: np.asarray(v) for k, v in diagnostics.convergence(x).items()}
    ed_s = time.perf_counter() - start
    line = f"  P={p:<8d} edward_lite {ed_s:7.1f} s"
    if az is not None and p <= args.arviz_max:
      az_s, theirs = time_arviz(x)
      worst = max(float(np.max(np.abs(ours[k] / theirs[k] - 1))) for k in ours)
      line += (f"   arviz {az_s:7.1f} s   arviz / edward_lite {az_s / ed_s:5.2f}"
               f"   max relative difference {worst:.1e}")
    print(line)


if __name__ == "__main__":
  main()
