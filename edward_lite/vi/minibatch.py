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

import numpy as np
import tensorflow as tf

from edward_lite import runtime
from edward_lite.target import make_target

__all__ = ["Minibatcher"]

_DATA_STREAM = 0x5EED  # separates the data-subsampling seeds from the draw seeds


class Minibatcher:
  """Chooses and applies the minibatch of each step.

  Args:
    model, args, kwargs, observed: as given to ``ed.vi.fit``.
    batch_size: ``B``, between 1 and ``N``.
    target: the full-data target (its latent shapes are checked against a
      batch's).
  """

  def __init__(self, model, args, kwargs, observed, batch_size, target):
    if not observed:
      raise ValueError("batch_size= needs observed data to subsample; observed= is empty.")
    sizes = {}
    for name, value in target.observed.items():
      if value.shape.rank == 0:
        raise ValueError(f"batch_size= subsamples observations along the first axis, but "
                         f"observed '{name}' is a scalar.")
      sizes[name] = int(value.shape[0])
    if len(set(sizes.values())) != 1:
      raise ValueError(f"batch_size= needs every observed variable to have the same number of "
                       f"observations along the first axis; they have {sizes}.")
    self.num_examples = n = next(iter(sizes.values()))
    self.batch_size = b = runtime.check_integer("batch_size", batch_size, 1)
    if b > n:
      raise ValueError(f"batch_size={b} is larger than the number of observations N={n}.")
    self.batches_per_epoch = n // b
    self.scale = n / b

    def batched(v):
      return ((tf.is_tensor(v) or isinstance(v, np.ndarray)) and len(v.shape) >= 1
              and v.shape[0] == n)

    self._args = [tf.convert_to_tensor(a) if batched(a) else a for a in target._args]  # pylint: disable=protected-access
    self._kwargs = {k: tf.convert_to_tensor(v) if batched(v) else v
                    for k, v in target._kwargs.items()}  # pylint: disable=protected-access
    self._arg_mask = [batched(a) for a in self._args]
    self._kwarg_mask = {k: batched(v) for k, v in self._kwargs.items()}
    self._observed = target.observed

    # One eager check on the first batch: the program must take its data
    # shapes from its arguments, and its latents must not depend on N.
    first = tf.range(b)
    batch_args, batch_kwargs, batch_observed = self._gather(first)
    try:
      batch_target = make_target(model, *batch_args, observed=batch_observed,
                                 structure_checks=1, **batch_kwargs)
    except (ValueError, tf.errors.InvalidArgumentError) as e:
      raise ValueError(
          "The program does not run on a minibatch of its data (with batch_size= every "
          "observed variable and every argument with N rows is sliced to batch_size "
          f"rows): {e}") from e
    for name, info in target.latents.items():
      other = batch_target.latents.get(name)
      if other is None or other.shape != info.shape:
        raise ValueError(
            f"Latent '{name}' has shape {info.shape.as_list()} on the full data but "
            f"{None if other is None else other.shape.as_list()} on a minibatch; "
            "minibatching supports latents that do not grow with the data (global latents).")

  def _gather(self, indices):
    args = [tf.gather(a, indices) if m else a for a, m in zip(self._args, self._arg_mask)]
    kwargs = {k: tf.gather(v, indices) if self._kwarg_mask[k] else v
              for k, v in self._kwargs.items()}
    observed = {k: tf.gather(v, indices) for k, v in self._observed.items()}
    return args, kwargs, observed

  def permutation(self, seed, step):
    """The random permutation ``[N]`` of the epoch that ``step`` falls in."""
    epoch = tf.cast(step, tf.int32) // self.batches_per_epoch
    epoch_seed = tf.random.experimental.stateless_fold_in(
        tf.random.experimental.stateless_fold_in(seed, _DATA_STREAM), epoch)
    return tf.argsort(tf.random.stateless_uniform([self.num_examples], epoch_seed))

  def indices(self, seed, step, permutation=None):
    """Positions ``[B]`` of the observations used at ``step`` (pass the
    epoch's ``permutation`` when it is at hand)."""
    if permutation is None:
      permutation = self.permutation(seed, step)
    position = tf.cast(step, tf.int32) % self.batches_per_epoch
    # A gather, not tf.slice: XLA compiles a slice's start as a constant.
    return tf.gather(permutation, position * self.batch_size + tf.range(self.batch_size))

  def target_at(self, target, seed, step, permutation=None):
    """``target`` on the minibatch of ``step``, likelihood scaled by ``N / B``."""
    args, kwargs, observed = self._gather(self.indices(seed, step, permutation))
    return target.with_data(args, kwargs, observed, likelihood_scale=self.scale)
