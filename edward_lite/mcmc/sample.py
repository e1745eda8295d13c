"""``ed.mcmc.sample``: vectorized MCMC over many chains, compiled in chunks.

The sampler runs as XLA-compiled chunks of many transitions (one
``tf.while_loop`` under ``tf.function(jit_compile=True)``) that advance every
chain together.  Between chunks the host updates the metric at the end of
each warmup window, the progress bar and checkpoints.  Every setting that
changes from call to call (seed, step size, metric, number of steps, phase)
is a Tensor input, so one compiled program serves warmup and sampling, all
chunks and all seeds.

The random stream is stateless: transition ``t`` uses the seed
``fold_in(seed, t)``, so a run does not depend on how it is cut into chunks
and a resumed run equals an uninterrupted one.  With 32 chains or more
NUTS samples in *rounds*: after warmup each chain runs up to 32 transitions
in a row without waiting for the others (``NUTS.run_rounds``), a round
ending with its chunk, so those draws depend on the chunk size too (resuming
cuts the same chunks).
"""

import collections
import hashlib
import time
import warnings

import numpy as np
import tensorflow as tf

from edward_lite import distribute, nonfinite, runtime
from edward_lite.checkpoint import Checkpointer, closes_checkpoints
from edward_lite.mcmc import adaptation, base, streaming
from edward_lite.mcmc.groups import ChainGroups
from edward_lite.mcmc.kernels import get_kernel
from edward_lite.mcmc.results import MCMCResult, fold_totals
from edward_lite.progress_report import make_progress
from edward_lite.target import make_target

__all__ = ["sample"]

DEFAULT_CHUNK = 200  # transitions per compiled call between host updates
# NUTS samples in rounds (each chain runs its transitions without waiting for
# the others) from this many chains (per device) up; with fewer, lockstep
# wastes little (0.96 of the leapfrog steps are useful at 4 chains on eight
# schools) and the rounds' code would add ~1 s of compile time.
ROUNDS_MIN_CHAINS = 32


# ``u``: the chains' unconstrained states ``[C, D]``; ``z``: the same in the
# preconditioned space the kernel moves in (``u = _to_u(z, scale)``), carried
# so that a chunk boundary does not round-trip ``z`` through ``u``, which
# would make the draws depend on the chunking by round-off.
ChunkState = collections.namedtuple(
    "ChunkState", ["u", "z", "scale", "dual_avg", "metric", "kernel_adapt", "stream"])


