"""Checkpoints of a run (a sampler's or a fit's): NumPy ``.npz`` files, never pickle.

A checkpoint directory holds

* ``lock`` -- the run that owns the directory (pid, host, start time).  One
  run at a time: the lock is an exclusive ``flock`` held from ``open`` to
  ``close``, released by the kernel if the process dies; a second run is
  refused with ``CheckpointLockedError`` naming the holder.
* ``meta.json`` -- what the run computes: the model's code and its data by
  content (``fingerprints.fingerprint``), the settings that change the draws and
  the library version.  Written when the directory is opened, before any
  compiled work; a run with a different model, data or settings refuses the
  directory (``CheckpointMismatchError``).
* ``chunk_<step>.npz`` -- the arrays one chunk produced (draws, statistics,
  ELBO values), written once, before the state that follows it; arrays
  nested by kind (``{"totals": {"accept_prob": ...}}``) are stored under
  ``kind/name``;
* ``state.npz`` -- the run's state (chain positions, adaptation state,
  running moments; a fit's variational and optimizer variables), the number
  of steps done and the host's running scalars (counts, a diagnosis) as
  JSON, so that the state and its scalars are replaced together.

What a chunk saves is an ``engine.ChunkRecord``.

Every file is written to a temporary name, flushed to disk and renamed, so a
kill at any moment leaves either the old or the new file (temporaries left
by a killed write are removed on the next open); chunk files past the
state's step are ignored on resume.  Every file read is validated: a
corrupt, truncated or foreign file raises ``CheckpointCorruptError`` naming
it.  Nothing is ever unpickled.

Because the random stream is a function of the transition index, resuming
from ``state.npz`` continues exactly as the uninterrupted run would.
"""

import contextvars
import functools
import json
import os
import re

import numpy as np

from edward_lite.runtime.checkpoint_files import (CheckpointCorruptError, CheckpointLockedError,
                                                  CheckpointMismatchError, DirectoryLock, atomic_write)
from edward_lite.version import __version__

__all__ = ["Checkpointer", "CheckpointMismatchError", "CheckpointCorruptError",
           "CheckpointLockedError", "closes_checkpoints"]

FORMAT = 4  # of meta.json; 1 had no "format" key and named the model only; 2 kept a
# dense metric's moments per chain ([C, D, D]); 3 kept statistics a kernel gives
# one value always, and each chain's deepest tree, not its trees at the limit
META, STATE = "meta.json", "state.npz"
_CHUNK = re.compile(r"chunk_(\d{12})\.npz")
# Files a killed write leaves: "<name>.<random>.tmp" (and "tmp<random>.tmp.npz"
# from before checkpoint format 2).
_TEMPORARY = re.compile(r"(meta\.json|state\.npz|chunk_\d{12}\.npz)\..+\.tmp|tmp.+\.tmp\.npz")


# Checkpointers opened inside the current ``closes_checkpoints`` call.
_OPENED = contextvars.ContextVar("edward_lite_open_checkpoints", default=None)


def closes_checkpoints(fn):
  """Decorator: every ``Checkpointer`` opened while ``fn`` runs is closed
  (its directory unlocked) when ``fn`` returns or raises."""

  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    opened = []
    token = _OPENED.set(opened)
    try:
      return fn(*args, **kwargs)
    finally:
      _OPENED.reset(token)
      for ckpt in opened:
        ckpt.close()

  return wrapped


