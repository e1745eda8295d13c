"""``ed.mcmc.sample``: the driver of a vectorized MCMC run.

The run is built from layers, each its own module:

* ``schedule``: the run as data -- Stan's warmup windows and the phases
  (initial fast window, slow windows, final fast window, sampling) with
  their flags;
* ``compiled``: the model's target and its compiled functions, cached by
  content across calls; ``initial_states``: the chains' starting states;
* ``chunk``: one compiled ``tf.while_loop`` of ``n`` transitions of every
  chain (the kernel's step, step-size and metric adaptation, streaming
  statistics, kept draws), its settings Tensors in ``ChunkInputs``, so one
  program serves warmup and sampling, all chunks and all seeds;
* ``metric``: the preconditioning, re-estimated at the end of each slow
  window; ``adaptation``: dual averaging and Welford moments.

This module checks the call and cuts each phase into chunks, re-estimating
the metric at the end of each slow window; the host loop shared with
``ed.vi.fit`` (``engine.run_chunks``) runs them, with progress, checkpoints
and the callback.

The random stream is stateless: transition ``t`` uses the seed
``fold_in(seed, t)``, so a run does not depend on how it is cut into chunks
and a resumed run equals an uninterrupted one.  With 32 chains or more
NUTS samples in *rounds*: after warmup each chain runs up to 32 transitions
in a row without waiting for the others (``NUTS.run_rounds``), a round
ending with its chunk, so those draws depend on the chunk size too (resuming
cuts the same chunks).  With 256 chains or more warmup runs in rounds of 4,
the step size adapting once per round, so the warmup depends on it as well.
"""

import collections

import numpy as np
import tensorflow as tf

from edward_lite.distribute.sharding import PARALLEL_MODES
from edward_lite.distribute.strategies import resolve
from edward_lite.checks import arguments
from edward_lite.runtime import seeds
from edward_lite.runtime.deprecation import RenamedKeys
from edward_lite.runtime.checkpoint import Checkpointer, closes_checkpoints
from edward_lite.runtime.chunked_run import ChunkOutcome, ChunkRecord, run_chunks
from edward_lite.model.init_values import describe_init
from edward_lite.analysis.diagnostics import psrf_from_moments
from edward_lite.mcmc import (initial_states, metric, metric_update, restarts, run_check, schedule,
                              streaming)
from edward_lite.mcmc.chunk import ChunkInputs, ChunkState
from edward_lite.mcmc.groups import ChainGroups
from edward_lite.mcmc.kernels import get_kernel
from edward_lite.mcmc.compiled import Program
from edward_lite.mcmc.results import MCMCResult

__all__ = ["sample"]

DEFAULT_CHUNK = 200  # transitions per compiled call between host updates


