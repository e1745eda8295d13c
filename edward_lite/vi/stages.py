"""The stages of ``ed.vi.fit``: each an optimization of one surrogate.

A fit is a list of stages run in order on one ``Problem`` (the model, its
target and the source of its minibatches); a richer family starts with a
mean-field warm start whose location and scales initialise the next stage.
Each stage runs its compiled chunks (``elbo.run_chunk``) under the shared
host loop (``engine.run_chunks``): progress, checkpoints, the callback, and
the relative-ELBO-change stopping rule.  A step whose ELBO or gradient is
not finite is not applied; the first is diagnosed on its own draws and data
(``elbo_diagnosis.diagnose``), then the stage skips such steps or raises
``NonFiniteELBOError``.
"""

import dataclasses
from typing import Any, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from edward_lite.distribute.sharding import ShardedTarget
from edward_lite.runtime import console
from edward_lite.runtime.checkpoint import CheckpointMismatchError
from edward_lite.runtime.chunked_run import ChunkOutcome, ChunkRecord, run_chunks
from edward_lite.vi import elbo as elbo_lib
from edward_lite.vi.elbo_diagnosis import diagnose
from edward_lite.vi.minibatch import DatasetBatches

__all__ = ["NonFiniteELBOError", "Problem", "Stage", "StageResult", "run_stage"]


class NonFiniteELBOError(FloatingPointError):
  """The ELBO or its gradient became NaN or infinite (``on_nonfinite="stop"``)."""


class Problem(NamedTuple):
  """What every stage of a fit optimizes, and where it runs.

  Attributes:
    model: the edward_lite program (for a sharded target's replicas).
    target: its full-data ``Target``.
    batches: the minibatch source (``minibatch.Minibatcher`` or
      ``DatasetBatches``) or None for the full data at every step.
    seed: the fit's ``[2]`` int32 seed; step ``t`` draws with
      ``fold_in(seed, t)``.
    strategy, parallel: the ``tf.distribute`` strategy and its split, or None.
    jit_compile: compile the chunks with XLA.
  """
  model: Any
  target: Any
  batches: Any
  seed: tf.Tensor
  strategy: Any
  parallel: str
  jit_compile: bool


class Stage(NamedTuple):
  """One optimization: ``steps`` Adam (or the user's optimizer) steps of
  ``surrogate`` with ``samples`` draws each.

  Attributes:
    label: the progress report's name (``"fitting"``, ``"warm start"``).
    surrogate: a ``FlatSurrogate`` or ``ProgramSurrogate``.
    optimizer: a built Keras optimizer over ``surrogate.variables``.
    steps, samples, stl: the fit's settings of the same names.
    tol: the relative-ELBO-change stopping rule's tolerance, or None.
    on_nonfinite: ``"skip"`` or ``"stop"``.
    chunk: steps per compiled call.
    progress: ``progress.make_progress``'s setting.
    checkpointer: a ``Checkpointer`` or None.
    callback: the user's ``callback(info)`` or None.
  """
  label: str
  surrogate: Any
  optimizer: Any
  steps: int
  samples: int
  stl: bool
  tol: Optional[float]
  on_nonfinite: str
  chunk: int
  progress: Any
  checkpointer: Any = None
  callback: Any = None


class StageResult(NamedTuple):
  """``elbo[steps]`` (NaN at skipped steps), ``steps`` done, ``converged``
  by ``tol``, ``nonfinite`` (None or the skipped count, first step and its
  diagnosis) and ``timings`` (seconds, and steps per second after the
  compiling chunk)."""
  elbo: np.ndarray
  steps: int
  converged: bool
  nonfinite: Optional[dict]
  timings: dict


@dataclasses.dataclass
class _Trace:
  """The host's running record of a stage (what its checkpoint keeps)."""
  elbo: list = dataclasses.field(default_factory=list)  # one array per chunk
  skipped: int = 0
  first_bad: Optional[int] = None
  reason: Optional[str] = None

  def scalars(self):
    return dict(skipped=self.skipped, first_bad=self.first_bad, reason=self.reason)

  @classmethod
  def restored(cls, resumed):
    scalars = resumed["scalars"]
    return cls(list(resumed["arrays"].get("elbo", [])), int(scalars.get("skipped", 0)),
               scalars.get("first_bad"), scalars.get("reason"))


def restore(stage, resumed, batches, checkpoint_dir):
  """Loads a checkpoint (``Checkpointer.load``'s dict) into the stage's
  variables and positions a dataset's batch stream; returns its ``_Trace``."""
  state_vars = stage.surrogate.variables + list(stage.optimizer.variables)
  if [np.shape(a) for a in resumed["state"]] != [tuple(v.shape) for v in state_vars]:
    raise CheckpointMismatchError(
        f"The checkpoint in {checkpoint_dir} holds variational parameters of other shapes "
        "than this fit's; use another checkpoint_dir or delete it.")
  for variable, value in zip(state_vars, resumed["state"]):
    variable.assign(value)
  if isinstance(batches, DatasetBatches):
    batches.seek(resumed["step"])
  return _Trace.restored(resumed)


