"""Traced programs kept on disk, so a model is traced once per machine.

Before a compiled function runs, Python traces it into a TensorFlow graph
(for a NUTS chunk: the sampler's loops around the model's vectorized
density and gradient, 1.5-2.5 s for eight schools) and XLA compiles the
graph.  ``compile_cache`` keeps XLA's executables; this module keeps the
traced graphs, as SavedModels of the concrete functions, so that a new
process running a program it ran before skips the trace as well.

A program is found by a key of what its trace depends on:

- the model's code and data by content (``fingerprints.fingerprint``) and
  the settings ``Program`` keys its in-memory cache by (kernel, chains,
  pooling, dtype, XLA or not);
- the function and its argument signature (dtypes, shapes, Python values);
- the library: a digest of edward_lite's own source files, Python's
  version, and the version of every imported package that has one
  (TensorFlow, TensorFlow Probability, NumPy, and whatever a model calls).

Any change gives another key, never a stale program.  A trace is saved once
and then loaded back and used from the first call on, so the XLA executable
compiled in the first process is the one later processes load (a loaded
graph's functions are renamed, and TensorFlow keys executables by name).

The programs live in ``programs/`` inside the compile cache's folder (see
``compile_cache``): off when that is off.  A function that reads a ``tf.Variable``
or another resource, calls Python (``tf.py_function``), or captures more
than ``MAX_CAPTURED_BYTES`` of data is not kept.  Writes go to a temporary
folder renamed into place, so concurrent processes and interrupted writes leave
either a whole entry or none; an entry that fails to load is ignored and
replaced.  ``ED_PROGRAM_CACHE=0`` turns this cache off and keeps XLA's.
"""

import collections
import functools
import hashlib
import itertools
import json
import logging
import os
import shutil
import sys
import tempfile

import tensorflow as tf

try:  # TensorFlow's counter of unique ids (not public API): see _align_names
  from tensorflow.python.framework.ops import uid as _uid  # pylint: disable=import-error
except ImportError:  # moved: loads still work, a second process compiles again
  _uid = None

from edward_lite.runtime import compile_cache

__all__ = ["directory", "load", "save_and_load", "entry_name", "remembered"]

# Ids a process may use between two loads (a trace uses thousands); counting
# to the next multiple takes at most 8 ms.
_NAME_BLOCK = 1 << 17
# A function that calls back into Python, or reads a variable or another
# resource, is not kept: a loaded copy would not see the live object.
_PYTHON_OPS = frozenset(["PyFunc", "PyFuncStateless", "EagerPyFunc"])
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


def _align_names():
  """Moves TensorFlow's counter of unique ids to the next multiple of
  ``_NAME_BLOCK``.  A loaded graph's functions are named by that counter
  (``__inference_<name>_<uid>``), and TensorFlow keys a cached XLA executable
  by the function's name as well as its content: aligned, the same load gets
  the same names in every process, whatever ran before it, so the executable
  the first process compiled is found by the next ones."""
  if _uid is None:
    return
  # Called from C (no Python frame per id): 131,072 ids in about 8 ms.
  collections.deque(itertools.starmap(_uid, itertools.repeat((), -_uid() % _NAME_BLOCK)), 0)


def load(name):
  """The saved concrete function ``name``, or None (absent or unreadable)."""
  folder = directory()
  path = folder and os.path.join(folder, name)
  if not path or not os.path.isdir(path):
    return None
  absl = logging.getLogger("absl")
  absl.addFilter(_drop_unsaved_gradient_note)
  try:
    _align_names()
    return tf.saved_model.load(path).function
  except Exception:  # pylint: disable=broad-except
    shutil.rmtree(path, ignore_errors=True)  # a damaged entry: trace again, rewrite
    return None
  finally:
    absl.removeFilter(_drop_unsaved_gradient_note)


def _drop_unsaved_gradient_note(record):
  """False for TensorFlow's note that a loaded function has custom-gradient
  ops saved without their gradients (``save_and_load`` does not save them:
  the kept functions are never differentiated)."""
  return "with ops with unsaved custom gradients" not in str(record.msg)


def _keepable(concrete):
  """Whether a loaded copy of ``concrete`` computes what it computes."""
  captured = concrete.captured_inputs
  if any(t.dtype in (tf.resource, tf.variant) for t in captured):
    return False
  if sum(t.shape.num_elements() * t.dtype.size for t in captured) > MAX_CAPTURED_BYTES:
    return False
  graph = concrete.graph.as_graph_def()
  used = {n.op for n in graph.node}.union(*({n.op for n in f.node_def}
                                            for f in graph.library.function))
  return not used & _PYTHON_OPS


def save_and_load(name, concrete):
  """Saves ``concrete`` (a ``ConcreteFunction``) as entry ``name`` and
  returns it loaded back (see the module docstring: later processes then
  find the same executable); ``concrete`` itself if it is not kept."""
  folder = directory()
  if not folder or not _keepable(concrete):
    return concrete
  module = tf.Module()
  module.function = concrete
  scratch = None
  try:
    os.makedirs(folder, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=f".{name[:16]}-", dir=folder)
    # The functions kept are called, never differentiated: TensorFlow need
    # not trace the gradients of custom-gradient ops (it fails, and logs a
    # traceback, on some inside a ``vectorized_map``).
    tf.saved_model.save(module, scratch, options=tf.saved_model.SaveOptions(
        experimental_custom_gradients=False))
    os.rename(scratch, os.path.join(folder, name))
  except Exception:  # pylint: disable=broad-except
    # Saved first by another process, not serializable, or a read-only or
    # full disk: the trace runs as it is.
    if scratch is not None:
      shutil.rmtree(scratch, ignore_errors=True)
    if not os.path.isdir(os.path.join(folder, name)):
      return concrete
  return load(name) or concrete


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
