"""``ed.vi.fit``: stochastic variational inference, compiled in chunks.

Maximizes the evidence lower bound

    ELBO(phi) = E_{q_phi}[log p(x, y) - log q_phi(x)]
              ~= (1/S) sum_s [log p(x_s, y) - log q_phi(x_s)],  x_s ~ q_phi,

with reparameterized draws, ``S = samples`` per step evaluated as one
vectorized batch (many log-density gradients in parallel make the gradient
of the ELBO stable enough for a plain Adam step).  With ``batch_size=B`` the
observed data is subsampled without replacement each step and the
likelihood scaled by ``N / B``, which keeps the ELBO estimate unbiased.

The optimization runs as compiled chunks of ``chunk_size`` steps (one
``tf.while_loop`` under ``tf.function(jit_compile=True)``); between chunks
the host updates the progress bar, checks the relative-ELBO-change stopping
rule and writes checkpoints.  Step ``t`` uses the stateless seed
``fold_in(seed, t)``, so a resumed fit continues exactly as an uninterrupted
one.  A step whose ELBO or gradient is not finite is skipped (and counted)
or stops the fit, with the step and the variable where it first appears.
"""

import time
import warnings

import numpy as np
import tensorflow as tf
import tf_keras

from edward_lite import distribute, nonfinite, runtime
from edward_lite.checkpoint import CheckpointMismatchError, Checkpointer, closes_checkpoints
from edward_lite.initialization import describe_init, parse_init
from edward_lite.progress_report import make_progress
from edward_lite.target import make_target
from edward_lite.vi import minibatch as minibatch_lib
from edward_lite.vi import families
from edward_lite.vi.families import get_family
from edward_lite.vi.results import VIResult
from edward_lite.vi.surrogates import FlatSurrogate, ProgramSurrogate, is_variational_program

__all__ = ["fit", "NonFiniteELBOError"]

DEFAULT_CHUNK = 100


class NonFiniteELBOError(FloatingPointError):
  """The ELBO or its gradient became NaN or infinite (``on_nonfinite="stop"``)."""


