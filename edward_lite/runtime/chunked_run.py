"""The host loop of a run in compiled chunks, shared by ``ed.mcmc.sample``
and ``ed.vi.fit``.

A run advances ``total`` steps (transitions, optimizer steps) as a sequence
of compiled calls.  The caller's ``run_chunk(step)`` makes one such call from
``step`` and returns a ``ChunkOutcome``; between chunks this loop, in this
order,

1. adds the chunk's wall time to the run's ``timings`` (the keys the chunk
   names: its phase, and ``compile_s`` for a call that compiled);
2. advances the progress report (``progress_report``) with the chunk's
   statistics;
3. writes the chunk's ``ChunkRecord`` to the run's checkpoint, if any;
4. calls the user's ``callback(info)``;
5. stops early if the chunk says so (a converged fit).

The checkpoint comes before the callback, so a callback that interrupts
the run (``KeyboardInterrupt``) leaves the chunk it saw saved, and the
resumed run continues after it.
"""

import time
from typing import NamedTuple, Optional

from edward_lite.runtime.progress import make_progress

__all__ = ["ChunkRecord", "ChunkOutcome", "run_chunks"]


class ChunkRecord(NamedTuple):
  """What a checkpoint keeps after a chunk (``checkpoint.Checkpointer.save``).

  Attributes:
    state: list of arrays, the run's whole state after the chunk (replaces
      the previous one).
    arrays: dict ``name -> array`` that this chunk produced (draws, ELBO
      values, per-chain totals), or ``kind -> {name -> array}`` for arrays
      nested by kind (names and kinds without ``/``); every chunk's are
      kept, and a resumed run reads them back with each array replaced by
      ``[one array per chunk]``.
    scalars: JSON-able dict of the host's running values (counts, the first
      failure and its diagnosis); replaces the previous one.
  """
  state: list
  arrays: dict
  scalars: dict


class ChunkOutcome(NamedTuple):
  """What one compiled chunk did, for the host loop.

  Attributes:
    steps: steps the chunk completed (>= 1).
    timing: keys of the run's ``timings`` its wall time adds to.
    postfix: statistics for the progress report.
    record: the chunk's ``ChunkRecord`` (None: nothing to save).
    info: the user callback's argument.
    stop: end the run after this chunk.
    total: the run's new length in steps, when the chunk changed it (an
      adaptive warmup that ended early); None: unchanged.
  """
  steps: int
  timing: tuple
  postfix: dict
  record: Optional[ChunkRecord]
  info: dict
  stop: bool = False
  total: Optional[int] = None


def run_chunks(run_chunk, start, total, timings, *, progress, label, checkpointer=None,
               callback=None, setup=None):
  """Runs ``run_chunk(step) -> ChunkOutcome`` from ``start`` until ``total``
  steps are done or a chunk stops the run.

  Args:
    run_chunk: makes the compiled call for the steps from ``step``.
    start: the first step (a resumed run's saved step).
    total: the run's length in steps.
    timings: dict of seconds, updated in place.
    progress: ``progress.make_progress``'s setting.
    label: the progress report's name of the run (``"sampling"``).
    checkpointer: a ``checkpoint.Checkpointer`` or None.
    callback: None or the user's ``callback(info)``.
    setup: None or a function called once before the first chunk, after
      the progress report has said that compiling starts; its seconds count
      with the first chunk's (a sampler run's initial states, found while
      its first chunk compiles).

  Returns:
    The step reached.  A chunk may change ``total`` (``ChunkOutcome.total``).
  """
  bar = make_progress(progress, total, start, label)
  step = start
  try:
    setup_s = 0.  # counted with the first chunk
    if setup is not None:
      began = time.perf_counter()
      setup()
      setup_s = time.perf_counter() - began
    while step < total:
      began = time.perf_counter()
      outcome = run_chunk(step)
      elapsed, setup_s = time.perf_counter() - began + setup_s, 0.
      for key in outcome.timing:
        timings[key] += elapsed
      step += outcome.steps
      if outcome.total is not None:
        total = outcome.total
        if bar is not None:
          bar.set_total(total)
      if bar is not None:
        bar.set_postfix(outcome.postfix, refresh=False)
        bar.update(outcome.steps)
      if checkpointer is not None and outcome.record is not None:
        checkpointer.save(step, outcome.record)
      if callback is not None:
        callback(outcome.info)
      if outcome.stop:
        break
  finally:
    if bar is not None:
      bar.close()
  return step
