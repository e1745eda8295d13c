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
``$XDG_CACHE_HOME/edward_lite/xla`` (``~/.cache/edward_lite/xla``).
``ED_COMPILE_CACHE=0`` (or empty) turns it off; a
``--tf_xla_persistent_cache_directory`` the user put in ``TF_XLA_FLAGS``
is kept.  Deleting the folder is always safe.
"""

import os

__all__ = ["configure", "directory"]

FLAG = "--tf_xla_persistent_cache_directory"


def directory():
  """The cache folder in use (None when off)."""
  for flag in os.environ.get("TF_XLA_FLAGS", "").split():
    if flag.startswith(FLAG + "="):
      return flag.split("=", 1)[1] or None
  return None


def _default():
  setting = os.environ.get("ED_COMPILE_CACHE")
  if setting is not None:
    return None if setting in ("", "0") else os.path.expanduser(setting)
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "edward_lite", "xla")


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
