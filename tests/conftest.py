import atexit
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Each test process its own compile cache (runtime/compile_cache.py), removed
# at exit: the suite neither reads a stale cache in the user's home nor leaves
# one there.
if "ED_COMPILE_CACHE" not in os.environ:
  os.environ["ED_COMPILE_CACHE"] = tempfile.mkdtemp(prefix="edward_lite_xla_")
  atexit.register(shutil.rmtree, os.environ["ED_COMPILE_CACHE"], ignore_errors=True)
# Traced programs are not kept (runtime/program_cache.py), here or in the
# processes tests start: saving each test's programs costs seconds and none
# runs again in a new process.  test_compile_cache.py turns it on where it
# tests it; ED_PROGRAM_CACHE=1 runs the whole suite through loaded programs.
os.environ.setdefault("ED_PROGRAM_CACHE", "0")

# Four logical CPU devices, so the distributed tests can run MirroredStrategy
# with 1, 2 and 4 replicas.  This must happen before TensorFlow initializes
# its devices (before any test module builds a tensor).  Other tests are
# unaffected: ops still default to /cpu:0.
import edward_lite as ed  # pylint: disable=wrong-import-position

LOGICAL_CPUS = ed.distribute.logical_cpus(4)


# -- tiers ------------------------------------------------------------------------------------
# Three tiers.  ``pytest -m "not slow"`` runs the fast one.  A test is slow when
# it is named in ``slow_tests.txt`` (one ``file::test`` per line, parameters
# left out: tests that took over 3 s on the 2-core CI-class machine) or marked
# ``@pytest.mark.slow``.  A test is long when named in ``long_tests.txt`` (same
# form; ``file::test[param]`` names one case) or marked ``@pytest.mark.long``:
# the longest end-to-end and statistical checks, each of which has a shorter
# check of the same path in the default run.  The default run (CI's) leaves
# the long tier out; ``--long`` (or ``-m long``) runs it.

def _listed(name):
  path = os.path.join(os.path.dirname(__file__), name)
  with open(path) as f:
    return {line.split("#")[0].strip() for line in f} - {""}


def pytest_addoption(parser):
  parser.addoption("--long", action="store_true",
                   help="also run the long tier (tests/long_tests.txt)")


def pytest_collection_modifyitems(config, items):
  import pytest  # pylint: disable=g-import-not-at-top
  slow, long = _listed("slow_tests.txt"), _listed("long_tests.txt")
  for item in items:
    path, _, name = item.nodeid.partition("::")
    test = f"{os.path.basename(path)}::{name}"
    base = test.split("[")[0]
    if base in slow:
      item.add_marker(pytest.mark.slow)
    if test in long or base in long:
      item.add_marker(pytest.mark.long)
      item.add_marker(pytest.mark.slow)
  if config.getoption("--long") or "long" in (config.getoption("-m") or ""):
    return
  left_out = [item for item in items if item.get_closest_marker("long") is not None]
  if left_out:
    config.hook.pytest_deselected(items=left_out)
    items[:] = [item for item in items if item.get_closest_marker("long") is None]

