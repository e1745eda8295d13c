"""NUTS with many chains: lockstep against rounds, in one process.

In lockstep every chain waits, at each transition, for the longest
trajectory of the batch; in rounds (``NUTS.run_rounds``, the sampler's
sampling phase from ``ROUNDS_MIN_CHAINS`` chains up) each chain runs up to
32 transitions in a row and waits only at the end of the round.  For
eight schools (non-centered), ``--warmup`` + ``--draws`` iterations with
streaming statistics only, this prints per chain count and mode:

* sampling seconds (median of ``--reps`` runs of the compiled sampler, new
  seed each run, compile excluded);
* leapfrog iterations of the batched loop in the sampling phase,
  reconstructed from the per-transition leapfrog counts of a run with kept
  draws: lockstep ``sum_t max_c n[t, c]``, rounds ``sum_rounds max_c
  sum_{t in round} n[t, c]``, and the efficiency ``useful / (C x iterations)``
  (useful = ``sum n``);
* microseconds per iteration, and the ratio of the sampling times.

    cd /work/main && .venv/bin/python benchmarks/mcmc_nuts_chains.py [--chains 128 512 2048]
"""

import argparse
import importlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import edward_lite as ed  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import zoo  # noqa: E402  (eight schools, shared with the tests)

chunk_module = importlib.import_module("edward_lite.mcmc.chunk")
program_module = importlib.import_module("edward_lite.mcmc.compiled")

Y, SIGMA, eight_schools = zoo.EIGHT_SCHOOLS_Y, zoo.EIGHT_SCHOOLS_SIGMA, zoo.eight_schools


def iterations(n_grads, rounds, chunk, capacity):
  """Leapfrog iterations of the sampling phase from per-transition leapfrog
  counts ``n_grads [T, C]``."""
  if not rounds:
    return int(n_grads.max(1).sum())
  total = 0
  for c0 in range(0, len(n_grads), chunk):
    for r0 in range(c0, min(c0 + chunk, len(n_grads)), capacity):
      total += int(n_grads[r0:min(r0 + capacity, c0 + chunk)].sum(0).max())
  return total


def run(chains, rounds, args):
  program_module.Program._cache.clear()  # the mode is fixed when a program is traced
  chunk_module.ROUNDS_MIN_CHAINS = 32 if rounds else 10 ** 9
  kwargs = dict(observed={"y": Y}, chains=chains, warmup=args.warmup, draws=args.draws,
                progress=False)
  kept = ed.mcmc.sample(eight_schools, SIGMA, seed=0, **kwargs)  # also compiles
  n = kept.sample_stats["num_gradients"]
  times = []
  for rep in range(args.reps):
    result = ed.mcmc.sample(eight_schools, SIGMA, seed=rep + 1, keep_draws=False, **kwargs)
    times.append(result.timings["sampling_s"])
  iters = iterations(n, rounds, importlib.import_module("edward_lite.mcmc.sample").DEFAULT_CHUNK,
                     chunk_module._round_capacity(chains, 10))
  seconds = float(np.median(times))
  return dict(seconds=seconds, iterations=iters, efficiency=n.sum() / (chains * iters),
              us_per_iteration=1e6 * seconds / iters, compile_s=kept.timings["compile_s"])


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--chains", type=int, nargs="+", default=[128, 512, 2048])
  parser.add_argument("--warmup", type=int, default=200)
  parser.add_argument("--draws", type=int, default=1000)
  parser.add_argument("--reps", type=int, default=3)
  args = parser.parse_args()
  print(f"# TF {tf.__version__}; eight schools NUTS, {args.warmup} warmup + {args.draws} "
        f"draws; sampling phase only; median of {args.reps}")
  print("| chains | mode | compile s | sampling s | leapfrog iterations | efficiency | "
        "µs / iteration | lockstep s / rounds s |")
  print("|---|---|---|---|---|---|---|---|")
  for chains in args.chains:
    lock, rnd = run(chains, False, args), run(chains, True, args)
    for mode, r in (("lockstep", lock), ("rounds", rnd)):
      ratio = f"**{lock['seconds'] / rnd['seconds']:.2f}**" if mode == "rounds" else ""
      print(f"| {chains} | {mode} | {r['compile_s']:.1f} | {r['seconds']:.3f} | "
            f"{r['iterations']:,} | {r['efficiency']:.2f} | {r['us_per_iteration']:.0f} | "
            f"{ratio} |", flush=True)


if __name__ == "__main__":
  main()
