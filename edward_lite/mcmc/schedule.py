"""The run as data: warmup windows and the phases the driver runs.

A run of ``warmup + draws`` iterations is a list of ``Phase`` records that
tile ``[0, warmup + draws)``; the driver cuts each phase into compiled
chunks and passes its flags to them as Tensors.  Two warmups:

**Short windows** (kernels with gradients; ``short_windows_schedule``), for
a warmup of at most 1000 iterations:

    [0, 10) [10, 20) ...     windows of 10 iterations, growing to a third
    ... [t, t + t/3) ...     of the iterations so far, at most 100: at each
                             end the metric is re-estimated from the draws
                             and gradients of that window and the previous
    [950, 1000)              final window: step size only
    [1000, ...)              sampling: fixed step sizes and metric

The step size's dual averaging restarts at the end of the first window (the
metric then leaves its start from the gradients).  With a low-rank or dense
metric it then runs on to the end of warmup, as nutpie's does; with a
diagonal one (asked for, or chosen because the curvature varies) it
restarts again for the final window, as Stan's does (``run.Run`` decides at
the marked restarts).  Restarted, a 50-iteration window ends with the
average step size small: on a Gaussian-like posterior that costs a third
longer trees (kidiq accepted 0.89 for a target of 0.8), where the curvature
varies it keeps the divergences down (the latent Poisson GP: 13 at 8
chains, 115 run on; RESULTS section 25).  An adaptive warmup (the default)
ends at the first window end from ``MIN_WARMUP`` on (``Phase.late``) at
which the metric has settled and the chains agree (``run.Run`` decides; it
also judges the curvature only at late window ends): the final window then
follows at once (``end_warmup``), so the run is shorter than ``warmup +
draws``.

**Stan's windows** (random-walk Metropolis; ``build_schedule``), 1000
iterations:

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

__all__ = ["Phase", "warmup_windows", "build_schedule", "short_windows_schedule",
           "end_warmup", "restarts_step_size", "phase_at", "warmup_length", "MIN_WARMUP",
           "FIRST_WINDOW", "MAX_WINDOW", "FINAL_WINDOW"]

FIRST_WINDOW = 10   # iterations of the first short window
MAX_WINDOW = 100    # the longest short window
SHARE_AFTER = 50    # the bulk shares one step size from the first window end after this
MIN_WARMUP = 100    # an adaptive warmup runs at least this many windowed iterations
FINAL_WINDOW = 50   # the final window of a warmup of 500 iterations or more


class Phase(NamedTuple):
  """Iterations ``[start, end)`` run with the same flags."""
  start: int
  end: int
  warmup: bool      # adapting (step size, kernel); draws are not kept
  collect: bool     # the metric's moments are collected
  share: bool       # the bulk of the chains shares one step size
  end_window: bool  # the metric is estimated at ``end``
  restart: bool = False   # the step size's dual averaging restarts at ``end``
  may_stop: bool = False  # an adaptive warmup may end at ``end``
  final: bool = False     # the final window starts at ``end`` (restarts_step_size)
  late: bool = False      # ends from MIN_WARMUP on: the chains had time to reach the posterior


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
  """Stan's windows: the phases of a run, in order, without empty ones.

  Args:
    warmup, draws: iteration counts.
    adapt_metric: whether the metric is adapted in Stan's windows; without
      it warmup is one phase.
    bulk: the default adaptation, whose bulk of chains shares one step size
      from the first slow window to the end of warmup (the initial fast
      window is every chain's own).  Only with metric windows.

  Windows ending from ``MIN_WARMUP`` on are ``late``: there warmup also
  moves chains in a mode of negligible mass (``restarts.far_below``), as in
  the short windows.  Without it, 582 of 10^5 random-walk chains started
  in a mode of a millionth of the mass sampled it (RESULTS section 57).
  """
  windows = warmup_windows(warmup) if adapt_metric else []
  phases = []
  if windows:
    phases.append(Phase(0, windows[0][0], True, False, False, False))
    phases += [Phase(a, b, True, True, bulk, True, restart=True, late=b >= MIN_WARMUP)
               for a, b in windows]
    phases.append(Phase(windows[-1][1], warmup, True, False, bulk, False))
  else:
    phases.append(Phase(0, warmup, True, False, False, False))
  phases.append(Phase(warmup, warmup + draws, False, False, False, False))
  return [p for p in phases if p.end > p.start]


def final_window(warmup):
  """The final window's length for a warmup of ``warmup`` iterations."""
  return min(FINAL_WINDOW, max(warmup // 10, 1)) if warmup >= 20 else 0


def short_windows_schedule(warmup, draws, adaptive=True, bulk=False):
  """Short windows (module docstring): the phases of a run of at most
  ``warmup`` warmup iterations.  ``adaptive`` marks the window ends from
  ``MIN_WARMUP`` on where the warmup may end; ``bulk`` as ``build_schedule``
  (the bulk shares a step size from the first window end after
  ``SHARE_AFTER``)."""
  final = final_window(warmup)
  slow_end = warmup - final
  phases, start, first = [], 0, True
  size_at = lambda t: min(max(FIRST_WINDOW, t // 3), MAX_WINDOW)  # pylint: disable=unnecessary-lambda-assignment
  while start < slow_end:
    end = start + size_at(start)
    if end + size_at(end) > slow_end:  # the next would not fit: extend
      end = slow_end
    last, late = end == slow_end, end >= min(MIN_WARMUP, slow_end)
    phases.append(Phase(start, end, True, True, bulk and start >= SHARE_AFTER, True,
                        restart=first, final=last, late=late,
                        may_stop=adaptive and not last and late))
    start, first = end, False
  phases.append(Phase(slow_end, warmup, True, False, bulk, False))
  phases.append(Phase(warmup, warmup + draws, False, False, False, False))
  return [p for p in phases if p.end > p.start]


def restarts_step_size(phase, metric_kind, stopping=False):
  """Whether the step size's dual averaging restarts at the end of ``phase``
  (a window; ``stopping``: an adaptive warmup ends there): where the phase
  says so, and where the final window starts only with a diagonal metric
  (``metric_kind == "diag"``; module docstring)."""
  return phase.restart or ((phase.final or stopping) and metric_kind == "diag")


def end_warmup(schedule, at, draws):
  """The schedule of a warmup that ends its windows at iteration ``at`` (a
  window end): the phases up to ``at``, then the final window and the
  sampling phase.  The whole warmup is ``at + final_window(...)``."""
  done = [p for p in schedule if p.end <= at]
  final = final_window(schedule[-1].start)
  share = any(p.share for p in done)
  return done + [p for p in (Phase(at, at + final, True, False, share, False),
                             Phase(at + final, at + final + draws, False, False, False, False))
                 if p.end > p.start]


def warmup_length(schedule):
  """The iterations of warmup in ``schedule``."""
  return sum(p.end - p.start for p in schedule if p.warmup)


def phase_at(schedule, step):
  """The phase that holds iteration ``step``."""
  for phase in schedule:
    if phase.start <= step < phase.end:
      return phase
  raise ValueError(f"iteration {step} is outside the run [0, {schedule[-1].end}).")
