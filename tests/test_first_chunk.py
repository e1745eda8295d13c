"""A new run's first chunk without XLA (mcmc/compiled.py): it runs the
compiled chunk's graph op by op while XLA compiles, so it must compute what
the compiled chunk computes, in every run alike, and leave the user's
output as it was."""

import os
import threading

import numpy as np
import tensorflow as tf

import edward_lite as ed
from edward_lite.mcmc import compiled, kernels, run
from edward_lite.runtime import console, kept_function


def _normal_mean(scale):
  mu = ed.Normal(0., 1., name="mu")
  return ed.Normal(mu, scale, sample_shape=3, name="y")


def _random_walk(scale):
  steps = ed.Normal(tf.zeros(4), 1., name="steps")
  return ed.Normal(tf.scan(lambda a, x: a + x, steps), scale, name="y")


Y = np.array([0.3, -0.2, 0.8], np.float32)


def _sample(chains, model=_normal_mean, y=Y, **kwargs):
  compiled.Program._cache.clear()  # pylint: disable=protected-access
  post = ed.mcmc.sample(model, 0.5, observed={"y": y}, chains=chains, warmup=30, draws=20,
                        seed=4, progress=False, **kwargs)
  (program,) = compiled.Program._cache.values()  # pylint: disable=protected-access
  return post, program


def test_the_first_chunk_matches_the_compiled_one_and_runs_in_every_run(monkeypatch):
  """The first chunk's copy of the compiled graph (no ``_XlaMustCompile``,
  no assertions, its random ops compiled alone) and the compiled chunk, from
  the same state and inputs, end at the same states and totals up to XLA's
  round-off; the copy serves each new run's first chunk only, compiled
  before or not, so a second run in the process draws what the first drew."""
  calls, compared = [], []
  run_chunk = compiled.Program.run_chunk

  def spy(self, state, inputs, capacity, collects=True, first=False):
    calls.append(first)
    out = run_chunk(self, state, inputs, capacity, collects, first)
    if first:
      compared.append((state, out, run_chunk(self, state, inputs, capacity, collects)))
    return out

  monkeypatch.setattr(compiled.Program, "run_chunk", spy)
  post, program = _sample(chains=4)
  assert program.first_chunk_without_xla and program.compiled
  (start, copy_out, xla_out), = compared
  assert not np.allclose(copy_out[0].u, start.u)  # the chains moved
  # Ten warmup transitions grow round-off to 1e-3 here; other random
  # numbers would move the chains by about their posterior sd (0.3-0.6).
  for a, b in zip(tf.nest.flatten(copy_out), tf.nest.flatten(xla_out)):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=1e-2, atol=1e-2)
  again = ed.mcmc.sample(_normal_mean, 0.5, observed={"y": Y}, chains=4, warmup=30, draws=20,
                         seed=4, progress=False)
  assert calls.count(True) == 2 and calls[0] is True  # once per run, the run's first chunk
  np.testing.assert_array_equal(again.draws["mu"], post.draws["mu"])


def test_which_programs_run_their_first_chunk_without_xla():
  """Up to FIRST_CHUNK_MAX_CHAINS chains, compiled, without loops."""
  limit, nuts = compiled.FIRST_CHUNK_MAX_CHAINS, kernels.get_kernel("nuts")

  def program(chains, model=_normal_mean, y=Y, jit_compile=True):
    return compiled.Program.get(model, (0.5,), {}, {"y": y}, nuts, chains, None,
                                jit_compile=jit_compile)

  assert program(limit).first_chunk_without_xla
  assert not program(limit + 1).first_chunk_without_xla
  assert not program(2, jit_compile=False).first_chunk_without_xla
  walk = np.array([0.5, 1., 0.2, 1.3], np.float32)
  assert not program(2, _random_walk, walk).first_chunk_without_xla


def test_a_first_chunk_without_xla_is_cut_to_the_first_windows_length():
  """Without warmup the first chunk would be 200 draws run op by op (a
  deep-tree run took 268 s that way, 35 s with the cut): it holds
  FIRST_CHUNK_MAX_TRANSITIONS, the others chunk_size."""
  steps = []
  compiled.Program._cache.clear()  # pylint: disable=protected-access
  ed.mcmc.sample(_normal_mean, 0.5, observed={"y": Y}, chains=2, warmup=0, draws=50,
                 chunk_size=20, seed=4, progress=False,
                 callback=lambda info: steps.append(info["step"]))
  assert steps == [run.FIRST_CHUNK_MAX_TRANSITIONS, 30, 50]


