"""What ``ed.vi.train`` reports: the per-step ELBO and its terms (also as
TensorBoard scalars), held-out evaluations, and the ``TrainResult``.

Per step, from the batch's summed terms (each the average of the step's
``K`` draws per example) and its ``B`` rows:

    elbo = (sum_i log p(x_i | z_i) + log p(z_i) + f_i - log q(z_i | x_i)) / B,
    log_likelihood = sum_i log p(x_i | z_i) / B,
    kl = sum_i [log q(z_i | x_i) - log p(z_i)] / B      (nats per example),
    factor = sum_i f_i / B                              (``ed.Factor`` terms),
    objective = sum_i objective_i / B                   (what the step maximized).
"""

import dataclasses

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import summary_pb2  # pylint: disable=g-direct-tensorflow-import

from edward_lite.runtime import console, seeds
from edward_lite.vi import amortized, held_out, objectives

__all__ = ["TrainResult", "Scalars", "Evaluator", "per_example"]


COLUMNS = 7  # summed log_likelihood, log_prior, log_q, factor, objective; rows, applied


def per_example(sums):
  """``[n, 7]`` step sums (``COLUMNS``) -> dict of ``[n]``."""
  sums = np.asarray(sums, np.float64).reshape(-1, COLUMNS)
  ll, lp, lq, factor, objective, rows = (sums[:, k] for k in range(6))
  return {"elbo": (ll + lp + factor - lq) / rows, "log_likelihood": ll / rows,
          "kl": (lq - lp) / rows, "factor": factor / rows, "objective": objective / rows}


@dataclasses.dataclass
class TrainResult:
  """The outcome of ``ed.vi.train``.

  Attributes:
    history: ``name -> [steps]`` NumPy: ``elbo``, ``log_likelihood``, ``kl``,
      ``factor`` and ``objective`` per example of each step's batch (a
      resumed run includes the steps before it).
    evaluations: list of dicts ``{"step": t, ...}``, one per evaluation.
    steps: optimizer steps done.
    stopped: None, or why the run stopped before its length:
      ``{"step", "reason"}`` (early stopping, ``ed.vi.StopTraining``).
    best: early stopping's best evaluation, ``{"step", monitor: value}``
      (its weights are the variables' when it restores them), or None.
    timings: seconds: ``compile_s`` (the first call, its steps included),
      ``train_s`` (the other calls); ``timed_steps`` (theirs) and
      ``steps_per_s`` after the first call (with one call, that call's).
    variables: the trained variables (model's and guide's).
    optimizer: the optimizer, with its state.
    skipped: steps whose ELBO or gradient was not finite, their gradient
      replaced by zero (a ``RuntimeWarning`` names the first, ``first_skipped``).
  """
  history: dict
  evaluations: list
  steps: int
  timings: dict
  variables: list
  optimizer: object = dataclasses.field(repr=False, default=None)
  skipped: int = 0
  first_skipped: object = None
  stopped: object = None
  best: object = None
  _evaluator: object = dataclasses.field(repr=False, default=None)

  def elbo(self, dataset):
    """ELBO per example of ``dataset`` and its terms (``log_likelihood``,
    ``kl``; ``iwae`` for an IWAE run), ``K`` fixed noise draws per example
    (the objective's)."""
    return self._evaluator.on(dataset)

  def log_likelihood(self, dataset, samples=1000, seed=0, rows_per_call=8192):
    """The importance-sampled log-likelihood of held-out data, ``log p(x)``
    per example, with its Monte Carlo error and bits per dimension
    (``held_out.py``)."""
    return held_out.log_likelihood(self._evaluator.program, dataset, samples, seed,
                                   rows_per_call, self._evaluator.jit_compile)


