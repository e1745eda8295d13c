"""The whole suite as a few pytest runs, each in fresh processes.

    python tests/run_pytest.py [pytest options]            # the suite, in batches
    python tests/run_pytest.py [pytest options] FILES...   # one pytest run

Why: TensorFlow keeps every XLA executable a process compiles until the
process ends (its device compilation cache has no eviction; tensorflow
issue 64170), about 50 MB per model sampled.  The suite samples well over a
thousand models, so one pytest worker grew to 11 GB and two of them, beside
the tests' own subprocesses, exhausted CI's 24 GB machine.  Run in
``BATCHES`` batches of test files, each a new ``pytest`` with new workers,
a worker holds a third of that.

Every argument is passed to each pytest run.  Files are assigned to batches
greedily, largest first, by their seconds in a measured run
(``file_seconds.txt``; a file not listed is estimated from its slow marks
and size), and each batch lists its files largest first so that ``--dist loadfile`` ends on
short files.  The exit status is the first failing batch's (a batch
that selects no test, status 5, is not a failure unless every batch is).
"""

import glob
import os
import re
import subprocess
import sys
import time

BATCHES = 3
HERE = os.path.dirname(os.path.abspath(__file__))


def _measured():
  """``file name -> seconds`` from ``file_seconds.txt``."""
  path = os.path.join(HERE, "file_seconds.txt")
  if not os.path.exists(path):
    return {}
  with open(path, encoding="utf-8") as f:
    rows = [line.split() for line in f if line.strip() and not line.startswith("#")]
  return {name: float(seconds) for seconds, name in rows}


def _costs(files):
  """Seconds per file: measured (``file_seconds.txt``), else estimated: 1.6
  (the measured files' median ratio) x (20 per test marked slow or long, 1
  per 2 kB of source)."""
  measured, costs = _measured(), {}
  for path in files:
    if os.path.basename(path) in measured:
      costs[path] = measured[os.path.basename(path)]
      continue
    with open(path, encoding="utf-8") as f:
      source = f.read()
    # Tests marked slow, and whole tests marked long (slow too).
    marked = source.count("mark.slow") + len(re.findall(r"@pytest\.mark\.long\b", source))
    costs[path] = 1.6 * (20 * marked + os.path.getsize(path) / 2048)
  return costs


def batches(files, count=BATCHES):
  """``count`` lists of ``files``, balanced by ``_costs``, each largest first."""
  costs = _costs(files)
  groups = [[] for _ in range(count)]
  totals = [0.0] * count
  for path in sorted(files, key=lambda p: (-costs[p], p)):
    lightest = totals.index(min(totals))
    groups[lightest].append(path)
    totals[lightest] += costs[path]
  return [group for group in groups if group]


def _names_tests(args):
  """True when an argument names files, directories or node ids to run."""
  return any(os.path.exists(arg.split("::")[0]) for arg in args if not arg.startswith("-"))


def main(args):
  pytest = [sys.executable, "-m", "pytest"]
  if _names_tests(args):
    return subprocess.call(pytest + args)
  files = sorted(glob.glob(os.path.join(HERE, "test_*.py")))
  groups = batches([os.path.relpath(path) for path in files])
  codes, start = [], time.time()
  for number, group in enumerate(groups, 1):
    print(f"=== run_pytest: batch {number}/{len(groups)}, {len(group)} files ===", flush=True)
    codes.append(subprocess.call(pytest + args + group))
  ran = [code for code in codes if code != 5]
  status = next((code for code in ran if code != 0), 0) if ran else 5
  print(f"=== run_pytest: {len(groups)} batches, exit codes {codes}, "
        f"{'passed' if status == 0 else 'FAILED'} in {time.time() - start:.0f} s ===", flush=True)
  return status


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