@closes_checkpoints
def fit(model, *args, observed=None, family="meanfield", steps=5000, samples=None, seed=0,
        optimizer=None, learning_rate=None, stl=False, batch_size=None, dataset=None,
        num_examples=None, tol=None,
        init="uniform", init_radius=2., warm_start=None, on_nonfinite="skip", chunk_size=None,
        progress=True, checkpoint_dir=None, jit_compile=True, callback=None,
        program_args=(), program_kwargs=None, strategy=None, parallel="data", dtype=None,
        **kwargs):
  """Fits a variational approximation to the posterior of ``model``.

  Args:
    model: an edward_lite program.
    *args, **kwargs: its arguments (keywords not listed here go to ``model``).
    observed: dict name -> observed value.
    family: ``"meanfield"``, ``"fullrank"``, ``"realnvp"``, ``"maf"``,
      ``"iaf"``, a family object (``ed.vi.RealNVP(layers=8, hidden=128)``)
      or a variational program (a callable drawing every latent under its
      model name, reading trainable ``tf.Variable``; called with
      ``program_args``/``program_kwargs``).
    steps: maximum number of optimization steps.
    samples: draws per step for the ELBO and its gradient (default by
      family: 32 mean-field, 64 full-rank, 128 RealNVP/IAF, 32 MAF).
    seed: integer seed; every random choice derives from it.
    optimizer: a Keras optimizer (tf_keras or Keras 3); default Adam at ``learning_rate``
      (default by family) with cosine decay to a hundredth over ``steps``.
    learning_rate: learning rate of the default optimizer.
    stl: use the sticking-the-landing gradient estimator.
    batch_size: subsample the observed data (and every program argument
      whose leading dimension is the number of observations ``N``) to
      ``batch_size`` per step, scaling the likelihood by ``N / batch_size``.
    dataset: a finite ``tf.data.Dataset`` of minibatches instead: dicts
      whose keys name observed random variables or keyword arguments of
      ``model``, the batch on the first axis; repeated for as many steps as
      needed, the likelihood of a batch of ``b`` rows scaled by ``N / b``.
      Importance weights take one pass over it.
    num_examples: ``N`` for ``dataset`` (counted with one pass when None).
    tol: stop when the relative change of the mean ELBO between consecutive
      chunks is below ``tol`` (None: run all ``steps``).
    init: initial location of a flat family: ``"uniform"`` (uniform in
      ``(-init_radius, init_radius)`` on the unconstrained space, as Stan),
      ``"prior"`` (median of prior draws), or a dict of constrained values.
    warm_start: steps of mean-field ADVI run first to set the location and
      scales of a full-rank or flow family (default ``min(500, steps)``).
      Adam moves each parameter by about the learning rate per step, so a
      richer family (smaller learning rate, costlier steps) would otherwise
      spend many steps just travelling to the posterior's location.
    on_nonfinite: ``"skip"`` a step whose ELBO or gradient is NaN/inf
      (counted, reported with a warning) or ``"stop"`` with a
      ``NonFiniteELBOError``; both name the first such step and the variable
      (or data) where the non-finite value appears, found by recomputing
      that step on its draws and its minibatch.
    chunk_size: steps per compiled call between host updates (default 100).
    progress: report progress with the ELBO, as ``ed.mcmc.sample``'s.
    checkpoint_dir: directory for checkpoints of the trainable state; an
      interrupted fit resumes from it when called again with the same
      arguments.  With ``dataset`` the resumed fit reads the dataset again
      and skips the batches already used, so it equals an uninterrupted fit
      only if the dataset yields the same batches in the same order each
      time (a ``shuffle`` needs a ``seed``).
    jit_compile: compile the chunk with XLA (default True; with a strategy,
      each replica's part).
    dtype: the model's floating dtype (default float32; ``tf.float64`` for
      double precision, see ``ed.make_target``).
    callback: optional ``callback(info)`` after every chunk with ``step``,
      ``elbo`` (mean over the chunk) and ``skipped``.
    strategy: a ``tf.distribute.Strategy`` (or a name for
      ``ed.distribute.strategy``) to spread the model's log density and its
      gradient over the replicas; the surrogate and the optimizer stay on
      the host.
    parallel: with ``strategy``: ``"data"`` shards the observations (or each
      minibatch, whose size must then be a multiple of the replica count:
      ``batch_size``, or every batch of ``dataset`` -- batch it with
      ``drop_remainder=True``) across the replicas, ``"chains"`` splits the
      ``samples`` draws of each step among them.

  Returns:
    A ``VIResult``.
  """
  runtime.check_model_kwargs(model, kwargs, fit, "ed.vi.fit")
  integer = runtime.check_integer
  steps, seed = integer("steps", steps, 1), integer("seed", seed, 0)
  chunk = integer("chunk_size", chunk_size, 1) if chunk_size is not None else DEFAULT_CHUNK
  if on_nonfinite not in ("skip", "stop"):
    raise ValueError(f"on_nonfinite must be 'skip' or 'stop'; got {on_nonfinite!r}.")
  runtime.check_call_settings(observed=observed, callback=callback, stl=stl,
                              jit_compile=jit_compile)
  runtime.check_positive("init_radius", init_radius)
  if not isinstance(program_args, (tuple, list)):
    raise TypeError(f"program_args must be a tuple of the variational program's positional "
                    f"arguments; got {type(program_args).__name__}.")
  if program_kwargs is not None and not isinstance(program_kwargs, dict):
    raise TypeError(f"program_kwargs must be a dict or None; got "
                    f"{type(program_kwargs).__name__}.")
  if tol is not None:
    runtime.check_positive("tol", tol, "a positive number or None")
  strategy = distribute.resolve(strategy, parallel)
  if strategy is not None:
    replicas = strategy.num_replicas_in_sync
    if parallel == "data" and batch_size is not None and batch_size % replicas:
      raise ValueError(f"A data-parallel minibatch must split evenly across the {replicas} "
                       f"replicas; batch_size={batch_size} is not a multiple of {replicas}.")
  target, batches = _target_and_batches(model, args, kwargs, observed, batch_size, dataset,
                                        num_examples, dtype)

  program = is_variational_program(family)
  fam = None if program else get_family(family)
  if samples is None:
    samples = 32 if program else fam.default_samples
  samples = integer("samples", samples, 1)
  if strategy is not None and parallel == "chains" and samples % replicas:
    raise ValueError(f"parallel='chains' splits the samples of each step across the "
                     f"{replicas} replicas; samples={samples} is not a multiple of {replicas}.")
  if stl and program:
    raise ValueError("stl=True needs a flat family; a variational program cannot hold its "
                     "parameters fixed in its density.")
  if stl and not fam.cheap_density:
    raise ValueError(f"stl=True needs the density of the family at its own draws with the "
                     f"parameters held fixed, which '{fam.name}' computes in D sequential "
                     "passes; use 'realnvp' or stl=False.")

  seed_t = tf.constant(runtime.seed_pair(seed), tf.int32)
  if warm_start is None:
    warm_start = 0 if program or isinstance(fam, families.MeanField) else min(500, steps)
  warm_start = runtime.check_integer("warm_start", warm_start, 0)
  optimizer = _optimizer(optimizer, learning_rate,
                         0.01 if program else fam.default_learning_rate, steps)
  init_loc = None if program else _initial_loc(target, init, init_radius, seed_t)
  _check_finite_start(target, init_loc, init_radius, seed_t)

  ckpt, resumed = None, None
  if checkpoint_dir:
    fingerprint = runtime.fingerprint(model, args, kwargs, observed)
    ckpt = Checkpointer(checkpoint_dir, fingerprint, dict(
        family=_describe_family(family, fam), steps=steps, samples=samples, seed=seed,
        learning_rate=learning_rate, stl=stl, batch_size=batch_size, tol=tol,
        dataset=None if dataset is None else [repr(dataset.element_spec), batches.num_examples],
        init=describe_init(init), warm_start=warm_start,
        optimizer=_describe(optimizer), chunk_size=chunk, jit_compile=bool(jit_compile)))
    resumed = ckpt.load()

  if program:
    surrogate = ProgramSurrogate(family, target, program_args, program_kwargs)
  else:
    loc, scale = init_loc, None
    if warm_start and not isinstance(fam, families.MeanField) and resumed is None:
      warm = fit(model, *args, observed=observed, family="meanfield", steps=warm_start,
                 seed=seed, batch_size=batch_size, dataset=dataset,
                 num_examples=getattr(batches, "num_examples", None), init=init,
                 init_radius=init_radius, progress=progress, jit_compile=jit_compile,
                 strategy=strategy, parallel=parallel, dtype=dtype, **kwargs)
      raw = warm.raw_params
      loc, scale = raw["loc"], np.logaddexp(0., raw["scale"])  # softplus
    surrogate = FlatSurrogate(fam, target, loc, scale)
  optimizer.build(surrogate.variables)

  state_vars = surrogate.variables + list(optimizer.variables)
  step, elbo_chunks, skipped, first_bad, reason = 0, [], 0, None, None
  if resumed is not None:
    step, elbo_chunks, skipped, first_bad, reason = _restore(resumed, state_vars, batches,
                                                             checkpoint_dir)

  # The model's log density of each step: on this device, or spread over the
  # replicas of a strategy (strategy.run cannot sit inside XLA; each
  # replica's part is compiled instead).
  step_target = target if strategy is None else distribute.ShardedTarget(
      target, strategy, parallel, model=model, jit_compile=jit_compile,
      place_shards=batches is None)
  compiled = (batches is None or batches.compiled) and strategy is None
  train_step = _make_train_step(surrogate, step_target, batches, optimizer, seed_t, samples,
                                stl)
  if batches is not None and not batches.compiled:
    # The loop reads a dataset iterator: compile the step only.
    train_step = tf.function(train_step, jit_compile=jit_compile and strategy is None)
  run_chunk = tf.function(
      lambda start, n, stop_on_bad: _run_chunk(
          train_step, batches, seed_t, start, n, stop_on_bad, chunk,
          surrogate.variables[0].dtype),
      jit_compile=jit_compile and compiled)
  bar = make_progress(progress, steps, step, "fitting")
  timings = dict(compile_s=0., train_s=0.)
  first_chunk, start_step = None, step
  converged, previous = False, None
  while step < steps:
    n = min(chunk, steps - step)
    # Until the first non-finite step has been diagnosed, stop at it (with
    # the parameters and the data it saw); afterwards skip such steps in the loop.
    stop_on_bad = on_nonfinite == "stop" or reason is None
    start_time = time.perf_counter()
    elbo, done, bad_count, data = run_chunk(tf.constant(step), tf.constant(n),
                                            tf.constant(stop_on_bad))
    elapsed = time.perf_counter() - start_time
    timings["compile_s" if not timings["compile_s"] else "train_s"] += elapsed
    done, bad_count = int(done), int(bad_count)
    if bad_count and stop_on_bad:
      first_bad = step + done
      bad_target = batches.target_for(target, data) if batches else target
      reason = _diagnose(surrogate, target, bad_target, seed_t, samples, stl, first_bad,
                         jit_compile and strategy is None)
      if on_nonfinite == "stop":
        raise NonFiniteELBOError(
            f"Non-finite ELBO at step {first_bad}: {reason} The parameters are those "
            "before that step; lower the learning rate or check the model.")
      # The step was not applied: count it as skipped here and go on with the
      # next step (and, from a dataset, the next batch).
      done += 1
    first_chunk = done if first_chunk is None else first_chunk
    elbo = elbo.numpy()[:done]
    skipped += bad_count
    elbo_chunks.append(elbo)
    step += done
    if bar is not None:
      bar.set_postfix(elbo=f"{np.nanmean(elbo):.4g}" if done else "nan", skipped=skipped,
                      refresh=False)
      bar.update(done)
    if ckpt and done:
      ckpt.save([v.numpy() for v in state_vars], step, {"kept": {
          "elbo": elbo_chunks, "skipped": [np.asarray(bad_count)],
          "first_bad": [np.asarray(-1 if first_bad is None else first_bad)],
          "reason": [np.asarray(reason or "")]}})
    mean = float(np.nanmean(elbo)) if np.isfinite(elbo).any() else np.nan
    if callback is not None:
      callback(dict(step=step, elbo=mean, skipped=skipped))
    if tol is not None and previous is not None and np.isfinite(mean) and done == n:
      if abs(mean - previous) / max(abs(mean), 1e-12) < tol:
        converged = True
        break
    if done == n:
      previous = mean
  if bar is not None:
    bar.close()
  # Steady state: the steps after the first (compiling) chunk.
  timings["steps_per_s"] = ((step - start_step - first_chunk) / timings["train_s"]
                            if timings["train_s"] else float("nan"))
  nonfinite = None
  if skipped:
    nonfinite = dict(skipped=skipped, first_step=first_bad, reason=reason)
    warnings.warn(f"{skipped} of {step} steps had a non-finite ELBO or gradient and were "
                  f"skipped; the first at step {first_bad}: {reason}", RuntimeWarning,
                  stacklevel=2)
  full_log_prob = None
  if dataset is not None:
    full_log_prob = batches.full_log_prob_fn(surrogate.model_log_prob, target)
  return VIResult(target=target, surrogate=surrogate, family=fam or family,
                  full_log_prob=full_log_prob,
                  elbo=np.concatenate(elbo_chunks) if elbo_chunks else np.zeros([0]),
                  steps=step, samples=samples, converged=converged, nonfinite=nonfinite,
                  timings=timings, seed=seed, settings=dict(
                      family=_describe_family(family, fam), steps=steps, samples=samples,
                      seed=seed, learning_rate=learning_rate, stl=bool(stl),
                      batch_size=batch_size, tol=tol,
                      init=init if isinstance(init, str) else "dict",
                      init_radius=float(init_radius), warm_start=warm_start,
                      on_nonfinite=on_nonfinite, chunk_size=chunk,
                      jit_compile=bool(jit_compile), optimizer=_describe(optimizer),
                      dtype=None if dtype is None else tf.as_dtype(dtype).name,
                      dataset=dataset is not None,
                      num_examples=getattr(batches, "num_examples", None),
                      strategy=None if strategy is None else type(strategy).__name__,
                      parallel=parallel))


