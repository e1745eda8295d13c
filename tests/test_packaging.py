"""The installed environment is consistent and the main job runs."""

import ast
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_pip_check_passes():
  result = subprocess.run([sys.executable, "-m", "pip", "check"],
                          capture_output=True, text=True, timeout=120)
  assert result.returncode == 0, result.stdout + result.stderr


def test_ci_runs_the_readme_test_command():
  ci = (ROOT / ".ci" / "run").read_text()
  command = next(line.strip() for line in ci.splitlines()
                 if "pytest" in line and not line.lstrip().startswith("#"))
  assert command in (ROOT / "README.md").read_text()


@pytest.mark.slow
def test_main_job_prints_model_and_log_joint():
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  result = subprocess.run([sys.executable, str(ROOT / "examples" / "eight_schools.py")],
                          capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
  assert result.returncode == 0, result.stderr[-3000:]
  out = result.stdout
  for name in ("mu", "tau", "theta_tilde", "y"):
    assert re.search(rf"^\s+{name}\s", out, re.M), out
  # The printed log joint equals the density computed by hand with NumPy.
  printed = float(re.search(r"Log joint at .*: (-?\d+\.\d+)", out).group(1))
  y = np.array([28., 8., -3., 7., -1., 1., 18., 12.])
  sigma = np.array([15., 10., 16., 11., 9., 11., 10., 18.])
  mu, tau = 4.4, 3.6

  def normal(x, m, s):
    return -0.5 * ((x - m) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)

  expected = (normal(mu, 0., 5.) + np.log(2 / (np.pi * 5. * (1 + (tau / 5.) ** 2))) +
              normal(np.zeros(8), 0., 1.).sum() + normal(y, mu, sigma).sum())
  assert abs(printed - expected) < 1e-3


def _run_as_a_user(code, **env):
  """``python -c code`` with the user's environment (no log settings of ours)."""
  clean = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "ED_VERBOSE")}
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        timeout=300, env=dict(clean, **env), cwd=ROOT)


@pytest.mark.slow
def test_import_and_a_compiled_run_are_quiet():
  # A new user's first session: no TensorFlow start-up or XLA log lines.  The mixture
  # samples a Categorical eagerly when traced, which on CPUs without AVX-512 logs
  # oneDNN's int32 line once per process.
  code = ("import edward_lite as ed\n"
          "def m():\n"
          "  a = ed.Normal(0., 1., name='a')\n"
          "  ed.MixtureSameFamily(ed.distributions.tfd.Categorical(probs=[.5, .5]),\n"
          "                       ed.distributions.tfd.Normal([-1., 1.], 1.), name='b')\n"
          "  return ed.Normal(a, 1., name='y')\n"
          "r = ed.mcmc.sample(m, observed={'y': 0.5}, chains=2, warmup=20, draws=20,\n"
          "                   init='prior', progress=False)\n"
          "print(r.draws['a'].shape)\n")
  result = _run_as_a_user(code)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip() == "(20, 2)"
  assert result.stderr == "", result.stderr[:2000]
  # Asked for, TensorFlow's logs are still there.
  loud = _run_as_a_user("import edward_lite", ED_VERBOSE="1")
  assert "I0000" in loud.stderr or "oneDNN" in loud.stderr


def test_tensorflow_imported_first_logs_nothing_after_edward_lite():
  # TensorFlow's own import lines come before edward_lite can act (the Quick
  # start says how to silence them); nothing after: no cuInit, no XLA start.
  code = ("import sys\n"
          "import tensorflow as tf\n"
          "sys.stderr.write('MARK\\n'); sys.stderr.flush()\n"
          "import edward_lite as ed\n"
          "r = ed.mcmc.sample(lambda: ed.Normal(0., 1., name='a'), chains=2, warmup=20,\n"
          "                   draws=20, progress=False)\n"
          "print(r.draws['a'].shape)\n")
  result = _run_as_a_user(code)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip() == "(20, 2)"
  assert result.stderr.split("MARK\n", 1)[1] == "", result.stderr[-2000:]


# A TensorFlow C++ log line ("I0000 00:00:1795775911.582188 13977 port.cc:153] ...")
# or absl's note before its first one.
TF_LOG_LINE = re.compile(r"^(?:[IWEF]\d{4} \d\d:\d\d:\d\d|WARNING: All log messages before absl)",
                         re.M)


