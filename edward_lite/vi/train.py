"""``ed.vi.train``: amortized variational inference and deep generative
models (VAEs), trained over a ``tf.data`` pipeline under any ``tf.distribute``
strategy.

Maximizes, over the weights of the guide's networks (an encoder) and of the
model's (a decoder), the per-example ELBO of each step's batch ``b``,

    ELBO = (1/B) sum_{i in b} [log p(x_i | z_i) + log p(z_i) - log q(z_i | x_i)],

``z_i`` drawn by the guide from per-example noise (``amortized.py``; ``B``
the global batch size).  Under a strategy each replica differentiates its
rows' part of that sum divided by the global ``B`` (an all-reduce of the row
counts), and the optimizer sums the replicas' gradients (an all-reduce), so
the update equals the single-device update on the global batch.  Step ``t``
reads the ``t``-th batch of the repeated dataset and noise stateless in
``(seed, t)``; with the weights, the optimizer's state and ``t`` saved, a
resumed run continues exactly as an uninterrupted one.
"""

import contextlib
import dataclasses
import hashlib
import random
import time
import warnings

import numpy as np
import tensorflow as tf
import tf_keras
from tensorflow.python.eager import context  # pylint: disable=g-direct-tensorflow-import

from edward_lite.checks import arguments
from edward_lite.distribute.strategies import resolve
from edward_lite.runtime import console, content_hash, fingerprints, seeds
from edward_lite.runtime.checkpoint import Checkpointer, closes_checkpoints
from edward_lite.runtime.chunked_run import ChunkOutcome, ChunkRecord, run_chunks
from edward_lite.vi import amortized, objectives, train_step
from edward_lite.vi.early_stopping import EarlyStopping, StopTraining, Tracker
from edward_lite.vi.train_result import Evaluator, Scalars

__all__ = ["train"]