def _target_and_batches(model, args, kwargs, observed, batch_size, dataset, num_examples,
                        dtype=None):
  """``(target, batches)``: the full-data target and the source of the
  minibatches (a ``Minibatcher``, ``DatasetBatches`` or None)."""
  if dataset is not None:
    if batch_size is not None:
      raise ValueError("Give batch_size= (to subsample arrays) or dataset=, not both.")
    batches = minibatch_lib.DatasetBatches(model, args, kwargs, observed, dataset,
                                           num_examples, dtype)
    target = batches.target
  else:
    target = make_target(model, *args, observed=observed, dtype=dtype, **kwargs)
    batches = (minibatch_lib.Minibatcher(model, args, kwargs, observed, batch_size, target)
               if batch_size is not None else None)
  if not target.names:
    raise ValueError("The program has no latent variables: nothing to fit.")
  if target.dtype is None or not target.dtype.is_floating:
    raise TypeError("Variational inference needs all latent variables in one floating dtype; "
                    f"they are {[(n, i.dtype.name) for n, i in target.latents.items()]}.")
  return target, batches


def _optimizer(optimizer, learning_rate, default_rate, steps):
  """``optimizer`` checked, or Adam at ``learning_rate`` (default
  ``default_rate``) with cosine decay to a hundredth over ``steps``."""
  if optimizer is None:
    rate = learning_rate if learning_rate is not None else default_rate
    if isinstance(rate, bool) or not isinstance(rate, (int, float, np.integer, np.floating)) \
        or not (np.isfinite(rate) and rate > 0):
      raise ValueError(f"learning_rate must be a positive number; got {rate!r}.")
    return tf_keras.optimizers.Adam(tf_keras.optimizers.schedules.CosineDecay(
        rate, decay_steps=steps, alpha=0.01))
  if not _is_keras_optimizer(optimizer):
    raise TypeError(f"optimizer must be a Keras optimizer (tf_keras.optimizers.Adam(...) or "
                    f"keras.optimizers.Adam(...)); got {type(optimizer).__name__}.")
  return optimizer


