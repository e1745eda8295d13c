"""Traced programs kept on disk, so a model is traced once per machine.

Before a compiled function runs, Python traces it into a TensorFlow graph
(for a NUTS chunk: the sampler's loops around the model's vectorized
density and gradient, 1.5-2.5 s for eight schools) and XLA compiles the
graph.  ``compile_cache`` keeps XLA's executables; this module keeps the
traced graphs, as the function libraries of the concrete functions
(``kept_function``), so that a new process running a program it ran before
skips the trace as well.

A program is found by a key of what its trace depends on:

- the model's code and data by content (``fingerprints.fingerprint``) and
  the settings ``Program`` keys its in-memory cache by (kernel, chains,
  pooling, dtype, XLA or not);
- the function and its argument signature (dtypes, shapes, Python values);
- the library: a digest of edward_lite's own source files, Python's
  version, and the version of every imported package that has one
  (TensorFlow, TensorFlow Probability, NumPy, and whatever a model calls).

Any change gives another key, never a stale program.  A trace is kept once
and run in its kept form from the first call on, under names tagged with
the entry's key, so the XLA executable compiled in the first process is the
one later processes find (TensorFlow keys executables by function name).

The programs live in ``programs/`` inside the compile cache's folder (see
``compile_cache``): off when that is off.  A function that reads a ``tf.Variable``
or another resource, calls Python (``tf.py_function``), or captures more
than ``MAX_CAPTURED_BYTES`` of data is not kept.  An entry is one file
(``<key>.program``, a pickle: open only a cache folder you trust, as with
any saved program); writes go to a temporary file renamed into place, so
concurrent processes and interrupted writes leave either a whole entry or
none; an entry that fails to load is ignored and replaced.
``ED_PROGRAM_CACHE=0`` turns this cache off and keeps XLA's.
"""

import functools
import hashlib
import json
import os
import pickle
import sys
import tempfile

from edward_lite.runtime import compile_cache, kept_function

__all__ = ["directory", "load", "keep", "entry_name", "remembered"]

# Captured data above this many bytes is not copied to disk.
MAX_CAPTURED_BYTES = 1 << 26
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def directory():
  """The folder of saved programs, or None when the cache is off."""
  root = compile_cache.directory()
  off = os.environ.get("ED_PROGRAM_CACHE", "1") in ("", "0")
  return None if off or not root else os.path.join(root, "programs")


@functools.lru_cache(maxsize=1)
def _source_digest():
  """SHA-256 of edward_lite's Python sources (path and bytes, in order)."""
  digest = hashlib.sha256()
  for folder, dirs, files in sorted(os.walk(_PACKAGE)):
    dirs.sort()
    for name in sorted(f for f in files if f.endswith(".py")):
      path = os.path.join(folder, name)
      digest.update(os.path.relpath(path, _PACKAGE).encode() + b"\0")
      with open(path, "rb") as f:
        digest.update(f.read())
  return digest.hexdigest()


def _versions():
  """``name=version`` of every imported top-level package that has one."""
  found = []
  for name, module in list(sys.modules.items()):
    if "." in name or module is None:
      continue
    try:
      version = getattr(module, "__version__", None)
    except Exception:  # pylint: disable=broad-except
      continue  # a lazy module that fails on attribute access
    if isinstance(version, str):
      found.append(f"{name}={version}")
  return sorted(found)


def entry_name(program_key, signature):
  """The folder name of one concrete function: a SHA-256 of the program's
  key, the function's name and argument signature, and the library."""
  parts = [repr(program_key), repr(signature), _source_digest(), sys.version] + _versions()
  return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _path(name):
  """The file of entry ``name``, or None when the cache is off."""
  folder = directory()
  return folder and os.path.join(folder, name + ".program")


def load(name):
  """The kept function ``name`` (a ``KeptFunction``), or None (absent,
  unreadable, or this TensorFlow cannot call it)."""
  path = _path(name)
  if not path or not os.path.isfile(path) or not kept_function.available():
    return None
  try:
    with open(path, "rb") as f:
      kept = kept_function.KeptFunction(**pickle.load(f))
  except Exception:  # pylint: disable=broad-except
    _remove(path)  # a damaged entry: traced again and rewritten
    return None
  try:
    os.utime(path)  # its last use, for compile_cache.trim
  except OSError:
    pass
  return kept


def _remove(path):
  """Removes a file if it is there."""
  try:
    os.remove(path)
  except OSError:
    pass


def keep(name, concrete, args):
  """Saves ``concrete`` (a ``ConcreteFunction`` traced for ``args``) as
  entry ``name`` and returns its ``KeptFunction``, which this process calls
  from now on (so the XLA executable it compiles is the one later processes
  find); ``concrete`` itself if it is not kept."""
  folder = directory()
  if not folder:
    return concrete
  kept = kept_function.KeptFunction.from_concrete(concrete, args, tag=name[:16],
                                                  max_captured_bytes=MAX_CAPTURED_BYTES)
  if kept is None:
    return concrete
  scratch = None
  try:
    os.makedirs(folder, exist_ok=True)
    handle, scratch = tempfile.mkstemp(prefix=f".{name[:16]}-", dir=folder)
    with os.fdopen(handle, "wb") as f:
      pickle.dump(kept.state(), f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(scratch, _path(name))
  except Exception:  # pylint: disable=broad-except
    # Not serializable, or a read-only or full disk: traced again next time.
    if scratch is not None:
      _remove(scratch)
  return kept


def remembered(name, compute):
  """``compute()``, a JSON value about a program that costs a trace to find
  (whether it loops), kept as entry ``name + ".json"`` and read back in
  later processes; computed every time when the cache is off."""
  folder = directory()
  if not folder:
    return compute()
  path = os.path.join(folder, name + ".json")
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except (OSError, ValueError):
    pass  # not written yet, or damaged: found again and rewritten
  value = compute()
  scratch = None
  try:
    os.makedirs(folder, exist_ok=True)
    handle, scratch = tempfile.mkstemp(prefix=".fact-", dir=folder)
    with os.fdopen(handle, "w", encoding="utf-8") as f:
      json.dump(value, f)
    os.replace(scratch, path)
  except OSError:  # a read-only or full disk: found again next time
    if scratch is not None and os.path.exists(scratch):
      os.remove(scratch)
  return value