def test_the_copy_drops_assertions_as_xla_does():
  """An ``Assert`` that fails: the compiled function ignores it (XLA drops
  it), and so does its copy without XLA."""

  def halve(x):
    with tf.control_dependencies([tf.debugging.Assert(x > 0., [x])]):
      return tf.identity(x / 2.)

  fn = tf.function(halve, jit_compile=True, autograph=False)
  x = tf.constant(-3.)
  concrete = fn.get_concrete_function(x)
  kept = kept_function.KeptFunction.from_concrete(concrete, (x,), tag="t_assert",
                                                  max_captured_bytes=1 << 20)
  copy = kept.without_xla("t_copy")
  assert float(fn(x)) == float(copy(x)) == -1.5
  plain = tf.function(halve, autograph=False)
  try:
    plain(x)
  except tf.errors.InvalidArgumentError:
    pass  # the assertion runs op by op, and fails
  else:
    raise AssertionError("the assertion did not run without XLA")
  assert kept_function.KeptFunction.from_concrete(
      plain.get_concrete_function(x), (x,), tag="t_plain",
      max_captured_bytes=1 << 20).without_xla("t_plain_copy") is None  # not compiled with XLA


def test_stderr_passes_through_without_the_cache_notes(capfd, monkeypatch):
  """While the first chunk runs beside the compile, stderr is forwarded as
  it comes, less the compile cache's note; filters opened while one is open
  (another run's compile) share it, and closing them in any order gives
  stderr back."""
  monkeypatch.delenv("ED_VERBOSE", raising=False)
  monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
  note = (b"E0000 00:00 text_format.cc:378] Error parsing text-format "
          b"tensorflow.XlaSerializedCacheEntry: 2:1: Expected identifier, got: 5\n")
  # oneDNN's dtype check, logged per float64 op run op by op (a float64
  # flow's first chunk without XLA logged 40).
  onednn = b"W0000 00:00:1796031520.254779    3259 util.cc:163] Not handling type DT_DOUBLE\n"
  outer = console.FilteredStderr()
  os.write(2, b"progress line\n")
  inner = console.FilteredStderr()
  os.write(2, note + onednn)
  outer.close()
  outer.close()  # once only
  os.write(2, note + b"\r 10%|#")
  inner.close()
  os.write(2, note)  # given back: nothing filtered
  assert capfd.readouterr().err == "progress line\n\r 10%|#" + note.decode()


def test_threads_that_filter_stderr_at_once_give_it_back(capfd, monkeypatch):
  """First calls on several threads (chain groups, the compile beside the
  first chunk) and a short buffered call filter stderr at once; each
  redirect must be undone in order, or a filter's pipe stays on fd 2 and
  its reader waits for an end that never comes (CI hung so, 2026-11-28).
  Afterwards fd 2 is the file it was, no reader is left, and every line but
  the notes came through."""
  monkeypatch.delenv("ED_VERBOSE", raising=False)
  monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
  note = (b"E0000 00:00 text_format.cc:378] Error parsing text-format "
          b"tensorflow.XlaSerializedCacheEntry: 2:1: Expected identifier, got: 5\n")
  before = os.fstat(2)
  readers = lambda: {t for t in threading.enumerate() if t.name == "edward_lite-stderr"}
  earlier = readers()  # another test's, if a child process of it holds its pipe
  rng = np.random.default_rng(0)
  plans = [rng.integers(0, 3, size=40) for _ in range(4)]

  def work(number, plan):
    for i, how in enumerate(plan):
      line = f"t{number} {i}\n".encode()
      if how == 0:
        console.without_cache_note(lambda: os.write(2, note + line))
      elif how == 1:
        console._with_stderr_buffered(  # pylint: disable=protected-access
            lambda: os.write(2, note + line), keep=lambda l: b"Error parsing" not in l)
      else:
        quiet = console.FilteredStderr()
        os.write(2, line + note)
        quiet.close()

  threads = [threading.Thread(target=work, args=(n, plan), daemon=True)
             for n, plan in enumerate(plans)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join(60)
  assert not any(thread.is_alive() for thread in threads), "a thread is stuck"
  after = os.fstat(2)
  assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
  assert readers() <= earlier
  err = capfd.readouterr().err
  assert "Error parsing" not in err
  assert sorted(err.splitlines()) == sorted(f"t{n} {i}" for n in range(4) for i in range(40))
