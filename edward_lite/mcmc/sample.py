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

This module is the driver: ``settings`` checks the call once
(``SampleSettings``: the checkpoint's identity and the result's settings);
``run`` holds the run between chunks (``Run``: it cuts each phase into
chunks and re-estimates the metric at the end of each window); the host
loop shared with ``ed.vi.fit`` (``chunked_run.run_chunks``) runs them, with
progress, checkpoints and the callback.

The random stream is stateless: transition ``t`` uses the seed
``fold_in(seed, t)``, so a run does not depend on how it is cut into chunks
and a resumed run equals an uninterrupted one.  With 32 chains or more
NUTS samples in *rounds*: after warmup each chain runs up to 32 transitions
in a row without waiting for the others (``NUTS.run_rounds``), a round
ending with its chunk, so those draws depend on the chunk size too (resuming
cuts the same chunks).  With 256 chains or more warmup runs in rounds of 4,
the step size adapting once per round, so the warmup depends on it as well.
"""

import dataclasses

from edward_lite.checks import arguments
from edward_lite.runtime.checkpoint import Checkpointer, closes_checkpoints
from edward_lite.runtime.chunked_run import run_chunks
from edward_lite.mcmc import flow_adaptation, memory
from edward_lite.mcmc.compiled import Program
from edward_lite.mcmc.run import Run
from edward_lite.model.target import Target
# DEFAULT_CHUNK: still importable from here (benchmarks read it).
from edward_lite.mcmc.settings import DEFAULT_CHUNK, SampleSettings  # pylint: disable=unused-import

__all__ = ["sample"]


@closes_checkpoints
def sample(model, *args, observed=None, kernel="nuts", chains=4, warmup=1000, draws=1000,
           seed=0, thin=1, keep_draws=True, init="uniform", init_radius=2.,
           step_size=None, adapt_metric=True, adaptive_warmup=True, pooled=None, chunk_size=None,
           progress=True, checkpoint_dir=None, max_init_tries=100, callback=None,
           strategy=None, parallel="data", jit_compile=True, dtype=None, superchains=None,
           **kwargs):
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
      means (ESS and MCSE of the mean); see ``ed.mcmc.streaming``.  Kept
      draws are checked against the memory available before any compiled
      work (``ed.mcmc.memory``; ``ED_MEMORY_LIMIT`` overrides it): a run
      that cannot fit raises ``MemoryError``, one needing over half of it
      warns (``RuntimeWarning``).
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
      keeps the identity.  ``"flow"`` (or an ``ed.mcmc.FlowAdaptation``, or
      a fit of this model by ``ed.vi.fit``) first fits a normalizing flow
      to the posterior and samples through it, for curvature that changes
      with position (``ed.mcmc.flow_adaptation``; the result's
      ``transport`` and ``total_gradients`` count the fit).
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
    superchains: ``K``: the chains start in ``K`` contiguous superchains,
      the chains of each from one drawn point, and the summary's ``r_hat``
      is nested R-hat (Margossian et al. 2024), which tells many short
      chains that forgot their starts from ones that did not, where split
      R-hat needs long chains.  ``None`` (default): 16 superchains for
      256 chains or more whose starts are drawn (``init`` a mode, or a
      dict that leaves latents to draw), else none; 0: none.  Given
      ``init`` values are kept as they are.

  Returns:
    An ``MCMCResult``.
  """
  arguments.check_model_kwargs(model, kwargs, sample, "ed.mcmc.sample")
  settings = SampleSettings.from_call(
      kernel=kernel, chains=chains, warmup=warmup, draws=draws, seed=seed, thin=thin,
      keep_draws=keep_draws, init=init, init_radius=init_radius, step_size=step_size,
      adapt_metric=adapt_metric, adaptive_warmup=adaptive_warmup, pooled=pooled,
      chunk_size=chunk_size, progress=progress, checkpoint_dir=checkpoint_dir,
      max_init_tries=max_init_tries, callback=callback, strategy=strategy, parallel=parallel,
      jit_compile=jit_compile, dtype=dtype, observed=observed, superchains=superchains)
  groups = settings.make_chain_groups()
  flow_fit, fit_info = _flow_fit(model, args, kwargs, observed, settings)
  program = _program(model, args, kwargs, observed, settings, groups,
                     flow_fit.transport() if flow_fit is not None else None)
  if flow_fit is not None:
    flow_adaptation.check_fit(flow_fit, program.target)
    settings = dataclasses.replace(settings, init=flow_adaptation.starting_points(
        program.target, settings.init, settings.chains, settings.seed, settings.init_radius))
  settings = settings.for_target(program.target, groups)
  ckpt = Checkpointer(settings.checkpoint_dir, program.fingerprint,
                      settings.checkpoint_settings()) if settings.checkpoint_dir else None
  run = Run.begin(program, settings, groups, ckpt)
  timings = dict(compile_s=0., warmup_s=0., sampling_s=0.)
  try:
    run_chunks(run.run_chunk, run.start, run.total, timings, progress=settings.progress,
               label="sampling", checkpointer=ckpt, callback=settings.callback,
               setup=run.setup)
  finally:
    program.join_compile()  # a run within its first chunk leaves no compile running
  result = run.result(timings)
  if flow_fit is not None:
    result.transport = flow_adaptation.describe(flow_fit, settings.flow, fit_info)
  return result


def _flow_fit(model, args, kwargs, observed, settings):
  """The fit ``adapt_metric`` asks to sample through and its record
  (``flow_adaptation.fit_transport``), or ``(None, None)``."""
  if settings.flow is None:
    return None, None
  if isinstance(model, Target):
    raise ValueError("adapt_metric='flow' fits a flow to a model: give the model and its "
                     "data, not a prebuilt target.")
  return flow_adaptation.fit_transport(settings.flow, model, args, kwargs, observed,
                                       settings.seed, settings.dtype, settings.progress,
                                       settings.checkpoint_dir)


def _program(model, args, kwargs, observed, settings, groups, transport):
  """The compiled ``Program`` of the model (cached across calls): with chain
  groups, one block's.  The kept draws of all chains are checked against the
  memory available (``memory.check``) as soon as the model is traced, before
  any compiled work: a new run, or one resumed from its checkpoint."""
  s = settings

  def check_memory(target):
    memory.check(target, s.kernel, s.chains, s.draws, s.thin, s.keep_draws, s.chunk_size,
                 chain_groups=groups is not None)

  if groups:
    return Program.get(model, args, kwargs, observed, s.kernel, s.chains // groups.size,
                       s.pooling, jit_compile=s.jit_compile, dtype=s.dtype,
                       check_target=check_memory, transport=transport)
  return Program.get(model, args, kwargs, observed, s.kernel, s.chains, s.pooling, s.strategy,
                     s.parallel, s.jit_compile, s.dtype, check_target=check_memory,
                     transport=transport)