def _restore(resumed, state_vars, batches, checkpoint_dir):
  """Loads a checkpoint into ``state_vars`` and positions a dataset's batch
  stream; returns ``(step, elbo chunks, skipped steps, first non-finite
  step, its diagnosis)`` so far (the last two None when there was none)."""
  if [np.shape(a) for a in resumed["state"]] != [tuple(v.shape) for v in state_vars]:
    raise CheckpointMismatchError(
        f"The checkpoint in {checkpoint_dir} holds variational parameters of other shapes "
        "than this fit's; use another checkpoint_dir or delete it.")
  for variable, value in zip(state_vars, resumed["state"]):
    variable.assign(value)
  step = resumed["step"]
  if isinstance(batches, minibatch_lib.DatasetBatches):
    batches.seek(step)
  kept = resumed["host"]["kept"]
  first_bad = int(kept["first_bad"][-1]) if kept.get("first_bad") else -1
  return (step, list(kept.get("elbo", [])),
          int(sum(np.sum(c) for c in kept.get("skipped", []))),
          None if first_bad < 0 else first_bad,
          str(kept["reason"][-1]) if first_bad >= 0 else None)


# -- the compiled chunk ----------------------------------------------------------


def _elbo_and_gradients(surrogate, target, seed, samples, stl, step):
  """``(elbo, gradients, state, log_q)`` of one step on ``target`` (the step's
  minibatch): the ELBO estimate, its gradients with respect to the surrogate's
  variables, and the step's draws with their surrogate log density."""
  draw_seed = tf.random.experimental.stateless_fold_in(seed, step)
  with tf.GradientTape() as tape:
    state, log_q = surrogate.draw(samples, draw_seed, stl)
    log_p = surrogate.model_log_prob(target, state)
    elbo = tf.reduce_mean(log_p - log_q)
    loss = -elbo
  grads = tape.gradient(loss, surrogate.variables,
                        unconnected_gradients=tf.UnconnectedGradients.ZERO)
  return elbo, grads, state, log_q