class Scalars:
  """The run's per-step terms and evaluations, kept for the result and the
  checkpoint and written to TensorBoard (``tensorboard_dir``)."""

  def __init__(self, tensorboard_dir, optimizer, saved, tags=("elbo", "log_likelihood", "kl")):
    self.optimizer, self.tags = optimizer, tags
    self.sums = list(saved["arrays"].get("terms", [])) if saved else []
    self.evaluations = list(saved["scalars"].get("evaluations", [])) if saved else []
    self.stopping = dict(saved["scalars"].get("stopping", {})) if saved else {}
    self._unsaved = []
    self.writer = tf.summary.create_file_writer(tensorboard_dir) if tensorboard_dir else None

  def add(self, first_step, sums):
    """Adds the ``[n, 5]`` sums of steps ``first_step + 1 .. first_step + n``;
    returns their per-example terms."""
    self.sums.append(sums)
    self._unsaved.append(sums)
    terms = per_example(sums)
    if self.writer is not None:
      rate = self.optimizer.learning_rate
      with self.writer.as_default():
        for i in range(len(sums)):
          step = first_step + i + 1
          for key in self.tags:
            _scalar(key if key in ("elbo", "objective") else f"elbo/{key}", terms[key][i], step)
          _scalar("learning_rate", rate(step - 1) if callable(rate) else rate, step)
      self.writer.flush()
    return terms

  def evaluated(self, step, values):
    if not values:
      return
    values = {k: float(v) for k, v in values.items()}
    self.evaluations.append({"step": step, **values})
    if self.writer is not None:
      with self.writer.as_default():
        for key, value in values.items():
          _scalar(f"eval/{key}", value, step)
      self.writer.flush()

  def unsaved(self):
    """The sums since the last checkpoint (which this one now holds)."""
    out, self._unsaved = np.concatenate(self._unsaved), []
    return out

  def saved(self):
    return {"evaluations": self.evaluations, "stopping": self.stopping}

  def result(self, variables, steps, evaluator):
    sums = np.concatenate(self.sums) if self.sums else np.zeros([0, COLUMNS])
    history = per_example(sums)
    skipped = np.flatnonzero(sums[:, COLUMNS - 1] <= 0)
    if self.writer is not None:
      self.writer.close()
    return TrainResult(history=history, evaluations=self.evaluations, steps=steps, timings={},
                       variables=variables, skipped=len(skipped),
                       first_skipped=int(skipped[0]) + 1 if len(skipped) else None,
                       _evaluator=evaluator, **self.stopping)


# TensorBoard's scalar metadata (its ``summary/v2`` ``scalar`` writes the
# same), so scalars are written without the tensorboard package installed.
_SCALAR = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
    data_class=summary_pb2.DATA_CLASS_SCALAR)


def _scalar(tag, value, step):
  tf.summary.write(tag, tf.constant(float(value), tf.float32), step=step, metadata=_SCALAR)


class Evaluator:
  """The evaluation hook: a held-out dataset's ELBO (and IWAE bound), or the
  user's function."""

  def __init__(self, program, objective, evaluate, seed, jit_compile):
    self.program, self.evaluate, self.jit_compile = program, evaluate, jit_compile
    self.seed = seeds.stream(seed, "vi_eval_noise")
    self.samples = objective.samples
    iwae = isinstance(objective, objectives.IWAE)
    self.keys = ["elbo", "log_likelihood", "kl"] + ["factor"] * bool(program.factors) + \
        ["iwae"] * iwae

    def sums(batch, noise):
      # In float64: XLA sums a float32 vector one element after another, so
      # a batch of 10^6 rows would lose digits of its ELBO.
      terms = {k: tf.cast(v, tf.float64) for k, v in
               program.sample_terms(batch, noise, self.samples).items()}
      rows = tf.cast(tf.shape(terms["log_q"])[1], tf.float64)
      bound = objective.total(terms, 0.) if iwae else \
          tf.reduce_sum(objectives.log_weights(terms)) / self.samples
      return tf.stack([tf.reduce_sum(terms[k]) / self.samples for k in amortized.TERMS]
                      + [bound, rows, rows])

    self._sums = console.first_call_quiet(
        console.per_call_function(sums, jit_compile=bool(jit_compile)))

  def __call__(self, step):
    if self.evaluate is None:
      return {}
    if isinstance(self.evaluate, tf.data.Dataset):
      return self.on(self.evaluate)
    values = self.evaluate(step)
    if not isinstance(values, dict):
      raise TypeError(f"evaluate(step) must return a dict name -> number; got "
                      f"{type(values).__name__}.")
    return values

  def on(self, dataset):
    """``{elbo, log_likelihood, kl}`` (``factor``, ``iwae``) per example over
    ``dataset``."""
    held_out.check_keys(dataset, self.program, "The evaluation dataset")
    total = np.zeros(COLUMNS)
    for index, batch in enumerate(dataset):
      rows = tf.shape(next(iter(batch.values())))[0]
      noise = amortized.noise_for(self.program.noise_spec, self.seed,
                                  tf.constant(index, tf.int64), self.samples)(rows)
      total += self._sums(batch, noise).numpy()
    values = per_example(total)
    values["iwae"] = values.pop("objective")
    return {k: float(values[k][0]) for k in self.keys}
