"""Words for a program that fails while it is traced: where (the user's
line), with which arguments, and the likely cause when it is one a newcomer
meets (mixed float dtypes, strings given as data, integer data meeting
floats, float64 data read from a global instead of an argument).  Each hint
is empty when it does not apply and never raises: it only adds to the error
being reported.
"""

import inspect
import linecache
import os
import re

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["is_dtype_conflict", "first_line", "program_site", "describe_arguments",
           "strings_hint", "outside_data_hint", "integer_arguments", "event_rank_hint",
           "index_dtype_hint"]


def outside_data_hint(program):
  """Words for float64 NumPy or pandas data the program reads from a global
  or a closure, which, unlike its arguments, is not converted to the
  model's dtype; empty if there is none."""
  try:  # a hint: it must never hide the error it is added to
    found = _float64_outside_arguments(program)
  except Exception:  # pylint: disable=broad-except
    found = []
  if not found:
    return ""
  return (f" The program reads float64 data from outside its arguments ({found}, a global "
          "or closure variable), which is not converted as arguments are: pass it as an "
          "argument, or convert it with .astype(np.float32).")


def _float64_outside_arguments(program):
  """Names of the globals and closure variables the program's code (and the
  functions defined in it) reads that hold float64 NumPy or pandas data."""
  fn = inspect.unwrap(program)
  code = getattr(fn, "__code__", None)
  if code is None:
    return []
  names, codes = set(), [code]
  while codes:
    c = codes.pop()
    names.update(c.co_names)
    codes.extend(k for k in c.co_consts if inspect.iscode(k))
  values = {n: fn.__globals__[n] for n in names if n in fn.__globals__}
  for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
    try:
      values[name] = cell.cell_contents
    except ValueError:  # an empty cell
      pass

  def float64(value):
    if isinstance(value, (np.ndarray, np.floating)):
      return value.dtype == np.float64
    if not type(value).__module__.startswith("pandas"):
      return False
    dtypes = value.dtypes  # a DataFrame's: a Series of dtypes; a Series': one
    return any(d == np.float64 for d in (dtypes if value.ndim > 1 else [dtypes]))

  return sorted(n for n, v in values.items() if float64(v))


def _named_arguments(program, data):
  """``[(name, value)]``: the program's arguments, by parameter name where
  its signature binds them."""
  try:
    return list(inspect.signature(program).bind_partial(*data.args,
                                                        **data.kwargs).arguments.items())
  except (TypeError, ValueError):
    return [(f"#{i}", a) for i, a in enumerate(data.args)] + list(data.kwargs.items())


def strings_hint(program, data):
  """Words for string-valued array arguments (labels a user meant as
  indices), which no numeric op takes, also a DataFrame's or a dict's
  string columns (``df["g"]``); empty if there are none."""
  names = [label for n, v in _named_arguments(program, data) for label in _strings(n, v)]
  if not names:
    return ""
  which = (f"{names[0]} holds" if len(names) == 1 else f"{', '.join(names)} hold")
  return (f" ({which} strings, which TensorFlow's math and indexing ops do not take: "
          "convert them to numbers, labels to integer codes with "
          "pandas.factorize(column)[0])")


def _strings(name, value):
  """Words for the parts of argument ``name`` that hold strings: the
  argument itself, or its columns (a pandas DataFrame) or entries (a dict)."""
  if _is_strings(value):
    return [f"argument {name!r}"]
  columns = getattr(value, "columns", None)
  if columns is not None and hasattr(value, "__getitem__"):  # a pandas DataFrame
    return [f"column {c!r} of argument {name!r}" for c in columns
            if _is_strings(np.asarray(value[c]))]
  if isinstance(value, dict):
    return [f"entry {k!r} of argument {name!r}" for k, v in value.items() if _is_strings(v)]
  return []


def _is_strings(value):
  if tf.is_tensor(value):
    return value.dtype == tf.string
  if not isinstance(value, np.ndarray):
    return False
  return value.dtype.kind in "US" or (value.dtype.kind == "O" and value.size > 0
                                       and isinstance(value.flat[0], str))


