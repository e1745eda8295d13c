"""The compiled program of a model and kernel, cached across calls.

``Program.get`` returns the ``Target`` of a model with its data and the
compiled functions the driver calls: the chunk of transitions, the draws of
initial states and the initial ``ChunkState``.  The cache key is the
program's code and data by content (``fingerprints.fingerprint``), the kernel's
settings, the number of chains and the pooling, so a new seed or new run
lengths reuse the compiled program; under the same key (and the library's
version) the chunk and the value and gradient are kept on disk for the next
process (``runtime/program_cache``).  A ``Target`` given in place of a model
(``ed.sbc``'s ``SimulationTarget``) is used as it is and never cached: it
cannot be identified by content.

The first chunk of a new run without XLA: XLA's compile of the chunk is
most of a small model's first seconds (2-3 s on 2 cores for eight
schools), and the chunk of the first window is ten transitions.  For a
program of at most ``FIRST_CHUNK_MAX_CHAINS`` chains without loops (whose
op-by-op runs are slow), a new run's first chunk runs the same traced
graph op by op (``KeptFunction.without_xla``: no second trace) while XLA
compiles on another thread, and every later chunk runs the compiled
program.  The copy draws the compiled chunk's random numbers and differs
from it by round-off only.  It runs in every run, compiled before or not,
so a seed gives the same draws in a new process as in a warm one (RESULTS
section 50).  A chunk that cannot be kept (``KeptFunction.from_concrete``:
it reads a variable or calls Python), or a TensorFlow without the call by
name, has no copy: its first chunk is compiled as the others.
"""

import collections
import threading
import warnings

import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.distribute.sharding import ShardedTarget
from edward_lite.distribute.strategies import resolve
from edward_lite.language import tracing
from edward_lite.runtime import console, fingerprints, kept_function, program_cache
from edward_lite.mcmc import adaptation, base, chunk, metric, streaming
from edward_lite.model.target import Target, make_target
from edward_lite.model.transported import TransportedTarget

__all__ = ["Program", "FIRST_CHUNK_MAX_CHAINS"]

FIRST_CHUNK_MAX_CHAINS = 16  # a new run's first chunk runs without XLA up to this many chains


