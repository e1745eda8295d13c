"""A quiet console: TensorFlow's start-up logs stay out of a user's output.

Importing TensorFlow 2.21 writes a dozen C++ log lines to stderr (oneDNN,
CUDA stubs, CPU features, ``cuInit`` on machines without a GPU, XLA
service start), none of them about the user's model.  ``quiet_startup``,
run when edward_lite is imported, (1) sets ``TF_CPP_MIN_LOG_LEVEL=2`` (C++
info and warnings off, errors kept) and (2) sends stderr to a buffer while
TensorFlow is imported and lists its devices, replaying the buffer if the
import fails.  It does nothing when TensorFlow is already imported, when
``ED_VERBOSE=1``, or when the user asks for TensorFlow's logs with
``TF_CPP_MIN_LOG_LEVEL=0`` (another level they set is kept).  When the
user's script imported TensorFlow first, its log level is already fixed, so
the lines TensorFlow logs later -- listing devices (``cuInit``) and
starting XLA at the first compile -- are filtered by their text instead
(``_STARTUP_NOTES``); TensorFlow's import lines themselves came before
edward_lite could act.
``mute_onednn_int32_note`` does the same for one run-time line: on CPUs
without AVX-512, the first int32 transpose a process runs logs
``E0000 ... oneDNN supports DT_INT32 only on platforms with AVX-512``, an
ERROR-level note about TensorFlow's choice of kernel that
``TF_CPP_MIN_LOG_LEVEL=2`` keeps.  TFP's ``Categorical`` sampling runs one
when a model with a mixture is first traced, and so does ancestral sampling
of a categorical program.  TensorFlow logs it once per process, so the
first ``RandomVariable`` runs such a transpose eagerly (``tf.init_scope``)
with stderr sent to a buffer.  At import it would create the eager context,
which ``ed.distribute.logical_cpus`` must still be able to configure.
edward_lite's own warnings, convergence notes and Python warnings are
untouched, except TensorFlow's note that ``vectorized_map`` loops over a
random op it cannot vectorize (an implementation detail of prior and
predictive draws), and the ERROR line TensorFlow logs each time it loads an
executable from the compile cache (``runtime/compile_cache.py``: it tries a
text parse before the binary one), on some CPUs two lines on tuning
preferences, and oneDNN's note on each float64 op it declines (logged when
a graph with them first runs op by op), dropped from the first call of each
compiled function (``without_cache_note``, ``first_call_quiet``), from
a run's first chunk without XLA (its threefry random ops compile one by
one) and from a compile that runs on another thread while the run goes on
(``mcmc.compiled``): stderr then passes through ``FilteredStderr``, which
forwards every other line as it comes.  Every change of file descriptor 2
is made under one lock (``_FD2``) and filters open at once share one pipe,
so threads never restore it out of order.
"""

import logging
import os
import sys
import tempfile
import threading

__all__ = ["quiet_startup", "mute_onednn_int32_note", "without_cache_note", "first_call_quiet",
           "per_call_function", "FilteredStderr"]

# TensorFlow reads a cached XLA executable (``runtime/compile_cache.py``) by
# first trying to parse it as text; the failed attempt logs this ERROR line
# before the binary read succeeds.
_CACHE_NOTE = b"Error parsing text-format tensorflow.XlaSerializedCacheEntry"
# On some CPUs (AVX-512 ones, seen 2026-11-27) XLA records two tuning
# preferences among the compile machine's features that the host's feature
# list never shows, and each load of a cached executable logs one ERROR line
# per preference; they are not instruction sets, so the executable runs.
_TUNING_NOTES = tuple(b"Loading XLA:CPU AOT result. Target machine feature +prefer-no-" + op +
                      b" is not" for op in (b"scatter", b"gather"))

# TensorFlow's check of an op's dtype for oneDNN logs a WARNING line per
# float64 op it sees when a graph runs op by op (tensorflow/core/util/util.cc;
# TF_CPP_MIN_LOG_LEVEL=2 does not stop it): a float64 flow's first chunk,
# run without XLA, logged 40.
_ONEDNN_TYPE_NOTE = b"] Not handling type DT_"

# Lines TensorFlow logs after its import about the machine, not the model:
# CUDA probing on a machine without a GPU, and XLA's start at the first
# compile.  Dropped by text when TensorFlow was imported before edward_lite.
_STARTUP_NOTES = (b"failed call to cuInit", b"Could not find cuda drivers",
                  b"All log messages before absl::InitializeLog", b"XLA service 0x",
                  b"StreamExecutor [", b"disabling MLIR crash reproducer",
                  b"Compiled cluster using XLA")

_ONEDNN_NOTE_MUTED = False

# Every change of file descriptor 2 is made under this lock, and each puts
# back what it found: two threads that redirected and restored fd 2 each on
# its own restored them out of order (a first call's buffer put the pipe of
# a filter closed meanwhile back on fd 2, whose reader then never saw its
# end: CI hung, 2026-11-28).
_FD2 = threading.RLock()


class _DropPforFallbackNote(logging.Filter):

  def filter(self, record):
    return not str(record.msg).startswith("Using a while_loop for converting")


