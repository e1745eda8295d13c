"""Python's cyclic garbage collector paused while a program is traced or loaded.

Tracing a sampler or loading a saved one creates tens of thousands of
Python objects (graph operations, their attributes and metadata), and
each of those bursts triggers full collections that walk every object
TensorFlow keeps alive: measured on eight schools, 0.1-0.2 s of a 1.2 s
second run went to the collector (benchmarks/RESULTS.md §42).
``paused()`` turns it off for the duration of such a step and back on
after (a collection then runs as usual, when its thresholds say); when it
was already off, it is left off.  Reference counting, which frees most
objects, is not affected.
"""

import contextlib
import gc

__all__ = ["paused"]


@contextlib.contextmanager
def paused():
  """A block run with the cyclic garbage collector off (module docstring)."""
  was_enabled = gc.isenabled()
  gc.disable()
  try:
    yield
  finally:
    if was_enabled:
      gc.enable()
