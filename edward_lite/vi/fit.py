"""``ed.vi.fit``: stochastic variational inference, compiled in chunks.

Maximizes the evidence lower bound

    ELBO(phi) = E_{q_phi}[log p(x, y) - log q_phi(x)]
              ~= (1/S) sum_s [log p(x_s, y) - log q_phi(x_s)],  x_s ~ q_phi,

with reparameterized draws, ``S = samples`` per step evaluated as one
vectorized batch (many log-density gradients in parallel make the gradient
of the ELBO stable enough for a plain Adam step).  With ``batch_size=B`` the
observed data is subsampled without replacement each step and the
likelihood scaled by ``N / B``, which keeps the ELBO estimate unbiased.

The call's settings are checked once (``settings.py``: ``FitSettings``,
the checkpoint's identity and the result's settings).  The fit is a list
of stages (``stages.py``): for a full-rank or flow family a mean-field
warm start first, then the family itself.  Each stage
runs compiled chunks of ``chunk_size`` steps (``elbo.py``) under the host
loop shared with ``ed.mcmc.sample`` (``engine.py``): progress, the
relative-ELBO-change stopping rule, checkpoints.  Step ``t`` uses the
stateless seed ``fold_in(seed, t)``, so a resumed fit continues exactly as
an uninterrupted one.  A step whose ELBO or gradient is not finite is
skipped (and counted) or stops the fit, with the step and the variable
where it first appears (``elbo_diagnosis.py``).
"""

import warnings

import numpy as np
import tensorflow as tf

from edward_lite.checks import arguments
from edward_lite.language import tracing
from edward_lite.runtime import fingerprints, seeds
from edward_lite.runtime.checkpoint import Checkpointer, closes_checkpoints
from edward_lite.model.init_values import MODES as INIT_MODES
from edward_lite.model.init_values import PartialInit, complete, parse_init
from edward_lite.model.target import make_target
from edward_lite.vi import minibatch as minibatch_lib
from edward_lite.vi import families, fit_check
from edward_lite.vi.families import get_family
from edward_lite.vi.elbo_diagnosis import check_finite_start
from edward_lite.vi.results import VIResult
# DEFAULT_CHUNK: still importable from here.
from edward_lite.vi.settings import (  # pylint: disable=unused-import
    DEFAULT_CHUNK, FitSettings, make_optimizer)
from edward_lite.vi.start import elbo_start
from edward_lite.vi.stages import NonFiniteELBOError, Problem, Stage, restore, run_stage
from edward_lite.vi.surrogates import FlatSurrogate, ProgramSurrogate

__all__ = ["fit", "NonFiniteELBOError"]