def run_stage(stage, problem, start=0, trace=None):
  """Runs ``stage`` from step ``start`` (a resumed stage's, with its
  ``trace``); returns a ``StageResult``."""
  surrogate, target, batches = stage.surrogate, problem.target, problem.batches
  seed, strategy = problem.seed, problem.strategy
  trace = trace or _Trace()
  # The model's log density of each step: on this device, or spread over the
  # replicas of a strategy (strategy.run cannot sit inside XLA; each
  # replica's part is compiled instead).
  step_target = target if strategy is None else ShardedTarget(
      target, strategy, problem.parallel, model=problem.model,
      jit_compile=problem.jit_compile, place_shards=batches is None)
  compiled = (batches is None or batches.compiled) and strategy is None
  train_step = elbo_lib.make_train_step(surrogate, step_target, batches, stage.optimizer, seed,
                                        stage.samples, stage.stl)
  if batches is not None and not batches.compiled:
    # The loop reads a dataset iterator: compile the step only.
    train_step = console.per_call_function(
        train_step, jit_compile=problem.jit_compile and strategy is None)
  run = console.first_call_quiet(console.per_call_function(
      lambda begin, n, stop_on_bad: elbo_lib.run_chunk(
          train_step, batches, seed, begin, n, stop_on_bad, stage.chunk, tf.float64),
      jit_compile=problem.jit_compile and compiled))
  state_vars = surrogate.variables + list(stage.optimizer.variables)
  first_chunk, previous, converged = None, None, False

  def run_chunk(step):
    nonlocal first_chunk, previous, converged
    n = min(stage.chunk, stage.steps - step)
    # Until the first non-finite step has been diagnosed, stop at it (with
    # the parameters and the data it saw); afterwards skip such steps in the loop.
    stop_on_bad = stage.on_nonfinite == "stop" or trace.reason is None
    values, done, bad_count, data = run(tf.constant(step), tf.constant(n),
                                        tf.constant(stop_on_bad))
    done, bad_count = int(done), int(bad_count)
    if bad_count and stop_on_bad:
      trace.first_bad = step + done
      bad_target = batches.target_for(target, data) if batches else target
      trace.reason = diagnose(surrogate, target, bad_target, seed, stage.samples, stage.stl,
                              trace.first_bad, problem.jit_compile and strategy is None)
      if stage.on_nonfinite == "stop":
        raise NonFiniteELBOError(
            f"Non-finite ELBO at step {trace.first_bad}: {trace.reason} The parameters are "
            "those before that step; lower the learning rate or check the model.")
      # The step was not applied: count it as skipped here and go on with the
      # next step (and, from a dataset, the next batch).
      done += 1
    timing = ("compile_s",) if first_chunk is None else ("train_s",)
    first_chunk = done if first_chunk is None else first_chunk
    values = values.numpy()[:done]
    trace.skipped += bad_count
    trace.elbo.append(values)
    mean = float(np.nanmean(values)) if np.isfinite(values).any() else np.nan
    stop = False
    if stage.tol is not None and previous is not None and np.isfinite(mean) and done == n:
      converged = stop = abs(mean - previous) / max(abs(mean), 1e-12) < stage.tol
    if done == n:
      previous = mean
    record = ChunkRecord(state=[v.numpy() for v in state_vars], arrays={"elbo": values},
                         scalars=trace.scalars()) if stage.checkpointer else None
    return ChunkOutcome(
        steps=done, timing=timing, record=record, stop=stop,
        postfix=dict(elbo=f"{mean:.4g}", skipped=trace.skipped),
        info=dict(step=step + done, elbo=mean, skipped=trace.skipped))

  timings = dict(compile_s=0., train_s=0.)
  step = run_chunks(run_chunk, start, stage.steps, timings, progress=stage.progress,
                    label=stage.label, checkpointer=stage.checkpointer, callback=stage.callback)
  # Steady state: the steps after the first (compiling) chunk.
  timings["steps_per_s"] = ((step - start - first_chunk) / timings["train_s"]
                            if timings["train_s"] else float("nan"))
  nonfinite = None
  if trace.skipped:
    nonfinite = dict(skipped=trace.skipped, first_step=trace.first_bad, reason=trace.reason)
  return StageResult(elbo=np.concatenate(trace.elbo) if trace.elbo else np.zeros([0]),
                     steps=step, converged=converged, nonfinite=nonfinite, timings=timings)