@closes_checkpoints
def train(model, guide, dataset, *, steps=None, epochs=None, objective=None, optimizer=None,
          learning_rate=1e-3, strategy=None, seed=0, checkpoint_dir=None, checkpoint_every=None,
          tensorboard_dir=None, evaluate=None, eval_every=None, early_stopping=None,
          progress=True, steps_per_call=50, jit_compile="auto"):
  """Trains a model with per-datapoint latents and its amortized guide.

  Args:
    model: an edward_lite program of one batch; the dataset's keys name its
      observed random variables and arguments (``model(x)`` drawing
      ``z [b, L]`` and ``ed.Bernoulli(logits=decoder(z), name="x")``).
      Keras layers it calls are trained too.
    guide: a program drawing every latent of the model under its name from
      Keras networks, called with the dataset keys it takes as arguments
      (``guide(x)`` drawing ``ed.Normal(mu(x), sigma(x), name="z")``); None
      for a fully observed model (an autoregressive one), whose
      log-likelihood is then maximized (``kl`` is 0).
    dataset: a finite ``tf.data.Dataset`` of batches, dicts ``key -> [b, ...]``
      (one pass over the data; it is repeated).  Shuffle it with a ``seed``
      for a reproducible (and resumable) run; with a strategy, batch it with
      ``drop_remainder=True`` so every replica gets rows.
    steps, epochs: the run's length, in optimizer steps or passes over the
      dataset (one of the two).
    objective: what each step maximizes per example (``objectives.py``):
      ``ed.vi.ELBO(samples=1, kl_weight=1.)`` (the default; ``K`` draws,
      a beta or a schedule of it) or ``ed.vi.IWAE(samples=5)``.
    optimizer: a Keras optimizer; default ``tf_keras`` Adam at ``learning_rate``.
    strategy: a ``tf.distribute.Strategy`` (or a name, ``ed.distribute.strategy``)
      to train data-parallel; variables are created under its scope.
    seed: integer; the Keras initializers of layers not yet built, and every
      noise draw, derive from it.
    checkpoint_dir: directory for the weights, optimizer state, step and
      history, saved every ``checkpoint_every`` steps (default: every call)
      and at the end; a call with the same directory resumes (``steps`` may be
      larger; it reads the dataset again up to the step reached, so shuffle
      with a ``seed``) and equals an uninterrupted run bit for bit.  A call
      with other code, first batch, seed, optimizer, variables or replica
      count is refused (``CheckpointMismatchError``).
    tensorboard_dir: write ``elbo``, ``elbo/log_likelihood``, ``elbo/kl``,
      ``learning_rate`` per step and ``eval/*`` scalars there.
    evaluate: a held-out ``tf.data.Dataset`` (its ELBO per example and terms,
      and the IWAE bound for an IWAE run, with the objective's ``K`` fixed
      noise draws per example) or ``evaluate(step) -> dict`` of floats; run
      every ``eval_every`` steps (default: at the end only) and at the end.
      ``evaluate(step)`` may raise ``ed.vi.StopTraining`` to end the run
      there; any other exception it raises leaves the step saved in the
      checkpoint first.
    early_stopping: an ``ed.vi.EarlyStopping(patience=...)`` watching the
      evaluations (``early_stopping.py``), or None.
    progress: report progress with the ELBO (``runtime/progress.py``).
    steps_per_call: optimizer steps per compiled call between host updates.
    jit_compile: True: a step on one device is one XLA program (under a
      strategy, each replica's objective and gradient); False: no XLA;
      ``"auto"`` (the default): XLA on GPUs and TPUs, not on CPUs, where its
      compile costs 3-9 s and its steps are 1.1-1.2x faster for an
      Image Transformer and slower for small dense networks (``_uses_xla``).

  Returns:
    A ``TrainResult``: ``history`` (per-step ELBO per example, its terms and
    the objective), ``evaluations``, ``stopped``, ``best``, ``timings``,
    ``variables``, ``elbo(dataset)`` and ``log_likelihood(dataset)``.
  """
  program, objective, first, total = _checked(model, guide, dataset, steps, epochs, objective,
                                             evaluate, early_stopping)
  seed = arguments.check_integer("seed", seed, 0)
  per_call = arguments.check_integer("steps_per_call", steps_per_call, 1)
  every = arguments.check_integer("checkpoint_every", checkpoint_every, 1) \
      if checkpoint_every is not None else None
  eval_every = arguments.check_integer("eval_every", eval_every, 1) \
      if eval_every is not None else None
  strategy = resolve(strategy)
  jit_compile = _uses_xla(jit_compile, strategy)
  variables, optimizer = _built(program, objective, first, dataset, strategy, seed, optimizer,
                                learning_rate)
  seed_t = tf.constant(seeds.seed_pair(seed), tf.int32)
  opt_vars = list(optimizer.variables)

  evaluator = Evaluator(program, objective, evaluate, seed_t, jit_compile)
  monitor = None
  if early_stopping is not None:
    monitor = early_stopping.monitor or (
        "iwae" if isinstance(objective, objectives.IWAE) else "elbo")
    if isinstance(evaluate, tf.data.Dataset) and monitor not in evaluator.keys:
      raise ValueError(f"EarlyStopping(monitor={monitor!r}) names no value of the held-out "
                       f"evaluation, which gives {evaluator.keys}.")
  keeps_best = early_stopping is not None and early_stopping.restore_best
  ckpt, start, saved = None, 0, None
  if checkpoint_dir:
    ckpt = Checkpointer(checkpoint_dir, _fingerprint(model, guide, first, dataset), dict(
        seed=seed, jit_compile=jit_compile, optimizer=_describe(optimizer),
        variables=[(v.shape.as_list(), v.dtype.name) for v in variables],  # Keras names count
        strategy=None if strategy is None else strategy.num_replicas_in_sync,
        objective=objective.describe(), early_stopping=None if early_stopping is None else
        dataclasses.asdict(early_stopping)))
    saved = ckpt.load(expect=lambda: [v.numpy() for v in variables + opt_vars
                                      + variables * keeps_best])
    if saved is not None:
      start = saved["step"]
      for v, value in zip(variables + opt_vars, saved["state"]):
        v.assign(value)
  scalars = Scalars(tensorboard_dir, optimizer, saved, _tags(objective, program))
  tracker = Tracker(early_stopping, monitor, variables, scalars.stopping, scalars.evaluations)
  if saved is not None and tracker.keeps_weights:
    tracker.best_weights = saved["state"][len(variables) + len(opt_vars):]

  def finish(steps):
    result = scalars.result(variables, steps, evaluator)
    result.optimizer = optimizer
    return result

  if start >= total or tracker.stopped:
    return finish(start)

  pipeline = dataset.repeat().skip(start).prefetch(tf.data.AUTOTUNE)
  if strategy is not None:
    pipeline = strategy.experimental_distribute_dataset(pipeline)
  iterator = iter(pipeline)
  # The first call's TensorFlow notes (XLA's start, the compile cache) are dropped.
  run_calls = console.first_call_quiet(
      train_step.compiled_calls(program, objective, variables, optimizer, strategy,
                                jit_compile, seeds.stream(seed_t, "vi_train_noise")))
  timings = {"compile_s": 0., "train_s": 0., "timed_steps": 0}

  def run_chunk(step):
    n = min(per_call, total - step)
    for k in (every, eval_every):
      if k:
        n = min(n, k - step % k)
    began = time.perf_counter()
    sums = run_calls(iterator, tf.constant(n), tf.constant(step)).numpy()  # [n, 7]
    first_call = not timings["compile_s"]
    timings["compile_s" if first_call else "train_s"] += time.perf_counter() - began
    timings["timed_steps"] += 0 if first_call else n
    step += n
    terms = scalars.add(step - n, sums)
    if (eval_every and step % eval_every == 0) or step == total:
      try:
        values = evaluator(step)
      except StopTraining as stop:
        tracker.stop(step, str(stop) or "evaluate raised StopTraining")
      except BaseException:
        if ckpt is not None:  # the steps done are kept; the evaluation is not
          ckpt.save(step, record())
        raise
      else:
        scalars.evaluated(step, values)
        tracker.update(step, values)
    due = every is None or step % every == 0 or step == total or tracker.stopped
    return ChunkOutcome(steps=n, timing=(), postfix={"elbo": f"{terms['elbo'][-1]:.3f}"},
                        record=record() if ckpt is not None and due else None, info={},
                        stop=tracker.stopped)

  def record():
    return ChunkRecord(state=[v.numpy() for v in variables + opt_vars]
                       + tracker.saved_weights(),
                       arrays={"terms": scalars.unsaved()}, scalars=scalars.saved())

  reached = run_chunks(run_chunk, start, total, {}, progress=progress, label="training",
                       checkpointer=ckpt)
  result = finish(reached)
  timed = (timings["timed_steps"], timings["train_s"]) if timings["timed_steps"] else (
      reached - start, timings["compile_s"])  # one call: its rate, compile included
  result.timings.update(timings, steps_per_s=timed[0] / max(timed[1], 1e-9))
  if result.skipped:
    warnings.warn(f"{result.skipped} of {result.steps} steps had a non-finite ELBO or "
                  "gradient, which was replaced by zero; the first at step "
                  f"{result.first_skipped} (its "
                  "batch's terms are in result.history; a NaN or inf in the data, or a "
                  "network output out of the distribution's support, are the usual causes).",
                  RuntimeWarning, stacklevel=3)
  return result