@pytest.mark.slow
def test_the_readmes_first_snippet_runs_verbatim():
  # Run as a user would (no log settings of ours): it imports edward_lite
  # before tensorflow, as the Quick start says, so no TensorFlow log line shows.
  readme = (ROOT / "README.md").read_text()
  snippet = readme.split("```python\n", 1)[1].split("```", 1)[0]
  code = snippet + "assert posterior.draws['tau'].shape == (1000, 8)\n"
  result = _run_as_a_user(code)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "r_hat" in result.stdout and "tau" in result.stdout
  assert not TF_LOG_LINE.search(result.stderr), result.stderr[-3000:]
  assert snippet.index("import edward_lite") < snippet.index("import tensorflow")
  assert "put\n`import edward_lite as ed` above `import tensorflow as tf`" in readme


def test_ci_stops_when_the_readme_command_fails_before_pytest():
  # Under set -e a failing venv or pip install (an earlier command of the &&
  # list) would not stop .ci/run, which would go on to the ArviZ 1.x part.
  # The command's line replaced by an && list whose middle command fails, then
  # .ci/run's next line: the script must stop there with that status.
  lines = (ROOT / ".ci" / "run").read_text().splitlines()
  at = next(i for i, line in enumerate(lines)
            if "pytest" in line and not line.lstrip().startswith("#"))
  after = next(line for line in lines[at + 1:] if not line.lstrip().startswith("#"))
  script = "\n".join(["set -euo pipefail", "true && (exit 3) && true", after, "echo REACHED"])
  result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
  assert result.returncode == 3 and "REACHED" not in result.stdout, (after, result)


def test_every_script_parses_on_this_python():
  # Benchmarks and examples are not imported by other tests; a syntax error
  # newer than setup.py's python_requires (a nested same-quote f-string on
  # 3.11) would otherwise go unseen until someone runs the script.
  scripts = sorted(ROOT.glob("benchmarks/*.py")) + sorted(ROOT.glob("examples/*.py")) + sorted(
      ROOT.glob("tpu_scripts/*.py"))
  assert len(scripts) > 10
  for path in scripts:
    compile(path.read_text(), str(path), "exec")


def test_supported_pythons_are_declared():
  from packaging.specifiers import SpecifierSet  # pylint: disable=g-import-not-at-top
  setup = (ROOT / "setup.py").read_text()
  supported = SpecifierSet(re.search(r'python_requires="([^"]+)"', setup).group(1))
  for minor in (10, 11, 12, 13):
    assert f"3.{minor}" in supported
    assert f'"Programming Language :: Python :: 3.{minor}"' in setup
  assert "3.9" not in supported and "3.14" not in supported
  assert f"{sys.version_info.major}.{sys.version_info.minor}" in supported


def test_ci_runs_the_arviz_tests_under_arviz_1x():
  """.ci/run's second part: a pyenv Python 3.12/3.13 (ArviZ 1.x) runs the
  fast tier of every file, the files listed whole and, in every other test file that mentions ArviZ, the
  tests named *arviz*; so each test there that uses ArviZ must be so named."""
  ci = (ROOT / ".ci" / "run").read_text()
  assert "set -euo pipefail" in ci and ".venv312" in ci
  assert "versions/3.12.*/bin/python3" in ci and "versions/3.13.*/bin/python3" in ci
  assert ".venv312/" in (ROOT / ".gitignore").read_text().split()
  assert '.venv312/bin/python tests/run_pytest.py -q -n 2 --dist loadfile -m "not slow"' in ci
  whole = re.search(r'WHOLE="([^"]+)"', ci).group(1).split()
  for name in ("test_arviz_export.py", "test_plot.py", "test_predictive.py",
               "test_persistence.py", "test_psis.py"):
    assert f"tests/{name}" in whole
  for path in sorted((ROOT / "tests").glob("test_*.py")):
    source = path.read_text()
    if "arviz" not in source or f"tests/{path.name}" in whole:
      continue
    for node in ast.parse(source).body:
      if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
        body = ast.get_source_segment(source, node)
        if "arviz" in body or "az." in body:
          assert "arviz" in node.name, f"{path.name}::{node.name} uses ArviZ"
