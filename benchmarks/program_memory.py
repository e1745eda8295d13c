"""Memory a process keeps per compiled program, against the program cache's bound.

``ed.mcmc.sample`` keeps the last ``Program.MAX_CACHED`` compiled programs of
a process (``mcmc/compiled.py``).  This script samples ``--programs``
distinct models (linear regressions with 1, 2, ... coefficients: each a new
program) in one process and prints the resident memory after each, with
the cache's bound set by ``--bound`` (0: nothing kept), with XLA or
without (``--no-xla``).  Between models it collects Python's garbage and
returns freed heap to the system (``malloc_trim``), so what remains is what
is still held.

    python benchmarks/program_memory.py --bound 8 --programs 16
    python benchmarks/program_memory.py --bound 0 --programs 16 --no-xla

The caches on disk are turned off (each program is traced and compiled).
Results: RESULTS section 43.
"""

import argparse
import ctypes
import gc
import os

os.environ["ED_PROGRAM_CACHE"] = "0"
os.environ["ED_COMPILE_CACHE"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import edward_lite as ed  # noqa: E402
from edward_lite.mcmc import compiled  # noqa: E402

import machine  # noqa: E402


def resident_mb():
  """The process's resident set size (VmRSS), in MB."""
  with open("/proc/self/status") as f:
    return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS"))


def regression(x):
  w = ed.Normal(tf.zeros(x.shape[1]), 1., name="w")
  return ed.Normal(tf.linalg.matvec(x, w), 1., name="y")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--bound", type=int, default=compiled.Program.MAX_CACHED)
  parser.add_argument("--programs", type=int, default=16)
  parser.add_argument("--no-xla", action="store_true")
  args = parser.parse_args()
  print(machine.machine_line())
  print(f"# tensorflow {machine.version('tensorflow')}; bound {args.bound}; "
        f"XLA {not args.no_xla}")
  compiled.Program.MAX_CACHED = args.bound
  trim = ctypes.CDLL("libc.so.6").malloc_trim
  rng = np.random.default_rng(0)
  before = None
  for k in range(1, args.programs + 1):
    x = rng.normal(size=(50, k)).astype(np.float32)
    y = (x.sum(1) + rng.normal(size=50)).astype(np.float32)
    ed.mcmc.sample(regression, x, observed={"y": y}, chains=4, warmup=100, draws=100, seed=0,
                   progress=False, jit_compile=not args.no_xla)
    gc.collect()
    trim(0)
    now = resident_mb()
    print(f"{k:3d} programs sampled, {len(compiled.Program._cache)} cached: "  # pylint: disable=protected-access
          f"{now:7.0f} MB" + (f"  (+{now - before:.0f})" if before else ""), flush=True)
    before = now


if __name__ == "__main__":
  main()