def _make_train_step(surrogate, target, batches, optimizer, seed, samples, stl):
  """``train_step(step, data) -> (elbo, finite)``: one optimizer update,
  applied only when the ELBO and every gradient are finite."""

  def train_step(step, data):
    step_target = batches.target_for(target, data) if batches else target
    elbo, grads, _, _ = _elbo_and_gradients(surrogate, step_target, seed, samples, stl, step)
    finite = tf.math.is_finite(elbo)
    for g in grads:
      # The square too: Adam's second moment would overflow to inf (and the
      # parameters to NaN) on a finite gradient above ~1e19 in float32.
      finite &= tf.reduce_all(tf.math.is_finite(tf.square(g)))

    def apply():
      optimizer.apply_gradients(zip(grads, surrogate.variables))
      return tf.constant(True)

    tf.cond(finite, apply, lambda: tf.constant(False))
    return elbo, finite

  return train_step


def _run_chunk(train_step, batches, seed, start, n, stop_on_bad, capacity, dtype):
  """Runs up to ``n`` steps from step ``start``.

  Returns ``(elbo[capacity], steps done, non-finite steps, data)``, ``data``
  the data of the last step run (an empty placeholder without minibatches).
  With ``stop_on_bad`` the loop ends at a non-finite step, which is not
  applied and not counted as done, and ``data`` is its data.
  """
  # What the batch source carries from step to step (the epoch's permutation).
  carry = batches.carry_init(seed, start) if batches else tf.zeros([0], tf.int32)
  spec = batches.data_spec if batches else tf.TensorSpec([0], tf.int32)

  def body(i, trace, bad_count, carry, data):
    step = start + i
    if batches:
      carry, data = batches.next(carry, seed, step)
    elbo, finite = train_step(step, data)
    trace = tf.tensor_scatter_nd_update(trace, [[i]], tf.reshape(elbo, [1]))
    bad_count += tf.cast(~finite, tf.int32)
    done = i + tf.where(stop_on_bad & ~finite, 0, 1)
    return done, trace, bad_count, carry, data

  def cond(i, trace, bad_count, carry, data):
    del trace, carry, data
    return (i < n) & ~(stop_on_bad & (bad_count > 0))

  loop_vars = (tf.constant(0), tf.fill([capacity], tf.constant(np.nan, dtype)),
               tf.constant(0), carry, tf.nest.map_structure(_placeholder, spec))
  # The data's shape as its spec: a dataset's batches may differ in size.
  shapes = tf.nest.map_structure(lambda v: v.shape, loop_vars[:-1] + (spec,))
  i, trace, bad_count, _, data = tf.while_loop(cond, body, loop_vars, shape_invariants=shapes)
  return trace, i, bad_count, data