@closes_checkpoints
def sample(model, *args, observed=None, kernel="nuts", chains=4, warmup=1000, draws=1000,
           seed=0, thin=1, keep_draws=True, init="uniform", init_radius=2.,
           step_size=None, adapt_metric=True, adaptive_warmup=True, pooled=None, chunk_size=None,
           progress=True, checkpoint_dir=None, max_init_tries=100, callback=None,
           strategy=None, parallel="data", jit_compile=True, dtype=None, **kwargs):
  """Samples the posterior of ``model(*args, **kwargs)`` given ``observed``.

  Args:
    model: an edward_lite program, or a prebuilt ``Target`` (e.g.
      ``ed.sbc``'s ``SimulationTarget``), which then carries the arguments,
      data and dtype and is compiled afresh (never cached).
    *args, **kwargs: its arguments (keywords not listed here go to ``model``).
    observed: dict name -> observed value.
    kernel: ``"nuts"``, ``"hmc"``, ``"rwmh"``, ``"chees"`` or a kernel object
      (``ed.mcmc.NUTS(max_tree_depth=8)``, ``ed.mcmc.HMC(num_leapfrog_steps=32,
      jitter=True)``, ``ed.mcmc.RWMH(scale=0.1, adapt=False)``, ...).
    chains: number of chains ``C``, advanced together as a batch.
    warmup: adaptation iterations (discarded); with ``adaptive_warmup`` the
      most there will be.
    draws: iterations kept per chain after warmup (before thinning).
    seed: integer seed; every random choice derives from it.
    thin: keep every ``thin``-th draw.
    keep_draws: keep draws (``[draws, chains, ...]`` per variable); with
      False only streaming statistics are kept, in constant memory: per-chain
      moments of each half of the run (mean, sd, split R-hat) and batch
      means (ESS and MCSE of the mean); see ``ed.mcmc.streaming``.
    init: ``"uniform"`` (uniform(-init_radius, init_radius) on the
      unconstrained space, as Stan), ``"prior"`` (draws from the prior), a
      dict ``name -> constrained value``
      (broadcast to all chains) or an array ``[C, D]`` of unconstrained states.
    step_size: initial step size (proposal scale for RWMH).
    adapt_metric: the metric warmup adapts (``metric_update``).  ``True``
      (default): for kernels with gradients, a low-rank-plus-diagonal metric
      estimated from the draws and the gradients (nutpie's), re-estimated
      in short windows (``schedule``), or a diagonal one when ``D`` is over
      1000 or the ``[chains, D, D]`` moments would be too large; for
      random-walk Metropolis a diagonal from the draws in Stan's windows.
      ``"low_rank"``, ``"diag"`` or ``"dense"`` (every direction; for a
      strongly correlated posterior of moderate dimension) choose; ``False``
      keeps the identity.
    adaptive_warmup: end warmup as soon as the metric has settled and the
      chains agree (from 100 iterations, then a final step-size window of
      up to 50), instead of always running ``warmup`` iterations; kernels
      with gradients only.  The result's ``warmup`` is the warmup run.
    pooled: how warmup adaptation is shared between chains.  ``None``
      (default): in the initial fast window every chain adapts its own step
      size, so each can leave a bad start; from then to the end of warmup
      the chains whose recent acceptance is near the median chain's (the
      bulk) share one step size (dual averaging on the harmonic mean of
      their acceptance), and a chain that rejects far more than the bulk
      adapts its own until it rejoins (``adaptation.step_size_update``);
      one metric is estimated from all chains.  ``False``: per-chain step
      size and (for a diagonal metric) metric (Stan's and NumPyro's scheme).  ``"metric"``: per-chain step
      sizes, one metric.  ``True``: one step size (tuned to the mean
      acceptance over chains) and one metric from the start; a chain that
      starts where the density is very steep can then stay stuck there (the
      summary warns about stuck chains).
    chunk_size: transitions per compiled call between host updates
      (progress, checkpoints); default 200.  With kept draws a sampling
      chunk holds ``chunk_size`` kept draws.  NUTS with 32 chains or more
      samples in rounds that end with the chunk, so its draws depend on
      ``chunk_size`` as well as ``seed``.
    progress: report progress (``edward_lite.runtime.progress``): a tqdm
      bar on a terminal, else plain lines (compiling, then every 10%); False
      is silent.
    checkpoint_dir: directory for checkpoints; an interrupted run resumes
      from it when called again with the same arguments.
    max_init_tries: redraws of chains whose initial log density is not finite.
    callback: optional ``callback(info)`` called on the host after every
      chunk (after its checkpoint) with a dict: ``step``, ``total``,
      ``warmup`` (bool), ``step_size``, ``divergences`` (in the chunk),
      ``num_gradients`` (per chain, in the chunk; ``"gradients"``, the key
      in 0.1, still reads it, with a warning).
    strategy: a ``tf.distribute.Strategy`` (or a name for
      ``ed.distribute.strategy``) to spread the log-density evaluations over
      its replicas; the sampler's own arithmetic stays one program on the
      host, which then runs without XLA (each replica's part is compiled).
    parallel: with ``strategy``: ``"data"`` shards the observations across
      the replicas (all-reduced sums; the prior counted once) or
      ``"chains"`` gives each replica a block of ``chains / R`` chains.
      Either way a seed gives the same draws on any number of replicas, up
      to float round-off (and the same as ``jit_compile=False`` on one
      device: XLA draws other stateless random numbers).
      ``"chain_groups"`` runs the whole compiled sampler on each device (GPUs
      or logical CPUs, not TPUs) for its block of ``chains / R`` chains, the
      blocks in parallel with no communication inside a chunk -- the fast
      choice for many chains of a cheap density; pooled adaptation is
      averaged over the blocks between chunks, and a seed gives the same
      draws for a fixed number of devices (``ed.mcmc.groups``).
    jit_compile: compile with XLA (default): the whole sampler, or with a
      strategy each replica's part.
    dtype: the model's floating dtype (default float32); ``tf.float64`` runs
      the model and the sampler in double precision (``ed.make_target``).

  Returns:
    An ``MCMCResult``.
  """
  arguments.check_model_kwargs(model, kwargs, sample, "ed.mcmc.sample")
  settings = _check_settings(chains, warmup, draws, seed, thin, chunk_size, init_radius,
                             max_init_tries, step_size)
  arguments.check_call_settings(observed=observed, keep_draws=keep_draws, callback=callback,
                                jit_compile=jit_compile)
  if adapt_metric is not True and adapt_metric is not False and \
      adapt_metric not in metric_update.KINDS:
    raise ValueError(f"adapt_metric must be True, False, 'diag', 'low_rank' or 'dense'; got "
                     f"{adapt_metric!r}.")
  if not isinstance(adaptive_warmup, bool):
    raise ValueError(f"adaptive_warmup must be True or False; got {adaptive_warmup!r}.")
  kernel = get_kernel(kernel)
  pooling = _pooling(pooled, kernel)
  if parallel not in PARALLEL_MODES:
    raise ValueError(f"parallel must be 'data', 'chains' or 'chain_groups'; got {parallel!r}.")
  groups = None
  if parallel == "chain_groups":
    groups = _chain_groups(strategy, chains, pooling)
    program = Program.get(model, args, kwargs, observed, kernel, chains // groups.size, pooling,
                          jit_compile=jit_compile, dtype=dtype)
  else:
    program = Program.get(model, args, kwargs, observed, kernel, chains, pooling,
                          strategy, parallel, jit_compile, dtype)
  target = program.target
  dtype = target.dtype.as_numpy_dtype
  dim = target.dim
  target_accept = kernel.default_target_accept(dim)
  adapt = metric_update.metric_settings(adapt_metric, kernel, dim,
                                        chains // groups.size if groups else chains, pooling[1])
  pooling = (pooling[0], adapt.pooled)
  bulk = pooling[0] == "bulk"
  if adapt.gradients and adapt.adapts:
    run_schedule = schedule.short_windows_schedule(warmup, draws, adaptive_warmup, bulk)
  else:
    run_schedule = schedule.build_schedule(warmup, draws, adapt.adapts, bulk)
  chunk = settings["chunk_size"] or DEFAULT_CHUNK
  capacity = chunk if keep_draws else 0  # draws kept per sampling chunk
  seed_t = tf.constant(seeds.seed_pair(seed), tf.int32)

  ckpt = Checkpointer(checkpoint_dir, program.fingerprint, dict(
      kernel=kernel.settings(), chains=chains, warmup=warmup, draws=draws, seed=seed,
      thin=thin, keep_draws=keep_draws, adapt_metric=adapt_metric,
      adaptive_warmup=adaptive_warmup, pooled=pooling,
      dtype=str(dtype),
      init=describe_init(init), step_size=step_size, chunk_size=chunk,
      jit_compile=bool(jit_compile),
      **({"chain_groups": groups.size} if groups else {}))) if checkpoint_dir else None
  resumed = ckpt.load(lambda: tf.nest.flatten(program.state_template(
      chains, pooling, adapt.rank))) if ckpt else None

  window = {}  # the current window's per-chain totals (sums over its chunks)
  ended_at = None  # the window end at which an adaptive warmup ended
  curvature_strikes = 0  # consecutive windows whose curvature varied (metric_update)
  just_switched = False  # the metric went diagonal at the last window end
  if resumed is not None:
    state, step = resumed["state"], resumed["step"]
    state = ChunkState(*tf.nest.pack_sequence_as(
        program.state_template(chains, pooling, adapt.rank), [tf.constant(x) for x in state]))
    ended_at = resumed["scalars"].get("warmup_ended_at")
    adapt = adapt._replace(kind=resumed["scalars"].get("metric", adapt.kind))
    curvature_strikes = resumed["scalars"].get("curvature_strikes", 0)
    just_switched = resumed["scalars"].get("just_switched", False)
    if ended_at is not None:
      run_schedule = schedule.end_warmup(run_schedule, ended_at, draws)
    chunks = resumed["arrays"]
    kept = {k: list(v) for k, v in chunks.items() if not k.startswith("_")}
    totals = None
    window_start = (schedule.phase_at(run_schedule, step).start if step < run_schedule[-1].end
                    else step)
    for i, in_warmup in enumerate(chunks["_warmup"]):
      chunk_totals = {k[1:]: v[i] for k, v in chunks.items()
                      if k.startswith("_") and k not in ("_warmup", "_start")}
      totals = _fold_totals(totals, chunk_totals, bool(in_warmup))
      if chunks["_start"][i] >= window_start:  # the current window's chunks so far
        window = {k: window[k] + v for k, v in chunk_totals.items()} if window else chunk_totals
  else:
    u0 = initial_states.initial_state(program, init, chains, seed_t, init_radius, max_init_tries)
    h0 = step_size if step_size is not None else kernel.initial_step_size(dim)
    state = program.initial_chunk_state(tf.constant(u0), tf.constant(h0, dtype), chains,
                                        pooling, adapt.rank,
                                        tf.constant(-(-draws // streaming.NUM_BATCHES)))
    if adapt.gradients and adapt.adapts:
      start = metric_update.initial_metric(
          state.metric, program.value_and_gradient(state.u)[1], adapt)
      state = state._replace(metric=start, z=metric.to_z(state.u, start))
    step = 0
    kept, totals = collections.defaultdict(list), None

  adapt_step = kernel.adapts_step_size

  def run_chunk(step):
    """The compiled chunk from transition ``step``, then the host's
    bookkeeping: kept draws and totals, the metric at a window's end, and
    the end of an adaptive warmup."""
    nonlocal state, totals, run_schedule, ended_at, window, adapt, curvature_strikes, just_switched
    phase = schedule.phase_at(run_schedule, step)
    run_warmup = schedule.warmup_length(run_schedule)
    in_warmup = phase.warmup
    n = min(step + chunk * (1 if in_warmup or not keep_draws else thin), phase.end) - step
    first_call = not program.compiled
    inputs = ChunkInputs(
        final_step=tf.exp(state.dual_avg.log_step_bar), seed=seed_t, start=tf.constant(step),
        n=tf.constant(n), adapt_step=tf.constant(in_warmup and adapt_step),
        share=tf.constant(phase.share), collect=tf.constant(phase.collect),
        sampling=tf.constant(not in_warmup), keep=tf.constant(not in_warmup and keep_draws),
        thin=tf.constant(thin), target_accept=tf.constant(target_accept, dtype),
        split_at=tf.constant(run_warmup + draws // 2))
    if groups:
      state, out = groups.run_chunk(program.run_chunk, state, inputs, capacity)
    else:
      state, out = program.run_chunk(state, inputs, capacity)
      out = tf.nest.map_structure(lambda t: t.numpy(), out)
    program.compiled = True
    n_kept = -(-n // thin) if not in_warmup and keep_draws else 0
    out["kept"] = {key: value[:n_kept] for key, value in out["kept"].items()}
    for key, value in out["kept"].items() if n_kept else ():
      kept.setdefault(key, []).append(value)
    # Per-chain totals are folded chunk by chunk: constant memory without draws.
    totals = _fold_totals(totals, out["totals"], in_warmup)
    window = out["totals"] if step == phase.start else {
        k: window[k] + v for k, v in out["totals"].items()}
    end = step + n
    new_total = None
    if phase.end_window and end == phase.end:
      stuck = restarts.stuck_chains(window, end - phase.start,
                                    state.moments.draws if phase.late else None)
      if stuck.any():
        state = restarts.move_chains(state, stuck, seeds.seed_pair(seed), end)
      state, window_end = metric_update.end_window(
          state, adapt, restart=schedule.restarts_step_size(phase, adapt.kind))
      agree = _chains_agree(window, end - phase.start)
      varies = agree and phase.late and metric_update.curvature_varies(window_end)
      curvature_strikes = curvature_strikes + 1 if varies else 0
      if just_switched:  # a window under the diagonal metric before warmup may end
        window_end, just_switched = window_end._replace(settled=False), False
      if curvature_strikes >= metric_update.CURVATURE_STRIKES:
        state, adapt = metric_update.diagonal(state), adapt._replace(kind="diag")
        state = metric_update.restart_step_size(state)
        window_end, just_switched = window_end._replace(settled=False), True
      if phase.may_stop and window_end.settled and agree and not varies:
        if schedule.restarts_step_size(phase, adapt.kind, stopping=True):
          state = metric_update.restart_step_size(state)
        run_schedule, ended_at = schedule.end_warmup(run_schedule, end, draws), end
        new_total = run_schedule[-1].end
        run_warmup = schedule.warmup_length(run_schedule)
    if end == run_warmup:
      state = state._replace(kernel_adapt=kernel.finalize_adaptation(state.kernel_adapt))
    step_size = _step_size_in_use(state, end >= run_warmup)
    record = ChunkRecord(
        state=[t.numpy() for t in tf.nest.flatten(state)],
        arrays={**out["kept"], **{"_" + k: v for k, v in out["totals"].items()},
                "_warmup": np.asarray(in_warmup), "_start": np.asarray(step)},
        scalars={"warmup_ended_at": ended_at, "metric": adapt.kind,
                 "curvature_strikes": curvature_strikes,
                 "just_switched": just_switched}) if ckpt else None
    return ChunkOutcome(
        steps=n, record=record, total=new_total,
        # The first call's time is its compile and its run.
        timing=("compile_s",) * first_call + ("warmup_s" if in_warmup else "sampling_s",),
        postfix=_postfix(out, totals, in_warmup, step_size, n),
        info=RenamedKeys(step=end, total=run_schedule[-1].end, warmup=in_warmup,
                         step_size=step_size,
                         divergences=int(np.sum(out["totals"]["diverging"])),
                         num_gradients=out["totals"]["n_grads"],
                         renamed={"gradients": "num_gradients"}))

  timings = dict(compile_s=0., warmup_s=0., sampling_s=0.)
  run_chunks(run_chunk, step, run_schedule[-1].end, timings, progress=progress,
             label="sampling", checkpointer=ckpt, callback=callback)
  run_check.check_run(program, state, _step_size_in_use(state, True),
                      totals["sampling"] if totals else None,
                      run_schedule[-1].end - schedule.warmup_length(run_schedule))
  return MCMCResult.build(target, kernel, kept, totals, state, chains=chains,
                          warmup=schedule.warmup_length(run_schedule), draws=draws, thin=thin,
                          keep_draws=keep_draws, timings=timings, seed=seed)


def _pooling(pooled, kernel):
  """``(pool_step, pool_metric)``: whether the step size and the metric are
  one for all chains, from ``sample``'s ``pooled=`` setting (a low-rank or
  dense metric is one for all chains whatever it says)."""
  if pooled is None:
    return "bulk", True
  if isinstance(pooled, str) and pooled == "metric":
    return False, True
  if pooled is True or pooled is False:
    if not pooled and kernel.shared_metric:
      raise ValueError(f"the {kernel.name} kernel estimates one metric from all chains; it "
                       "needs pooled=True, 'metric' or None (the default).")
    return pooled, pooled
  raise ValueError(f"pooled must be None, False, 'metric' or True; got {pooled!r}.")


def _chain_groups(strategy, chains, pooled):
  """Checked ``ChainGroups`` over the devices of ``strategy``."""
  resolved = resolve(strategy, "chains")
  if resolved is None:
    raise ValueError("parallel='chain_groups' needs a strategy with the devices to use, "
                     "e.g. strategy='mirrored' or ed.distribute.strategy('mirrored', "
                     "devices=ed.distribute.logical_cpus(2)).")
  if isinstance(resolved, tf.distribute.TPUStrategy) or resolved.extended.worker_devices[
      0].split("/")[-1].upper().startswith("DEVICE:TPU"):
    raise ValueError("parallel='chain_groups' runs one program per GPU or CPU device; on "
                     "TPUs use parallel='chains' or 'data'.")
  if isinstance(resolved, tf.distribute.MultiWorkerMirroredStrategy):
    raise ValueError("parallel='chain_groups' runs on the devices of this host; across "
                     "workers use parallel='chains' or 'data'.")
  return ChainGroups(resolved, chains, pooled)


# -- inputs ---------------------------------------------------------------------


def _check_settings(chains, warmup, draws, seed, thin, chunk_size, init_radius,
                    max_init_tries, step_size):
  integer = arguments.check_integer
  out = dict(chains=integer("chains", chains, 1), warmup=integer("warmup", warmup, 0),
             draws=integer("draws", draws, 1), seed=integer("seed", seed, 0),
             thin=integer("thin", thin, 1), max_init_tries=integer("max_init_tries", max_init_tries, 1),
             chunk_size=None if chunk_size is None else integer("chunk_size", chunk_size, 1))
  arguments.check_positive("init_radius", init_radius)
  if step_size is not None:
    arguments.check_positive("step_size", step_size)
  return out


# -- host side -------------------------------------------------------------------


def _step_size_in_use(state, sampling):
  """The chains' step sizes ``[1 or C]``: the dual-averaging iterate in
  warmup, its average (what sampling uses) after."""
  log_step = state.dual_avg.log_step_bar if sampling else state.dual_avg.log_step
  return np.exp(log_step.numpy()).reshape(-1)


AGREE_RHAT = 1.1  # an adaptive warmup ends only when the chains' log densities agree this well


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


def _fold_totals(totals, chunk, in_warmup):
  """Adds one chunk's per-chain totals (dict name -> ``[chains]``) to the
  run's, by phase: ``{"warmup": {...}, "sampling": {...}}`` (None: start).
  Memory stays constant in the number of chunks."""
  if totals is None:
    totals = {phase: {k: np.zeros_like(v) for k, v in chunk.items()}
              for phase in ("warmup", "sampling")}
  phase = totals["warmup" if in_warmup else "sampling"]
  # A chain whose log density overflowed has an inf (or, summed with an inf
  # of the other sign, NaN) total: kept as such, without NumPy's warning.
  with np.errstate(invalid="ignore", over="ignore"):
    for key, value in chunk.items():
      phase[key] = np.maximum(phase[key], value) if key == "max_depth" else phase[key] + value
  return totals


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
