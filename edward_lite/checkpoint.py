"""Checkpoints of a sampling run: NumPy ``.npz`` files, never pickle.

A checkpoint directory holds

* ``meta.json`` -- the model fingerprint and the run settings; a run with a
  different model, data or settings refuses the directory;
* ``chunk_<step>.npz`` -- what one chunk kept (draws, statistics), written
  once, before the state that follows it;
* ``state.npz`` -- the sampler state (chain positions, adaptation state,
  running moments) and the number of transitions done.  It is replaced
  atomically (write, fsync, rename), so a kill at any moment leaves either
  the old or the new state, and chunk files past the state's step are
  ignored on resume.

Because the random stream is a function of the transition index, resuming
from ``state.npz`` continues exactly as the uninterrupted run would.
"""

import json
import os
import tempfile

import numpy as np

__all__ = ["Checkpointer", "CheckpointMismatchError"]


class CheckpointMismatchError(ValueError):
  """The checkpoint was written by a different model or with other settings."""


def _atomic_savez(path, arrays):
  directory = os.path.dirname(path)
  fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp.npz")
  try:
    with os.fdopen(fd, "wb") as f:
      np.savez(f, **arrays)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


class Checkpointer:
  """Saves and restores one sampling run in ``directory``."""

  def __init__(self, directory, fingerprint, settings):
    self.directory = os.fspath(directory)
    model, digest = fingerprint
    self.meta = {"model": getattr(model, "__qualname__", repr(model)), "data": digest,
                 "settings": json.loads(json.dumps(settings, default=str))}
    os.makedirs(self.directory, exist_ok=True)

  def _path(self, name):
    return os.path.join(self.directory, name)

  def load(self):
    """The saved run, or None if the directory holds none.

    Returns:
      dict with ``state`` (list of arrays, flattened sampler state), ``step``
      and ``host`` (``{"kept": {key: [chunk arrays]}}``).

    Raises:
      CheckpointMismatchError: the directory holds a run of another model,
        other data or other settings.
    """
    meta_path, state_path = self._path("meta.json"), self._path("state.npz")
    if not os.path.exists(meta_path):
      return None
    with open(meta_path) as f:
      saved = json.load(f)
    if saved != self.meta:
      diffs = [k for k in ("model", "data") if saved.get(k) != self.meta[k]]
      diffs += [f"settings.{k}" for k in sorted(set(saved.get("settings", {})) |
                                                 set(self.meta["settings"]))
                if saved.get("settings", {}).get(k) != self.meta["settings"].get(k)]
      raise CheckpointMismatchError(
          f"The checkpoint in {self.directory} was written for a different run (differs in: "
          f"{', '.join(diffs)}); use another checkpoint_dir or delete it.")
    if not os.path.exists(state_path):
      return None
    with np.load(state_path, allow_pickle=False) as data:
      step = int(data["step"])
      state = [data[f"s{i}"] for i in range(int(data["n_state"]))]
    kept = {}
    for name in sorted(os.listdir(self.directory)):
      if not (name.startswith("chunk_") and name.endswith(".npz")):
        continue
      if int(name[len("chunk_"):-len(".npz")]) > step:
        continue  # written after the last saved state: redone on resume
      with np.load(self._path(name), allow_pickle=False) as data:
        for key in data.files:
          kept.setdefault(key, []).append(data[key])
    return {"state": state, "step": step, "host": {"kept": kept}}

  def save(self, state_arrays, step, host):
    """Writes the chunk that ended at ``step`` and then the state."""
    meta_path = self._path("meta.json")
    if not os.path.exists(meta_path):
      with open(meta_path, "w") as f:
        json.dump(self.meta, f)
    last = {key: chunks[-1] for key, chunks in host["kept"].items() if chunks}
    _atomic_savez(self._path(f"chunk_{step:012d}.npz"), last)
    arrays = {f"s{i}": np.asarray(a) for i, a in enumerate(state_arrays)}
    arrays.update(step=np.asarray(step), n_state=np.asarray(len(state_arrays)))
    _atomic_savez(self._path("state.npz"), arrays)