def _placeholder(spec):
  """A tensor compatible with ``spec`` (its unknown dimensions 0)."""
  shape = [] if spec.shape.rank is None else [d or 0 for d in spec.shape]
  return tf.zeros(shape, spec.dtype)


# -- diagnosis of a non-finite step ------------------------------------------------


def _diagnose(surrogate, target, step_target, seed, samples, stl, step, jit_compile):
  """One sentence: where the first non-finite value of step ``step`` appears.

  ``step_target`` is ``target`` on the step's data (its minibatch).  The
  step's draws, ELBO and gradients are recomputed compiled as in the loop
  (``jit_compile``): XLA draws other random numbers than TensorFlow's kernels.
  """
  params = surrogate.named(surrogate.variables)
  for name, value in params.items():
    if not np.all(np.isfinite(value.numpy())):
      return f"the surrogate parameter '{name}' is not finite."
  _, kwargs, observed = step_target.data
  for name, value in [*kwargs.items(), *observed.items()]:
    if tf.is_tensor(value) and value.dtype.is_floating:
      bad = int(np.sum(~np.isfinite(value.numpy())))
      if bad:
        return (f"the data '{name}' of this step contains {bad} non-finite value(s) "
                "(NaN or inf); remove or impute them.")
  _, elbo_grads, state, log_q = tf.function(
      lambda: _elbo_and_gradients(surrogate, step_target, seed, samples, stl,
                                  tf.constant(step)),
      jit_compile=jit_compile)()
  values = surrogate.constrained(target, state)
  for name, value in values.items():
    bad = int(np.sum(~np.all(np.isfinite(np.reshape(value.numpy(), [samples, -1])), axis=1)))
    if bad:
      return (f"the draws of latent '{name}' are not finite ({bad} of {samples} draws); "
              "the surrogate's scale may have blown up.")
  flat = target.flatten(target.unconstrain(values))
  reason = nonfinite.explain(step_target, flat, "draws")  # names the term and the cause
  if reason:
    return reason
  bad = int(np.sum(~np.isfinite(log_q.numpy())))
  if bad:
    return f"the surrogate's log density is not finite at {bad} of {samples} draws."
  _, grads = step_target.value_and_gradient(target.unflatten(flat))
  for name, grad in grads.items():
    if not np.all(np.isfinite(grad.numpy())):
      return f"the gradient of the log density with respect to '{name}' is not finite."
  for name, grad in surrogate.named(elbo_grads).items():
    grad = grad.numpy()
    if not np.all(np.isfinite(grad)):
      return f"the ELBO gradient with respect to the surrogate parameter '{name}' is not finite."
    with np.errstate(over="ignore"):
      overflows = not np.all(np.isfinite(np.square(grad)))
    if overflows:
      return (f"the ELBO gradient with respect to the surrogate parameter '{name}' is so "
              f"large ({np.max(np.abs(grad)):.3g}) that the optimizer's squared "
              "gradient overflows; rescale the model (e.g. a tiny scale parameter).")
  return "the non-finite value could not be reproduced by recomputing the step."