def _checked(model, guide, dataset, steps, epochs, objective, evaluate, early_stopping):
  """The arguments checked before anything is built: ``(program, objective,
  first batch, total steps)``."""
  if not isinstance(dataset, tf.data.Dataset):
    raise TypeError(f"dataset= must be a tf.data.Dataset; got {type(dataset).__name__}.")
  if int(dataset.cardinality()) == int(tf.data.INFINITE_CARDINALITY):
    raise ValueError("dataset= repeats forever; give one pass over the data (drop the "
                     ".repeat()): train repeats it, and epochs= counts passes.")
  program = amortized.BatchProgram(model, guide, dataset.element_spec)
  objective = objectives.resolve(objective)
  if early_stopping is not None and not isinstance(early_stopping, EarlyStopping):
    raise TypeError(f"early_stopping= must be ed.vi.EarlyStopping(...); got "
                    f"{type(early_stopping).__name__}.")
  if early_stopping is not None and evaluate is None:
    raise ValueError("early_stopping= watches the evaluations: give evaluate= (a held-out "
                     "dataset) and eval_every=.")
  if evaluate is not None and not (callable(evaluate) or isinstance(evaluate, tf.data.Dataset)):
    raise TypeError(f"evaluate= must be a tf.data.Dataset or a function of the step; got "
                    f"{type(evaluate).__name__}.")
  first = next(iter(dataset), None)
  if first is None:
    raise ValueError("dataset= is empty.")
  total = _total_steps(steps, epochs, dataset)
  return program, objective, first, total


