"""The test tiers (tests/conftest.py): long tests are slow too, the default run
leaves them out, and a fast-tier run names its unmarked tests over the limit."""

import conftest  # pylint: disable=import-error  (tests/conftest.py: the tiers)

pytest_plugins = ["pytester"]

TIERS = """
import time

import pytest


def test_quick():
  pass


def test_sleepy():
  time.sleep(0.3)


@pytest.mark.slow
def test_marked_slow():
  time.sleep(0.3)


@pytest.mark.long
def test_marked_long():
  time.sleep(0.3)


@pytest.mark.long_cases("b")
@pytest.mark.parametrize("case", ["a", "b"])
def test_cases(case):
  del case
"""

INI = """
[pytest]
markers =
    slow: slow
    long: long
    long_cases(*ids): long cases
"""


def test_the_fast_tier_is_a_run_that_leaves_slow_out():
  for expr in ("not slow", "not slow and not long", "(not  slow)"):
    assert conftest.excludes_slow(expr), expr
  for expr in ("", None, "slow", "slow and not long", "long", "not slowish"):
    assert not conftest.excludes_slow(expr), expr


def test_the_tests_over_the_limit_longest_first():
  durations = {"a": 2., "b": 12.5, "c": 10., "d": 30.}
  assert conftest.over_the_limit(durations, 10.) == [("d", 30.), ("b", 12.5)]
  assert conftest.over_the_limit({}, 10.) == []


def _run(pytester, *args):
  pytester.makeini(INI)
  pytester.makepyfile(test_tiers_example=TIERS)
  return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-v",
                                      "-o", "fast_tier_limit=0.15", *args, plugins=[conftest])


def test_a_fast_tier_run_names_its_unmarked_tests_over_the_limit(pytester):
  result = _run(pytester, "-m", "not slow")
  result.assert_outcomes(passed=3, deselected=3)  # quick, sleepy, cases[a]
  out = result.stdout.str()
  assert "fast tier: 1 unmarked test over 0.15 s" in out, out
  assert "They belong in the slow tier" in out
  named = [line for line in out.splitlines() if line.rstrip().endswith(("_sleepy", "_quick"))
           and " s  " in line]
  assert len(named) == 1 and named[0].rstrip().endswith("test_sleepy"), out


def test_the_default_run_leaves_the_long_tier_out_and_has_no_guard(pytester):
  result = _run(pytester)
  result.assert_outcomes(passed=4, deselected=2)  # marked long, cases[b]
  assert "fast tier" not in result.stdout.str()
  long_tier = _run(pytester, "--long", "-m", "long")
  long_tier.assert_outcomes(passed=2, deselected=4)
  long_tier.stdout.fnmatch_lines(["*test_marked_long PASSED*", "*test_cases?b? PASSED*"])
