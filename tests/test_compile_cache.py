"""The persistent compile cache (runtime/compile_cache.py), the program cache
(runtime/program_cache.py) and the program's AutoGraph conversion
(language/autograph.graph_program): what cut the seconds before the first draw must
not change a result or a user's output."""

import collections
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.mcmc import compiled
from edward_lite.mcmc import run as run_module
from edward_lite.language.autograph import graph_program
from edward_lite.runtime import compile_cache, kept_function, program_cache, xla_options

ROOT = pathlib.Path(__file__).resolve().parent.parent

RUN = ("import numpy as np, edward_lite as ed\n"
       "def m():\n"
       "  mu = ed.Normal(0., 1., name='mu')\n"
       "  return ed.Normal(mu, 0.5, sample_shape=3, name='y')\n"
       "r = ed.mcmc.sample(m, observed={'y': [0.3, -0.2, 0.8]}, chains=2, warmup=100,\n"
       "                   draws=50, seed=3, progress=False)\n"
       "np.save(__import__('sys').argv[1], r.draws['mu'])\n"
       "from edward_lite.mcmc.compiled import Program\n"
       "print(sorted(p for program in Program._cache.values() for p in program.loaded))\n")
ALL_FUNCTIONS = "['run_chunk', 'value_and_gradient']"


# The chunk's compile on its own thread (``Program.compile_chunk_during``)
# left out: every load then comes from the first chunk's copy without XLA
# (its threefry ops compile one by one) or a later first call, as on a
# loaded machine where that thread ends first (CI, 2026-11-28).
WITHOUT_COMPILE_THREAD = ("from edward_lite.mcmc.compiled import Program\n"
                          "Program.compile_chunk_during = lambda self, work, *args: work()\n")


