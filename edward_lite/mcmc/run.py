"""One sampler run on the host: its state between compiled chunks.

A ``Run`` holds what ``ed.mcmc.sample`` carries from chunk to chunk: the
chains' ``ChunkState``, the schedule (shortened when an adaptive warmup
ends), the metric settings in use (a run may go on with the diagonal), the
per-chain totals of the run and of the current window, the kept draws, and
the counters of the metric's checks.  ``Run.run_chunk(step)`` makes one
compiled call and its bookkeeping, for ``chunked_run.run_chunks``; ``result``
builds the ``MCMCResult``.

A checkpoint holds, per chunk, its arrays nested by kind -- ``kept`` (the
chunk's draws ``[n, C, ...]`` by name), ``totals`` (its per-chain sums
``[C]`` by name), ``warmup`` and ``start`` -- and, replaced at every chunk,
the state and the scalars ``warmup_ended_at``, ``metric``,
``curvature_strikes`` and ``just_switched``; ``Run.begin`` rebuilds the run
from them: the totals are folded again chunk by chunk, and those of the
current window's chunks summed.
"""

import functools

import numpy as np
import tensorflow as tf

from edward_lite.runtime import seeds
from edward_lite.runtime.deprecation import RenamedKeys
from edward_lite.runtime.chunked_run import ChunkOutcome, ChunkRecord
from edward_lite.analysis.diagnostics import psrf_from_moments
from edward_lite.mcmc import (initial_states, metric, metric_update, restarts, run_check,
                              schedule, streaming)
from edward_lite.mcmc.chunk import ChunkInputs, ChunkState
from edward_lite.mcmc.kept_draws import KeptDraws, capacity, chunk_outputs, row_bytes
from edward_lite.mcmc.results import MCMCResult
from edward_lite.model.init_values import check_init

__all__ = ["Run", "AGREE_RHAT"]

# A first chunk run without XLA (compiled.Program.first_chunk_without_xla)
# holds at most this many transitions: the first window's length.
FIRST_CHUNK_MAX_TRANSITIONS = 10
AGREE_RHAT = 1.1  # an adaptive warmup ends only when the chains' log densities agree this well