def _built(program, objective, first, dataset, strategy, seed, optimizer, learning_rate):
  """The programs' variables (their networks built on the first batch, seeded,
  under the strategy's scope) and the optimizer built for them."""
  scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
  with scope:
    with _seeded_initializers(seed):
      try:
        variables = program.inspect(first)
      except Exception as error:
        if _batched(dataset):
          _note_first_batch(error, first)
          raise
        shapes = {k: v.shape.as_list() for k, v in dataset.element_spec.items()}
        raise ValueError(f"dataset= is not batched (its elements have shapes {shapes}, with no "
                         "batch axis first) and the programs failed on one; batch it, "
                         "e.g. dataset.batch(64).") from error
    if strategy is not None:
      outside = [v.name for v in variables if not strategy.extended.variable_created_in_scope(v)]
      if outside:
        raise ValueError(f"Variables {outside[:3]} were created outside strategy.scope(); "
                         "let ed.vi.train build the networks (do not call them before) or "
                         "build them under the strategy's scope.")
    optimizer = _optimizer(optimizer, learning_rate)
    made_in = getattr(optimizer, "_distribution_strategy", None)  # tf_keras records it
    if strategy is not None and made_in is not None and made_in is not strategy:
      raise ValueError("optimizer= was created outside strategy.scope(); create it under "
                       "the scope, or give learning_rate= and let ed.vi.train create it.")
    optimizer.build(variables)
    if objective.doubly_reparameterized:
      program.check_stopped(first)
  return variables, optimizer


def _uses_xla(jit_compile, strategy):
  """``jit_compile`` as a bool: ``"auto"`` is XLA where the steps run on a
  GPU or TPU (the strategy's devices, else TensorFlow's default placement),
  not on CPUs.  Measured on a 2-core CPU (RESULTS section 56): XLA's first
  call costs 3-9 s more for an Image Transformer, whose steps it makes
  1.1-1.2x faster, and 6 s more for the digits VAE, whose steps it makes
  slower; accelerators are where XLA's fusion pays (a TPU runs nothing else)."""
  if isinstance(jit_compile, str):
    if jit_compile != "auto":
      raise ValueError(f'jit_compile= must be True, False or "auto"; got {jit_compile!r}.')
    devices = (strategy.extended.worker_devices if strategy is not None else
               [d.name for d in tf.config.list_logical_devices()])
    return any(kind in d.upper() for d in devices for kind in (":GPU:", ":TPU:"))
  if not isinstance(jit_compile, (bool, np.bool_)):
    raise TypeError(f'jit_compile= must be True, False or "auto"; got {jit_compile!r}.')
  return bool(jit_compile)


