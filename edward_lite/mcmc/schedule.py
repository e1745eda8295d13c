"""The run as data: Stan's warmup windows and the phases the driver runs.

A run of ``warmup + draws`` iterations is a list of ``Phase`` records that
tile ``[0, warmup + draws)``; the driver cuts each phase into compiled
chunks and passes its flags to them as Tensors.  For 1000 warmup
iterations and the default adaptation:

    [0, 75)      initial fast window: every chain its own step size
    [75, 100)    slow window: metric moments collected, bulk step size  }
    [100, 150)   ...                                                    } metric
    [150, 250)                                                         } estimated
    [250, 450)                                                         } at each end
    [450, 950)                                                         }
    [950, 1000)  final fast window: bulk step size
    [1000, ...)  sampling: fixed step sizes and metric
"""

from typing import NamedTuple

__all__ = ["Phase", "warmup_windows", "build_schedule", "phase_at"]


class Phase(NamedTuple):
  """Iterations ``[start, end)`` run with the same flags."""
  start: int
  end: int
  warmup: bool      # adapting (step size, kernel); draws are not kept
  collect: bool     # the metric's moments are collected
  share: bool       # the bulk of the chains shares one step size
  end_window: bool  # the metric is estimated, and the step size restarted, at ``end``


def warmup_windows(num_warmup, init_buffer=75, term_buffer=50, base_window=25):
  """Stan's slow windows: ``(start, end)`` pairs (end exclusive) at whose
  ends the metric is updated and the step-size adaptation restarted.

  Windows double from ``base_window`` after ``init_buffer`` iterations and
  stop ``term_buffer`` before the end of warmup; a window after which the
  next would not fit is extended to the end.  When the buffers do not fit,
  they become 15% / 75% / 10% of warmup, as in Stan.  Empty when warmup is
  shorter than 20 iterations.
  """
  if num_warmup < 20:
    return []
  if init_buffer + base_window + term_buffer > num_warmup:
    init_buffer = int(0.15 * num_warmup)
    term_buffer = int(0.1 * num_warmup)
    base_window = num_warmup - init_buffer - term_buffer
  windows, start, size = [], init_buffer, base_window
  slow_end = num_warmup - term_buffer
  while start < slow_end:
    end = start + size
    if end + 2 * size > slow_end:  # the next window would not fit: extend
      end = slow_end
    windows.append((start, end))
    start, size = end, size * 2
  return windows


def build_schedule(warmup, draws, adapt_metric=True, bulk=False):
  """The phases of a run, in order, without empty ones.

  Args:
    warmup, draws: iteration counts.
    adapt_metric: whether the metric is adapted in Stan's windows; without
      it warmup is one phase.
    bulk: the default adaptation, whose bulk of chains shares one step size
      from the first slow window to the end of warmup (the initial fast
      window is every chain's own).  Only with metric windows.
  """
  windows = warmup_windows(warmup) if adapt_metric else []
  phases = []
  if windows:
    phases.append(Phase(0, windows[0][0], True, False, False, False))
    phases += [Phase(a, b, True, True, bulk, True) for a, b in windows]
    phases.append(Phase(windows[-1][1], warmup, True, False, bulk, False))
  else:
    phases.append(Phase(0, warmup, True, False, False, False))
  phases.append(Phase(warmup, warmup + draws, False, False, False, False))
  return [p for p in phases if p.end > p.start]


def phase_at(schedule, step):
  """The phase that holds iteration ``step``."""
  for phase in schedule:
    if phase.start <= step < phase.end:
      return phase
  raise ValueError(f"iteration {step} is outside the run [0, {schedule[-1].end}).")