class Run:
  """A sampler run between chunks (module docstring).

  Attributes:
    program: the ``compiled.Program``.
    settings: the completed ``settings.SampleSettings``.
    groups: ``groups.ChainGroups`` or None.
    saving: whether a checkpoint keeps each chunk (``ChunkRecord``).
    state: the chains' ``ChunkState``.
    start: the step the run starts (or resumes) from.
    schedule: the run's phases (``schedule``).
    adapt: the ``metric_update.MetricSettings`` in use.
    kept: the run's ``kept_draws.KeptDraws``.
    totals: ``{"warmup": {...}, "sampling": {...}}`` of per-chain totals
      (``fold_totals``), or None before the first chunk.
    window: the current window's per-chain totals (sums over its chunks).
    ended_at: the window end at which an adaptive warmup ended, or None.
    curvature_strikes: consecutive windows whose curvature varied
      (``metric_update.curvature_varies``).
    just_switched: the metric went diagonal at the last window end.
  """

  def __init__(self, program, settings, groups=None, saving=False):
    self.program, self.settings, self.groups = program, settings, groups
    self.saving = saving  # a checkpoint keeps each chunk's record
    self.seed = tf.constant(seeds.seed_pair(settings.seed), tf.int32)
    self.adapt = settings.metric
    if self.adapt.gradients and self.adapt.adapts:
      self.schedule = schedule.short_windows_schedule(
          settings.warmup, settings.draws, settings.adaptive_warmup, settings.pooling.bulk)
    else:
      self.schedule = schedule.build_schedule(settings.warmup, settings.draws,
                                              self.adapt.adapts, settings.pooling.bulk)
    # Whether any chunk collects the metric's moments (a static part of
    # the compiled chunk: ``chunk.run_chunk``); later schedules only shorten.
    self.collects = any(p.collect for p in self.schedule)
    self.state, self.start = None, 0
    self.kept = KeptDraws(-(-settings.draws // settings.thin) if settings.keep_draws else 0)
    self.totals, self.window = None, {}
    self.ended_at, self.curvature_strikes, self.just_switched = None, 0, False

  @classmethod
  def begin(cls, program, settings, groups=None, checkpointer=None):
    """The run from its checkpoint if ``checkpointer`` holds one, else a
    new run, whose initial states ``setup`` finds."""
    run = cls(program, settings, groups, saving=checkpointer is not None)
    resumed = checkpointer.load(lambda: tf.nest.flatten(run._state_template())) \
        if checkpointer else None
    if resumed is not None:
      run._restore(resumed)
    return run

  def setup(self):
    """A new run's initial states, step sizes and metric, found while its
    first chunk compiles (``_initialize_while_compiling``); nothing for a
    run resumed from a checkpoint.  ``chunked_run.run_chunks`` calls it
    before the first chunk and counts its seconds with that chunk's."""
    if self.state is None:
      self._initialize_while_compiling()

  @property
  def total(self):
    """The run's length in transitions."""
    return self.schedule[-1].end

  def _state_template(self):
    """A ``ChunkState`` of this run's structure, shapes and dtypes (what a
    checkpoint's state is packed into)."""
    s = self.settings
    return self.program.state_template(s.chains, s.pooling, self.adapt.rank)

  def _initialize(self):
    """The chains' initial states, step sizes and metric (a new run)."""
    s, program = self.settings, self.program
    u0 = initial_states.initial_state(program, s.init, s.chains, self.seed, s.init_radius,
                                      s.max_init_tries, s.superchains)
    h0 = s.step_size if s.step_size is not None else s.kernel.initial_step_size(
        program.target.dim)
    state = program.initial_chunk_state(
        tf.constant(u0), tf.constant(h0, s.float_dtype), s.chains, s.pooling, self.adapt.rank,
        tf.constant(-(-s.draws // streaming.NUM_BATCHES)))
    if self.adapt.gradients and self.adapt.adapts:
      start = metric_update.initial_metric(
          state.metric, program.value_and_gradient(state.u)[1], self.adapt)
      state = state._replace(metric=start, z=metric.to_z(state.u, start))
    self.state = state

  def _initialize_while_compiling(self):
    """``_initialize``, while the first chunk's program compiles on another
    thread (``Program.compile_chunk_during``): the initial states' search
    and the first metric overlap the compile, which is most of a small
    model's first seconds.  Runs as ``_initialize`` alone where the first
    call would not reuse what compiled: chain groups, replicas, or a
    program compiled before."""
    program = self.program
    if self.groups or program.compiled or program.density is not program.target:
      self._initialize()
      return
    # The user's init= (names, shapes, values) is checked first: an error
    # raised by the initialization would otherwise wait for the compile.
    check_init(program.target, self.settings.init, self.settings.chains)
    template = self._state_template()
    step0 = self._inputs(template, 0, 0)  # no transition: the run only compiles
    program.compile_chunk_during(self._initialize, template, step0, self._capacity(),
                                 self.collects)

  def _restore(self, resumed):
    """The run at a checkpoint (``Checkpointer.load``'s dict)."""
    step, arrays, scalars = resumed["step"], resumed["arrays"], resumed["scalars"]
    self.start = step
    self.state = ChunkState(*tf.nest.pack_sequence_as(
        self._state_template(), [tf.constant(x) for x in resumed["state"]]))
    self.ended_at = scalars.get("warmup_ended_at")
    self.adapt = self.adapt._replace(kind=scalars.get("metric", self.adapt.kind))
    self.curvature_strikes = scalars.get("curvature_strikes", 0)
    self.just_switched = scalars.get("just_switched", False)
    if self.ended_at is not None:
      self.schedule = schedule.end_warmup(self.schedule, self.ended_at, self.settings.draws)
    kept = arrays.get("kept", {})  # name -> the chunks' arrays
    for chunk in zip(*kept.values()):
      self.kept.append(dict(zip(kept, chunk)))
    window_start = schedule.phase_at(self.schedule, step).start if step < self.total else step
    totals = arrays["totals"]
    for i, in_warmup in enumerate(arrays["warmup"]):
      chunk_totals = {k: v[i] for k, v in totals.items()}
      self.totals = fold_totals(self.totals, chunk_totals, bool(in_warmup))
      if arrays["start"][i] >= window_start:  # the current window's chunks so far
        self.window = ({k: self.window[k] + v for k, v in chunk_totals.items()} if self.window
                       else chunk_totals)

  # -- one chunk ------------------------------------------------------------------

  def run_chunk(self, step):
    """The compiled chunk from transition ``step``, then the host's
    bookkeeping: kept draws and totals, the metric at a window's end, and
    the end of an adaptive warmup.  Returns a ``ChunkOutcome``."""
    s = self.settings
    phase = schedule.phase_at(self.schedule, step)
    run_warmup = schedule.warmup_length(self.schedule)
    in_warmup = phase.warmup
    n = min(step + s.chunk_size * (1 if in_warmup or not s.keep_draws else s.thin),
            phase.end) - step
    if step == 0 and self.program.first_chunk_without_xla:
      # Run op by op while XLA compiles, the first chunk is cut short: a
      # run without warmup would otherwise take its first 200 draws op by
      # op (270 s for a deep-tree run XLA samples in seconds).
      n = min(n, FIRST_CHUNK_MAX_TRANSITIONS)
    first_call = not self.program.compiled
    inputs = self._inputs(self.state, step, n)
    capacity = self._capacity()
    n_kept = -(-n // s.thin) if not in_warmup and s.keep_draws else 0
    if self.groups:
      self.state, out = self.groups.run_chunk(
          functools.partial(self.program.run_chunk, collects=self.collects, first=step == 0),
          self.state, inputs, capacity, n_kept)
    else:
      self.state, out = self.program.run_chunk(self.state, inputs, capacity, self.collects,
                                               first=step == 0)
      out = chunk_outputs(out, n_kept)
    kept = self.kept.append(out["kept"])  # the rows written, for the checkpoint
    # Per-chain totals are folded chunk by chunk: constant memory without draws.
    self.totals = fold_totals(self.totals, out["totals"], in_warmup)
    self.window = out["totals"] if step == phase.start else {
        k: self.window[k] + v for k, v in out["totals"].items()}
    end = step + n
    new_total = None
    if phase.end_window and end == phase.end and self._end_window(phase, end):
      new_total = self.total
      run_warmup = schedule.warmup_length(self.schedule)
    if end == run_warmup:
      self.state = self.state._replace(
          kernel_adapt=s.kernel.finalize_adaptation(self.state.kernel_adapt))
    step_size = step_size_in_use(self.state, end >= run_warmup)
    return ChunkOutcome(
        steps=n, record=self._record(step, in_warmup, kept, out["totals"]), total=new_total,
        # Until a compiled call returns, a chunk's time is the compile's and its run's.
        timing=("compile_s",) * first_call + ("warmup_s" if in_warmup else "sampling_s",),
        postfix=_postfix(out, self.totals, in_warmup, step_size, n),
        info=RenamedKeys(step=end, total=self.total, warmup=in_warmup, step_size=step_size,
                         divergences=int(np.sum(out["totals"]["diverging"])),
                         num_gradients=out["totals"]["n_grads"],
                         renamed={"gradients": "num_gradients"}))

  def _inputs(self, state, step, n):
    """The ``ChunkInputs`` of ``n`` transitions from ``step`` (in one phase)."""
    s = self.settings
    phase = schedule.phase_at(self.schedule, step)
    in_warmup = phase.warmup
    return ChunkInputs(
        final_step=tf.exp(state.dual_avg.log_step_bar), seed=self.seed,
        start=tf.constant(step), n=tf.constant(n),
        adapt_step=tf.constant(in_warmup and s.kernel.adapts_step_size),
        share=tf.constant(phase.share), collect=tf.constant(phase.collect),
        sampling=tf.constant(not in_warmup), keep=tf.constant(not in_warmup and s.keep_draws),
        thin=tf.constant(s.thin), target_accept=tf.constant(s.target_accept, s.float_dtype),
        split_at=tf.constant(schedule.warmup_length(self.schedule) + s.draws // 2))

  def _capacity(self):
    """Draws kept per sampling chunk (``kept_draws.capacity``); 0 without
    kept draws."""
    s, target = self.settings, self.program.target
    if not s.keep_draws:
      return 0
    return capacity(s.chains, s.draws, s.thin, s.chunk_size,
                    row_bytes(target.constrained_dim, target.dtype, s.kernel))

  def _end_window(self, phase, end):
    """At the end of a window (``phase``, at transition ``end``): moves
    stuck chains, re-estimates the metric (going diagonal after
    ``metric_update.CURVATURE_STRIKES`` windows whose curvature varied) and
    ends an adaptive warmup where the metric has settled and the chains
    agree.  Returns whether the warmup ended."""
    state, adapt, window = self.state, self.adapt, self.window
    stuck = restarts.stuck_chains(window, end - phase.start,
                                  state.moments.draws if phase.late else None)
    if stuck.any():
      state = restarts.move_chains(state, stuck, seeds.seed_pair(self.settings.seed), end)
    state, window_end = metric_update.end_window(
        state, adapt, restart=schedule.restarts_step_size(phase, adapt.kind))
    agree = _chains_agree(window, end - phase.start)
    varies = agree and phase.late and metric_update.curvature_varies(window_end)
    self.curvature_strikes = self.curvature_strikes + 1 if varies else 0
    if self.just_switched:  # a window under the diagonal metric before warmup may end
      window_end, self.just_switched = window_end._replace(settled=False), False
    if self.curvature_strikes >= metric_update.CURVATURE_STRIKES:
      state, adapt = metric_update.diagonal(state), adapt._replace(kind="diag")
      state = metric_update.restart_step_size(state)
      window_end, self.just_switched = window_end._replace(settled=False), True
    ended = phase.may_stop and window_end.settled and agree and not varies
    if ended:
      if schedule.restarts_step_size(phase, adapt.kind, stopping=True):
        state = metric_update.restart_step_size(state)
      self.schedule = schedule.end_warmup(self.schedule, end, self.settings.draws)
      self.ended_at = end
    self.state, self.adapt = state, adapt
    return ended

  def _record(self, step, in_warmup, kept, totals):
    """The checkpoint's ``ChunkRecord`` of the chunk from ``step`` (None
    without a checkpoint)."""
    if not self.saving:
      return None
    return ChunkRecord(
        state=[t.numpy() for t in tf.nest.flatten(self.state)],
        arrays={"kept": kept, "totals": totals, "warmup": np.asarray(in_warmup),
                "start": np.asarray(step)},
        scalars={"warmup_ended_at": self.ended_at, "metric": self.adapt.kind,
                 "curvature_strikes": self.curvature_strikes,
                 "just_switched": self.just_switched})

  # -- the end --------------------------------------------------------------------

  def result(self, timings):
    """Checks the finished run (``run_check``) and returns its ``MCMCResult``."""
    s, warmup = self.settings, schedule.warmup_length(self.schedule)
    run_check.check_run(self.program, self.state, step_size_in_use(self.state, True),
                        self.totals["sampling"] if self.totals else None, self.total - warmup)
    return MCMCResult.build(self.program.target, s.kernel, self.kept.arrays(), self.totals,
                            self.state,
                            warmup=warmup, timings=timings, **s.result_settings())


def step_size_in_use(state, sampling):
  """The chains' step sizes ``[1 or C]``: the dual-averaging iterate in
  warmup, its average (what sampling uses) after."""
  log_step = state.dual_avg.log_step_bar if sampling else state.dual_avg.log_step
  return np.exp(log_step.numpy()).reshape(-1)


def _chains_agree(window, n):
  """Whether the chains' log densities over a window of ``n`` iterations
  (per-chain sums ``log_prob`` and ``log_prob_sq``) agree: their R-hat
  (``psrf_from_moments``) below ``AGREE_RHAT``, so no chain is still
  arriving or stuck where the others are not."""
  if window["log_prob"].shape[0] < 2:
    return True
  with np.errstate(invalid="ignore", over="ignore"):  # a chain at -inf: no agreement
    mean = window["log_prob"] / n
    var = np.maximum(window["log_prob_sq"] / n - mean**2, 0.) * n / max(n - 1, 1)
  rhat = float(psrf_from_moments(mean[None], var[None], n).numpy()[0])
  return np.isfinite(rhat) and rhat < AGREE_RHAT


def fold_totals(totals, chunk, in_warmup):
  """Adds one chunk's per-chain totals (dict name -> ``[chains]``) to the
  run's, by phase: ``{"warmup": {...}, "sampling": {...}}`` (None: start).
  Memory stays constant in the number of chunks.  Floating totals are
  float64: a float32 running total of 10^5-10^6 one-transition chunks
  drifts (a chunk's sum is short, and summed in the draws' dtype)."""
  if totals is None:
    totals = {phase: {k: np.zeros(np.shape(v), _total_dtype(v)) for k, v in chunk.items()}
              for phase in ("warmup", "sampling")}
  phase = totals["warmup" if in_warmup else "sampling"]
  # A chain whose log density overflowed has an inf (or, summed with an inf
  # of the other sign, NaN) total: kept as such, without NumPy's warning.
  with np.errstate(invalid="ignore", over="ignore"):
    for key, value in chunk.items():
      phase[key] = phase[key] + value
  return totals


def _total_dtype(value):
  dtype = np.asarray(value).dtype
  return np.float64 if dtype.kind == "f" else dtype


def _postfix(out, totals, in_warmup, step_size, n):
  """The progress line's statistics: the phase, the step size, the mean
  acceptance of the last chunk, and the divergent transitions so far (in
  warmup while it runs; after it, those of sampling and, apart, warmup's)."""
  def count(phase):
    return int(np.sum(totals[phase]["diverging"]))

  stats = dict(phase="warmup" if in_warmup else "sampling",
               step_size=f"{float(np.mean(step_size)):.3g}",
               accept=f"{np.mean(out['totals']['accept_prob']) / n:.2f}")
  if in_warmup:
    return dict(stats, divergent_so_far=count("warmup"))
  return dict(stats, divergent_so_far=count("sampling"), divergent_in_warmup=count("warmup"))
