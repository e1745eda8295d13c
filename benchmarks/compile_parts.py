"""The first chunk's trace and XLA compile, measured apart: eight schools, 4 chains.

``benchmarks/first_draw.py`` times the whole call to the first draw, where
the compile runs beside the initial states.  Here each part runs alone in
the main thread (the run's setup is replaced by: trace, compile, initial
states), in one process, ``--reps`` times with a new program each time (so
every repetition traces and compiles again; the compile caches are off).
Prints, per repetition, the trace's seconds, the compile's wall seconds and
its CPU seconds (user + system, all of XLA's threads: XLA compiles on both
cores of a 2-core machine), and the medians over the repetitions after the
first, whose one-off costs they leave out.  Comparing two checkouts, run
them alternately: this machine's speed drifts by 10-20% between minutes.

    ED_COMPILE_CACHE=0 python benchmarks/compile_parts.py [--reps 6] [--chains 4]

Results: RESULTS section 46.
"""

import argparse
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _cpu_seconds():
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--reps", type=int, default=6)
  parser.add_argument("--chains", type=int, default=4)
  args = parser.parse_args()
  if os.environ.get("ED_COMPILE_CACHE") != "0":
    sys.exit("Run with ED_COMPILE_CACHE=0: a cached program or executable is not a compile.")
  sys.path.insert(0, os.path.join(HERE, ".."))
  sys.path.insert(0, os.path.join(HERE, "..", "examples"))
  import edward_lite as ed  # pylint: disable=import-outside-toplevel
  from edward_lite.mcmc import run as run_module  # pylint: disable=import-outside-toplevel
  from edward_lite.mcmc.compiled import Program  # pylint: disable=import-outside-toplevel
  from eight_schools import SIGMA, Y, eight_schools  # pylint: disable=import-outside-toplevel
  import machine  # pylint: disable=import-outside-toplevel
  print(machine.machine_line())
  rows = []

  def setup_in_parts(run):
    """``Run._initialize_while_compiling``, its parts one after another."""
    program = run.program
    template = run._state_template()  # pylint: disable=protected-access
    call = (template, run._inputs(template, 0, 0), run._capacity())  # pylint: disable=protected-access
    key = program._key(program._run_chunk_fn, call)  # pylint: disable=protected-access
    t0 = time.perf_counter()
    concrete = program._concrete_function(program._run_chunk_fn, key, call)  # pylint: disable=protected-access
    program._concrete[key] = concrete  # pylint: disable=protected-access
    trace = time.perf_counter() - t0
    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    concrete(*call)
    rows.append((trace, time.perf_counter() - t0, _cpu_seconds() - cpu0))
    run._initialize()  # pylint: disable=protected-access

  run_module.Run._initialize_while_compiling = setup_in_parts  # pylint: disable=protected-access
  for rep in range(args.reps):
    Program._cache.clear()  # pylint: disable=protected-access
    ed.mcmc.sample(eight_schools, SIGMA, observed={"y": Y}, chains=args.chains, draws=100,
                   seed=0, progress=False)
    print(f"rep {rep}: trace {rows[-1][0]:.3f} s  compile {rows[-1][1]:.3f} s  "
          f"compile CPU {rows[-1][2]:.3f} s", flush=True)
  later = rows[1:] or rows
  trace, wall, cpu = (statistics.median(column) for column in zip(*later))
  print(f"median after the first: trace {trace:.3f} s  compile {wall:.3f} s  "
        f"compile CPU {cpu:.3f} s")


if __name__ == "__main__":
  main()