def integer_arguments(program, data, error):
  """``[(name, dtype name)]``: the integer Tensor arguments of the program
  whose dtype a dtype error names -- an int64 count column meeting floats in
  a density (``Cannot convert 0.0 to EagerTensor of dtype int64``) -- those
  on the failing line of the program if any are.  Not for a random
  variable's ``value=`` (its error names it) or the program's own
  ``tf.convert_to_tensor(x, dtype=float...)`` (another hint)."""
  text = first_line(error)
  if (not re.search(r"dtype|tensor but is a", text) or text.startswith("Value for ") or
      text.startswith("Tensor conversion requested dtype float")):
    return []
  found = [(name, value.dtype.name) for name, value in _named_arguments(program, data)
           if tf.is_tensor(value) and value.dtype.is_integer and
           re.search(rf"\b{value.dtype.name}\b", text)]
  line = program_site(error.__traceback__).partition(" (")[2]
  on_line = [(n, d) for n, d in found if re.search(rf"\b{re.escape(str(n))}\b", line)]
  return on_line or found


def describe_arguments(program, data):
  """'x: float32 [3, 5], n: 3' -- the program's arguments as given to it."""
  parts = []
  for name, value in _named_arguments(program, data):
    if tf.is_tensor(value) or isinstance(value, np.ndarray):
      try:
        dtype = tf.as_dtype(value.dtype).name
      except TypeError:  # a NumPy dtype TensorFlow has none for (object)
        dtype = value.dtype.name
      parts.append(f"{name}: {dtype} {list(value.shape)}")
    else:
      parts.append(f"{name}: {type(value).__name__}")
  return ", ".join(parts) or "none"


def is_dtype_conflict(error):
  """Whether ``error`` is TensorFlow's complaint about mixed float dtypes."""
  text = first_line(error)
  return (("float64" in text and "float32" in text) or "incompatible dtypes" in text or
          ("float tensor" in text and "double tensor" in text))


# Frames in these directories (TensorFlow's, TFP's, edward_lite's) are not
# the program's line.
_LIBRARY_DIRS = tuple(os.path.dirname(f) + os.sep for f in (
    tf.__file__, tfp.__file__, os.path.dirname(os.path.abspath(__file__))))

_OP_PREFIX = re.compile(r"\{\{function_node [^}]*\}\}\s*")  # TensorFlow's op-location prefix


def program_site(tb, until=None):
  """' at file.py:12 (code)': the last frame of the failing traceback in the
  user's code (not TensorFlow's, TFP's or edward_lite's), or ''; with
  ``until`` (an entry of the traceback ``tb``), the last such frame before it."""
  where = ""
  while tb is not None and tb is not until:
    filename = tb.tb_frame.f_code.co_filename
    if not filename.startswith(_LIBRARY_DIRS) and os.path.basename(filename) != "contextlib.py":
      line = linecache.getline(filename, tb.tb_lineno).strip()
      where = f" at {os.path.basename(filename)}:{tb.tb_lineno}" + (f" ({line})" if line else "")
    tb = tb.tb_next
  return where


_SMALL_INDEX = re.compile(r"attr '(?:Tindices|TI|Taxis)' of (u?int(?:8|16)) is not in the list")


def index_dtype_hint(error):
  """Words for indices of a dtype TensorFlow's indexing ops do not take
  (pandas' category codes are int8); empty for any other error."""
  found = _SMALL_INDEX.search(str(error))
  if not found:
    return ""
  return (f" TensorFlow indexes (tf.gather, tf.one_hot, ...) with int32 or int64, not "
          f"{found.group(1)}: convert the indices with .astype(np.int32) (pandas' category "
          f"codes are int8).")


def event_rank_hint(dist):
  """Words for a ``TransformedDistribution`` whose bijector acts on events of
  more dimensions than its base distribution's (a bijector on vectors, such
  as ``Ascending``, over a batch of scalars ``Normal(tf.zeros(3), 1.)``):
  TFP samples it but cannot give its log density.  Empty otherwise."""
  try:  # a hint: it must never hide the error it is added to
    if not isinstance(dist, tfp.distributions.TransformedDistribution):
      return ""
    need = max(tf.nest.flatten(dist.bijector.forward_min_event_ndims))
    base = dist.distribution
    have = base.event_shape.rank
    if have is None or have >= need:
      return ""
    return (f"Its bijector {type(dist.bijector).__name__} acts on events of at least "
            f"{need} dimension(s), but the base distribution's events have {have} (event "
            f"shape {base.event_shape.as_list()}, batch shape {base.batch_shape.as_list()}): "
            f"make the base's batch its event with tfd.Sample(base, n) or "
            f"tfd.Independent(base, reinterpreted_batch_ndims={need - have}).")
  except Exception:  # pylint: disable=broad-except
    return ""


def first_line(error):
  """The error's first line, without TensorFlow's op-location prefix."""
  text = _OP_PREFIX.sub("", str(error)).strip()
  return text.splitlines()[0][:200] if text else type(error).__name__
