"""Host-side helpers shared by the inference loops (MCMC and VI).

* ``seed_pair`` turns an integer seed into the ``[2]`` int32 pair that
  TensorFlow's stateless random ops take;
* ``fingerprint`` keys a program and the *content* of its data, for caches of
  compiled functions and for checkpoints that must refuse other data;
* ``progress_bar`` is a tqdm bar on a terminal, None elsewhere.
"""

import hashlib
import sys

import numpy as np
import tensorflow as tf

__all__ = ["seed_pair", "fingerprint", "progress_bar", "check_integer"]


def seed_pair(seed):
  """Integer seed -> ``[low, high]`` with both parts in ``[0, 2**31 - 1)``."""
  return [seed % (2**31 - 1), (seed // (2**31 - 1)) % (2**31 - 1)]


def fingerprint(model, args, kwargs, observed):
  """A hashable key of the program and the content of its data:
  ``(model, sha1 hex digest)``."""
  digest = hashlib.sha1()

  def add(value):
    if isinstance(value, (np.ndarray, np.generic)) or tf.is_tensor(value):
      array = np.asarray(value)
      digest.update(f"{array.dtype}{array.shape}".encode())
      digest.update(np.ascontiguousarray(array).tobytes())
    elif isinstance(value, (list, tuple)):
      digest.update(f"{type(value).__name__}{len(value)}".encode())
      for v in value:
        add(v)
    elif isinstance(value, dict):
      for k in sorted(value, key=str):
        digest.update(str(k).encode())
        add(value[k])
    elif isinstance(value, (int, float, str, bool, type(None), complex)):
      digest.update(repr(value).encode())
    else:
      digest.update(f"id{id(value)}".encode())

  add(list(args))
  add(dict(kwargs))
  add(dict(observed or {}))
  return (model, digest.hexdigest())


def progress_bar(progress, total, initial, desc):
  """A tqdm bar when ``progress`` is on, tqdm is installed and stderr is a
  terminal; otherwise None."""
  if not progress or not sys.stderr.isatty():
    return None
  try:
    import tqdm  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  return tqdm.tqdm(total=total, initial=initial, unit="it", desc=desc, leave=True)


def check_integer(name, value, low):
  """``int(value)`` if it is an integer >= ``low``; else a ValueError naming it."""
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
    raise ValueError(f"{name} must be an integer >= {low}; got {value!r}.")
  return int(value)