def _verbose():
  return (os.environ.get("ED_VERBOSE", "") not in ("", "0") or
          os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0")


def quiet_startup():
  """Imports TensorFlow quietly (see the module docstring)."""
  if _verbose():
    _import_and_filter()
    return
  if "tensorflow" in sys.modules:
    _with_stderr_buffered(lambda: _import_and_filter(list_devices=True), keep=_not_startup_note)
    return
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  _with_stderr_buffered(lambda: _import_and_filter(list_devices=True))


def mute_onednn_int32_note():
  """Runs the once-per-process oneDNN int32 note into a buffer (module docstring)."""
  global _ONEDNN_NOTE_MUTED
  if _ONEDNN_NOTE_MUTED:
    return
  _ONEDNN_NOTE_MUTED = True
  if not _verbose():
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    with tf.init_scope():
      _with_stderr_buffered(lambda: tf.transpose(tf.zeros([1, 2], tf.int32)))


def without_cache_note(fn, *args):
  """``fn(*args)`` (a compiled function's first call, which may load a cached
  executable) with stderr passed through ``FilteredStderr``, which drops the
  cache's note: first calls made at once on several threads (chain groups,
  a compile beside the first chunk) share one filter."""
  quiet = FilteredStderr()
  try:
    return fn(*args)
  finally:
    quiet.close()


def per_call_function(fn=None, **options):
  """``tf.function(fn, autograph=False, **options)`` for a function that a
  library call makes anew each time, or traces once per setting by design
  (its code traced again and again on purpose), marked so that
  TensorFlow's "triggered tf.function retracing" warning, which counts
  traces of the same code across functions, does not blame the user's
  repeated calls.  Without ``fn``, the decorator that makes it."""
  if fn is None:
    return lambda f: per_call_function(f, **options)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  function = tf.function(fn, **{"autograph": False, **options})
  function._omit_frequent_tracing_warning = True  # pylint: disable=protected-access
  return function


def first_call_quiet(fn):
  """``fn`` whose first call runs through ``without_cache_note``."""
  called = []

  def call(*args):
    if called:
      return fn(*args)
    called.append(True)
    return without_cache_note(fn, *args)

  return call


class FilteredStderr:
  """File descriptor 2 sent through a pipe until ``close()``; a reader
  thread forwards what arrives to the real stderr as it comes, without the
  compile cache's notes (``_not_cache_note``), so that a progress report
  written meanwhile is seen at once.  A log line is one write, which a pipe
  delivers whole, so the notes are dropped line by line; text without a
  newline yet (a progress bar's update) is forwarded as it is.  Filters
  open at once share one pipe, given back when the last closes (a pipe's
  reader stops only when no copy of its write end is left).  Nothing is
  filtered when the user asked for TensorFlow's logs (``ED_VERBOSE``)."""

  FORWARD_WAIT_S = 5.
  _open = 0  # filters not yet closed
  _saved = _reader = None  # the real stderr and the reader, while any is open

  def __init__(self):
    self._closed = _verbose()
    if self._closed:
      return
    cls = FilteredStderr
    with _FD2:
      cls._open += 1
      if cls._open > 1 or cls._saved is not None:
        return
      try:
        saved = os.dup(2)
      except OSError:  # no stderr file descriptor
        return
      sys.stderr.flush()
      read, write = os.pipe()
      os.dup2(write, 2)
      os.close(write)
      cls._saved = saved
      cls._reader = threading.Thread(target=cls._forward, args=(read, saved), daemon=True,
                                     name="edward_lite-stderr")
      cls._reader.start()

  @staticmethod
  def _forward(read, saved):
    """Forwards the pipe to ``saved`` (the real stderr) until every write
    end is closed; closes both."""
    with os.fdopen(read, "rb", buffering=0) as pipe:
      while True:
        data = pipe.read(1 << 16)
        if not data:
          break
        *lines, rest = data.split(b"\n")
        out = b"".join(line + b"\n" for line in lines if _not_cache_note(line)) + rest
        while out:
          out = out[os.write(saved, out):]
    os.close(saved)

  def close(self):
    """Closes this filter (once; from any thread); the last one open gives
    stderr back, waiting up to ``FORWARD_WAIT_S`` for what is left to be
    forwarded.  A process started while the filter was open holds a copy of
    the pipe's write end as its stderr: the reader forwards it until that
    process ends."""
    cls = FilteredStderr
    with _FD2:
      if self._closed:
        return
      self._closed = True
      cls._open -= 1
      if cls._open or cls._saved is None:
        return
      sys.stderr.flush()
      os.dup2(cls._saved, 2)  # fd 2's write end closed: the reader sees the pipe's end
      cls._reader.join(FilteredStderr.FORWARD_WAIT_S)
      cls._saved = cls._reader = None  # the reader closes the saved stderr when it ends


def _not_cache_note(line):
  return (_CACHE_NOTE not in line and _ONEDNN_TYPE_NOTE not in line
          and not any(note in line for note in _TUNING_NOTES) and _not_startup_note(line))


def _not_startup_note(line):
  return not any(note in line for note in _STARTUP_NOTES)


def _with_stderr_buffered(fn, keep=None):
  """Calls ``fn`` with file descriptor 2 sent to a buffer, replayed if it
  raises; if ``keep`` is given, its lines ``keep(line)`` are replayed always.
  Holds ``_FD2`` throughout: ``fn`` must be short (an import, one op)."""
  with _FD2:
    try:
      saved = os.dup(2)
    except OSError:  # no stderr file descriptor
      fn()
      return
    sys.stderr.flush()
    with tempfile.TemporaryFile() as buffer:
      os.dup2(buffer.fileno(), 2)
      failed = False
      try:
        fn()
      except BaseException:
        failed = True
        raise
      finally:
        os.dup2(saved, 2)
        os.close(saved)
        if failed or keep is not None:
          buffer.seek(0)
          lines = buffer.read().splitlines(keepends=True)
          kept = b"".join(l for l in lines if failed or keep(l))
          if kept:
            sys.stderr.write(kept.decode(errors="replace"))
            sys.stderr.flush()


def _import_and_filter(list_devices=False):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if list_devices:
    tf.config.list_physical_devices()  # CUDA probing logs here
  if os.environ.get("ED_VERBOSE", "") in ("", "0"):
    tf.get_logger().addFilter(_DropPforFallbackNote())