@closes_checkpoints
def sample(model, *args, observed=None, kernel="nuts", chains=4, warmup=1000, draws=1000,
           seed=0, thin=1, keep_draws=True, init="uniform", init_radius=2.,
           step_size=None, adapt_metric=True, pooled=None, chunk_size=None,
           progress=True, checkpoint_dir=None, max_init_tries=100, callback=None,
           strategy=None, parallel="data", jit_compile=True, dtype=None, **kwargs):
  """Samples the posterior of ``model(*args, **kwargs)`` given ``observed``.

  Args:
    model: an edward_lite program.
    *args, **kwargs: its arguments (keywords not listed here go to ``model``).
    observed: dict name -> observed value.
    kernel: ``"nuts"``, ``"hmc"``, ``"rwmh"``, ``"chees"`` or a kernel object
      (``ed.mcmc.NUTS(max_tree_depth=8)``, ``ed.mcmc.HMC(num_leapfrog_steps=32,
      jitter=True)``, ``ed.mcmc.RWMH(scale=0.1, adapt=False)``, ...).
    chains: number of chains ``C``, advanced together as a batch.
    warmup: adaptation iterations (discarded).
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
    adapt_metric: adapt the metric in warmup windows (Stan's schedule):
      ``True`` or ``"diag"`` (diagonal), ``"dense"`` (full covariance, for
      strongly correlated posteriors of moderate dimension; needs
      ``pooled=True``), ``False`` (identity).
    pooled: how warmup adaptation is shared between chains.  ``None``
      (default): in the initial fast window every chain adapts its own step
      size, so each can leave a bad start; from then to the end of warmup
      the chains whose recent acceptance is near the median chain's (the
      bulk) share one step size (dual averaging on the geometric mean of
      their acceptance), and a chain that rejects far more than the bulk
      adapts its own until it rejoins (``adaptation.step_size_update``);
      one diagonal metric is estimated from all chains.  ``False``: per-chain step size and
      metric (Stan's and NumPyro's scheme).  ``"metric"``: per-chain step
      sizes, one metric.  ``True``: one step size (tuned to the mean
      acceptance over chains) and one metric from the start; a chain that
      starts where the density is very steep can then stay stuck there (the
      summary warns about stuck chains).
    chunk_size: transitions per compiled call between host updates
      (progress, checkpoints); default 200.  With kept draws a sampling
      chunk holds ``chunk_size`` kept draws.  NUTS with 32 chains or more
      samples in rounds that end with the chunk, so its draws depend on
      ``chunk_size`` as well as ``seed``.
    progress: report progress (``edward_lite.progress_report``): a tqdm
      bar on a terminal, else plain lines (compiling, then every 10%); False
      is silent.
    checkpoint_dir: directory for checkpoints; an interrupted run resumes
      from it when called again with the same arguments.
    max_init_tries: redraws of chains whose initial log density is not finite.
    callback: optional ``callback(info)`` called on the host after every
      chunk (after its checkpoint) with a dict: ``step``, ``total``,
      ``warmup`` (bool), ``step_size``, ``divergences`` (in the chunk),
      ``gradients`` (per chain, in the chunk).
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
  runtime.check_model_kwargs(model, kwargs, sample, "ed.mcmc.sample")
  settings = _check_settings(chains, warmup, draws, seed, thin, chunk_size, init_radius,
                             max_init_tries, step_size)
  runtime.check_call_settings(observed=observed, keep_draws=keep_draws, callback=callback,
                              jit_compile=jit_compile)
  if adapt_metric not in (True, False, "diag", "dense"):
    raise ValueError(f"adapt_metric must be True, False, 'diag' or 'dense'; got {adapt_metric!r}.")
  dense = adapt_metric == "dense"
  kernel = get_kernel(kernel)
  pooling = _pooling(pooled, dense, kernel)
  if parallel not in ("data", "chains", "chain_groups"):
    raise ValueError(f"parallel must be 'data', 'chains' or 'chain_groups'; got {parallel!r}.")
  groups = None
  if parallel == "chain_groups":
    groups = _chain_groups(strategy, chains, pooling)
    program = _Program.get(model, args, kwargs, observed, kernel, chains // groups.size, pooling,
                           jit_compile=jit_compile, dtype=dtype)
  else:
    program = _Program.get(model, args, kwargs, observed, kernel, chains, pooling,
                           strategy, parallel, jit_compile, dtype)
  target = program.target
  dtype = target.dtype.as_numpy_dtype
  dim = target.dim
  target_accept = kernel.default_target_accept(dim)
  windows = adaptation.warmup_windows(warmup) if adapt_metric else []
  window_ends = {end for _, end in windows}
  window_starts = {start for start, _ in windows}
  total = warmup + draws
  chunk = settings["chunk_size"] or DEFAULT_CHUNK
  capacity = chunk if keep_draws else 0  # draws kept per sampling chunk
  seed_t = tf.constant(runtime.seed_pair(seed), tf.int32)

  ckpt = Checkpointer(checkpoint_dir, program.fingerprint, dict(
      kernel=kernel.settings(), chains=chains, warmup=warmup, draws=draws, seed=seed,
      thin=thin, keep_draws=keep_draws, adapt_metric=adapt_metric, pooled=pooling,
      dtype=str(dtype),
      init=_describe_init(init), step_size=step_size, chunk_size=chunk,
      jit_compile=bool(jit_compile),
      **({"chain_groups": groups.size} if groups else {}))) if checkpoint_dir else None
  resumed = ckpt.load(lambda: tf.nest.flatten(_state_template(
      program, chains, pooling, dense))) if ckpt else None

  if resumed is not None:
    state, step, host = resumed["state"], resumed["step"], resumed["host"]
    state = ChunkState(*tf.nest.pack_sequence_as(_state_template(program, chains, pooling, dense),
                                                 [tf.constant(x) for x in state]))
    kept = {k: list(v) for k, v in host["kept"].items() if not k.startswith("_")}
    totals = None
    for i, in_warmup in enumerate(host["kept"]["_warmup"]):
      totals = fold_totals(totals, {k[1:]: v[i] for k, v in host["kept"].items()
                                    if k.startswith("_") and k != "_warmup"}, bool(in_warmup))
  else:
    u0 = _initial_state(program, init, chains, seed_t, init_radius, max_init_tries)
    h0 = step_size if step_size is not None else kernel.initial_step_size(dim)
    state = program.initial_chunk_state(tf.constant(u0), tf.constant(h0, dtype), chains,
                                        pooling, dense,
                                        tf.constant(-(-draws // streaming.NUM_BATCHES)))
    step = 0
    kept, totals = collections.defaultdict(list), None

  adapt_step = kernel.adapts_step_size
  # After the initial fast window, where every chain leaves its starting
  # point with its own step size, the bulk shares one to the end of warmup.
  shared = (windows[0][0], warmup) if windows and pooling[0] == "bulk" else (0, 0)
  bar = make_progress(progress, total, step, "sampling")
  timings = dict(compile_s=0., warmup_s=0., sampling_s=0.)
  while step < total:
    in_warmup = step < warmup
    n = _chunk_length(step, warmup, total, chunk * (1 if in_warmup or not keep_draws else thin),
                      window_ends | window_starts)
    collect = in_warmup and any(s <= step < e for s, e in windows)
    share = shared[0] <= step < shared[1]
    final_step = tf.exp(state.dual_avg.log_step_bar)
    start = time.perf_counter()
    first_call = not program.compiled
    chunk_args = (
        state, final_step, seed_t, tf.constant(step), tf.constant(n),
        tf.constant(in_warmup and adapt_step), tf.constant(share), tf.constant(collect),
        tf.constant(not in_warmup), tf.constant(not in_warmup and keep_draws),
        tf.constant(thin), tf.constant(target_accept, dtype), tf.constant(warmup + draws // 2),
        capacity)
    if groups:
      state, out = groups.run_chunk(program.run_chunk, *chunk_args)
    else:
      state, out = program.run_chunk(*chunk_args)
      out = tf.nest.map_structure(lambda t: t.numpy(), out)
    n_kept = -(-n // thin) if not in_warmup and keep_draws else 0
    out["kept"] = {key: value[:n_kept] for key, value in out["kept"].items()}
    elapsed = time.perf_counter() - start
    if first_call:
      program.compiled = True
      timings["compile_s"] += elapsed  # includes this chunk's run time
    timings["warmup_s" if in_warmup else "sampling_s"] += elapsed
    for key, value in out["kept"].items() if n_kept else ():
      kept.setdefault(key, []).append(value)
    # Per-chain totals are folded chunk by chunk: constant memory without draws.
    totals = fold_totals(totals, out["totals"], in_warmup)
    step += n
    if in_warmup and step in window_ends:
      state = _end_window(state, pooling[1], dtype)
    if step == warmup:
      state = state._replace(kernel_adapt=kernel.finalize_adaptation(state.kernel_adapt))
    if bar is not None:
      bar.set_postfix({"phase": "warmup" if in_warmup else "sampling",
                       **_postfix(out, state, n)}, refresh=False)
      bar.update(n)
    if ckpt:
      ckpt.save(tf.nest.map_structure(lambda t: t.numpy(), tuple(tf.nest.flatten(state))),
                step, {"kept": {**{k: [v] for k, v in out["kept"].items()},
                                **{"_" + k: [v] for k, v in out["totals"].items()},
                                "_warmup": [np.asarray(in_warmup)]}})
    if callback is not None:
      in_use = state.dual_avg.log_step_bar if step >= warmup else state.dual_avg.log_step
      callback(dict(step=step, total=total, warmup=in_warmup,
                    step_size=np.exp(in_use.numpy()).reshape(-1),
                    divergences=int(np.sum(out["totals"]["diverging"])),
                    gradients=out["totals"]["n_grads"]))
  if bar is not None:
    bar.close()
  base_target = getattr(target, "base", target)  # a ShardedTarget's full-data target
  return MCMCResult.build(base_target, kernel, kept, totals, state, chains=chains, warmup=warmup,
                          draws=draws, thin=thin, keep_draws=keep_draws, timings=timings)


def _pooling(pooled, dense, kernel):
  """``(pool_step, pool_metric)``: whether the step size and the metric are
  one for all chains, from ``sample``'s ``pooled=`` setting."""
  if pooled is None:
    return "bulk", True
  if isinstance(pooled, str) and pooled == "metric":
    return False, True
  if pooled is True or pooled is False:
    if not pooled and (dense or kernel.shared_metric):
      needs = "adapt_metric='dense'" if dense else f"the {kernel.name} kernel"
      raise ValueError(f"{needs} estimates one metric from all chains; it needs "
                       "pooled=True, 'metric' or None (the default).")
    return pooled, pooled
  raise ValueError(f"pooled must be None, False, 'metric' or True; got {pooled!r}.")


