"""Checkpoint / resume: a run killed with SIGKILL resumes bit-identically."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import edward_lite as ed

SCRIPT = textwrap.dedent("""
    import sys, time
    import numpy as np
    import edward_lite as ed

    def model():
      mu = ed.Normal(0., 2., name="mu")
      tau = ed.HalfNormal(1., name="tau")
      return ed.Normal(mu, tau + 0.5, sample_shape=5, name="y")

    y = np.array([0.3, 1.1, -0.4, 0.9, 2.0], np.float32)
    ckpt, out, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
    result = ed.mcmc.sample(
        model, observed={"y": y}, kernel="nuts", chains=3, warmup=100, draws=120, seed=21,
        chunk_size=20, progress=False, checkpoint_dir=ckpt or None,
        callback=lambda info: time.sleep(delay))
    np.savez(out, mu=result.draws["mu"], tau=result.draws["tau"],
             n_grads=result.sample_stats["num_gradients"], step_size=result.step_size)
""")


def _run(tmp_path, ckpt, out, delay, wait=True):
  script = tmp_path / "run.py"
  script.write_text(SCRIPT)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.Popen([sys.executable, str(script), ckpt, str(out), str(delay)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  if wait:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-2000:]
  return proc


def _saved_step(ckpt):
  path = os.path.join(ckpt, "state.npz")
  if not os.path.exists(path):
    return 0
  try:
    with np.load(path) as data:
      return int(data["step"])
  except Exception:  # pylint: disable=broad-except
    return 0


@pytest.mark.slow
def test_resume_after_sigkill_is_bit_identical(tmp_path):
  ckpt = str(tmp_path / "ckpt")
  proc = _run(tmp_path, ckpt, tmp_path / "killed.npz", delay=0.3, wait=False)
  try:
    deadline = time.time() + 240
    while _saved_step(ckpt) < 140 and time.time() < deadline:  # mid-sampling
      assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
      time.sleep(0.05)
    assert _saved_step(ckpt) >= 140
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  killed_at = _saved_step(ckpt)
  assert killed_at < 220, "the run finished before it could be killed"
  assert not (tmp_path / "killed.npz").exists()

  _run(tmp_path, ckpt, tmp_path / "resumed.npz", delay=0.)
  _run(tmp_path, "", tmp_path / "straight.npz", delay=0.)
  resumed, straight = np.load(tmp_path / "resumed.npz"), np.load(tmp_path / "straight.npz")
  for key in ("mu", "tau", "n_grads", "step_size"):
    np.testing.assert_array_equal(resumed[key], straight[key])
  assert resumed["mu"].shape == (120, 3)


def model_a():
  return ed.Normal(0., 1., name="x")


def model_b():
  return ed.Normal(0., 2., name="x")


@pytest.mark.slow
def test_checkpoint_of_another_run_is_refused(tmp_path):
  ckpt = str(tmp_path / "ckpt")
  kwargs = dict(chains=2, warmup=20, draws=20, progress=False, checkpoint_dir=ckpt)
  first = ed.mcmc.sample(model_a, seed=1, **kwargs)
  again = ed.mcmc.sample(model_a, seed=1, **kwargs)  # complete: reloaded, not rerun
  np.testing.assert_array_equal(first.draws["x"], again.draws["x"])
  with pytest.raises(ed.mcmc.CheckpointMismatchError, match="settings.seed"):
    ed.mcmc.sample(model_a, seed=2, **kwargs)
  with pytest.raises(ed.mcmc.CheckpointMismatchError, match="model"):
    ed.mcmc.sample(model_b, seed=1, **kwargs)


@pytest.mark.slow
def test_chunk_files_nest_arrays_by_kind_and_an_older_layout_is_refused(tmp_path):
  ckpt = tmp_path / "ckpt"
  kwargs = dict(chains=2, warmup=20, draws=20, seed=1, chunk_size=10, progress=False,
                checkpoint_dir=str(ckpt))
  result = ed.mcmc.sample(model_a, **kwargs)
  with np.load(ckpt / "chunk_000000000010.npz") as warm:  # a warmup chunk: no draws kept
    assert {"totals/accept_prob", "totals/n_grads", "warmup", "start"} <= set(warm.files)
    assert not [k for k in warm.files if k.startswith("kept/")]
  last = f"chunk_{result.warmup + 20:012d}.npz"
  with np.load(ckpt / last) as chunk:
    assert "kept/draws" in chunk.files and not chunk["warmup"]
  meta = json.loads((ckpt / "meta.json").read_text())
  assert meta["settings"]["checkpoint_layout"] == 3 and meta["settings"]["pooled"] == [
      "bulk", True]
  del meta["settings"]["checkpoint_layout"]  # as written before arrays were nested
  (ckpt / "meta.json").write_text(json.dumps(meta))
  with pytest.raises(ed.mcmc.CheckpointMismatchError, match="settings.checkpoint_layout"):
    ed.mcmc.sample(model_a, **kwargs)


@pytest.mark.slow
def test_streamed_statistics_resume_in_float64_and_an_older_layout_is_refused(tmp_path):
  ckpt = tmp_path / "ckpt"
  kwargs = dict(chains=2, warmup=20, draws=40, seed=4, chunk_size=10, progress=False,
                keep_draws=False)
  straight = ed.mcmc.sample(model_a, **kwargs)
  chunks = []

  def stop(info):
    chunks.append(info)
    if len(chunks) == 4:
      raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    ed.mcmc.sample(model_a, checkpoint_dir=str(ckpt), callback=stop, **kwargs)
  with np.load(ckpt / "state.npz") as state:
    assert int(state["step"]) == 30  # a chunk into sampling
    # float32 draws; the streaming statistics (moments, batch sums) in float64
    dtypes = {state[f"s{i}"].dtype for i in range(int(state["n_state"]))}
    assert {np.dtype(np.float32), np.dtype(np.float64)} <= dtypes
  resumed = ed.mcmc.sample(model_a, checkpoint_dir=str(ckpt), **kwargs)
  assert resumed.mean["x"].dtype == np.float64
  np.testing.assert_array_equal(resumed.mean["x"], straight.mean["x"])
  np.testing.assert_array_equal(resumed.variance["x"], straight.variance["x"])
  for stat, values in straight.streamed.items():
    np.testing.assert_array_equal(resumed.streamed[stat]["x"], values["x"])
  # A checkpoint of layout 2 kept the statistics in the draws' dtype.
  meta = json.loads((ckpt / "meta.json").read_text())
  meta["settings"]["checkpoint_layout"] = 2
  (ckpt / "meta.json").write_text(json.dumps(meta))
  with pytest.raises(ed.mcmc.CheckpointMismatchError, match="settings.checkpoint_layout"):
    ed.mcmc.sample(model_a, checkpoint_dir=str(ckpt), **kwargs)


def test_a_state_missing_one_array_is_refused_naming_it(tmp_path):
  # Issue 53, item 7: the refusal listed all the state's array names.
  ckpt = tmp_path / "ckpt"
  kwargs = dict(chains=2, warmup=10, draws=20, seed=5, chunk_size=10, progress=False)

  def stop(info):
    raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    ed.mcmc.sample(model_a, checkpoint_dir=str(ckpt), callback=stop, **kwargs)
  with np.load(ckpt / "state.npz") as state:
    arrays = {key: state[key] for key in state.files}
  assert int(arrays["n_state"]) > 10
  del arrays["s7"]
  np.savez(ckpt / "state.npz", **arrays)
  with pytest.raises(ed.mcmc.CheckpointCorruptError) as info:
    ed.mcmc.sample(model_a, checkpoint_dir=str(ckpt), **kwargs)
  message = str(info.value)
  assert "lacks array 's7'; delete it" in message, message
  assert "'s8'" not in message and len(message) < 300, message
