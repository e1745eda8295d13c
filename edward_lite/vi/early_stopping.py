"""Stopping ``ed.vi.train`` before its length: early stopping on a held-out
evaluation, and ``StopTraining`` raised by the user's ``evaluate(step)``.

``EarlyStopping(patience=p)`` watches one value of each evaluation (by
default the held-out ``elbo``, ``iwae`` for an IWAE run) and stops the run
after the ``p``-th evaluation in a row that did not improve on the best by
more than ``min_delta``; the weights of the best evaluation are then the
variables' (``restore_best``).  Its state -- the best value, its step, its
weights -- is part of the run's checkpoint, so a resumed run stops where the
uninterrupted one does, and a run that stopped returns at once when called
again with its checkpoint.
"""

import dataclasses
import math

from edward_lite.checks import arguments

__all__ = ["EarlyStopping", "StopTraining", "Tracker"]


class StopTraining(Exception):
  """Raise from ``evaluate(step)`` to end ``ed.vi.train`` after that step:
  the run saves its checkpoint and returns its result (``result.stopped``
  holds the step and the exception's message)."""


@dataclasses.dataclass(frozen=True)
class EarlyStopping:
  """Early stopping on the evaluations of ``ed.vi.train``'s ``evaluate=``.

  Attributes:
    patience: evaluations in a row without improvement that stop the run.
    monitor: the evaluation's value to watch; None: ``"iwae"`` for an IWAE
      objective, else ``"elbo"``.
    mode: ``"max"`` (the default: an ELBO, a log-likelihood) or ``"min"``
      (a loss your ``evaluate(step)`` returns).
    min_delta: the least change that counts as an improvement.
    restore_best: end with the best evaluation's weights (kept in host
      memory and in the checkpoint), not the last step's.
  """
  patience: int = 5
  monitor: object = None
  mode: str = "max"
  min_delta: float = 0.
  restore_best: bool = True

  def __post_init__(self):
    arguments.check_integer("EarlyStopping(patience=)", self.patience, 1)
    if self.mode not in ("max", "min"):
      raise ValueError(f"EarlyStopping(mode=) must be 'max' or 'min'; got {self.mode!r}.")
    if not (isinstance(self.min_delta, (int, float)) and math.isfinite(self.min_delta)
            and self.min_delta >= 0):
      raise ValueError(f"EarlyStopping(min_delta=) must be a number >= 0; got "
                       f"{self.min_delta!r}.")
    if self.monitor is not None and not isinstance(self.monitor, str):
      raise TypeError(f"EarlyStopping(monitor=) must name an evaluation's value; got "
                      f"{self.monitor!r}.")


class Tracker:
  """Early stopping's state over a run.

  Args:
    rule: an ``EarlyStopping`` (or None: only ``StopTraining`` stops).
    monitor: the value it watches (resolved).
    variables: the trained variables.
    stopping: the run's saved ``{"best", "stopped"}`` (a resumed run's), or {}.
    evaluations: the run's evaluations so far.
  """

  def __init__(self, rule, monitor, variables, stopping, evaluations):
    self.rule, self.monitor, self.variables = rule, monitor, variables
    self.state = stopping
    self.state.setdefault("best", None)
    self.state.setdefault("stopped", None)
    self.best_weights = [v.numpy() for v in variables] if self.keeps_weights else []
    self.evaluations = evaluations

  @property
  def keeps_weights(self):
    return self.rule is not None and self.rule.restore_best

  def update(self, step, values):
    """Records the evaluation ``values`` at ``step``; True if the run stops."""
    if self.rule is None:
      return False
    if self.monitor not in values:
      raise ValueError(f"EarlyStopping watches '{self.monitor}', which the evaluation does "
                       f"not give (it gives {sorted(values)}); set EarlyStopping(monitor=).")
    value, best = float(values[self.monitor]), self.state["best"]
    sign = 1. if self.rule.mode == "max" else -1.
    if best is None or sign * (value - best[self.monitor]) > self.rule.min_delta:
      self.state["best"] = {"step": step, self.monitor: value}
      if self.keeps_weights:
        self.best_weights = [v.numpy() for v in self.variables]
      return False
    since = sum(1 for e in self.evaluations if e["step"] > self.state["best"]["step"])
    if since < self.rule.patience:
      return False
    self.stop(step, f"early stopping: '{self.monitor}' did not improve for {since} "
              f"evaluations after step {self.state['best']['step']}")
    if self.keeps_weights:
      for v, w in zip(self.variables, self.best_weights):
        v.assign(w)
    return True

  def stop(self, step, reason):
    self.state["stopped"] = {"step": int(step), "reason": reason}

  @property
  def stopped(self):
    return self.state["stopped"] is not None

  def saved_weights(self):
    """The state's extra arrays: the best weights (restore_best), else none."""
    return list(self.best_weights)