# -- inputs ---------------------------------------------------------------------

START_POINTS = 128  # uniform points tried when the initial location's density is not finite


def _check_finite_start(target, loc, radius, seed):
  """Raises ``ValueError`` naming the non-finite term and its likely cause when
  the log density is finite neither at the initial location ``loc`` ``[D]``
  (None for a variational program) nor at any of ``START_POINTS`` points
  uniform on ``[-radius, radius]`` (unconstrained): every step would be
  skipped.  One eager run of the program normally; before compiled work."""
  points = []
  if loc is not None:
    point = np.asarray(loc, target.dtype.as_numpy_dtype)[None]
    if np.all(np.isfinite(point)) and np.isfinite(
        float(tf.add_n(list(nonfinite.terms_at(target, point[0]).values())))):
      return
    points.append(point)
  radius = radius if np.isfinite(radius) and radius > 0 else 2.
  draws = tf.random.stateless_uniform(
      [START_POINTS, target.dim], runtime.stream(seed, "vi_start_points"),
      -radius, radius, dtype=target.dtype)
  if np.isfinite(target.log_prob_flat(draws).numpy()).any():
    return
  points.append(draws.numpy())
  points = np.concatenate(points)
  reason = nonfinite.explain(target, points, "starting points")
  where = "the initial location nor at " if loc is not None else ""
  raise ValueError(
      f"The log density is finite neither at {where}any of {START_POINTS} points drawn "
      f"uniformly in [-{radius:g}, {radius:g}] on the unconstrained space, so every step "
      f"would be skipped" + (f": {reason}" if reason else ".") +
      " Check the model's support and data, or pass init= values inside the support.")


def _initial_loc(target, init, radius, seed):
  """Initial location ``[D]`` of a flat family on the unconstrained space."""
  given = parse_init(target, init, 1, allow_array=False)
  if not isinstance(given, str):
    return given[0]
  dtype = target.dtype.as_numpy_dtype
  if given == "uniform":
    return tf.random.stateless_uniform([target.dim], seed, -radius, radius, dtype=dtype).numpy()
  draws = target.sample_prior(101, runtime.stream(seed, "vi_prior_start"))
  u = target.flatten(target.unconstrain(draws)).numpy()
  return np.median(u, axis=0).astype(dtype)


def _is_keras_optimizer(optimizer):
  if isinstance(optimizer, tf_keras.optimizers.Optimizer):
    return True
  try:
    import keras  # pylint: disable=g-import-not-at-top
  except ImportError:
    return False
  return isinstance(optimizer, keras.optimizers.Optimizer)


def _describe_family(family, fam):
  if fam is not None:
    return fam.settings()
  return getattr(family, "__qualname__", repr(family))


def _describe(optimizer):
  config = optimizer.get_config()
  return {k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v))
          for k, v in config.items()}
