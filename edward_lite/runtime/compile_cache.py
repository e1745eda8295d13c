"""A persistent cache of XLA executables, so a model compiles once per machine.

A compiled chunk of transitions is an XLA executable; compiling it takes
most of the seconds before a small model's first draw, in every new process.
TensorFlow can keep those executables on disk (``TF_XLA_FLAGS
--tf_xla_persistent_cache_directory``), keyed by a fingerprint of the
compiled graph, its argument shapes and the device: a second process that
builds the same program (same model structure, data shapes, kernel and
settings) loads the executable instead of compiling it, and any change
gives another key, never a stale program.

``configure``, run when edward_lite is imported and before TensorFlow reads
its XLA flags, points that flag at ``$ED_COMPILE_CACHE`` if set, else at
``$XDG_CACHE_HOME/edward_lite/xla`` (``~/.cache/edward_lite/xla``).  The
fingerprint does not hold ``XLA_FLAGS``, which change the executable: with
flags other than edward_lite's own (``xla_options``) the default folder is
``xla-<digest of the flags>``.
``ED_COMPILE_CACHE=0`` (or empty, ``false``, ``no``, ``off``) turns it off,
and ``1`` (``true``, ``yes``, ``on``) keeps the default folder, not a
folder named ``1``; a
``--tf_xla_persistent_cache_directory`` the user put in ``TF_XLA_FLAGS``
is kept.  Deleting the folder is always safe.

The folder is bounded: every new model, and every new version of
edward_lite or TensorFlow, adds executables (1-4 MB each) and traced
programs (0.1-0.4 MB) that nothing would remove.  When edward_lite is
imported and the folder holds more than ``$ED_COMPILE_CACHE_MAX_MB``
megabytes (default ``DEFAULT_MAX_MB``; ``0`` for no bound), ``trim`` removes
the entries used least recently until it holds 80% of that, so that a
process at the bound does not trim again at once.  Only the cache's own
files are counted and removed (TensorFlow's ``xla_compile_cache__*``
executables, ``programs/``' entries), never anything else in a folder the
user named.  An entry another process is about to read is only a cache
miss: that process compiles (or traces) again.
"""

import hashlib
import os
import shutil
import time

from edward_lite.runtime import xla_options

__all__ = ["configure", "directory", "trim", "max_bytes", "DEFAULT_MAX_MB"]

FLAG = "--tf_xla_persistent_cache_directory"
DEFAULT_MAX_MB = 2048
_EXECUTABLE_PREFIX = "xla_compile_cache__"
_PROGRAM_SUFFIXES = (".program", ".json")
# A temporary file (an interrupted write) older than this is removed.
_STALE_SCRATCH_SECONDS = 3600


def directory():
  """The cache folder in use (None when off)."""
  for flag in os.environ.get("TF_XLA_FLAGS", "").split():
    if flag.startswith(FLAG + "="):
      return flag.split("=", 1)[1] or None
  return None


def _default():
  setting = os.environ.get("ED_COMPILE_CACHE")
  switch = None if setting is None else setting.strip().lower()
  if switch in ("", "0", "false", "no", "off"):
    return None
  if setting is not None and switch not in ("1", "true", "yes", "on"):
    return os.path.expanduser(setting)
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  flags = os.environ.get("XLA_FLAGS", "")
  name = "xla" if flags == xla_options.FLAG else (
      "xla-" + hashlib.sha256(flags.encode()).hexdigest()[:8])
  return os.path.join(base, "edward_lite", name)


def configure():
  """Adds the cache flag to ``TF_XLA_FLAGS`` (see the module docstring)."""
  flags = os.environ.get("TF_XLA_FLAGS", "")
  path = _default()
  if FLAG in flags or path is None:
    return
  try:
    os.makedirs(path, exist_ok=True)
  except OSError:
    return  # a read-only home: compile every time, as without the cache
  os.environ["TF_XLA_FLAGS"] = f"{flags} {FLAG}={path}".strip()
  trim(path, max_bytes())


def max_bytes():
  """The folder's bound in bytes from ``$ED_COMPILE_CACHE_MAX_MB`` (None:
  no bound)."""
  setting = os.environ.get("ED_COMPILE_CACHE_MAX_MB", "").strip()
  try:
    megabytes = float(setting) if setting else DEFAULT_MAX_MB
  except ValueError as error:
    raise ValueError("ED_COMPILE_CACHE_MAX_MB must be a number of megabytes (0 for no "
                     f"bound); got {setting!r}.") from error
  return int(megabytes * 2**20) if megabytes > 0 else None


def _entries(folder):
  """``(last use, bytes, path)`` of the cache's own files in ``folder``;
  removed on the way: interrupted writes past ``_STALE_SCRATCH_SECONDS``,
  and the SavedModel folders earlier versions kept as programs (never read
  again).
  A file's last use is the later of its access and modification times
  (a program entry is touched when loaded; an executable's access time is
  what the file system keeps, at worst its creation)."""
  found = []
  now = time.time()
  for sub, wanted in (("", lambda n: n.startswith(_EXECUTABLE_PREFIX)),
                      ("programs", lambda n: n.endswith(_PROGRAM_SUFFIXES))):
    try:
      scan = list(os.scandir(os.path.join(folder, sub)))
    except OSError:
      continue
    for entry in scan:
      try:
        if sub and os.path.isfile(os.path.join(entry.path, "saved_model.pb")):
          shutil.rmtree(entry.path, ignore_errors=True)
          continue
        if not entry.is_file(follow_symlinks=False):
          continue
        stat = entry.stat(follow_symlinks=False)
        if sub and entry.name.startswith("."):  # program_cache's temporary files
          if now - stat.st_mtime > _STALE_SCRATCH_SECONDS:
            os.remove(entry.path)
          continue
        if wanted(entry.name):
          found.append((max(stat.st_atime, stat.st_mtime), stat.st_size, entry.path))
      except OSError:
        continue  # removed meanwhile by another process
  return found


def trim(folder, limit):
  """Removes the least recently used entries of the cache in ``folder``
  when they exceed ``limit`` bytes, down to 80% of it (None: no bound),
  and what ``_entries`` removes in any case.  Returns the entries' bytes
  removed."""
  entries = _entries(folder)
  if limit is None:
    return 0
  total = sum(size for _, size, _ in entries)
  if total <= limit:
    return 0
  removed = 0
  for _, size, path in sorted(entries):
    if total - removed <= 0.8 * limit:
      break
    try:
      os.remove(path)
      removed += size
    except OSError:
      pass  # removed meanwhile by another process
  return removed
