"""The package's layout: a documented namespace, and the paths from before the move."""

import ast
import importlib
import pathlib
import re
import sys
import warnings

import pytest

import edward_lite as ed
from edward_lite import old_paths


def test_dir_is_the_documented_api():
  names = set(dir(ed))
  assert names == set(ed.__all__)
  # No internal module or helper leaks into the namespace.
  for internal in ("console", "quiet_startup", "zoo", "language", "runtime", "checks",
                   "fingerprints", "CONSTRUCTORS"):
    assert internal not in names
  for public in ("Normal", "RandomVariable", "trace", "make_log_joint_fn", "make_target",
                 "mcmc", "vi", "distribute", "diagnostics", "posterior_predictive",
                 "prior_predictive", "load", "plot"):
    assert public in names
  assert set(dir(ed.mcmc)) == set(ed.mcmc.__all__)
  assert "adaptation" not in dir(ed.mcmc) and "chunk" not in dir(ed.mcmc)


@pytest.mark.parametrize("old", sorted(old_paths.MOVED))
def test_old_module_paths_import_the_moved_module_with_a_warning(old):
  new = "edward_lite." + old_paths.MOVED[old]
  sys.modules.pop(f"edward_lite.{old}", None)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    if old == "plot":
      pytest.importorskip("matplotlib")
    module = importlib.import_module(f"edward_lite.{old}")
  assert module is importlib.import_module(new)
  assert module.__spec__.name == new  # the module keeps its own spec
  assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message)
             for w in caught)


def test_old_names_reach_their_objects():
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from edward_lite.programs import condition  # pylint: disable=g-import-not-at-top
    from edward_lite.target import make_target  # pylint: disable=g-import-not-at-top
    assert condition is ed.condition and make_target is ed.make_target
    assert ed.nonfinite is importlib.import_module("edward_lite.checks.nonfinite")


def _folder_of(module):
  """``edward_lite.mcmc.sample`` -> ``mcmc``; a top-level module or the package -> None."""
  parts = module.split(".")
  root = pathlib.Path(ed.__file__).parent
  return parts[1] if len(parts) > 1 and (root / parts[1]).is_dir() else None


def test_folders_import_only_the_folders_contributing_lists_above_them():
  root = pathlib.Path(ed.__file__).parent
  layout = (root.parent / "CONTRIBUTING.md").read_text().split("## Layout")[1]
  order = re.findall(r"^  (\w+)/ ", layout.split("old_paths.py")[0], re.M)
  assert sorted(order) == sorted(p.name for p in root.iterdir()
                                 if (p / "__init__.py").exists())
  upward = []
  for path in root.rglob("*.py"):
    folder = path.relative_to(root).parts[0]
    if folder not in order:  # a top-level module (the package's own __init__, old_paths)
      continue
    for node in ast.walk(ast.parse(path.read_text())):  # function-level imports too
      names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
               [f"{node.module}.{a.name}" for a in node.names]  # from edward_lite import mcmc
               if isinstance(node, ast.ImportFrom) and node.module else [])
      for name in names:
        other = _folder_of(name) if name.startswith("edward_lite.") else None
        if other and order.index(other) > order.index(folder):
          upward.append(f"{path.relative_to(root)} imports {name}")
  assert not upward, upward
