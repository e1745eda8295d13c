"""Progress of a chunked run: a tqdm bar on a terminal, plain lines elsewhere.

On a terminal (stderr a TTY, tqdm installed) a bar whose description reads
``"<desc> (compiling)"`` until the first chunk returns.  Elsewhere -- a
notebook, a batch job's log, CI -- one line when compiling starts, one when
the first chunk is done with the seconds since the call, and one per
10% of the iterations with iterations per second and the run's statistics
(phase, step size, acceptance, divergences; or ELBO).  ``progress=False``
silences both.
"""

import sys
import time

__all__ = ["make_progress"]


def make_progress(progress, total, initial, desc):
  """The progress reporter of a run of ``total`` iterations starting at
  ``initial``, or None when ``progress`` is off.  It has tqdm's ``update(n)``,
  ``set_postfix(dict or **kwargs, refresh=...)`` and ``close()``, and
  ``set_total(total)``."""
  if not progress:
    return None
  if sys.stderr.isatty():
    try:
      import tqdm  # pylint: disable=g-import-not-at-top
    except ImportError:
      pass
    else:
      return _Bar(tqdm.tqdm(total=total, initial=initial, unit="it",
                            desc=f"{desc} (compiling)", leave=True), desc)
  return LineProgress(total, initial, desc)


class _Bar:
  """A tqdm bar that drops "(compiling)" from its description after the
  first chunk."""

  def __init__(self, bar, desc):
    self._bar, self._desc, self._first = bar, desc, True

  def update(self, n):
    if self._first:
      self._first = False
      self._bar.set_description(self._desc, refresh=False)
    self._bar.update(n)

  def set_postfix(self, ordered_dict=None, refresh=True, **kwargs):
    self._bar.set_postfix(ordered_dict, refresh=refresh, **kwargs)

  def set_total(self, total):
    self._bar.total = total
    self._bar.refresh()

  def close(self):
    self._bar.close()


class LineProgress:
  """Plain progress lines on stderr (see the module docstring)."""

  def __init__(self, total, initial, desc, stream=None):
    self.total, self.done, self.desc = total, initial, desc
    self._stream = stream or sys.stderr
    self._start = self._last_time = time.perf_counter()
    self._last_done, self._first = initial, True
    self._next = self._tenth(initial) + 1
    self._postfix = {}
    self._write(f"compiling (first call){', resuming at ' + str(initial) if initial else ''}")

  def _tenth(self, done):
    return (10 * done) // max(self.total, 1)

  def _write(self, text):
    self._stream.write(f"{self.desc}: {text}\n")
    self._stream.flush()

  def update(self, n):
    self.done += n
    now = time.perf_counter()
    if self._first:
      self._first = False
      self._write(f"first chunk done {now - self._start:.1f} s after the call")
      self._last_time, self._last_done = now, self.done
      return
    if self._tenth(self.done) >= self._next or self.done >= self.total:
      self._next = self._tenth(self.done) + 1
      rate = (self.done - self._last_done) / max(now - self._last_time, 1e-9)
      stats = "".join(f", {k} {v}" for k, v in self._postfix.items())
      self._write(f"{100 * self.done // max(self.total, 1)}% ({self.done}/{self.total}), "
                  f"{rate:.0f} it/s{stats}")
      self._last_time, self._last_done = now, self.done

  def set_postfix(self, ordered_dict=None, refresh=True, **kwargs):
    del refresh
    self._postfix = {**(ordered_dict or {}), **kwargs}

  def set_total(self, total):
    """The run's new length (an adaptive warmup ended early)."""
    self.total = total
    self._next = self._tenth(self.done) + 1

  def close(self):
    pass
