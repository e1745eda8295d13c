"""The data of a model: the program's arguments, observed values and scales.

``ModelData`` is one immutable value that every run of a program reads:

* ``args``, ``kwargs``: the program's arguments, NumPy and pandas arrays
  converted to Tensors once (``prepare_arguments``);
* ``observed``: name -> observed value;
* ``likelihood_scale`` (multiplies every observed term, e.g. ``N / B`` for a
  minibatch of ``B`` of ``N`` rows) and ``prior_scale`` (every other term,
  e.g. ``1 / R`` on each of ``R`` data shards).

Rows: minibatching and data-parallel sharding cut the data into blocks of
rows.  A row is one observation: every observed variable has the same number
``N`` of rows on its first axis, and so does every argument (positional or
keyword, a Tensor or array) cut with it; other arguments are passed whole.
The latents must not grow with ``N`` (global latents only): a block of rows
then changes only the likelihood, and

    log p(theta, y) = log p(theta) + sum_blocks sum_{i in block} log p(y_i | theta).

The finiteness checks here run before any compiled work, so a NaN in the
data is named (argument, column, row) instead of surfacing as a NaN density.
"""

import dataclasses
import inspect
from typing import Any, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from edward_lite.language import dtypes
from edward_lite.language.random_variable import RandomVariable
from edward_lite.language.autograph import graph_program
from edward_lite.language.reparameterize import Reparameterized

__all__ = ["ModelData", "RowData", "prepare_arguments", "snapshot", "check_finite", "call_program"]


@dataclasses.dataclass(frozen=True)
class ModelData:
  """What one run of a program reads besides the latent values."""
  args: Tuple[Any, ...] = ()
  kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  observed: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  likelihood_scale: Optional[Any] = None
  prior_scale: Optional[Any] = None

  def replace(self, **changes):
    """A copy with some fields replaced (``dataclasses.replace``)."""
    return dataclasses.replace(self, **changes)

  def scale_of(self, observed):
    """The scale of an observed (``True``) or other term; None for 1."""
    return self.likelihood_scale if observed else self.prior_scale


def call_program(program, data, float_dtype=None, autograph=True):
  """``program(*data.args, **data.kwargs)`` in the model's floating dtype.

  Traced (inside a ``tf.function``) the program's own body runs converted by
  AutoGraph (``graph_program``), unless ``autograph=False`` (the check for
  Python control flow on latents, which must see the program as written).
  A transformed program (``ed.reparameterize``'s) is given the observed
  names of ``data`` and the conversion by its ``bind(observed, autograph)``.
  """
  convert = autograph and not tf.executing_eagerly()
  if isinstance(program, Reparameterized):
    # A program transformation (``ed.reparameterize``): it learns which names
    # carry data in this run and converts the program it wraps itself.
    program = program.bind(observed=tuple(data.observed), autograph=convert)
  elif convert:
    program = graph_program(program)
  with dtypes.float_scope(float_dtype):
    return program(*data.args, **data.kwargs)


def is_array_like(x):
  return (isinstance(x, (np.ndarray, np.generic, list, tuple)) or
          hasattr(x, "__array__")) and not isinstance(x, str)


def is_foreign_array(x):
  """An array of another library that NumPy can read (a pandas Series, an
  xarray DataArray, ...): not a NumPy or TensorFlow value, a Python sequence,
  a random variable, or a table the program indexes by column name (a
  pandas DataFrame)."""
  return (hasattr(x, "__array__") and not hasattr(x, "columns") and not tf.is_tensor(x) and
          not isinstance(x, (np.ndarray, np.generic, list, tuple, str, tf.Variable,
                             RandomVariable)))


def check_finite(what, value):
  """Raises ValueError if a numeric, eager value holds NaN or infinity."""
  if isinstance(value, RandomVariable):
    value = value.value
  if tf.is_tensor(value) and not hasattr(value, "numpy"):
    return  # symbolic: cannot check here
  frame = None
  try:
    if hasattr(value, "select_dtypes"):  # a pandas DataFrame: its numeric columns
      frame = value.select_dtypes(include="number")
      value = frame.to_numpy(dtype=np.float64, na_value=np.nan)
    elif hasattr(value, "to_numpy") and getattr(value.dtype, "kind", "") in "fiuc":
      value = value.to_numpy(dtype=np.float64, na_value=np.nan)  # a (nullable) Series
    array = np.asarray(value)
  except (TypeError, ValueError):  # ragged sequences, values NumPy cannot read: not checkable
    return
  if array.dtype.kind in "fc" and not np.all(np.isfinite(array)):
    bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
    first = np.argwhere(~np.isfinite(array))[0]
    at = f", the first at index {tuple(int(i) for i in first)}" if array.ndim > 1 else (
        f", the first at index {int(first[0])}" if array.ndim == 1 else "")
    if frame is not None:  # by the table's own names
      at = (f", the first in column '{frame.columns[first[1]]}' at row "
            f"{frame.index[first[0]]!r}")
    raise ValueError(f"{what} contains {bad} non-finite value(s) (NaN or inf){at}; "
                     "remove or impute them before inference.")


def prepare_arguments(program, args, kwargs, float_dtype):
  """Checks data arguments are finite; NumPy and pandas arrays become
  Tensors once, floating ones in ``float_dtype`` (if given); other data
  (a DataFrame, lists and dicts of arrays) are copied (``snapshot``).

  Returns:
    ``(args tuple, kwargs dict)``.
  """
  try:
    bound = inspect.signature(program).bind_partial(*args, **kwargs).arguments
  except (TypeError, ValueError):
    bound = {f"#{i}": a for i, a in enumerate(args)}
    bound.update(kwargs)
  for pname, value in bound.items():
    values = value if isinstance(value, dict) else {pname: value}
    for vname, v in values.items():
      if is_array_like(v) or tf.is_tensor(v) or (
          isinstance(v, (float, complex)) and not isinstance(v, bool)):
        check_finite(f"Argument '{vname}' of the program", v)

  def convert(v):
    if is_foreign_array(v):  # a pandas Series or DataFrame, ...: its values
      v = np.asarray(v)
    if isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind in "fiubc":
      return tf.convert_to_tensor(dtypes.cast_data(v, float_dtype) if float_dtype else v)
    return snapshot(v)

  return tuple(convert(a) for a in args), {k: convert(v) for k, v in kwargs.items()}


def snapshot(value):
  """A copy of the data in ``value`` that later edits of the caller's object
  cannot reach: a pandas table or array copied deeply, lists, tuples and
  dicts element by element; anything else (Tensors, variables, Keras layers,
  functions, numbers) itself.

  A compiled function may be traced long after the call that made its target
  (a result's ``log_likelihood()``, a new chunk length), and tracing reads
  the program's arguments then: without the copy, a DataFrame edited in
  place in between would be read as edited, under a cache key computed from
  the content it had at the call."""
  if isinstance(value, np.ndarray):
    return value.copy()
  if hasattr(value, "columns") and hasattr(value, "copy"):  # a pandas DataFrame
    return value.copy(deep=True)
  if type(value) is dict:
    return {k: snapshot(v) for k, v in value.items()}
  if type(value) in (list, tuple):
    return type(value)(snapshot(v) for v in value)
  return value


class RowData:
  """The row-indexed inputs of a target (see the module docstring).

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

  def check_global_latents(self, target, rows):
    """Runs the target's program once, eagerly, on ``rows`` of the data and
    checks that the program accepts it and that its latents keep their
    shapes."""
    args, kwargs, observed = self.take(rows)
    try:
      part = target.retrace(args, kwargs, observed)
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
