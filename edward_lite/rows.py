"""Observations along the first axis: the rows of a program's data.

Minibatching (``ed.vi.fit(batch_size=)``) and data-parallel sharding
(``strategy=``) both cut the data of a target into blocks of rows.  A row is
one observation: every observed variable has the same number ``N`` of rows
on its first axis, and so does every program argument (positional or
keyword, a Tensor or array) that is cut with it; other arguments are passed
whole.  The latents must not grow with ``N`` (global latents only): a block
of rows then changes only the likelihood, and

    log p(theta, y) = log p(theta) + sum_blocks sum_{i in block} log p(y_i | theta).
"""

import numpy as np
import tensorflow as tf

from edward_lite.target import make_target

__all__ = ["RowData"]


class RowData:
  """The row-indexed inputs of a target.

  Args:
    target: a ``Target``; its observed variables give ``N``.
    what: the option that needs rows, for error messages
      (e.g. ``"batch_size="``).
  """

  def __init__(self, target, what):
    self.what = what
    if not target.observed:
      raise ValueError(f"{what} needs observed data to cut into rows; observed= is empty.")
    sizes = {}
    for name, value in target.observed.items():
      if value.shape.rank == 0:
        raise ValueError(f"{what} cuts observations along the first axis, but observed "
                         f"'{name}' is a scalar.")
      sizes[name] = int(value.shape[0])
    if len(set(sizes.values())) != 1:
      raise ValueError(f"{what} needs every observed variable to have the same number of "
                       f"observations along the first axis; they have {sizes}.")
    self.num_rows = n = next(iter(sizes.values()))

    def has_rows(v):
      return ((tf.is_tensor(v) or isinstance(v, np.ndarray)) and len(v.shape) >= 1
              and v.shape[0] == n)

    args, kwargs, observed = target.data
    self.args = [tf.convert_to_tensor(a) if has_rows(a) else a for a in args]
    self.kwargs = {k: tf.convert_to_tensor(v) if has_rows(v) else v for k, v in kwargs.items()}
    self.observed = observed
    self.arg_mask = [has_rows(a) for a in self.args]
    self.kwarg_mask = {k: has_rows(v) for k, v in self.kwargs.items()}

  @property
  def data(self):
    """``(args, kwargs, observed)``, the row-indexed ones as Tensors."""
    return self.args, self.kwargs, self.observed

  def map_rows(self, fn, data=None):
    """Applies ``fn`` to every row-indexed input of ``data`` (default: the
    full data) and returns the new ``(args, kwargs, observed)``."""
    args, kwargs, observed = data or self.data
    return ([fn(a) if m else a for a, m in zip(args, self.arg_mask)],
            {k: fn(v) if self.kwarg_mask[k] else v for k, v in kwargs.items()},
            {k: fn(v) for k, v in observed.items()})

  def take(self, indices, data=None):
    """The rows at ``indices`` (a ``tf.gather``, XLA-friendly)."""
    return self.map_rows(lambda v: tf.gather(v, indices), data)

  def check_global_latents(self, model, target, rows):
    """Runs ``model`` once, eagerly, on ``rows`` of the data and checks that
    the program accepts it and that its latents keep their shapes."""
    args, kwargs, observed = self.take(rows)
    try:
      part = make_target(model, *args, observed=observed, structure_checks=1, **kwargs)
    except (ValueError, tf.errors.InvalidArgumentError) as e:
      raise ValueError(
          f"The program does not run on part of its data (with {self.what} every observed "
          f"variable and every argument with N={self.num_rows} rows is cut along its first "
          f"axis): {e}. A program whose rows depend on each other (a time series, a loop "
          "over the rows) cannot be cut: sample it with parallel='chains' or "
          "'chain_groups', or without minibatches.") from e
    for name, info in target.latents.items():
      other = part.latents.get(name)
      if other is None or other.shape != info.shape:
        raise ValueError(
            f"Latent '{name}' has shape {info.shape.as_list()} on the full data but "
            f"{None if other is None else other.shape.as_list()} on part of it; "
            f"{self.what} supports latents that do not grow with the data (global latents).")