class Program:
  """A model target and its compiled functions (see the module docstring);
  a call that cannot be identified by content is built fresh, never cached.

  ``MAX_CACHED`` programs are kept, the least recently used dropped first.
  What the bound holds is small beside what TensorFlow keeps: every
  distinct program a process traces and compiles leaves about 50 MB in
  TensorFlow's runtime (20 MB without XLA) for the life of the process,
  whatever the bound -- dropping a program frees only its Python graphs,
  about 2 MB with XLA (10 MB without; ``benchmarks/program_memory.py``,
  RESULTS section 43).  A process that samples many distinct models grows
  by that much per model; one that samples the same model again reuses its
  program and does not grow."""

  _cache = collections.OrderedDict()
  MAX_CACHED = 8

  @classmethod
  def get(cls, model, args, kwargs, observed, kernel, chains, pooled, strategy=None,
          parallel="data", jit_compile=True, dtype=None, check_target=None, transport=None):
    """The program of a model (cached by content) or of a prebuilt target
    (fresh).  ``check_target(target)``, if given, runs on the model's
    ``Target`` once the program has been traced eagerly (``make_target``'s
    checks), before any graph is traced or compiled: the memory guard
    (``ed.mcmc.memory``).  ``transport``: a ``Transport``; the program then
    samples the model's ``TransportedTarget`` (its key joins the
    program's, and the fingerprint's data digest)."""
    check_target = check_target or (lambda target: None)
    if isinstance(model, Target):
      if args or kwargs or observed or strategy is not None or dtype is not None:
        raise ValueError("A prebuilt target carries its data and dtype: give no arguments, "
                         "observed=, dtype= or strategy= with it.")
      check_target(model)
      return cls(model, kernel, fingerprints.Fingerprint(
          type(model).__name__, None, None, "a prebuilt target is not identified by content"),
                 jit_compile=jit_compile)
    strategy = resolve(strategy, parallel)
    fingerprint = fingerprints.fingerprint(model, args, kwargs, observed,
                                          tracing.active_tracers())
    if transport is not None:
      assert strategy is None, "SampleSettings refuses a flow with a strategy"
      if fingerprint.data is not None:
        fingerprint = fingerprint._replace(data=f"{fingerprint.data}+{transport.key}")
    key = (fingerprint.key, kernel.settings(), chains, pooled, id(strategy), parallel,
           bool(jit_compile), str(dtype))
    if fingerprint.key is not None and key in cls._cache:
      cls._cache.move_to_end(key)
      check_target(cls._cache[key].target)
      return cls._cache[key]
    target = make_target(model, *args, observed=observed, dtype=dtype, **kwargs)
    check_target(target)
    if transport is not None:
      target = TransportedTarget(target, transport)
    density = target
    if strategy is not None:
      if parallel == "chains" and chains % strategy.num_replicas_in_sync:
        raise ValueError(f"parallel='chains' needs chains to be a multiple of the "
                         f"{strategy.num_replicas_in_sync} replicas; got chains={chains}.")
      density = ShardedTarget(target, strategy, parallel, model=model, jit_compile=jit_compile)
    program = cls(target, kernel, fingerprint, jit_compile=jit_compile, density=density,
                  saved_key=key[:4] + key[5:] if strategy is None and fingerprint.key else None,
                  chains=chains)
    if fingerprint.key is not None:
      cls._cache[key] = program
      while len(cls._cache) > cls.MAX_CACHED:
        cls._cache.popitem(last=False)
    return program

  def __init__(self, target, kernel, fingerprint, jit_compile=True, density=None,
               saved_key=None, chains=None):
    """``target``: the model's ``Target`` (its description: names, shapes,
    constrain, prior draws); ``density``: the ``Density`` the compiled
    functions evaluate (a ``ShardedTarget`` across replicas; default the
    target itself); ``saved_key``: the program's key by content, under
    which its traced functions are kept on disk (``program_cache``), or
    None to trace in every process; ``chains``: the chains its chunk runs
    (None: unknown, and the first chunk is compiled as the others)."""
    if not target.names and target.enumerated_names:
      raise ValueError(f"The program's only latent variables {list(target.enumerated_names)} "
                       "are discrete and summed out exactly, so there is nothing to sample; "
                       "give the model a continuous latent, or compute their posterior by "
                       "enumeration directly.")
    if not target.names:
      raise ValueError("The program has no latent variables: every random variable is "
                       "observed or fixed, so there is nothing to sample.")
    if target.dtype is None or not target.dtype.is_floating:
      raise TypeError("MCMC needs all latent variables in one floating dtype; "
                      f"they are {[(n, i.dtype.name) for n, i in target.latents.items()]}.")
    self.target, self.kernel, self.fingerprint = target, kernel, fingerprint
    if saved_key is not None and program_cache.directory() is not None:
      target.loop_facts(program_cache.remembered(
          program_cache.entry_name(saved_key, ("loop_facts",)), target.loop_facts))
    self.density = density = target if density is None else density
    self.compiled = False
    # A sharded target calls strategy.run, which XLA cannot hold: its
    # replicas' parts are compiled instead.
    jit = bool(jit_compile) and density is target
    if jit and target.has_unbounded_loops:
      warnings.warn("The program has a tf.while_loop without maximum_iterations, whose "
                    "gradient XLA cannot compile: sampling without XLA (slower); give the "
                    "loop maximum_iterations= to compile it.", RuntimeWarning, stacklevel=4)
      jit = False
    # A new run's first chunk runs without XLA (module docstring).
    self.first_chunk_without_xla = bool(
        jit and chains is not None and chains <= FIRST_CHUNK_MAX_CHAINS and not target.has_loops)
    alg = "threefry" if jit else "philox"

    def run_chunk(state, inputs, capacity, collects):
      with base.random_algorithm(alg):
        return chunk.run_chunk(target, density, kernel, state, inputs, capacity, collects)

    # Under XLA every op is stateless or dropped (Assert, Print), so the
    # control dependencies TensorFlow adds between stateful ops in program
    # order order nothing; finding them took a tenth of the chunk's trace
    # (RESULTS section 49).  Without XLA, assertions need them.
    # One set of functions per program: the same code traced once for each
    # program a session samples (console.per_call_function).
    self._run_chunk_fn = console.per_call_function(
        run_chunk, jit_compile=jit,
        experimental_attributes={"_disable_acd": True} if jit else None)
    self._draw_initial_fn = console.per_call_function(self._draw_initial)
    self._initial_chunk_state_fn = console.per_call_function(self._initial_chunk_state)
    self._concrete = {}
    self._called = set()  # argument keys whose first call ran (through the console's filter)
    self._without_xla = {}  # argument key -> the chunk's copy without XLA (or None)
    self._copy_lock = threading.Lock()
    self._compiling = None  # the thread compiling the chunk while the first chunk runs
    self._saved_key = saved_key
    self.loaded = []  # names of the functions loaded from the program cache
    self.log_prob = console.per_call_function(density.log_prob_flat)
    self._value_and_gradient_fn = console.per_call_function(
        lambda u: tfp.math.value_and_gradient(density.log_prob_flat, u))
    # The functions kept on disk: the two whose traces take seconds (the
    # small ones trace in less time than a SavedModel takes to load).
    self._names = {self._run_chunk_fn: "run_chunk",
                   self._value_and_gradient_fn: "value_and_gradient"}

  def _call(self, fn, *args):
    """``fn(*args)`` through the concrete function of the argument signature
    (Tensors by dtype and shape, anything else by value): the polymorphic
    ``tf.function`` call is slow to match its arguments."""
    key = self._key(fn, args)
    if key not in self._concrete:
      self._concrete[key] = self._concrete_function(fn, key, args)
    if key not in self._called:  # a copy without XLA may have made the function (_make_copy)
      self._called.add(key)
      return console.without_cache_note(self._concrete[key], *args)  # compiles or loads
    return self._concrete[key](*args)

  @staticmethod
  def _key(fn, args):
    """Which concrete function of ``fn`` serves ``args``."""
    return (fn,) + tuple((t.dtype, tuple(t.shape)) if isinstance(t, tf.Tensor) else t
                         for t in tf.nest.flatten(args))

  def compile_chunk_during(self, work, state, inputs, capacity, collects=True):
    """``work()``, while the chunk for these arguments compiles on another
    thread; returns ``work()``'s value.

    The chunk is traced (or loaded) here first; its first call, made by
    the thread with ``inputs`` asking for no transition, is the compile
    (XLA's, or the graph's optimization), which runs in C++ without
    Python's lock, so ``work`` (a run's initial states and first metric)
    proceeds on another core, and so does the first chunk when it runs
    without XLA (``first_chunk_without_xla``): the thread is then joined
    by the first compiled call (``run_chunk``), else here.  A later call
    with arguments of the same shapes finds the compiled program.  stderr
    passes through ``console.FilteredStderr`` while the thread runs, so the
    compile cache's note is dropped as on any first call.  A compile that
    fails is left to that later call, which raises its error."""
    args = (state, inputs, capacity, collects)
    key = self._key(self._run_chunk_fn, args)
    if key in self._concrete:
      return work()
    concrete = self._concrete[key] = self._concrete_function(self._run_chunk_fn, key, args)
    quiet = console.FilteredStderr()
    self._called.add(key)  # the thread's call is the first, filtered by ``quiet``

    def compile_chunk():
      try:
        concrete(*args)
      except Exception:  # pylint: disable=broad-except
        pass  # raised again, in the caller's thread, by the first real call
      finally:
        quiet.close()

    self._compiling = threading.Thread(target=compile_chunk, name="edward_lite-compile",
                                       daemon=True)
    self._compiling.start()
    try:
      value = work()
    except Exception:
      # Raised now, not after the compile (no initial state had a finite
      # density): the thread finishes in the background, unjoined, and
      # stderr is given back at once so that the error is seen.
      self._compiling = None
      quiet.close()
      raise
    except BaseException:  # an interrupt: the run leaves no compile running
      self.join_compile()
      raise
    if not self.first_chunk_without_xla:
      self.join_compile()
    return value

  def join_compile(self):
    """Waits for ``compile_chunk_during``'s thread, if one runs (by the
    first compiled call, and at the end of every run)."""
    thread = self._compiling  # read once: chain groups' threads call this at once
    if thread is not None:
      thread.join()
      self._compiling = None

  def _concrete_function(self, fn, key, args):
    """``fn``'s concrete function for ``args``: loaded from the program
    cache when a process traced it before, else traced (and saved)."""
    if (self._saved_key is None or fn not in self._names or
        program_cache.directory() is None):
      return fn.get_concrete_function(*args)
    name = program_cache.entry_name(self._saved_key, (self._names[fn],) + key[1:])
    loaded = program_cache.load(name)
    if loaded is not None:
      self.loaded.append(self._names[fn])
      return loaded
    return program_cache.keep(name, fn.get_concrete_function(*args), args)

  def run_chunk(self, state, inputs, capacity, collects=True, first=False):
    """``chunk.run_chunk`` of this target and kernel, compiled; without XLA
    when ``first`` (a new run's first chunk) and ``first_chunk_without_xla``."""
    args = (state, inputs, capacity, collects)
    copy = self._copy_without_xla(args) if first and self.first_chunk_without_xla else None
    if copy is not None:
      # Its stateless random ops (threefry) compile one by one with XLA:
      # loaded from the compile cache, each logs its note.
      return console.without_cache_note(copy, *args)
    self.join_compile()
    out = self._call(self._run_chunk_fn, *args)
    self.compiled = True
    return out

  def _copy_without_xla(self, args):
    """The chunk for ``args`` run without XLA: a copy of its traced or
    loaded function (``KeptFunction.without_xla``); None where none can be
    made (a function that cannot be kept, or a TensorFlow without the call
    by name)."""
    key = self._key(self._run_chunk_fn, args)
    with self._copy_lock:  # chain groups call from a thread per device
      return self._without_xla[key] if key in self._without_xla else self._make_copy(key, args)

  def _make_copy(self, key, args):
    """``_copy_without_xla``'s copy, made and kept."""
    if key not in self._concrete:
      self._concrete[key] = self._concrete_function(self._run_chunk_fn, key, args)
    kept = self._concrete[key]
    if not isinstance(kept, kept_function.KeptFunction):
      kept = kept_function.KeptFunction.from_concrete(kept, args, tag="copy",
                                                      max_captured_bytes=float("inf"))
    self._without_xla[key] = kept and kept.without_xla("without_xla")
    return self._without_xla[key]

  def value_and_gradient(self, u):
    """The log density ``[C]`` at ``u [C, D]`` and its gradient ``[C, D]``."""
    return self._call(self._value_and_gradient_fn, u)

  def draw_initial(self, init, chains, seed, radius, attempt):
    return self._call(self._draw_initial_fn, init, chains, seed, radius, attempt)

  def initial_chunk_state(self, u, step_size, chains, pooled, rank, batch_size):
    """The ``ChunkState`` of a new run (one call instead of ~20 eager ops),
    with the identity metric and ``rank`` columns of a low-rank part.
    ``pooled``: ``adaptation.pool_flags``' argument (a ``settings.Pooling``),
    traced as a plain pair."""
    pooled = adaptation.pool_flags(pooled)
    return self._call(self._initial_chunk_state_fn, u, step_size, chains, pooled, rank,
                      batch_size)

  def _initial_chunk_state(self, u, step_size, chains, pooled, rank, batch_size):
    dtype, dim = self.target.dtype, self.target.dim
    pool_step, pool_metric = adaptation.pool_flags(pooled)
    step_shape = [1, 1] if pool_step is True else [chains, 1]
    moments = adaptation.metric_moments_init(chains, dim, dtype, dense=rank > 0)
    return chunk.ChunkState(
        u=u, z=u, metric=metric.identity(dim, chains, pool_metric, False, rank, dtype),
        dual_avg=adaptation.dual_averaging_init(tf.fill(step_shape, step_size)),
        moments=moments, previous=moments,
        kernel_adapt=self.kernel.adapt_init(chains, dtype),
        stream=streaming.stream_init(chains, self.target.constrained_dim, dtype,
                                     batch_size=batch_size))

  def _draw_initial(self, init, chains, seed, radius, attempt):
    """Initial states ``[C, D]`` for ``init`` "uniform" (on ``[-radius,
    radius]``) or "prior", drawn from ``fold_in(seed, -1 - attempt)``: one
    call per attempt (``initial_states`` evaluates them)."""
    target = self.target
    init_seed = tf.random.experimental.stateless_fold_in(seed, -1 - attempt)
    if init == "prior":
      u = target.flatten(target.unconstrain(target.sample_prior(chains, init_seed)))
    else:
      u = tf.random.stateless_uniform([chains, target.dim], init_seed, -radius, radius,
                                      dtype=target.dtype)
    return u

  def state_template(self, chains, pooled, rank=0):
    """A ``ChunkState`` of the right structure, shapes and dtypes (values
    arbitrary): what a checkpoint's arrays are packed into.  Built by eager
    ops (a few milliseconds; tracing ``initial_chunk_state`` took 45 ms
    before the first chunk's trace, where a new run waits for it)."""
    target = self.target
    return self._initial_chunk_state(tf.zeros([chains, target.dim], target.dtype),
                                     tf.constant(1., target.dtype), chains, pooled, rank,
                                     tf.constant(1))
