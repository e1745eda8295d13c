"""Seconds from ``ed.mcmc.sample`` to the first draw: eight schools, 4 chains.

Each run is a fresh process (a new user's script), so that tracing and the
XLA compile are counted; ``ED_COMPILE_CACHE`` chooses the compile cache
(``0``: off, a cold compile every run; a folder: warm from the second run).

    python benchmarks/first_draw.py [--runs 2] [--code /path/to/checkout]
        [--cold] [--against /path/to/other/checkout]

Prints, per run: the import's seconds (TensorFlow's, not counted), the
seconds from the call to the first chunk's return, the whole call, and the
first chunk's own seconds (trace + compile + run).  ``--cold`` gives each
run a new, empty cache folder (a machine that never ran the model; removed
after); ``--against`` alternates the runs with another checkout's (A B A B,
this machine's speed drifts between minutes) and prints both medians.
Results: RESULTS §24, §45, §46.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def one_run():
  t0 = time.perf_counter()
  import edward_lite as ed  # pylint: disable=import-outside-toplevel
  t_import = time.perf_counter() - t0
  sys.path.insert(0, os.path.join(HERE, "..", "examples"))
  from eight_schools import SIGMA, Y, eight_schools  # pylint: disable=import-outside-toplevel
  first = []
  t0 = time.perf_counter()
  post = ed.mcmc.sample(eight_schools, SIGMA, observed={"y": Y}, chains=4, draws=1000, seed=0,
                        progress=False,
                        callback=lambda info: first or first.append(time.perf_counter() - t0))
  total = time.perf_counter() - t0
  print(f"import {t_import:.2f} s  first draw {first[0]:.2f} s  whole call {total:.2f} s  "
        f"first chunk {post.timings['compile_s']:.2f} s", flush=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--runs", type=int, default=2)
  parser.add_argument("--code", default=os.path.join(HERE, ".."),
                      help="the checkout whose edward_lite runs")
  parser.add_argument("--cold", action="store_true",
                      help="a new, empty cache folder for every run")
  parser.add_argument("--against", default=None,
                      help="another checkout, run alternately with --code")
  parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.one:
    one_run()
    return
  import machine  # pylint: disable=import-outside-toplevel
  print(machine.machine_line())
  codes = [args.code] + ([args.against] if args.against else [])
  firsts = {code: [] for code in codes}
  for _ in range(args.runs):
    for code in codes:
      firsts[code].append(_run_once(code, args.cold))
  if args.against:
    for code in codes:
      print(f"{code}: first draw median {statistics.median(firsts[code]):.2f} s "
            f"({min(firsts[code]):.2f}-{max(firsts[code]):.2f})")


def _run_once(code, cold):
  """One ``--one`` run of ``code`` in a new process; its first-draw seconds."""
  env = dict(os.environ, PYTHONPATH=os.path.abspath(code),
             TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
  folder = tempfile.mkdtemp(prefix="edward_lite-first-draw-") if cold else None
  if folder:
    env["ED_COMPILE_CACHE"] = folder
  try:
    out = subprocess.run([sys.executable, os.path.join(HERE, "first_draw.py"), "--one"],
                         env=env, check=True, capture_output=True, text=True).stdout
  finally:
    if folder:
      shutil.rmtree(folder, ignore_errors=True)
  line = out.strip().splitlines()[-1]
  print(f"{code}: {line}", flush=True)
  return float(re.search(r"first draw ([0-9.]+) s", line).group(1))


if __name__ == "__main__":
  main()