def _note_first_batch(error, first):
  """Adds to an error raised while the programs ran on the first batch the
  batch's keys, dtypes and shapes (TensorFlow's own errors name none of them:
  an int64 label concatenated with a float draw says only "Tensor conversion
  requested dtype int64")."""
  if hasattr(error, "add_note"):  # (Python 3.11+)
    keys = ", ".join(f"{k}: {v.dtype.name} {v.shape.as_list()}" for k, v in first.items())
    error.add_note(f"ed.vi.train: the model or guide failed on the first batch, {{{keys}}}.")


def _tags(objective, program):
  """The per-step history keys written to TensorBoard."""
  tags = ["elbo", "log_likelihood", "kl"] + ["factor"] * bool(program.factors)
  return tags + ["objective"] * (objective != objectives.ELBO())


@contextlib.contextmanager
def _seeded_initializers(seed):
  """Keras initializers (unseeded ones draw from the global seeds) seeded
  from ``seed``; Python's, NumPy's and TensorFlow's global seeds restored
  after, so the user's later pipelines (a ``shuffle``) do not depend on it."""
  state, np_state = random.getstate(), np.random.get_state()
  tf_seed = context.global_seed()
  tf_keras.utils.set_random_seed(seed)
  try:
    yield
  finally:
    random.setstate(state)
    np.random.set_state(np_state)
    tf.random.set_seed(tf_seed)


def _batched(dataset):
  """Whether ``dataset``'s elements are batches: the last batching op of its
  pipeline is a batch, not an unbatch (or, if none is found, every element
  has a first axis of unknown size)."""
  try:
    stack = [dataset]
    while stack:
      name = type(stack[0]).__name__
      if "Batch" in name:
        return "Unbatch" not in name
      stack = stack[1:] + list(stack[0]._inputs())  # pylint: disable=protected-access
  except (AttributeError, TypeError):
    pass
  return all(s.shape.rank and s.shape[0] is None for s in dataset.element_spec.values())


def _total_steps(steps, epochs, dataset):
  if (steps is None) == (epochs is None):
    raise ValueError("Give the run's length as steps= or epochs=, one of the two.")
  if steps is not None:
    return arguments.check_integer("steps", steps, 1)
  epochs = arguments.check_integer("epochs", epochs, 1)
  per_epoch = int(dataset.cardinality())
  if per_epoch < 0:  # unknown: one pass to count
    per_epoch = sum(1 for _ in dataset)
  return epochs * per_epoch


def _optimizer(optimizer, learning_rate):
  """The optimizer; under Keras's ``mixed_float16`` policy wrapped in a
  dynamic ``LossScaleOptimizer`` (as ``Model.compile`` does)."""
  if optimizer is None:
    arguments.check_positive("learning_rate", learning_rate)
    optimizer = tf_keras.optimizers.Adam(learning_rate)
  elif not hasattr(optimizer, "apply_gradients") or not hasattr(optimizer, "build"):
    raise TypeError(f"optimizer= must be a Keras optimizer (tf_keras.optimizers.Adam(...)); "
                    f"got {type(optimizer).__name__}.")
  if (tf_keras.mixed_precision.global_policy().name == "mixed_float16"
      and not isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)):
    optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
  return optimizer


def _describe(optimizer):
  return {k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v))
          for k, v in optimizer.get_config().items()}


def _code(fn):
  code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__call__", None), "__code__", None)
  # pylint: disable-next=protected-access
  return content_hash.code_summary(code)[0] if code is not None else repr(type(fn))


def _fingerprint(model, guide, first, dataset):
  """Identity of a training run by content: the model's and guide's own code
  (their networks by the variables' names and shapes, in the settings), the
  first batch's bytes and the dataset's element spec and length."""
  code = hashlib.sha256(f"{_code(model)}|{_code(guide)}".encode()).hexdigest()
  data = hashlib.sha256(repr((dataset.element_spec, int(dataset.cardinality()))).encode())
  for key in sorted(first):
    data.update(key.encode() + np.ascontiguousarray(first[key].numpy()).tobytes())
  return fingerprints.Fingerprint(fingerprints.model_name(model), code, data.hexdigest(), None)