@pytest.mark.slow
@pytest.mark.parametrize("prefix", ["", WITHOUT_COMPILE_THREAD], ids=["thread", "no_thread"])
def test_a_second_process_loads_the_executable_quietly_and_draws_the_same(tmp_path, prefix):
  cache = tmp_path / "cache"
  env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "ED_VERBOSE",
                                                          "TF_XLA_FLAGS", "ED_PROGRAM_CACHE")}
  env["ED_COMPILE_CACHE"] = str(cache)
  draws, files, loaded = [], [], []
  for i in range(2):
    out = tmp_path / f"mu{i}.npy"
    done = subprocess.run([sys.executable, "-c", prefix + RUN, str(out)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == "", done.stderr[:2000]  # no note from reading the cache
    draws.append(np.load(out))
    files.append(sorted(str(p.relative_to(cache)) for p in cache.rglob("*")))
    loaded.append(done.stdout.strip())
  assert files[0] and files[1] == files[0]  # written once, then read
  assert loaded == ["[]", ALL_FUNCTIONS]  # traced, then every function loaded
  np.testing.assert_array_equal(draws[1], draws[0])  # the loaded program is the compiled one


REFIT = ("import edward_lite as ed\n"
         "def gaussian():\n"
         "  ed.Normal([1., -2.], [0.5, 3.], name='x')\n"
         "fit = ed.vi.fit(gaussian, family='meanfield', steps=80, samples=4, seed=1,\n"
         "                progress=False)\n"
         "print(fit.refit_by_fisher(512, seed=1)['loss'])\n")


@pytest.mark.slow
def test_the_flow_refit_loads_its_step_quietly(tmp_path):
  # The Fisher refit's Adam step is compiled anew each call; loaded from the
  # cache in a second process, its first call logged the cache's notes.
  env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "ED_VERBOSE",
                                                          "TF_XLA_FLAGS", "ED_PROGRAM_CACHE")}
  env["ED_COMPILE_CACHE"] = str(tmp_path / "cache")
  losses = []
  for _ in range(2):
    done = subprocess.run([sys.executable, "-c", REFIT], capture_output=True, text=True,
                          timeout=600, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "E0000" not in done.stderr, done.stderr[:2000]  # the fit's own warning may remain
    losses.append(done.stdout.strip())
  assert losses[0] == losses[1]


def test_the_cache_is_off_on_request_and_a_users_flag_is_kept(monkeypatch, tmp_path):
  monkeypatch.setenv("TF_XLA_FLAGS", "")
  monkeypatch.setenv("ED_COMPILE_CACHE", "0")
  compile_cache.configure()
  assert compile_cache.directory() is None
  monkeypatch.setenv("ED_COMPILE_CACHE", str(tmp_path / "c"))
  compile_cache.configure()
  assert compile_cache.directory() == str(tmp_path / "c") and (tmp_path / "c").is_dir()
  for switch, off in (("off", True), ("False", True), ("1", False), ("on", False)):
    monkeypatch.setenv("TF_XLA_FLAGS", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("ED_COMPILE_CACHE", switch)
    compile_cache.configure()  # a switch, not a folder named "1" or "on"
    if off:
      assert compile_cache.directory() is None, switch
    else:
      assert compile_cache.directory().startswith(str(tmp_path / "xdg" / "edward_lite")), switch
  mine = f"--tf_xla_persistent_cache_directory={tmp_path / 'mine'}"
  monkeypatch.setenv("TF_XLA_FLAGS", mine)
  compile_cache.configure()
  assert os.environ["TF_XLA_FLAGS"] == mine


def _normal_mean(scale):
  mu = ed.Normal(0., 1., name="mu")
  return ed.Normal(mu, scale, sample_shape=3, name="y")


Y = np.array([0.3, -0.2, 0.8], np.float32)


@pytest.fixture(name="programs")
def _programs(tmp_path, monkeypatch):
  """The program cache on, in ``tmp_path/programs``, and no program kept in
  memory, so every run builds its ``Program`` anew (as a new process does)."""
  monkeypatch.setenv("TF_XLA_FLAGS", f"--tf_xla_persistent_cache_directory={tmp_path}")
  monkeypatch.setenv("ED_PROGRAM_CACHE", "1")
  monkeypatch.setattr(compiled.Program, "_cache", collections.OrderedDict())
  return tmp_path / "programs"


def _run(kernel, scale=0.5):
  """``mu``'s draws, the names of the functions loaded from disk and of all
  the functions the run called that are kept on disk."""
  compiled.Program._cache.clear()  # pylint: disable=protected-access
  post = ed.mcmc.sample(_normal_mean, scale, observed={"y": Y}, kernel=kernel, chains=2,
                        warmup=100, draws=50, seed=3, progress=False)
  (program,) = compiled.Program._cache.values()  # pylint: disable=protected-access
  names = program._names  # pylint: disable=protected-access
  called = sorted(names[key[0]] for key in program._concrete  # pylint: disable=protected-access
                  if key[0] in names)
  return post.draws["mu"], sorted(program.loaded), called


def test_loaded_programs_draw_what_the_traced_ones_draw(programs, monkeypatch):
  monkeypatch.setenv("ED_PROGRAM_CACHE", "0")
  traced, loaded, called = _run("nuts")
  assert loaded == [] and not programs.exists() and len(called) == 2
  monkeypatch.setenv("ED_PROGRAM_CACHE", "1")
  first, loaded, _ = _run("nuts")  # traced, saved, and run as loaded back
  assert loaded == [] and len(list(programs.glob("*.program"))) == len(called)
  second, loaded, _ = _run("nuts")
  assert loaded == called
  np.testing.assert_array_equal(first, traced)
  np.testing.assert_array_equal(second, traced)


def test_a_damaged_entry_is_traced_again_and_rewritten(programs):
  first, _, called = _run("rwmh")
  for saved in programs.glob("*.program"):
    saved.write_bytes(b"not a kept program")
  again, loaded, _ = _run("rwmh")
  assert loaded == []
  third, loaded, _ = _run("rwmh")
  assert loaded == called
  np.testing.assert_array_equal(again, first)
  np.testing.assert_array_equal(third, first)
  _, loaded, _ = _run("rwmh", scale=0.6)  # other data: another program
  assert loaded == [] and len(list(programs.glob("*.program"))) == 2 * len(called)


def test_a_program_reading_a_variable_is_not_kept(programs):
  """A loaded copy would read the variable's saved value, not the live one."""
  scale = tf.Variable(0.5)
  draws, _, called = _run("rwmh", scale)
  _, loaded, _ = _run("rwmh", scale)
  assert "run_chunk" in called and "run_chunk" not in loaded
  np.testing.assert_array_equal(_run("rwmh", scale)[0], draws)


def _walk(n, step):
  """A Gaussian random walk's endpoint, summed in a Python loop over
  ``tf.range`` with an ``if`` on data: AutoGraph's work in the program's body."""
  scale = ed.HalfNormal(1., name="scale")
  total = tf.constant(0.)
  for _ in tf.range(n):
    total += step
  if tf.reduce_sum(step) > 0.:
    total = total * 2.
  return ed.Normal(total, scale, name="end")


def test_the_programs_own_loops_and_branches_on_data_still_trace():
  """The library traces without AutoGraph; the program's body is converted,
  so its ``for i in tf.range(n)`` and its ``if`` on data run in the graph:
  the traced log density is the analytic one (end ~ N(2 n step, scale))."""
  n, step, end = tf.constant(4), tf.constant(0.25), 1.7
  target = ed.make_target(_walk, n, step, observed={"end": end})
  u = tf.constant([[0.3], [-0.4]])
  traced = tf.function(target.log_prob_flat, autograph=False)(u)
  u64 = np.array([0.3, -0.4])
  scale = np.log1p(np.exp(u64))  # the softplus bijector of a positive scale
  expected = (-0.5 * ((end - 2. * 4 * 0.25) / scale) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)
              + np.log(np.sqrt(2 / np.pi)) - 0.5 * scale ** 2
              - np.log1p(np.exp(-u64)))  # log |d softplus / du|
  np.testing.assert_allclose(traced, expected, rtol=1e-5)


def test_a_program_autograph_cannot_read_runs_as_written():
  program = eval("lambda: ed.Normal(0., 1., name='x')", {"ed": ed})  # no source file
  assert graph_program(program)().distribution.scale == 1.
  assert graph_program(len) is len


USER_FUNCTION = ("import sys, edward_lite, tensorflow as tf\n"
                 "f = tf.function(lambda x: tf.reduce_sum(tf.sin(x) ** 2), jit_compile=True)\n"
                 "print(float(f(tf.linspace(0., 3., 7))))\n")


@pytest.mark.slow
def test_a_users_own_compiled_function_shares_the_cache_or_stays_out_of_it(tmp_path):
  """The cache is process-wide (TensorFlow reads its flag once): a script's own
  ``jit_compile`` function is cached too and gives the same value when loaded;
  with ``ED_COMPILE_CACHE=0`` nothing is written and nothing is logged
  (docs/guide/saving.md, "Your own compiled functions")."""
  expected = float(np.sum(np.sin(np.linspace(0., 3., 7, dtype=np.float32)) ** 2))
  env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "ED_VERBOSE",
                                                          "TF_XLA_FLAGS")}
  cache = tmp_path / "cache"
  env["ED_COMPILE_CACHE"] = str(cache)
  files = []
  for _ in range(2):
    done = subprocess.run([sys.executable, "-c", USER_FUNCTION], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert float(done.stdout) == pytest.approx(expected, rel=1e-5)
    files.append(sorted(p.name for p in cache.rglob("*") if p.is_file()))
  assert files[0] and files[1] == files[0]  # written by the first process, read by the second
  env["ED_COMPILE_CACHE"] = "0"
  done = subprocess.run([sys.executable, "-c", USER_FUNCTION], capture_output=True, text=True,
                        timeout=300, env=env, cwd=ROOT)
  assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
  assert float(done.stdout) == pytest.approx(expected, rel=1e-5)


def _regression(x):
  b = ed.Normal(0., 1., sample_shape=3, name="b")
  return ed.Normal(tf.linalg.matvec(x, b), 1., name="y")


def test_a_program_is_kept_without_a_logged_traceback(programs, caplog):
  """Saving the gradient of an op inside the chains' ``vectorized_map``
  failed and logged a traceback (the diamonds regression); the kept functions
  are never differentiated, so their custom gradients are not saved, and
  loading them logs nothing either."""
  x = np.random.default_rng(0).normal(size=(20, 3)).astype(np.float32)
  y = x @ np.array([1., -0.5, 0.2], np.float32)
  draws = []
  for _ in range(2):
    compiled.Program._cache.clear()  # pylint: disable=protected-access
    with caplog.at_level(logging.WARNING):
      post = ed.mcmc.sample(_regression, x, observed={"y": y}, chains=2, warmup=50, draws=20,
                            seed=1, progress=False)
    draws.append(post.draws["b"])
  assert [r.getMessage()[:200] for r in caplog.records] == []
  (program,) = compiled.Program._cache.values()  # pylint: disable=protected-access
  assert program.loaded  # the second run loaded what the first saved
  np.testing.assert_array_equal(draws[1], draws[0])


def change_point_30():
  tau = ed.Categorical(logits=tf.zeros([30]), name="tau")
  rate = ed.Gamma(2., 1., name="rate")
  return ed.Poisson(tf.where(tf.range(30) < tau, rate, 1.), name="y")


def test_a_programs_loop_facts_are_kept_and_found_again_when_damaged(programs):
  """Whether a program loops costs a trace to find: kept beside its traced
  functions, read by the next run, found again when the file is damaged."""
  _run("nuts")
  (facts,) = programs.glob("*.json")
  assert json.loads(facts.read_text()) == [False, False, False]
  calls = []
  found = lambda: calls.append(1) or [True, False, True]  # pylint: disable=unnecessary-lambda-assignment
  assert program_cache.remembered(facts.stem, found) == [False, False, False] and not calls
  facts.write_text("{not json")
  assert program_cache.remembered(facts.stem, found) == [True, False, True] and calls == [1]
  assert json.loads(facts.read_text()) == [True, False, True]
  # A pair kept by an older version: the program's own loops are taken to
  # be its loops (a summed-out latent then keeps its loop per chain).
  target = ed.make_target(change_point_30, observed={"y": np.ones(30, np.float32)})
  assert target.loop_facts() == (True, False, False) and target.sums_out_in_pairs
  assert target.loop_facts(known=[True, False]) == (True, False, True)
  assert not target.sums_out_in_pairs


def test_the_first_chunk_compiled_beside_the_initial_states_is_the_one_the_run_calls(monkeypatch):
  """The first chunk's program compiles on another thread while the initial
  states are found (``Program.compile_chunk_during``): the run then calls
  that program (no second trace of the chunk) and draws what a run without
  the overlap draws."""
  draws, chunk_keys = [], []
  for overlap in (True, False):
    if not overlap:
      monkeypatch.setattr(run_module.Run, "_initialize_while_compiling",
                          run_module.Run._initialize)  # pylint: disable=protected-access
    compiled.Program._cache.clear()  # pylint: disable=protected-access
    post = ed.mcmc.sample(_normal_mean, 0.5, observed={"y": Y}, chains=2, warmup=100, draws=50,
                          seed=3, progress=False)
    (program,) = compiled.Program._cache.values()  # pylint: disable=protected-access
    chunk_keys.append([k for k in program._concrete  # pylint: disable=protected-access
                       if k[0] is program._run_chunk_fn])  # pylint: disable=protected-access
    draws.append(post.draws["mu"])
    assert post.timings["compile_s"] > 0.
  assert [len(keys) for keys in chunk_keys] == [1, 1]
  np.testing.assert_array_equal(draws[0], draws[1])


def test_without_the_call_by_name_nothing_is_kept_and_runs_still_draw(programs, monkeypatch):
  """A TensorFlow without ``Context.call_function`` (``kept_function.available``):
  programs are traced in every run, none is written, and the draws are the
  same as those of a run whose first chunk is compiled (without the call by
  name there is no copy of it to run without XLA)."""
  monkeypatch.setattr(compiled, "FIRST_CHUNK_MAX_CHAINS", 0)
  first, _, _ = _run("rwmh")
  monkeypatch.setattr(kept_function, "available", lambda: False)
  monkeypatch.setattr(compiled.Program, "_cache", collections.OrderedDict())
  shutil.rmtree(programs)
  again, loaded, _ = _run("rwmh")
  assert loaded == [] and not list(programs.glob("*.program"))
  np.testing.assert_array_equal(again, first)


def test_entries_kept_as_saved_models_by_earlier_versions_are_removed(programs):
  """Earlier versions kept programs as SavedModel folders, which are never
  read again: the cache's cleanup at import removes them, and nothing else."""
  old = programs / ("a" * 64)
  (old / "variables").mkdir(parents=True)
  (old / "saved_model.pb").write_bytes(b"an old entry")
  other = programs / "not_an_entry"
  other.mkdir()
  compile_cache.trim(str(programs.parent), compile_cache.max_bytes())
  _run("rwmh")
  assert not old.exists() and other.is_dir() and list(programs.glob("*.program"))


def _cache_file(path, size, last_use):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(b"x" * size)
  os.utime(path, (last_use, last_use))
  return path


def test_the_cache_folder_is_trimmed_to_its_bound_least_recently_used_first(tmp_path):
  now = 1.8e9
  old_exe = _cache_file(tmp_path / "xla_compile_cache__1__2__XLA_CPU_JIT.pb", 400, now - 300)
  old_program = _cache_file(tmp_path / "programs" / "a.program", 300, now - 200)
  new_exe = _cache_file(tmp_path / "xla_compile_cache__3__4__XLA_CPU_JIT.pb", 400, now - 100)
  new_facts = _cache_file(tmp_path / "programs" / "b.json", 100, now)
  users_file = _cache_file(tmp_path / "notes.txt", 5000, now - 10**6)  # not the cache's
  stale_scratch = _cache_file(tmp_path / "programs" / ".abc-tmp", 50, 0)
  assert compile_cache.trim(str(tmp_path), None) == 0  # no bound
  assert compile_cache.trim(str(tmp_path), 1200) == 0  # 1,200 bytes held: within it
  assert not stale_scratch.exists()  # an interrupted write, hours old
  # Over a bound of 900: the oldest go until at most 720 bytes are left.
  assert compile_cache.trim(str(tmp_path), 900) == 700
  assert not old_exe.exists() and not old_program.exists()
  assert new_exe.exists() and new_facts.exists() and users_file.exists()


def test_the_bound_comes_from_the_environment_and_a_bad_one_is_named(monkeypatch):
  monkeypatch.delenv("ED_COMPILE_CACHE_MAX_MB", raising=False)
  assert compile_cache.max_bytes() == compile_cache.DEFAULT_MAX_MB * 2**20
  monkeypatch.setenv("ED_COMPILE_CACHE_MAX_MB", "0.5")
  assert compile_cache.max_bytes() == 2**19
  monkeypatch.setenv("ED_COMPILE_CACHE_MAX_MB", "0")
  assert compile_cache.max_bytes() is None
  monkeypatch.setenv("ED_COMPILE_CACHE_MAX_MB", "lots")
  with pytest.raises(ValueError, match="ED_COMPILE_CACHE_MAX_MB must be a number"):
    compile_cache.max_bytes()


def test_a_loaded_program_counts_as_used(programs):
  model = lambda: ed.Normal(ed.Normal(0., 1., name="mu"), 1., name="y")
  ed.mcmc.sample(model, observed={"y": 0.5}, chains=2, warmup=20, draws=10, seed=0,
                 progress=False)
  entries = list(programs.glob("*.program"))
  assert entries
  for entry in entries:
    os.utime(entry, (1e9, 1e9))
  compiled.Program._cache.clear()
  ed.mcmc.sample(model, observed={"y": 0.5}, chains=2, warmup=20, draws=10, seed=0,
                 progress=False)
  assert all(entry.stat().st_mtime > 1e9 + 1 for entry in entries)


def test_xla_reductions_flag_is_added_once_and_a_users_setting_kept(monkeypatch):
  """edward_lite keeps reductions in XLA's loops (``xla_options``); a
  YNNPACK setting of the user's, or ``ED_YNN_REDUCE=1``, is left alone."""
  monkeypatch.delenv("ED_YNN_REDUCE", raising=False)
  monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
  xla_options.configure()
  xla_options.configure()
  assert os.environ["XLA_FLAGS"] == ("--xla_force_host_platform_device_count=2 "
                                     "--xla_cpu_experimental_ynn_fusion_type=-reduce")
  mine = "--xla_cpu_experimental_ynn_fusion_type="
  monkeypatch.setenv("XLA_FLAGS", mine)
  xla_options.configure()
  assert os.environ["XLA_FLAGS"] == mine
  monkeypatch.setenv("XLA_FLAGS", "")
  monkeypatch.setenv("ED_YNN_REDUCE", "1")
  xla_options.configure()
  assert os.environ["XLA_FLAGS"] == ""


def test_the_default_folder_depends_on_the_xla_flags(monkeypatch, tmp_path):
  """The executables' key does not hold ``XLA_FLAGS``: other flags than
  edward_lite's own get a folder of their own, so a process never loads an
  executable compiled under other flags."""
  monkeypatch.delenv("ED_COMPILE_CACHE", raising=False)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  monkeypatch.setenv("XLA_FLAGS", xla_options.FLAG)
  assert compile_cache._default() == str(tmp_path / "edward_lite" / "xla")  # pylint: disable=protected-access
  folders = set()
  for flags in ("", "--xla_cpu_experimental_ynn_fusion_type=", xla_options.FLAG + " --x=1"):
    monkeypatch.setenv("XLA_FLAGS", flags)
    folders.add(compile_cache._default())  # pylint: disable=protected-access
  assert len(folders) == 3 and all(f.startswith(str(tmp_path / "edward_lite" / "xla-"))
                                   for f in folders)