class Checkpointer:
  """Saves and restores one run in ``directory``, which it holds locked from
  construction to ``close()`` (also a context manager).

  Args:
    directory: the checkpoint directory (created if missing).
    fingerprint: the run's ``fingerprints.Fingerprint``.
    settings: JSON-able dict of the settings that change the results.

  Raises:
    NotADirectoryError, PermissionError: ``directory`` is a file, or cannot
      be created or written.
    CheckpointLockedError: another run holds the directory.
    CheckpointMismatchError: the directory holds another run, or this run
      cannot be identified by content.
    CheckpointCorruptError: ``meta.json`` is corrupt or foreign.
  """

  def __init__(self, directory, fingerprint, settings):
    if not isinstance(directory, (str, bytes, os.PathLike)):
      raise TypeError(f"checkpoint_dir must be a path (a str or os.PathLike); got "
                      f"{type(directory).__name__} {directory!r}.")
    self.directory = os.fspath(directory)
    self._lock = None
    if fingerprint.unknown:
      raise CheckpointMismatchError(
          f"checkpoint_dir={self.directory!r} cannot be used: {fingerprint.unknown}, so a "
          "resumed run could not be checked against this call; pass data as arrays, "
          "numbers, lists or DataFrames (and objects the model reads as such), or run without "
          "checkpoint_dir.")
    self.meta = {"format": FORMAT, "version": __version__,
                 "model": {"name": fingerprint.name, "code": fingerprint.code},
                 "data": fingerprint.data,
                 "settings": json.loads(json.dumps(settings, default=str))}
    self._make_directory()
    self._lock = DirectoryLock(self.directory)
    try:
      self._remove_temporaries()
      self._check_or_write_meta()
    except BaseException:
      self.close()
      raise
    opened = _OPENED.get()
    if opened is not None:
      opened.append(self)

  # -- opening ------------------------------------------------------------------

  def _path(self, name):
    return os.path.join(self.directory, name)

  def _make_directory(self):
    path = self.directory
    if os.path.exists(path) and not os.path.isdir(path):
      raise NotADirectoryError(
          f"checkpoint_dir {path!r} is a file, not a directory; give the path of a directory "
          "(it is created if missing).")
    try:
      os.makedirs(path, exist_ok=True)
    except OSError as e:
      raise type(e)(e.errno, f"checkpoint_dir {path!r} cannot be created: "
                    f"{e.strerror or e}") from e
    if not os.access(path, os.W_OK | os.X_OK):
      raise PermissionError(
          f"checkpoint_dir {path!r} is not writable by this process; give a writable "
          "directory.")

  def _remove_temporaries(self):
    """Temporary files of a write that was killed (we hold the lock, so no
    other writer owns them)."""
    for name in os.listdir(self.directory):
      if _TEMPORARY.fullmatch(name):
        try:
          os.remove(self._path(name))
        except OSError:
          pass

  def _corrupt(self, name, what):
    return CheckpointCorruptError(
        f"The checkpoint file {self._path(name)} {what}; delete it (or the whole directory "
        f"{self.directory}) to start this run afresh.")

  def _read_meta(self):
    try:
      with open(self._path(META), "rb") as f:
        raw = f.read()
    except OSError as e:
      raise self._corrupt(META, f"cannot be read ({e.strerror or e})") from e
    if not raw.strip():
      raise self._corrupt(META, "is empty (a write was cut off)")
    try:
      saved = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
      raise self._corrupt(META, f"is not valid JSON (truncated or foreign: {e})") from e
    if not isinstance(saved, dict) or not {"model", "data", "settings"} <= set(saved):
      raise self._corrupt(META, "is not the metadata of an edward_lite checkpoint")
    return saved

  def _check_or_write_meta(self):
    if os.path.exists(self._path(META)):
      saved = self._read_meta()
      if saved.get("format") != FORMAT:
        raise CheckpointMismatchError(
            f"The checkpoint in {self.directory} was written by another version of edward_lite "
            f"(checkpoint format {saved.get('format', 1)}, this one reads {FORMAT}); use "
            "another checkpoint_dir or delete it.")
      self._compare(saved)
      return
    stray = [n for n in os.listdir(self.directory) if n == STATE or _CHUNK.fullmatch(n)]
    if stray:
      raise self._corrupt(
          sorted(stray)[0], f"is there without {META}, so it cannot be checked against this run")
    data = json.dumps(self.meta, indent=1, sort_keys=True).encode()
    atomic_write(self._path(META), lambda f: f.write(data))

  def _compare(self, saved):
    mine = self.meta
    diffs = []
    if saved.get("version") != mine["version"]:
      diffs.append(f"edward_lite version ({saved.get('version')} -> {mine['version']})")
    saved_model = saved.get("model") if isinstance(saved.get("model"), dict) else {}
    if saved_model.get("code") != mine["model"]["code"]:
      diffs.append(f"model code (the checkpoint's model '{saved_model.get('name')}' computes "
                   "something else)")
    if saved.get("data") != mine["data"]:
      diffs.append("data")
    saved_settings = saved.get("settings") if isinstance(saved.get("settings"), dict) else {}
    diffs += [f"settings.{k}" for k in sorted(set(saved_settings) | set(mine["settings"]))
              if saved_settings.get(k) != mine["settings"].get(k)]
    if diffs:
      raise CheckpointMismatchError(
          f"The checkpoint in {self.directory} was written for a different run (differs in: "
          f"{', '.join(diffs)}); use another checkpoint_dir or delete it.")

  # -- reading ------------------------------------------------------------------

  def _read_npz(self, name):
    """``{key: array}`` of an ``.npz`` file, every array read and checked."""
    try:
      with np.load(self._path(name), allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    except Exception as e:  # pylint: disable=broad-except
      # BadZipFile, EOFError, OSError, ValueError ("pickled data") or zlib's
      # error: each means the file is not what we wrote.
      try:
        empty = os.path.getsize(self._path(name)) == 0
      except OSError:
        empty = False
      reason = "is empty" if empty else (
          f"is not a readable NumPy archive (truncated, corrupt or foreign: "
          f"{type(e).__name__})")
      raise self._corrupt(name, reason) from e
    for key, array in arrays.items():
      if array.dtype.hasobject:
        raise self._corrupt(name, f"holds Python objects under '{key}'")
    return arrays

  def _read_state(self, expect):
    arrays = self._read_npz(STATE)

    def integer(key, low):
      value = arrays.get(key)
      if value is None or value.shape != () or value.dtype.kind not in "iu" or value < low:
        raise self._corrupt(STATE, f"has no valid '{key}' (an integer >= {low})")
      return int(value)

    step, n_state = integer("step", 1), integer("n_state", 0)
    keys = {"step", "n_state"} | {f"s{i}" for i in range(n_state)}
    if set(arrays) - {"scalars"} != keys:  # states saved before the scalars have none
      raise self._corrupt(STATE, _array_mismatch(set(arrays) - {"scalars"}, keys))
    state = [arrays[f"s{i}"] for i in range(n_state)]
    raw = arrays.get("scalars", np.frombuffer(b"{}", np.uint8))
    try:
      scalars = json.loads(raw.astype(np.uint8).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
      raise self._corrupt(STATE, f"has scalars that are not valid JSON ({e})") from e
    if not isinstance(scalars, dict):
      raise self._corrupt(STATE, "has scalars that are not a JSON object")
    if expect is not None:
      expect = list(expect() if callable(expect) else expect)
      got = [(a.shape, a.dtype) for a in state]
      want = [(np.shape(e), np.asarray(e).dtype) for e in expect]
      if got != want:
        raise self._corrupt(STATE, "holds a sampler state of other shapes or dtypes than "
                            "this run's")
    return step, state, scalars

  def load(self, expect=None):
    """The saved run, or None if the directory holds none.

    Args:
      expect: optional list (or a function returning one) of arrays or tensors
        with the shapes and dtypes the state must have.

    Returns:
      dict with ``state`` (list of arrays, the run's flattened state),
      ``step``, ``arrays`` (the chunks' ``ChunkRecord.arrays`` as ``{name:
      [one array per chunk]}``, and ``{kind: {name: [one array per chunk]}}``
      for those nested by kind) and ``scalars`` (the last
      ``ChunkRecord.scalars``).

    Raises:
      CheckpointCorruptError: a file of the run is corrupt, truncated, foreign
        or missing.
    """
    if not os.path.exists(self._path(STATE)):
      return None
    step, state, scalars = self._read_state(expect)
    chunks = []
    for name in os.listdir(self.directory):
      if not name.startswith("chunk_"):
        continue
      match = _CHUNK.fullmatch(name)
      if not match:
        raise self._corrupt(name, "is not named as a chunk of a run (chunk_<12 digits>.npz)")
      if int(match.group(1)) <= step:  # later ones were written after the last state
        chunks.append((int(match.group(1)), name))
    chunks.sort()
    if not chunks or chunks[-1][0] != step:
      missing = f"chunk_{step:012d}.npz"
      raise CheckpointCorruptError(
          f"The checkpoint in {self.directory} is incomplete: {self._path(missing)}, written "
          f"before {STATE} (step {step}), is missing; delete the directory to start this run "
          "afresh.")
    arrays = {}
    for _, name in chunks:
      for key, array in self._read_npz(name).items():
        kind, nested, rest = key.partition("/")
        group = arrays.setdefault(kind, {}) if nested else arrays
        entry = group.setdefault(rest if nested else key, []) if isinstance(group, dict) else None
        if not isinstance(entry, list):
          raise self._corrupt(name, f"holds '{kind}' both as an array and as a kind of arrays")
        entry.append(array)
    return {"state": state, "step": step, "arrays": arrays, "scalars": scalars}

  # -- writing ------------------------------------------------------------------

  def save(self, step, record):
    """Writes the arrays of the chunk that ended at ``step`` and then the
    state with its scalars (``record``, an ``engine.ChunkRecord``; its
    arrays by name, or a dict of them by kind, as ``kind/name``)."""
    chunk = {}
    for key, value in record.arrays.items():
      if "/" in key:
        raise ValueError(f"the name or kind of a checkpoint's arrays must have no '/'; got "
                         f"{key!r}.")
      if isinstance(value, dict):
        chunk.update({f"{key}/{name}": np.asarray(v) for name, v in value.items()})
      else:
        chunk[key] = np.asarray(value)
    atomic_write(self._path(f"chunk_{step:012d}.npz"), lambda f: np.savez(f, **chunk))
    scalars = json.dumps(record.scalars, sort_keys=True).encode("utf-8")
    arrays = {f"s{i}": np.asarray(a) for i, a in enumerate(record.state)}
    arrays.update(step=np.asarray(step), n_state=np.asarray(len(record.state)),
                  scalars=np.frombuffer(scalars, np.uint8))
    atomic_write(self._path(STATE), lambda f: np.savez(f, **arrays))

  # -- closing ------------------------------------------------------------------

  def close(self):
    """Releases the directory (idempotent)."""
    if self._lock is not None:
      self._lock.release()
      self._lock = None

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def _array_mismatch(found, expected, named=3):
  """Which arrays a saved file lacks or has too many, by name (a few)."""
  missing, extra = sorted(expected - found), sorted(found - expected)
  parts = []
  for what, names in (("lacks", missing), ("has the unexpected", extra)):
    if names:
      shown = ", ".join(f"'{n}'" for n in names[:named])
      more = f" and {len(names) - named} more" if len(names) > named else ""
      parts.append(f"{what} array{'s' if len(names) > 1 else ''} {shown}{more}")
  return " and ".join(parts)