@closes_checkpoints
def fit(model, *args, observed=None, family="meanfield", steps=5000, samples=None, seed=0,
        optimizer=None, learning_rate=None, stl=False, batch_size=None, dataset=None,
        num_examples=None, tol=None,
        init="auto", init_radius=2., warm_start=None, on_nonfinite="skip", chunk_size=None,
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
    init: initial location of a flat family: ``"auto"`` (the default: the
      location maximizing the ELBO of the starting surrogate at a fixed
      scale, by L-BFGS from a ``"uniform"`` point, ``vi/start.py``; Adam
      alone moves each parameter by about its learning rate per step, so
      from near 0 it cannot reach a mean of 243 in 5,000 steps; with
      ``dataset``, whose full data is not at hand, ``"uniform"``),
      ``"uniform"`` (uniform in ``(-init_radius, init_radius)`` on the
      unconstrained space, as Stan), ``"prior"`` (median of prior draws), or
      a dict of constrained values (those it does not name start uniform).
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
    A ``VIResult``.  At the end of the fit (not with ``dataset``) its Pareto
    k-hat is computed from 4000 draws, and a ``RuntimeWarning`` says when
    k-hat or the ELBO trace shows the fit cannot be trusted
    (``fit_check.py``).
  """
  arguments.check_model_kwargs(model, kwargs, fit, "ed.vi.fit")
  settings = FitSettings.from_call(
      family=family, steps=steps, samples=samples, seed=seed, optimizer=optimizer,
      learning_rate=learning_rate, stl=stl, batch_size=batch_size, dataset=dataset,
      num_examples=num_examples, tol=tol, init=init, init_radius=init_radius,
      warm_start=warm_start, on_nonfinite=on_nonfinite, chunk_size=chunk_size,
      progress=progress, checkpoint_dir=checkpoint_dir, jit_compile=jit_compile,
      callback=callback, program_args=program_args, program_kwargs=program_kwargs,
      strategy=strategy, parallel=parallel, dtype=dtype, observed=observed)
  target, batches = target_and_batches(model, args, kwargs, observed, batch_size, dataset,
                                        num_examples, dtype)
  settings = settings.for_family(batches)
  fam = settings.fam

  seed_t = tf.constant(seeds.seed_pair(settings.seed), tf.int32)
  spent = {"gradients": 0}  # model gradients evaluated: the start, warm start and fit
  init_loc = (None if settings.program
              else _initial_loc(target, settings.init, settings.init_radius, seed_t, fam, spent))
  check_finite_start(target, init_loc, settings.init_radius, seed_t)

  ckpt, resumed = None, None
  if settings.checkpoint_dir:
    fingerprint = fingerprints.fingerprint(model, args, kwargs, observed,
                                          tracing.active_tracers())
    ckpt = Checkpointer(settings.checkpoint_dir, fingerprint, settings.checkpoint_settings())
    resumed = ckpt.load()

  problem = Problem(model=model, target=target, batches=batches, seed=seed_t,
                    strategy=settings.strategy, parallel=settings.parallel,
                    jit_compile=settings.jit_compile)
  if settings.program:
    surrogate = ProgramSurrogate(settings.family, target, settings.program_args,
                                 settings.program_kwargs)
  else:
    loc, scale = init_loc, None
    if settings.warm_start and not isinstance(fam, families.MeanField) and resumed is None:
      loc, scale = _warm_start(problem, init_loc, settings.warm_start, settings.chunk_size,
                               settings.progress, spent)
    surrogate = FlatSurrogate(fam, target, loc, scale)
  settings.optimizer.build(surrogate.variables)
  stage = Stage(label="fitting", surrogate=surrogate, optimizer=settings.optimizer,
                steps=settings.steps, samples=settings.samples, stl=settings.stl,
                tol=settings.tol, on_nonfinite=settings.on_nonfinite, chunk=settings.chunk_size,
                progress=settings.progress, checkpointer=ckpt, callback=settings.callback)
  start, trace = 0, None
  if resumed is not None:
    start, trace = resumed["step"], restore(stage, resumed, batches, settings.checkpoint_dir)
  out = run_stage(stage, problem, start, trace)
  if out.nonfinite:
    _warn_skipped(out)
  spent["gradients"] += (out.steps - start) * settings.samples
  full_log_prob = None
  if settings.dataset is not None:
    full_log_prob = batches.full_log_prob_fn(surrogate.model_log_prob, target)
  result = VIResult(target=target, surrogate=surrogate, family=fam or settings.family,
                    full_log_prob=full_log_prob,
                    elbo=out.elbo, steps=out.steps, samples=settings.samples,
                    converged=out.converged,
                    nonfinite=out.nonfinite, timings=out.timings, seed=settings.seed,
                    settings=settings.result_settings(), num_gradients=spent["gradients"])
  if settings.dataset is None:
    fit_check.warn_if_untrusted(result)
  return result


def target_and_batches(model, args, kwargs, observed, batch_size, dataset, num_examples,
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


def _warm_start(problem, init_loc, steps, chunk, progress, spent):
  """``(loc, scale)`` ``[D]`` after ``steps`` of mean-field ADVI from
  ``init_loc``, with the mean-field defaults (samples, learning rate);
  ``spent["gradients"]`` counts the model gradients."""
  mean_field = get_family("meanfield")
  surrogate = FlatSurrogate(mean_field, problem.target, init_loc)
  optimizer = make_optimizer(None, None, mean_field.default_learning_rate, steps)
  optimizer.build(surrogate.variables)
  out = run_stage(Stage(label="warm start", surrogate=surrogate, optimizer=optimizer,
                        steps=steps, samples=mean_field.default_samples, stl=False, tol=None,
                        on_nonfinite="skip", chunk=chunk, progress=progress), problem)
  spent["gradients"] += out.steps * mean_field.default_samples
  if out.nonfinite:
    _warn_skipped(out, " of the mean-field warm start")
  if isinstance(problem.batches, minibatch_lib.DatasetBatches):
    problem.batches.seek(0)  # the family's stage reads the dataset from its start
  raw = surrogate.named(surrogate.variables)
  return raw["loc"].numpy(), np.logaddexp(0., raw["scale"].numpy())  # softplus


def _warn_skipped(out, which=""):
  skipped = out.nonfinite
  warnings.warn(f"{skipped['skipped']} of {out.steps} steps{which} had a non-finite ELBO or "
                f"gradient and were skipped; the first at step {skipped['first_step']}: "
                f"{skipped['reason']}", RuntimeWarning, stacklevel=3)


# -- inputs ---------------------------------------------------------------------


def _initial_loc(target, init, radius, seed, fam, spent):
  """Initial location ``[D]`` of a flat family on the unconstrained space
  (``spent``: ``elbo_start``'s)."""
  given = parse_init(target, init, 1, allow_array=False, modes=("auto", *INIT_MODES))
  dtype = target.dtype.as_numpy_dtype
  if isinstance(given, PartialInit):  # the others by the uniform rule
    u = tf.random.stateless_uniform([1, target.dim], seed, -radius, radius, dtype=dtype)
    return complete(target, given, u.numpy())[0]
  if not isinstance(given, str):
    return given[0]
  if given == "auto":
    return elbo_start(target, radius, fam.init_scale, seed, spent)
  if given == "uniform":
    return tf.random.stateless_uniform([target.dim], seed, -radius, radius, dtype=dtype).numpy()
  draws = target.sample_prior(101, seeds.stream(seed, "vi_prior_start"))
  u = target.flatten(target.unconstrain(draws)).numpy()
  return np.median(u, axis=0).astype(dtype)
