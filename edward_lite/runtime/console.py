"""A quiet console: TensorFlow's start-up logs stay out of a user's output.

Importing TensorFlow 2.21 writes a dozen C++ log lines to stderr (oneDNN,
CUDA stubs, CPU features, ``cuInit`` on machines without a GPU, XLA
service start), none of them about the user's model.  ``quiet_startup``,
run when edward_lite is imported, (1) sets ``TF_CPP_MIN_LOG_LEVEL=2`` (C++
info and warnings off, errors kept) and (2) sends stderr to a buffer while
TensorFlow is imported and lists its devices, replaying the buffer if the
import fails.  It does nothing when TensorFlow is already imported, when
``ED_VERBOSE=1``, or when the user asks for TensorFlow's logs with
``TF_CPP_MIN_LOG_LEVEL=0`` (another level they set is kept).
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
predictive draws).
"""

import logging
import os
import sys
import tempfile

__all__ = ["quiet_startup", "mute_onednn_int32_note"]

_ONEDNN_NOTE_MUTED = False


class _DropPforFallbackNote(logging.Filter):

  def filter(self, record):
    return not str(record.msg).startswith("Using a while_loop for converting")


def _verbose():
  return (os.environ.get("ED_VERBOSE", "") not in ("", "0") or
          os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0")


def quiet_startup():
  """Imports TensorFlow quietly (see the module docstring)."""
  if _verbose() or "tensorflow" in sys.modules:
    _import_and_filter()
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


def _with_stderr_buffered(fn):
  """Calls ``fn`` with file descriptor 2 sent to a buffer, replayed if it raises."""
  try:
    saved = os.dup(2)
  except OSError:  # no stderr file descriptor
    fn()
    return
  with tempfile.TemporaryFile() as buffer:
    os.dup2(buffer.fileno(), 2)
    try:
      fn()
    except BaseException:
      os.dup2(saved, 2)
      buffer.seek(0)
      sys.stderr.write(buffer.read().decode(errors="replace"))
      raise
    finally:
      os.dup2(saved, 2)
      os.close(saved)


def _import_and_filter(list_devices=False):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if list_devices:
    tf.config.list_physical_devices()  # CUDA probing logs here
  if os.environ.get("ED_VERBOSE", "") in ("", "0"):
    tf.get_logger().addFilter(_DropPforFallbackNote())
