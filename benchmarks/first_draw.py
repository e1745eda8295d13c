"""Seconds from ``ed.mcmc.sample`` to the first draw: eight schools, 4 chains.

``--model NAME`` runs another posterior of ``benchmarks/adaptation.py``
(``kidiq``, ``diamonds``, ``battery:logistic``, ...) instead, 4 chains x
1000 draws at its defaults.

Each run is a fresh process (a new user's script), so that tracing and the
XLA compile are counted; ``ED_COMPILE_CACHE`` chooses the compile cache
(``0``: off, a cold compile every run; a folder: warm from the second run).

    python benchmarks/first_draw.py [--runs 2] [--code /path/to/checkout]
        [--cold] [--against /path/to/other/checkout] [--model NAME]

Prints, per run: the import's seconds (TensorFlow's, not counted), the
seconds from the call to the first chunk's return, the whole call, and the
result's ``compile_s`` (the call until its first compiled chunk returned:
the trace, the compile and the chunks before).  ``--cold`` gives each
run a new, empty cache folder (a machine that never ran the model; removed
after); ``--against`` alternates the runs with another checkout's (A B A B,
this machine's speed drifts between minutes) and prints both medians, of
the first draw and of the whole call.
Results: RESULTS §24, §45, §46, §50.
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


def one_run(model):
  t0 = time.perf_counter()
  import edward_lite as ed  # pylint: disable=import-outside-toplevel
  t_import = time.perf_counter() - t0
  if model == "eight_schools":
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    from eight_schools import SIGMA, Y, eight_schools  # pylint: disable=import-outside-toplevel
    program, args, observed, options = eight_schools, (SIGMA,), {"y": Y}, {}
  else:
    sys.path.insert(0, HERE)
    import adaptation  # pylint: disable=import-outside-toplevel
    program, args, observed, options, _, _ = adaptation.load(model)
  first = []
  t0 = time.perf_counter()
  post = ed.mcmc.sample(program, *args, observed=observed, chains=4, draws=1000, seed=0,
                        progress=False,
                        callback=lambda info: first or first.append(time.perf_counter() - t0),
                        **options)
  total = time.perf_counter() - t0
  print(f"import {t_import:.2f} s  first draw {first[0]:.2f} s  whole call {total:.2f} s  "
        f"compile_s {post.timings['compile_s']:.2f} s", flush=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--runs", type=int, default=2)
  parser.add_argument("--code", default=os.path.join(HERE, ".."),
                      help="the checkout whose edward_lite runs")
  parser.add_argument("--cold", action="store_true",
                      help="a new, empty cache folder for every run")
  parser.add_argument("--against", default=None,
                      help="another checkout, run alternately with --code")
  parser.add_argument("--model", default="eight_schools",
                      help="a posterior of benchmarks/adaptation.py (default eight_schools)")
  parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.one:
    one_run(args.model)
    return
  import machine  # pylint: disable=import-outside-toplevel
  print(machine.machine_line())
  codes = [args.code] + ([args.against] if args.against else [])
  firsts = {code: [] for code in codes}
  for _ in range(args.runs):
    for code in codes:
      firsts[code].append(_run_once(code, args.cold, args.model))
  if args.against:
    for code in codes:
      first, whole = zip(*firsts[code])
      print(f"{code}: first draw median {statistics.median(first):.2f} s "
            f"({min(first):.2f}-{max(first):.2f}), whole call median "
            f"{statistics.median(whole):.2f} s ({min(whole):.2f}-{max(whole):.2f})")


def _run_once(code, cold, model):
  """One ``--one`` run of ``code`` in a new process; its first-draw and
  whole-call seconds."""
  env = dict(os.environ, PYTHONPATH=os.path.abspath(code),
             TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
  folder = tempfile.mkdtemp(prefix="edward_lite-first-draw-") if cold else None
  if folder:
    env["ED_COMPILE_CACHE"] = folder
  try:
    out = subprocess.run([sys.executable, os.path.join(HERE, "first_draw.py"), "--one",
                          "--model", model],
                         env=env, check=True, capture_output=True, text=True).stdout
  finally:
    if folder:
      shutil.rmtree(folder, ignore_errors=True)
  line = out.strip().splitlines()[-1]
  print(f"{code}: {line}", flush=True)
  return tuple(float(re.search(rf"{what} ([0-9.]+) s", line).group(1))
               for what in ("first draw", "whole call"))


if __name__ == "__main__":
  main()
