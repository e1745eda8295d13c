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

# Four logical CPU devices, so the distributed tests can run MirroredStrategy
# with 1, 2 and 4 replicas.  This must happen before TensorFlow initializes
# its devices (before any test module builds a tensor).  Other tests are
# unaffected: ops still default to /cpu:0.
import edward_lite as ed  # pylint: disable=wrong-import-position

LOGICAL_CPUS = ed.distribute.logical_cpus(4)


# -- the fast tier ---------------------------------------------------------------------------
# ``pytest -m "not slow"`` runs the fast tier; the default command runs
# everything.  A test is slow when it is named in ``slow_tests.txt`` (one
# ``file::test`` per line, parameters left out; the tests that took over 3 s
# on the 2-core CI-class machine), or marked ``@pytest.mark.slow``.

def _slow_tests():
  path = os.path.join(os.path.dirname(__file__), "slow_tests.txt")
  with open(path) as f:
    return {line.split("#")[0].strip() for line in f} - {""}


def pytest_collection_modifyitems(config, items):  # pylint: disable=unused-argument
  import pytest  # pylint: disable=g-import-not-at-top
  slow = _slow_tests()
  for item in items:
    path, _, name = item.nodeid.partition("::")
    if f"{os.path.basename(path)}::{name.split('[')[0]}" in slow:
      item.add_marker(pytest.mark.slow)
