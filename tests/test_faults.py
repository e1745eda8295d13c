"""Injected faults on checkpoints (issue 14) that tests/test_reliability.py
does not already cover with a real process: a SIGKILL inside the first
``meta.json`` write, two ``ed.mcmc.sample`` runs started on one directory at
once, and a DataFrame edited in place under a checkpoint.  (Covered there: a
full disk at the first save on a small tmpfs, an edited model, a run holding
the directory in another process, corrupt files.)
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import edward_lite as ed

RUN = dict(kernel="rwmh", chains=2, warmup=20, draws=20, progress=False)
MODEL = "def model():\n  return ed.Normal(0., 1., name='x')\n"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def _model():
  space = dict(ed=ed)
  exec(MODEL, space)  # pylint: disable=exec-used  (compiled as the child compiles it)
  return space["model"]


def _child(tmp_path, name, body, *args, wait=False):
  script = tmp_path / f"{name}.py"
  script.write_text("import os, signal, sys, time\nimport edward_lite as ed\n"
                    f"space = dict(ed=ed)\nexec({MODEL!r}, space)\nmodel = space['model']\n"
                    f"RUN = {RUN!r}\n" + textwrap.dedent(body))
  proc = subprocess.Popen([sys.executable, str(script), *map(str, args)], env=ENV,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  if not wait:
    return proc
  out, err = proc.communicate(timeout=240)
  return proc.returncode, out.decode(), err.decode()


KILLERS = {
    # Killed with an empty temporary file, before any byte of meta.json.
    "after-mkstemp": """
        import tempfile
        real = tempfile.mkstemp
        def mkstemp(*args, prefix="", **kwargs):
          made = real(*args, prefix=prefix, **kwargs)
          if prefix.startswith("meta.json"):
            os.kill(os.getpid(), signal.SIGKILL)
          return made
        tempfile.mkstemp = mkstemp
    """,
    # Killed with the whole temporary written and synced, before the rename.
    "before-rename": """
        real = os.replace
        def replace(src, dst):
          if os.path.basename(dst) == "meta.json":
            os.kill(os.getpid(), signal.SIGKILL)
          return real(src, dst)
        os.replace = replace
    """,
}


@pytest.mark.slow
@pytest.mark.parametrize("moment", sorted(KILLERS))
def test_sigkill_at_the_first_meta_write_loses_nothing(tmp_path, moment):
  ckpt = tmp_path / "ckpt"
  code, out, err = _child(tmp_path, "killed", textwrap.dedent(KILLERS[moment]) + """
ed.mcmc.sample(model, checkpoint_dir=sys.argv[1], seed=5, **RUN)
print("not killed")
""", ckpt, wait=True)
  assert code == -9, (code, out, err[-2000:])
  names = sorted(os.listdir(ckpt))
  assert "meta.json" not in names, names  # never empty or cut off: absent
  assert any(n.startswith("meta.json.") and n.endswith(".tmp") for n in names), names
  # The next call takes over the dead run's lock, removes its temporary and
  # gives the draws of an uninterrupted run.
  resumed = ed.mcmc.sample(_model(), checkpoint_dir=str(ckpt), seed=5, **RUN)
  fresh = ed.mcmc.sample(_model(), seed=5, **RUN)
  np.testing.assert_array_equal(resumed.draws["x"], fresh.draws["x"])
  assert not [n for n in os.listdir(ckpt) if n.endswith(".tmp")]
  assert json.loads((ckpt / "meta.json").read_text())["settings"]["seed"] == 5


FIRST = """
    def hold(info):
      # The first chunk is saved: tell the other run, and keep the directory
      # until it has tried.
      if not os.path.exists(sys.argv[2]):
        open(sys.argv[2], "w").close()
        deadline = time.time() + 120
        while not os.path.exists(sys.argv[3]) and time.time() < deadline:
          time.sleep(0.05)
    result = ed.mcmc.sample(model, checkpoint_dir=sys.argv[1], seed=7, chunk_size=10,
                            callback=hold, **RUN)
    print(repr(result.draws["x"].tolist()))
"""

SECOND = """
    deadline = time.time() + 120
    while not os.path.exists(sys.argv[2]) and time.time() < deadline:
      time.sleep(0.05)
    try:
      ed.mcmc.sample(model, checkpoint_dir=sys.argv[1], seed=8, chunk_size=10, **RUN)
      print("sampled")
    except ed.mcmc.CheckpointLockedError as e:
      print("locked:", e)
    finally:
      open(sys.argv[3], "w").close()
"""


@pytest.mark.slow
def test_two_runs_started_on_one_directory(tmp_path):
  ckpt, running, tried = tmp_path / "ckpt", tmp_path / "running", tmp_path / "tried"
  first = _child(tmp_path, "first", FIRST, ckpt, running, tried)
  second = _child(tmp_path, "second", SECOND, ckpt, running, tried)
  try:
    out2, err2 = second.communicate(timeout=240)
    out1, err1 = first.communicate(timeout=240)
  finally:
    for proc in (first, second):
      if proc.poll() is None:
        proc.kill()
        proc.wait()
  out1, out2 = out1.decode(), out2.decode()
  assert first.returncode == 0, err1.decode()[-3000:]
  assert out2.startswith("locked:"), (out2, err2.decode()[-3000:])
  assert str(ckpt) in out2 and f"pid {first.pid}" in out2
  draws = np.asarray(eval(out1.strip().splitlines()[-1]))  # pylint: disable=eval-used
  # The directory holds the seed-7 run only: seed 8 is refused, seed 7
  # returns exactly its draws.
  with pytest.raises(ed.mcmc.CheckpointMismatchError, match="settings.seed"):
    ed.mcmc.sample(_model(), checkpoint_dir=str(ckpt), seed=8, chunk_size=10, **RUN)
  again = ed.mcmc.sample(_model(), checkpoint_dir=str(ckpt), seed=7, chunk_size=10, **RUN)
  np.testing.assert_array_equal(again.draws["x"], draws.astype(np.float32))


def test_dataframe_edited_in_place_is_refused_by_the_checkpoint(tmp_path):
  pd = pytest.importorskip("pandas")
  frame = pd.DataFrame({"v": np.linspace(-1., 1., 5)})

  def df_model(df):
    mu = ed.Normal(0., 10., name="mu")
    return ed.Normal(mu + df["v"].to_numpy(np.float32), 1., name="y")

  observed = {"y": np.zeros(5, np.float32)}
  ckpt = str(tmp_path / "ckpt")
  ed.mcmc.sample(df_model, frame, observed=observed, checkpoint_dir=ckpt, seed=1, **RUN)
  frame.loc[2, "v"] = 40.  # edited in place: same object, other data
  with pytest.raises(ed.mcmc.CheckpointMismatchError, match="data") as info:
    ed.mcmc.sample(df_model, frame, observed=observed, checkpoint_dir=ckpt, seed=1, **RUN)
  assert ckpt in str(info.value)
