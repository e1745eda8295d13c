"""What ``ed.vi.train`` reports: the per-step ELBO and its terms (also as
TensorBoard scalars), held-out evaluations, and the ``TrainResult``.

Per step, from the batch's summed terms and its ``B`` rows:

    elbo = (sum_i log p(x_i | z_i) + log p(z_i) - log q(z_i | x_i)) / B,
    log_likelihood = sum_i log p(x_i | z_i) / B,
    kl = sum_i [log q(z_i | x_i) - log p(z_i)] / B      (nats per example).
"""

import dataclasses

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import summary_pb2  # pylint: disable=g-direct-tensorflow-import

from edward_lite.runtime import console, seeds
from edward_lite.vi import amortized

__all__ = ["TrainResult", "Scalars", "Evaluator", "per_example"]


def per_example(sums):
  """``[n, 5]`` (summed log_likelihood, log_prior, log_q, rows, applied) ->
  dict of ``[n]``."""
  sums = np.asarray(sums, np.float64).reshape(-1, 5)
  ll, lp, lq, rows = (sums[:, k] for k in range(4))
  return {"elbo": (ll + lp - lq) / rows, "log_likelihood": ll / rows, "kl": (lq - lp) / rows}


@dataclasses.dataclass
class TrainResult:
  """The outcome of ``ed.vi.train``.

  Attributes:
    history: ``name -> [steps]`` NumPy: ``elbo``, ``log_likelihood``, ``kl``
      per example of each step's batch (a resumed run includes the steps
      before it).
    evaluations: list of dicts ``{"step": t, ...}``, one per evaluation.
    steps: optimizer steps done.
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
  _evaluator: object = dataclasses.field(repr=False, default=None)

  def elbo(self, dataset):
    """ELBO per example of ``dataset`` and its terms (``log_likelihood``,
    ``kl``), one fixed noise draw per example."""
    return self._evaluator.on(dataset)


class Scalars:
  """The run's per-step terms and evaluations, kept for the result and the
  checkpoint and written to TensorBoard (``tensorboard_dir``)."""

  def __init__(self, tensorboard_dir, optimizer, saved):
    self.optimizer = optimizer
    self.sums = list(saved["arrays"].get("terms", [])) if saved else []
    self.evaluations = list(saved["scalars"].get("evaluations", [])) if saved else []
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
          _scalar("elbo", terms["elbo"][i], step)
          _scalar("elbo/log_likelihood", terms["log_likelihood"][i], step)
          _scalar("elbo/kl", terms["kl"][i], step)
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
    return {"evaluations": self.evaluations}

  def result(self, variables, steps, evaluator, program):
    del program
    sums = np.concatenate(self.sums) if self.sums else np.zeros([0, 5])
    history = per_example(sums)
    skipped = np.flatnonzero(sums[:, 4] <= 0)
    if self.writer is not None:
      self.writer.close()
    return TrainResult(history=history, evaluations=self.evaluations, steps=steps, timings={},
                       variables=variables, skipped=len(skipped),
                       first_skipped=int(skipped[0]) + 1 if len(skipped) else None,
                       _evaluator=evaluator)


# TensorBoard's scalar metadata (its ``summary/v2`` ``scalar`` writes the
# same), so scalars are written without the tensorboard package installed.
_SCALAR = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
    data_class=summary_pb2.DATA_CLASS_SCALAR)


def _scalar(tag, value, step):
  tf.summary.write(tag, tf.constant(float(value), tf.float32), step=step, metadata=_SCALAR)


class Evaluator:
  """The evaluation hook: a held-out dataset's ELBO, or the user's function."""

  def __init__(self, program, evaluate, seed, jit_compile):
    self.program, self.evaluate = program, evaluate
    self.seed = seeds.stream(seed, "vi_eval_noise")

    def sums(batch, noise):
      # In float64: XLA sums a float32 vector one element after another, so
      # a batch of 10^6 rows would lose digits of its ELBO.
      terms = program.terms(batch, noise)
      rows = tf.cast(tf.shape(terms["log_q"])[0], tf.float64)
      return tf.stack([tf.reduce_sum(tf.cast(terms[k], tf.float64)) for k in amortized.TERMS]
                      + [rows, rows])

    self._sums = console.first_call_quiet(
        tf.function(sums, jit_compile=bool(jit_compile), autograph=False))

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
    """``{elbo, log_likelihood, kl}`` per example over ``dataset``."""
    spec = dataset.element_spec
    if not isinstance(spec, dict) or set(spec) != set(self.program.spec):
      raise ValueError(f"The evaluation dataset's elements {spec} do not have the keys of "
                       f"the training dataset's, {sorted(self.program.spec)}.")
    total = np.zeros(5)
    for index, batch in enumerate(dataset):
      rows = tf.shape(next(iter(batch.values())))[0]
      noise = amortized.noise_for(self.program.noise_spec, self.seed,
                                  tf.constant(index, tf.int64))(rows)
      total += self._sums(batch, noise).numpy()
    return {k: float(v[0]) for k, v in per_example(total).items()}
