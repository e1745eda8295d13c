"""The documentation cannot rot: every Python block of docs/ runs, the README's
first snippet is the home page's and runs verbatim, and the site builds with
``mkdocs build --strict``.

The blocks of one page run in order in one namespace, in a temporary working
directory (plots and saved files land there). A block is skipped only when the
line before its fence is ``<!-- no-run: reason -->``.

``python tests/test_docs.py docs/guide/mcmc.md [more pages]`` runs pages in order.
"""

import ast
import inspect
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
NO_RUN = re.compile(r"<!--\s*no-run:\s*(.+?)\s*-->")
FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def python_blocks(text):
  """[(code, line, reason_to_skip or None)] of every ```python block of `text`."""
  blocks = []
  for match in FENCE.finditer(text):
    line = text.count("\n", 0, match.start()) + 1
    before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
    skip = NO_RUN.search(before)
    blocks.append((match.group(1), line, skip.group(1) if skip else None))
  return blocks


PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")
               if python_blocks(p.read_text()))


def test_every_guide_page_has_code_and_few_opt_outs():
  guide = sorted(p.relative_to(DOCS).as_posix() for p in (DOCS / "guide").glob("*.md"))
  assert len(guide) >= 9, guide
  assert set(guide) <= set(PAGES), set(guide) - set(PAGES)
  skipped = [(page, line, reason) for page in PAGES
             for _, line, reason in python_blocks((DOCS / page).read_text()) if reason]
  total = sum(len(python_blocks((DOCS / page).read_text())) for page in PAGES)
  assert len(skipped) <= max(3, total // 10), skipped  # opting out is the exception


def test_the_readmes_first_snippet_is_the_home_pages():
  # test_packaging.py runs the README's first snippet verbatim in a fresh process;
  # here it must also be the first block of docs/index.md, which runs below.
  readme_first = python_blocks((ROOT / "README.md").read_text())[0][0]
  index_first = python_blocks((DOCS / "index.md").read_text())[0][0]
  assert readme_first == index_first


def run_page(page):
  """Runs the blocks of docs/`page` in order in one namespace (in this process)."""
  namespace = {"__name__": f"docs_{page.replace('/', '_')[:-3]}"}
  for code, line, skip in python_blocks((DOCS / page).read_text()):
    if not skip:
      exec(compile(code, f"docs/{page}, the block at line {line}", "exec"), namespace)  # pylint: disable=exec-used


def _api_calls(code):
  """[(dotted name, keywords)] of every ``ed.a.b(...)`` call and ``ed.a.b`` use in ``code``."""

  def dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
      parts.append(node.attr)
      node = node.value
    return ".".join(reversed(parts)) if isinstance(node, ast.Name) and node.id == "ed" else None

  tree = ast.parse(code)
  calls = {id(node.func): node for node in ast.walk(tree) if isinstance(node, ast.Call)}
  uses = []
  for node in ast.walk(tree):
    name = dotted(node) if isinstance(node, ast.Attribute) else None
    if name and not isinstance(getattr(node, "ctx", None), ast.Store):
      call = calls.get(id(node))
      uses.append((name, [k.arg for k in call.keywords if k.arg] if call else []))
  return uses


def test_the_pages_code_names_what_the_library_has():
  # The default run's form of the check below (which runs every block, in the
  # long tier): every block parses, every ``ed.x.y`` it names exists, and
  # every keyword it gives an ``ed`` function is one that function takes.
  import edward_lite as ed  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  problems, checked = [], 0
  for page in PAGES + ["../README.md"]:
    for code, line, skip in python_blocks((DOCS / page).read_text()):
      if skip:
        continue
      try:
        uses = _api_calls(code)
      except SyntaxError as error:
        problems.append(f"{page}:{line}: {error}")
        continue
      for name, keywords in uses:
        obj = ed
        try:
          for part in name.split("."):
            obj = getattr(obj, part)
        except AttributeError:
          problems.append(f"{page}:{line}: ed.{name} does not exist")
          continue
        checked += 1
        try:
          params = inspect.signature(obj).parameters
        except (TypeError, ValueError):
          continue
        if any(p.kind == p.VAR_KEYWORD for p in params.values()):
          continue
        problems += [f"{page}:{line}: ed.{name} takes no {k}=" for k in keywords if k not in params]
  assert checked > 100, checked
  assert not problems, problems


# Pages that set up devices before TensorFlow starts run in a process of their
# own; the others share one (one TensorFlow start-up instead of one per page).
ALONE = [page for page in PAGES
         if any("logical_cpus" in code for code, _, _ in python_blocks((DOCS / page).read_text()))]
GROUPS = [[page] for page in ALONE] + [[page for page in PAGES if page not in ALONE]]


@pytest.mark.slow
@pytest.mark.parametrize("pages", GROUPS, ids=lambda pages: pages[0] if len(pages) == 1
                         else f"{len(pages)} pages")
def test_the_pages_code_runs(pages, tmp_path):
  # In a fresh process: the compiled programs' memory and mappings are not
  # added to the test worker's; each page keeps its own namespace.
  result = subprocess.run([sys.executable, __file__] + pages, capture_output=True, text=True,
                          timeout=1000, cwd=tmp_path, env=dict(os.environ, MPLBACKEND="Agg"))
  assert result.returncode == 0, f"docs/{pages} failed:\n{result.stderr[-4000:]}"


def _mkdocs():
  """The command that runs MkDocs: $MKDOCS (an executable, e.g. of another
  environment), else this Python's when MkDocs and mkdocstrings import."""
  if os.environ.get("MKDOCS"):
    return [os.environ["MKDOCS"]]
  try:
    import mkdocs  # pylint: disable=g-import-not-at-top,unused-import,import-outside-toplevel
    import mkdocstrings  # pylint: disable=g-import-not-at-top,unused-import,import-outside-toplevel
  except ImportError:
    return None
  return [sys.executable, "-m", "mkdocs"]


@pytest.mark.slow
def test_the_site_builds_in_strict_mode(tmp_path):
  command = _mkdocs()
  if command is None:
    pytest.skip("MkDocs or mkdocstrings is not installed: pip install -e '.[docs]'")
  result = subprocess.run(command + ["build", "--strict", "--site-dir", str(tmp_path / "site")],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
  assert (tmp_path / "site" / "api" / "mcmc" / "index.html").exists()
  html = (tmp_path / "site" / "api" / "mcmc" / "index.html").read_text()
  assert "chains" in html  # the docstring of ed.mcmc.sample is rendered


def test_the_readmes_links_to_the_docs_exist():
  readme = (ROOT / "README.md").read_text()
  links = re.findall(r"\]\(((?:docs/|CHANGELOG|CONTRIBUTING)[^)#]*)", readme)
  assert len(links) >= 10, links
  missing = [link for link in links if not (ROOT / link).exists()]
  assert not missing, missing



def test_the_readme_is_a_users_document_and_the_guide_covers_the_topics():
  # Issue 30, item 3: the README is for users (no development diary, no suite
  # costs); history and contributor matters live in their own files; the guide
  # has a page per topic and covers censoring and VI's start.
  readme = (ROOT / "README.md").read_text()
  assert len(readme.splitlines()) < 250
  for diary in (r"\bissue \d+", r"(?-i:RESULTS)", r"xdist", r"memory.map", r"\d+ GB", r"## Status"):
    assert not re.search(diary, readme, re.I), diary
  contributing = (ROOT / "CONTRIBUTING.md").read_text()
  assert "xdist" in contributing and "memory" in contributing
  assert (ROOT / "CHANGELOG.md").read_text().startswith("# Changelog")
  guide = {p.stem for p in (DOCS / "guide").glob("*.md")}
  assert {"models", "data", "loops", "mcmc", "vi", "predictive", "diagnostics", "distributed",
          "saving", "odes", "install"} <= guide, guide
  assert "log_survival_function" in (DOCS / "guide" / "models.md").read_text()
  assert "init=" in (DOCS / "guide" / "vi.md").read_text()
  assert "Known TFP issues" in (DOCS / "guide" / "install.md").read_text()


if __name__ == "__main__":
  for arg in sys.argv[1:]:
    run_page(pathlib.Path(arg).resolve().relative_to(DOCS).as_posix()
             if arg.startswith(("docs", "/")) else arg)
