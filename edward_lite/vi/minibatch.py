"""Minibatches of the observed data for stochastic variational inference.

With ``N`` observations and batch size ``B``, step ``t`` uses the ``B``
observations at positions ``(t mod E) B, ..., (t mod E) B + B - 1`` of a
random permutation of ``0..N-1`` drawn afresh for every epoch ``t div E``
(``E = N div B`` batches per epoch; a remainder of ``N mod B`` is left out
of that epoch, a different one each time).  The permutation (an argsort of
stateless uniforms, ``O(N log N)`` once per epoch) is carried through the
compiled loop.  (TensorFlow's ``index_shuffle``, which would compute only
the ``B`` entries needed, has no XLA kernel.)

Every observed variable is sliced, and so is every program argument (a
Tensor or array, positional or keyword) whose leading dimension is ``N``;
the likelihood of the batch is multiplied by ``N / B``.  For any fixed
batch ``b`` drawn uniformly,

    E_b[ log p(theta) + (N / B) sum_{i in b} log p(y_i | theta) ] = log p(theta, y),

so the minibatch ELBO and its gradient are unbiased.  Latent variables must
not depend on ``N`` (global latents only).
"""

import inspect
import typing

import tensorflow as tf

from edward_lite.checks import arguments
from edward_lite.runtime import console, seeds
from edward_lite.model.data import RowData
from edward_lite.model.target import make_target

__all__ = ["BatchSource", "Minibatcher", "DatasetBatches"]


@typing.runtime_checkable
class BatchSource(typing.Protocol):
  """The contract of a source of minibatches for the fit's compiled loop
  (``elbo.run_chunk``): a state carried from step to step, the data of
  each step and the target on that data."""
  compiled: bool  # whether reading the data can sit inside the XLA program
  num_examples: int

  @property
  def data_spec(self):
    """The ``tf.TensorSpec`` (structure) of one step's data."""

  def carry_init(self, seed, start):
    """The carried state before step ``start``."""

  def next(self, carry, seed, step):
    """``(carry, data)`` of ``step``."""

  def target_for(self, target, data):
    """``target`` on ``data``, its likelihood scaled to the full data."""


class Minibatcher:
  """Chooses and applies the minibatch of each step.

  Args:
    model, args, kwargs, observed: as given to ``ed.vi.fit``.
    batch_size: ``B``, between 1 and ``N``.
    target: the full-data target (its latent shapes are checked against a
      batch's).
  """

  def __init__(self, model, args, kwargs, observed, batch_size, target):
    del args, kwargs, observed  # read from the target
    self.rows = RowData(target, "batch_size=")
    self.num_examples = n = self.rows.num_rows
    self.batch_size = b = arguments.check_integer("batch_size", batch_size, 1)
    if b > n:
      raise ValueError(f"batch_size={b} is larger than the number of observations N={n}.")
    self.batches_per_epoch = n // b
    self.scale = n / b
    # One eager check on the first batch: the program must take its data
    # shapes from its arguments, and its latents must not depend on N.
    self.rows.check_global_latents(target, tf.range(b))

  def permutation(self, seed, step):
    """The random permutation ``[N]`` of the epoch that ``step`` falls in."""
    epoch = tf.cast(step, tf.int32) // self.batches_per_epoch
    epoch_seed = tf.random.experimental.stateless_fold_in(
        seeds.stream(seed, "vi_minibatches"), epoch)
    return tf.argsort(tf.random.stateless_uniform([self.num_examples], epoch_seed))

  def indices(self, seed, step, permutation=None):
    """Positions ``[B]`` of the observations used at ``step`` (pass the
    epoch's ``permutation`` when it is at hand)."""
    if permutation is None:
      permutation = self.permutation(seed, step)
    position = tf.cast(step, tf.int32) % self.batches_per_epoch
    # A gather, not tf.slice: XLA compiles a slice's start as a constant.
    return tf.gather(permutation, position * self.batch_size + tf.range(self.batch_size))

  # BatchSource: the carried state is the epoch's permutation, a step's data
  # its indices.
  compiled = True  # the whole loop can be one XLA program

  @property
  def data_spec(self):
    """The spec of a step's data: its ``B`` indices."""
    return tf.TensorSpec([self.batch_size], tf.int32)

  def carry_init(self, seed, start):
    return self.permutation(seed, start)

  def next(self, carry, seed, step):
    """``(carry, data)`` of ``step``; the permutation is redrawn at epoch starts."""
    carry = tf.cond(step % self.batches_per_epoch == 0,
                    lambda: self.permutation(seed, step), lambda: carry)
    return carry, self.indices(seed, step, carry)

  def target_for(self, target, data):
    """``target`` on the minibatch ``data`` (indices), likelihood scaled by ``N / B``."""
    args, kwargs, observed = self.rows.take(data)
    return target.with_data(args, kwargs, observed, likelihood_scale=self.scale)