def _chain_groups(strategy, chains, pooled):
  """Checked ``ChainGroups`` over the devices of ``strategy``."""
  resolved = distribute.resolve(strategy, "chains")
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


# -- the compiled program ------------------------------------------------------


class _Program:
  """A model target and its compiled chunk function, cached across calls.

  The cache key is the program's code and its data by content
  (``runtime.fingerprint``), the kernel settings, the number of chains and
  the pooling, so a new seed or new run lengths reuse the compiled program;
  a call that cannot be identified by content is built fresh, never cached.
  """

  _cache = collections.OrderedDict()
  MAX_CACHED = 8

  @classmethod
  def get(cls, model, args, kwargs, observed, kernel, chains, pooled, strategy=None,
          parallel="data", jit_compile=True, dtype=None):
    strategy = distribute.resolve(strategy, parallel)
    fingerprint = runtime.fingerprint(model, args, kwargs, observed)
    key = (fingerprint.key, kernel.settings(), chains, pooled, id(strategy), parallel,
           bool(jit_compile), str(dtype))
    if fingerprint.key is not None and key in cls._cache:
      cls._cache.move_to_end(key)
      return cls._cache[key]
    target = make_target(model, *args, observed=observed, dtype=dtype, **kwargs)
    if strategy is not None:
      if parallel == "chains" and chains % strategy.num_replicas_in_sync:
        raise ValueError(f"parallel='chains' needs chains to be a multiple of the "
                         f"{strategy.num_replicas_in_sync} replicas; got chains={chains}.")
      target = distribute.ShardedTarget(target, strategy, parallel, model=model,
                                        jit_compile=jit_compile)
    program = cls(target, kernel, fingerprint, jit_compile=jit_compile)
    if fingerprint.key is not None:
      cls._cache[key] = program
      while len(cls._cache) > cls.MAX_CACHED:
        cls._cache.popitem(last=False)
    return program

  def __init__(self, target, kernel, fingerprint, jit_compile=True):
    if not target.names:
      raise ValueError("The program has no latent variables: every random variable is "
                       "observed or fixed, so there is nothing to sample.")
    if target.dtype is None or not target.dtype.is_floating:
      raise TypeError("MCMC needs all latent variables in one floating dtype; "
                      f"they are {[(n, i.dtype.name) for n, i in target.latents.items()]}.")
    self.target, self.kernel, self.fingerprint = target, kernel, fingerprint
    self.compiled = False
    # A sharded target calls strategy.run, which XLA cannot hold: its
    # replicas' parts are compiled instead.
    jit = bool(jit_compile) and not isinstance(target, distribute.ShardedTarget)
    if jit and target.has_unbounded_loops:
      warnings.warn("The program has a tf.while_loop without maximum_iterations, whose "
                    "gradient XLA cannot compile: sampling without XLA (slower); give the "
                    "loop maximum_iterations= to compile it.", RuntimeWarning, stacklevel=4)
      jit = False
    alg = "threefry" if jit else "philox"

    def run_chunk(*args):
      with base.random_algorithm(alg):
        return self._run_chunk(*args)

    self._run_chunk_fn = tf.function(run_chunk, jit_compile=jit)
    self._draw_initial_fn = tf.function(self._draw_initial)
    self._initial_chunk_state_fn = tf.function(self._initial_chunk_state)
    self._concrete = {}
    self.log_prob = tf.function(target.log_prob_flat)

  def _call(self, fn, *args):
    """``fn(*args)`` through the concrete function of the argument signature
    (Tensors by dtype and shape, anything else by value): the polymorphic
    ``tf.function`` call is slow to match its arguments."""
    key = (fn,) + tuple((t.dtype, tuple(t.shape)) if isinstance(t, tf.Tensor) else t
                        for t in tf.nest.flatten(args))
    if key not in self._concrete:
      self._concrete[key] = fn.get_concrete_function(*args)
    return self._concrete[key](*args)

  def run_chunk(self, *args):
    """The compiled chunk (arguments of ``_run_chunk``)."""
    return self._call(self._run_chunk_fn, *args)

  def draw_initial(self, init, chains, seed, radius, attempt):
    return self._call(self._draw_initial_fn, init, chains, seed, radius, attempt)

  def initial_chunk_state(self, u, step_size, chains, pooled, dense, batch_size):
    """The ``ChunkState`` of a new run (one call instead of ~20 eager ops)."""
    return self._call(self._initial_chunk_state_fn, u, step_size, chains, pooled, dense,
                      batch_size)

  def _initial_chunk_state(self, u, step_size, chains, pooled, dense, batch_size):
    dtype, dim = self.target.dtype, self.target.dim
    pool_step, pool_metric = adaptation.pool_flags(pooled)
    step_shape = [1, 1] if pool_step is True else [chains, 1]
    return ChunkState(
        u=u, z=u, scale=_identity_scale(dim, chains, pool_metric, dense, dtype),
        dual_avg=adaptation.dual_averaging_init(tf.fill(step_shape, step_size)),
        metric=adaptation.welford_init([chains, dim], dtype, dense),
        kernel_adapt=self.kernel.adapt_init(chains, dtype),
        stream=streaming.stream_init(chains, self.target.constrained_dim, dtype,
                                     batch_size=batch_size))

  def _draw_initial(self, init, chains, seed, radius, attempt):
    """Initial states ``[C, D]`` for ``init`` "uniform" (on ``[-radius,
    radius]``) or "prior", drawn from ``fold_in(seed, -1 - attempt)``, and
    their log densities ``[C]``: one call per attempt."""
    target = self.target
    init_seed = tf.random.experimental.stateless_fold_in(seed, -1 - attempt)
    if init == "prior":
      u = target.flatten(target.unconstrain(target.sample_prior(chains, init_seed)))
    else:
      u = tf.random.stateless_uniform([chains, target.dim], init_seed, -radius, radius,
                                      dtype=target.dtype)
    return u, target.log_prob_flat(u)

  def _run_chunk(self, state, final_step, seed, start, n, adapt_step, share, collect,
                 sampling, keep, thin, target_accept, split_at, capacity):
    """Runs ``n`` transitions from ``state``; keeps up to ``capacity`` draws.

    ``capacity`` is a Python int (it fixes buffer shapes, so XLA sees static
    shapes); everything else is a Tensor, so one trace serves every call.
    """
    target, kernel = self.target, self.kernel
    scale = state.scale
    dtype = state.u.dtype
    chains = state.u.shape[0]

    def log_prob(z):
      return target.log_prob_flat(_to_u(z, scale))

    stat_dtypes = base.TransitionInfo.dtypes(dtype)
    buffers = {key: tf.zeros([capacity, chains], d) for key, d in stat_dtypes.items()}
    buffers["draws"] = tf.zeros([capacity, chains, target.constrained_dim], dtype)
    step0 = tf.where(adapt_step, tf.exp(state.dual_avg.log_step), final_step)
    kstate = kernel.init(state.z, log_prob, step0)
    totals = dict(n_grads=tf.zeros([chains], tf.int32), diverging=tf.zeros([chains], tf.int32),
                  accept_prob=tf.zeros([chains], dtype), max_depth=tf.zeros([chains], tf.int32))

    def one_step(i, kstate, step_size, kadapt):
      """One kernel step: the new kernel state, the chains' states ``z`` and
      the step's statistics."""
      t = start + i
      kstate, info = kernel.one_step(kstate, step_size, tf.random.experimental.stateless_fold_in(
          seed, t), log_prob, step=t, adapt_state=kadapt)
      return kstate, kernel.state(kstate), info

    def body(i, kstate, dual_avg, metric, kadapt, acc, buffers, totals, transition):
      """One transition and its bookkeeping.  A chunk is all warmup or all
      sampling; the flags select (``tf.where``: a ``tf.cond`` per
      transition costs more than this elementwise work)."""
      step_size = tf.where(adapt_step, tf.exp(dual_avg.log_step), final_step)
      new_kstate, z, info = transition(i, kstate, step_size, kadapt)
      totals = dict(
          n_grads=totals["n_grads"] + info.n_grads,
          diverging=totals["diverging"] + tf.cast(info.diverging, tf.int32),
          accept_prob=totals["accept_prob"] + info.accept_prob,
          max_depth=tf.maximum(totals["max_depth"], info.tree_depth))
      u = _to_u(z, scale)
      dual_avg = _select(adapt_step, adaptation.step_size_update(
          dual_avg, info.accept_prob, target_accept, share), dual_avg)
      kadapt = _select(adapt_step, kernel.adapt_update(kadapt, kstate, info, step_size,
                                                       start + i), kadapt)
      metric = _select(collect, adaptation.welford_update(metric, u), metric)
      x = target.constrain_flat(u)
      acc = _select(sampling, streaming.accumulate(acc, x), acc)
      if capacity:
        buffers = tf.cond(keep & (i % thin == 0), lambda: write(buffers, i, x, info),
                          lambda: dict(buffers))
      return i + 1, new_kstate, dual_avg, metric, kadapt, acc, buffers, totals

    def write(buffers, i, x, info):
      row = tf.reshape(tf.minimum(i // thin, capacity - 1), [1, 1])
      out = {"draws": tf.tensor_scatter_nd_update(buffers["draws"], row, x[None])}
      for key in stat_dtypes:
        out[key] = tf.tensor_scatter_nd_update(buffers[key], row, getattr(info, key)[None])
      return out

    def segments(i, last, carry, transition):
      """Transitions ``i .. last - 1`` in segments that end at the end of
      the current batch of the streaming statistics or of the first half
      (when sampling); each segment's bookkeeping closes it.  The
      per-transition loop only carries an ``Accumulator`` of the statistics
      (no gather or scatter by half)."""

      def segment(i, kstate, dual_avg, metric, kadapt, stream, buffers, totals):
        end = tf.minimum(last, i + stream.batch_size - stream.in_batch)
        end = tf.where(start + i < split_at, tf.minimum(end, split_at - start), end)
        end = tf.where(sampling, end, last)
        second_half = start + i >= split_at
        j, kstate, dual_avg, metric, kadapt, acc, buffers, totals = tf.while_loop(
            lambda j, *_: j < end, lambda *v: body(*v, transition),
            (i, kstate, dual_avg, metric, kadapt, streaming.run_begin(stream, second_half),
             buffers, totals))
        stream = streaming.stream_close(streaming.run_end(
            stream, acc, second_half, tf.where(sampling, j - i, 0)))
        return j, kstate, dual_avg, metric, kadapt, stream, buffers, totals

      return tf.while_loop(lambda i, *_: i < last, segment, (i,) + carry)

    def round_of_transitions(i, kstate, dual_avg, *carry):
      """Up to ``round_capacity`` transitions run by the kernel with no
      chain waiting for another (one in warmup, where the step size adapts
      after every transition), then their bookkeeping."""
      rounds = tf.where(adapt_step, 1, tf.minimum(round_capacity, n - i))
      step_size = tf.where(adapt_step, tf.exp(dual_avg.log_step), final_step)
      kstate, z_all, info_all = kernel.run_rounds(
          kstate, step_size,
          lambda k: tf.random.experimental.stateless_fold_in(seed, start + i + k), rounds,
          round_capacity, log_prob)

      # The round has already advanced ``kstate``; the bookkeeping reads its
      # transitions' states and statistics (``base.check_kernel`` refuses a
      # kernel whose adapt_update would need the state before each one).
      def transition(j, kstate, step_size, kadapt):
        del step_size, kadapt
        return kstate, tf.gather(z_all, j - i), tf.nest.map_structure(
            lambda value: tf.gather(value, j - i), info_all)

      return segments(i, i + rounds, (kstate, dual_avg) + carry, transition)

    carry = (kstate, state.dual_avg, state.metric, state.kernel_adapt, state.stream, buffers,
             totals)
    if kernel.supports_rounds and chains >= ROUNDS_MIN_CHAINS:
      round_capacity = _round_capacity(chains, target.dim)
      carry = tf.while_loop(lambda i, *_: i < n, round_of_transitions,
                            (tf.constant(0),) + carry)[1:]
    else:
      carry = segments(tf.constant(0), n, carry, one_step)[1:]
    kstate, dual_avg, metric, kadapt, stream, buffers, totals = carry
    z = kernel.state(kstate)
    new_state = ChunkState(_to_u(z, scale), z, scale, dual_avg, metric, kadapt, stream)
    # Full buffers: slicing to the kept count here would make it a compile-time
    # constant and recompile for every chunk length; the host slices instead.
    return new_state, {"kept": buffers, "totals": totals}


def _round_capacity(chains, dim):
  """Transitions per round of a kernel that runs rounds (NUTS): up to 32,
  fewer when the round's momenta and states (``2 * K * C * D`` numbers)
  would exceed 2^23 numbers."""
  return int(np.clip(2 ** 22 // (chains * dim), 1, 32))


def _select(flag, a, b):
  return tf.nest.map_structure(lambda x, y: tf.where(flag, x, y), a, b)


def _to_u(z, scale):
  """Preconditioned ``z [C, D]`` -> unconstrained ``u``: ``s * z`` for a
  diagonal scale ``[1 or C, D]``, ``L z`` for a dense Cholesky factor
  ``[1, D, D]`` of the inverse metric."""
  return tf.linalg.matvec(scale, z) if scale.shape.rank == 3 else z * scale


def _to_z(u, scale):
  """Inverse of ``_to_u``."""
  if scale.shape.rank == 3:
    return tf.transpose(tf.linalg.triangular_solve(scale[0], tf.transpose(u), lower=True))
  return u / scale


def _identity_scale(dim, chains, pooled, dense, dtype):
  if dense:
    return tf.eye(dim, batch_shape=[1], dtype=dtype)
  return tf.ones([1 if pooled else chains, dim], dtype)


def _end_window(state, pooled, dtype):
  """Metric update (one metric for all chains if ``pooled``) and step-size
  restart at the end of a slow window."""
  if state.metric.m2.shape.rank == 3:  # dense
    scale = tf.linalg.cholesky(adaptation.welford_covariance(state.metric))[None]
  else:
    scale = tf.sqrt(adaptation.welford_variance(state.metric, pooled=pooled))
  step = tf.exp(state.dual_avg.log_step_bar)
  scale = tf.cast(scale, dtype)
  return state._replace(
      z=_to_z(state.u, scale), scale=scale,
      dual_avg=adaptation.dual_averaging_init(step),
      metric=adaptation.welford_init(state.metric.mean.shape, dtype,
                                     state.metric.m2.shape.rank == 3))


def _state_template(program, chains, pooled, dense=False):
  """A ``ChunkState`` of the right structure, shapes and dtypes (values
  arbitrary): what a checkpoint's arrays are packed into."""
  target = program.target
  return program.initial_chunk_state(tf.zeros([chains, target.dim], target.dtype),
                                     tf.constant(1., target.dtype), chains, pooled, dense,
                                     tf.constant(1))


def _chunk_length(step, warmup, total, chunk, boundaries):
  """Steps until the next chunk boundary, window boundary or end of warmup."""
  stops = [b for b in boundaries | {warmup, total} if b > step]
  return min(step + chunk, min(stops)) - step


# -- inputs ---------------------------------------------------------------------


def _check_settings(chains, warmup, draws, seed, thin, chunk_size, init_radius,
                    max_init_tries, step_size):
  integer = runtime.check_integer
  out = dict(chains=integer("chains", chains, 1), warmup=integer("warmup", warmup, 0),
             draws=integer("draws", draws, 1), seed=integer("seed", seed, 0),
             thin=integer("thin", thin, 1), max_init_tries=integer("max_init_tries", max_init_tries, 1),
             chunk_size=None if chunk_size is None else integer("chunk_size", chunk_size, 1))
  runtime.check_positive("init_radius", init_radius)
  if step_size is not None:
    runtime.check_positive("step_size", step_size)
  return out


def _latent_of_column(target, column):
  """The latent whose unconstrained coordinates hold flat column ``column``."""
  for name, info in target.latents.items():
    column -= info.unconstrained_shape.num_elements()
    if column < 0:
      return name
  return "?"


def _describe_init(init):
  if isinstance(init, str):
    return init
  if isinstance(init, dict):
    return {k: np.asarray(v).tolist() for k, v in init.items()}
  return hashlib.sha1(np.ascontiguousarray(init).tobytes()).hexdigest()


def _initial_state(program, init, chains, seed, radius, max_tries):
  """Initial unconstrained states ``[C, D]`` with finite log density."""
  target = program.target
  dtype = target.dtype.as_numpy_dtype
  if isinstance(init, str):
    if init not in ("uniform", "prior"):
      raise ValueError(f"init must be 'uniform', 'prior', a dict of constrained values or an "
                       f"array [chains, {target.dim}]; got {init!r}.")
    flat = [n for n, i in target.latents.items() if i.distribution == "ImproperUniform"]
    if init == "prior" and flat:
      raise NotImplementedError(f"init='prior' cannot draw {flat}: an improper flat prior "
                                "(ed.Flat) has no draws; use init='uniform' or give init= values.")
    u = None
  elif isinstance(init, dict):
    unknown = [k for k in init if k not in target.names]
    if unknown:
      raise ValueError(f"init names {unknown} are not latent variables; the latents are "
                       f"{list(target.names)}.")
    values = {}
    for name, info in target.latents.items():
      if name not in init:
        raise ValueError(f"init is missing latent variable '{name}'.")
      try:
        value = np.asarray(init[name], dtype)
      except (TypeError, ValueError) as e:
        raise ValueError(f"init value for '{name}' is not a number or an array of numbers: "
                         f"{init[name]!r}.") from e
      try:
        values[name] = np.broadcast_to(value, (chains,) + tuple(info.shape)).copy()
      except ValueError as e:
        raise ValueError(f"init value for '{name}' has shape {value.shape}; expected "
                         f"{info.shape.as_list()} or [{chains}] + that.") from e
    u = target.flatten(target.unconstrain(values)).numpy()
    if not np.all(np.isfinite(u)):
      bad = [n for n, v in target.unconstrain(values).items() if not np.all(np.isfinite(v))]
      raise ValueError(f"init values for {bad} are outside the support of their distributions.")
  else:
    u = np.asarray(init, dtype)
    if u.shape != (chains, target.dim):
      raise ValueError(f"An init array must have shape [chains, D] = [{chains}, {target.dim}]; "
                       f"got {list(u.shape)}.")
    if not np.all(np.isfinite(u)):
      chain, column = (int(i) for i in np.argwhere(~np.isfinite(u))[0])
      raise ValueError(f"The init array holds {int(np.sum(~np.isfinite(u)))} NaN or infinite "
                       f"value(s), the first for chain {chain}, latent "
                       f"'{_latent_of_column(target, column)}'.")
  if u is not None:  # user values: checked, never redrawn
    bad = ~np.isfinite(program.log_prob(tf.constant(u)).numpy())
    max_tries = 1
  else:
    radius = tf.constant(radius, target.dtype)
    for attempt in range(max_tries):
      draw, lp = (t.numpy() for t in program.draw_initial(init, chains, seed, radius,
                                                           tf.constant(attempt)))
      u = draw if attempt == 0 else np.where(bad[:, None], draw, u)
      bad = ~np.isfinite(lp) if attempt == 0 else bad & ~np.isfinite(lp)
      if not bad.any():
        break
  if not bad.any():
    return u
  # Which term is not finite, and why (shared with ed.vi.fit's diagnosis).
  reason = nonfinite.explain(getattr(target, "base", target), u[bad], "initial points")
  tried = "at the given init values" if max_tries == 1 and not isinstance(init, str) else (
      f"after {max_tries} tries")
  raise ValueError(
      f"{int(bad.sum())} of {chains} chains have a non-finite initial log density {tried}"
      + (f": {reason[0].lower()}{reason[1:]}" if reason else ".")
      + " Check the model's support and data, or pass init= values inside the support.")


# -- host side -------------------------------------------------------------------


def _postfix(out, state, n):
  step = float(np.mean(np.exp(state.dual_avg.log_step.numpy())))
  return dict(step_size=f"{step:.3g}",
              accept=f"{np.mean(out['totals']['accept_prob']) / n:.2f}",
              divergences=int(np.sum(out["totals"]["diverging"])))
