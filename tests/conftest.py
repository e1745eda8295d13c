import atexit
import os
import re
import shutil
import tempfile

import pytest

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
# Three tiers, marked where each test is defined.  ``pytest -m "not slow"`` runs
# the fast one.  ``@pytest.mark.slow``: a test that took over 3 s on the 2-core
# CI-class machine.  ``@pytest.mark.long`` (a whole test, or one case with
# ``pytest.param(..., marks=pytest.mark.long)``; ``@pytest.mark.long_cases(ids)``
# names the cases of a parametrized fixture): the longest end-to-end and
# statistical checks, each with a comment naming the shorter check of the same
# path that the default run keeps.  A long test is slow too.  The default run
# (CI's) leaves the long tier out; ``--long`` (or ``-m long``) runs it.
#
# The fast tier's guard: under ``-m "not slow"`` the terminal summary names each
# unmarked test whose call took over ``fast_tier_limit`` seconds (pytest.ini;
# 10 s, margin over the 3 s rule for a loaded machine): it belongs in the slow
# tier.  A warning, not a failure: timings are noise on a shared machine.


DEFAULT_TIER_TIMEOUT_S = 600


def pytest_addoption(parser):
  parser.addoption("--long", action="store_true",
                   help="also run the long tier (tests marked long)")
  parser.addini("fast_tier_limit", "seconds over which a test not marked slow is "
                "named at the end of a -m 'not slow' run", default="10")


def pytest_collection_modifyitems(config, items):
  for item in items:
    cases = item.get_closest_marker("long_cases")
    callspec = getattr(item, "callspec", None)
    if cases is not None and callspec is not None and callspec.id in cases.args:
      item.add_marker(pytest.mark.long)
    if item.get_closest_marker("long") is not None and item.get_closest_marker("slow") is None:
      item.add_marker(pytest.mark.slow)
    if item.get_closest_marker("long") is None and item.get_closest_marker("timeout") is None:
      # The default tier's longest call is about 40 s on CI: a stuck one
      # fails after DEFAULT_TIER_TIMEOUT_S, not after the ini's 1,200 s
      # for the long tier, and CI's 90 minutes go on.
      item.add_marker(pytest.mark.timeout(DEFAULT_TIER_TIMEOUT_S))
  if config.getoption("--long") or "long" in (config.getoption("-m") or ""):
    return
  left_out = [item for item in items if item.get_closest_marker("long") is not None]
  if left_out:
    config.hook.pytest_deselected(items=left_out)
    items[:] = [item for item in items if item.get_closest_marker("long") is None]


def excludes_slow(markexpr):
  """True when ``-m markexpr`` leaves out the tests marked slow (the fast tier)."""
  return re.search(r"\bnot\s+slow\b", markexpr or "") is not None


def over_the_limit(durations, limit):
  """The ``(nodeid, seconds)`` of ``durations`` over ``limit``, longest first."""
  return sorted(((nodeid, t) for nodeid, t in durations.items() if t > limit),
                key=lambda pair: (-pair[1], pair[0]))


class FastTierGuard:
  """Records each unmarked test's call duration; names those over ``limit``."""

  def __init__(self, limit):
    self.limit = limit
    self.durations = {}

  def pytest_runtest_logreport(self, report):
    if report.when == "call" and "slow" not in report.keywords:
      self.durations[report.nodeid] = report.duration

  def pytest_terminal_summary(self, terminalreporter):
    offenders = over_the_limit(self.durations, self.limit)
    if not offenders:
      return
    tests = "test" if len(offenders) == 1 else "tests"
    terminalreporter.write_sep("=", f"fast tier: {len(offenders)} unmarked {tests} over "
                               f"{self.limit:g} s", yellow=True)
    for nodeid, seconds in offenders:
      terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}")
    terminalreporter.write_line("They belong in the slow tier: mark each @pytest.mark.slow "
                                "(the fast tier keeps tests under 3 s).")


def pytest_configure(config):
  # On pytest-xdist's controller (its reports carry the workers' durations),
  # not in the workers.
  if excludes_slow(config.getoption("-m")) and not hasattr(config, "workerinput"):
    limit = float(config.getini("fast_tier_limit"))
    config.pluginmanager.register(FastTierGuard(limit), "fast_tier_guard")