class DatasetBatches:
  """Minibatches from a ``tf.data.Dataset``.

  The dataset is finite (one epoch) and yields dicts whose keys name observed
  random variables or keyword arguments of the program, each with the batch
  on the first axis; the fit repeats it.  A batch of ``b`` rows scales the
  likelihood by ``N / b``.  The full-data log density (for importance
  weights) is accumulated over one pass:
  ``log p(x) + sum_batches [log p(x, batch) - log p(x)]``.

  Keys that are parameters of the program are passed as keyword arguments;
  the others name observed random variables.

  Args:
    model, args, kwargs, observed: as given to ``ed.vi.fit`` (``observed``
      may give variables the dataset does not).
    dataset: the ``tf.data.Dataset``.
    num_examples: ``N``; counted with one pass over the dataset when None.
  """

  compiled = False  # reading the iterator cannot be inside XLA

  def __init__(self, model, args, kwargs, observed, dataset, num_examples, dtype=None):
    if not isinstance(dataset, tf.data.Dataset):
      raise TypeError(f"dataset= must be a tf.data.Dataset; got {type(dataset).__name__}.")
    spec = dataset.element_spec
    if not isinstance(spec, dict) or not spec:
      raise ValueError("dataset= must yield dicts name -> batch (observed random variables "
                       f"and keyword arguments of the program); its elements are {spec}.")
    if int(dataset.cardinality()) == int(tf.data.INFINITE_CARDINALITY):
      raise ValueError("dataset= repeats forever; give one pass over the data (drop the "
                       ".repeat()): fit repeats it as needed, and N and the importance "
                       "weights take one pass.")
    first = next(iter(dataset), None)
    if first is None:
      raise ValueError("dataset= is empty.")
    try:
      parameters = inspect.signature(model).parameters
    except (TypeError, ValueError):
      parameters = {}
    self._kwargs = dict(kwargs)
    self._kwarg_keys = [k for k in first if k in parameters]
    self._observed_keys = [k for k in first if k not in parameters]
    if not self._observed_keys:
      raise ValueError(f"dataset= keys {sorted(first)} are all arguments of the program; at "
                       "least one must name an observed random variable.")
    self.target = make_target(
        model, *args,
        observed={**dict(observed or {}), **{k: first[k] for k in self._observed_keys}},
        dtype=dtype, **{**self._kwargs, **{k: first[k] for k in self._kwarg_keys}})
    self.dataset = dataset
    if num_examples is None:
      num_examples = int(sum(int(tf.shape(b[self._observed_keys[0]])[0]) for b in dataset))
    self.num_examples = arguments.check_integer("num_examples", num_examples, 1)
    self._iterator = iter(dataset.repeat())
    self._first = first

  def seek(self, step):
    """Positions the batch stream at ``step`` (a resumed fit continues with
    the batch an uninterrupted one would read)."""
    self._iterator = iter(self.dataset.repeat().skip(step))

  @property
  def data_spec(self):
    """The spec of a step's data: a batch of the dataset."""
    return self.dataset.element_spec

  def carry_init(self, seed, start):
    del seed, start
    return tf.zeros([0], tf.int32)

  def next(self, carry, seed, step):
    del seed, step
    return carry, next(self._iterator)

  def target_for(self, target, data, likelihood_scale=None):
    rows = tf.shape(data[self._observed_keys[0]])[0]
    if likelihood_scale is None:
      likelihood_scale = self.num_examples / tf.cast(rows, tf.float64)
    return target.with_data(
        kwargs={**self._kwargs, **{k: data[k] for k in self._kwarg_keys}},
        observed={k: data[k] for k in self._observed_keys},
        likelihood_scale=likelihood_scale)

  def full_log_prob_fn(self, model_log_prob, target):
    """A function ``state -> [n]``: the full-data log density, one pass over
    the dataset (each batch's term compiled once per batch shape), summed
    over the batches in float64: a float32 total near ``-10^9`` moves in
    steps of 64 nats, and its rounding differs between draws, which would
    add noise to their importance weights.

    Args:
      model_log_prob: ``(target, state) -> [n]`` (the surrogate's).
      target: the fit's target.
    """
    prior_fn = console.first_call_quiet(tf.function(lambda state: model_log_prob(
        self.target_for(target, self._first, 0.), state), jit_compile=True,
        autograph=False))
    term_fn = console.first_call_quiet(tf.function(lambda state, batch: model_log_prob(
        self.target_for(target, batch, 1.), state), jit_compile=True,
        autograph=False))

    def full_log_prob(state):
      prior = tf.cast(prior_fn(state), tf.float64)
      total = prior
      for batch in self.dataset:
        total += tf.cast(term_fn(state, batch), tf.float64) - prior
      return total

    return full_log_prob
