"""Content hashing: a value's content -- arrays by their bytes, pandas
objects, containers element by element, a user's functions and classes by
their code and what they read from closures and globals -- fed into one
SHA-256 (``digest``).  ``runtime.fingerprints`` builds a call's identity on
it; ``code_summary`` digests one code object.
"""

import builtins
import datetime
import decimal
import dis
import enum
import fractions
import functools
import hashlib
import os
import site
import sys
import sysconfig
import types

import numpy as np
import tensorflow as tf

__all__ = ["digest", "code_summary", "MAX_DEPTH"]


class _Unknown(Exception):
  """Raised inside the hasher when a value cannot be identified by content."""


# Functions of these packages (and of anything installed in site-packages or
# the standard library) are identified by their qualified name, not followed.
_LIBRARY_PACKAGES = frozenset([
    "edward_lite", "tensorflow", "tensorflow_probability", "tf_keras", "keras", "numpy",
    "scipy", "pandas", "jax", "absl", "google", "builtins"])
# Levels of user-written functions followed through globals and closures.
MAX_DEPTH = 12
_DATA_SCALARS = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis),
                 type(NotImplemented),
                 datetime.date, datetime.time, datetime.timedelta, decimal.Decimal,
                 fractions.Fraction, range, slice)
_GLOBAL_OPS = frozenset(["LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"])
# Class attributes that Python or the dataclass / namedtuple machinery adds;
# what they hold is also visible in the generated methods.
_CLASS_SKIP = frozenset(["__dict__", "__weakref__", "__module__", "__doc__", "__qualname__",
                         "__dataclass_fields__", "__dataclass_params__", "__match_args__",
                         "__annotations__", "__slots__", "__firstlineno__",
                         "__static_attributes__", "__orig_bases__", "__parameters__",
                         "_abc_impl"])


@functools.lru_cache(maxsize=None)
def _library_roots():
  roots = set(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
  try:
    roots.add(site.getusersitepackages())
  except Exception:  # pylint: disable=broad-except
    pass
  paths = sysconfig.get_paths()
  for key in ("stdlib", "platstdlib", "purelib", "platlib"):
    if paths.get(key):
      roots.add(paths[key])
  return tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)


@functools.lru_cache(maxsize=4096)
def _is_library_module(module):
  if not module or module == "__main__":
    return False
  top = module.split(".")[0]
  if top in _LIBRARY_PACKAGES or top in getattr(sys, "stdlib_module_names", ()):
    return True
  mod = sys.modules.get(module)
  if mod is None:
    return False  # unknown origin: treat as the user's and follow it
  path = getattr(mod, "__file__", None)
  if path is None:
    return False  # made at run time (built-in modules are in stdlib_module_names)
  return os.path.realpath(path).startswith(_library_roots())


def _is_library(obj):
  return _is_library_module(getattr(obj, "__module__", None))


@functools.lru_cache(maxsize=4096)
def code_summary(code):
  """``(digest, global names, attribute names)`` of a code object, nested
  code objects (inner functions, lambdas, comprehensions) included.  Line
  numbers and file names are left out: moving a function does not change
  what it computes."""
  h = hashlib.sha256()

  def put(*parts):
    for p in parts:
      h.update(p if isinstance(p, bytes) else repr(p).encode())
      h.update(b"\0")

  globals_, attributes = set(), set(code.co_names)
  put(code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
      code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags,
      getattr(code, "co_exceptiontable", b""))
  for const in code.co_consts:
    put(_const_repr(const))
    if isinstance(const, types.CodeType):
      _, g, a = code_summary(const)
      globals_ |= g
      attributes |= a
  for instruction in dis.get_instructions(code):
    if instruction.opname in _GLOBAL_OPS:
      globals_.add(instruction.argval)
  return h.hexdigest(), frozenset(globals_), frozenset(attributes)


def _const_repr(const):
  """A representation of a code constant that is the same in every process
  (a frozenset's order depends on string hashing)."""
  if isinstance(const, types.CodeType):
    return "code:" + code_summary(const)[0]
  if isinstance(const, (frozenset, set)):
    return "frozenset:" + repr(sorted(_const_repr(c) for c in const))
  if isinstance(const, tuple):
    return "tuple:" + repr([_const_repr(c) for c in const])
  return f"{type(const).__name__}:{const!r}"


def _type_name(value):
  t = type(value)
  return f"{t.__module__}.{t.__qualname__}"


def _pandas():
  """The pandas module if it is already imported (a pandas object cannot
  exist otherwise); pandas is not a dependency."""
  return sys.modules.get("pandas")


class _Hasher:
  """Feeds a value's content into one SHA-256: contiguous arrays go in as
  one buffer, without a copy (SHA-256 is hardware-accelerated on current CPUs
  and was the fastest of hashlib's digests here; the speed is in RESULTS.md,
  identity by content)."""

  def __init__(self, variables_by_value=True):
    self.variables_by_value = variables_by_value
    self.hash = hashlib.sha256()
    self.seen = {}  # id -> order of first visit (functions, classes, containers)
    self.keep = []  # keeps visited objects alive, so ids are not reused

  def tag(self, *parts):
    for p in parts:
      self.hash.update(str(p).encode())
      self.hash.update(b"\0")

  def _visit(self, value):
    """True the first time ``value`` is seen; afterwards a back-reference
    is hashed instead (cycles, shared helpers)."""
    if id(value) in self.seen:
      self.tag("ref", self.seen[id(value)])
      return False
    self.seen[id(value)] = len(self.seen)
    self.keep.append(value)
    return True

  # data ---------------------------------------------------------------------

  def array(self, array, where):
    array = np.asarray(array)
    if array.dtype.hasobject:
      self.tag("objects", array.shape)
      for i, item in enumerate(array.flat):
        self.value(item, f"{where}[{i}]")
      return
    array = np.ascontiguousarray(array)
    self.tag("array", array.dtype.str, array.shape)
    self.hash.update(array.reshape(-1).view(np.uint8))

  def value(self, value, where, depth=0, names=None):
    """Hashes any value: data by content, functions by code."""
    pd = _pandas()
    if isinstance(value, _DATA_SCALARS) or (isinstance(value, enum.Enum)):
      self.tag(_type_name(value), repr(value))
    elif isinstance(value, (np.ndarray, np.generic)):
      self.array(value, where)
    elif isinstance(value, (tf.DType, np.dtype, tf.TensorShape)):
      self.tag(_type_name(value), repr(value))
    elif isinstance(value, tf.Variable) and not self.variables_by_value:
      self.tag("variable", id(value))
    elif tf.is_tensor(value):
      if isinstance(value, (tf.SparseTensor, tf.RaggedTensor)):
        self.tag(_type_name(value))
        for i, part in enumerate(tf.nest.flatten(value, expand_composites=True)):
          self.value(part, f"{where}[{i}]")
      elif not hasattr(value, "numpy"):
        raise _Unknown(f"{where} (a symbolic tensor, without a value)")
      else:
        self.tag(_type_name(value))
        self.array(np.asarray(value), where)  # no copy of an eager tensor
    elif pd is not None and isinstance(value, (pd.DataFrame, pd.Series, pd.Index)):
      self.pandas(value, where, pd)
    elif pd is not None and pd.api.types.is_scalar(value) and _type_name(value).startswith(
        "pandas."):
      self.tag(_type_name(value), repr(value))  # pd.NA, pd.NaT, Timestamp, Period, ...
    elif isinstance(value, (list, tuple, dict, set, frozenset)):
      self.container(value, where, depth)
    elif isinstance(value, types.ModuleType):
      self.module(value, where, depth, names or ())
    elif isinstance(value, type) or (callable(value) and not hasattr(value, "__array__")):
      self.function(value, where, depth)
    elif hasattr(value, "__array__"):
      try:
        array = np.asarray(value)
      except Exception as e:  # pylint: disable=broad-except
        raise _Unknown(f"{where} (a {_type_name(value)} whose __array__ failed: "
                       f"{type(e).__name__})") from e
      self.tag(_type_name(value))
      self.array(array, where)
    else:
      self.instance(value, where, depth)

  def container(self, value, where, depth):
    if not self._visit(value):
      return
    self.tag(_type_name(value), len(value))
    if isinstance(value, dict):
      items = []
      for k, v in value.items():
        key = _Hasher()
        key.value(k, f"{where} key {k!r}")
        items.append((key.hash.hexdigest(), k, v))
      for key, k, v in sorted(items, key=lambda item: item[0]):
        self.tag(key)
        self.value(v, f"{where}[{k!r}]", depth)
    elif isinstance(value, (set, frozenset)):
      digests = []
      for item in value:
        sub = _Hasher(self.variables_by_value)
        sub.value(item, f"{where} item {item!r}", depth)
        digests.append(sub.hash.hexdigest())
      self.tag(*sorted(digests))
    elif value and all(type(v) is float for v in value):  # pylint: disable=unidiomatic-typecheck
      self.array(np.array(value, np.float64), where)
    else:
      for i, v in enumerate(value):
        self.value(v, f"{where}[{i}]", depth)

  def pandas(self, value, where, pd):
    self.tag(_type_name(value))
    if isinstance(value, pd.Index):
      self.tag(repr(value.names))
      if isinstance(value, pd.RangeIndex):
        self.tag(value.start, value.stop, value.step)
      elif isinstance(value, pd.MultiIndex):
        for i, (level, codes) in enumerate(zip(value.levels, value.codes)):
          self.pandas(level, f"{where}.levels[{i}]", pd)
          self.array(codes, where)
      else:
        self.column(value, f"{where}.index", pd)
      return
    self.pandas(value.index, f"{where}.index", pd)
    if isinstance(value, pd.Series):
      self.value(value.name, f"{where}.name")
      self.column(value, where, pd)
      return
    self.pandas(value.columns, f"{where}.columns", pd)
    for i in range(value.shape[1]):
      self.column(value.iloc[:, i], f"{where}[{value.columns[i]!r}]", pd)

  def column(self, column, where, pd):
    """The values of a Series or an Index, with their dtype."""
    dtype = column.dtype
    self.tag(str(dtype))
    if isinstance(dtype, pd.CategoricalDtype):
      self.pandas(dtype.categories, f"{where}.categories", pd)
      self.tag(dtype.ordered)
      self.array(np.asarray(column.cat.codes if isinstance(column, pd.Series) else
                            column.codes), where)
    elif isinstance(dtype, np.dtype):
      self.array(column.to_numpy(), where)
    else:  # extension dtypes (nullable integers, strings, periods, ...)
      self.array(column.to_numpy(dtype=object), where)

  # code ---------------------------------------------------------------------

  def function(self, fn, where, depth):
    """A callable by what it computes."""
    if depth > MAX_DEPTH:
      raise _Unknown(f"{where} (calls nested more than {MAX_DEPTH} user functions deep)")
    if isinstance(fn, functools.partial):
      self.tag("partial")
      self.function(fn.func, where, depth)
      self.value(fn.args, f"{where} (partial arguments)", depth)
      self.value(fn.keywords, f"{where} (partial keywords)", depth)
    elif isinstance(fn, types.MethodType):
      self.tag("method")
      self.function(fn.__func__, where, depth)
      self.value(fn.__self__, f"{where}.__self__", depth)
    elif isinstance(fn, types.FunctionType):
      self.python_function(fn, where, depth)
    elif isinstance(fn, type):
      self.cls(fn, where, depth)
    elif isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType, np.ufunc,
                         types.MethodWrapperType, types.WrapperDescriptorType,
                         types.MethodDescriptorType, types.ClassMethodDescriptorType)):
      owner = getattr(fn, "__self__", None)
      if owner is not None and not isinstance(owner, types.ModuleType) and not isinstance(
          owner, type):
        self.value(owner, f"{where}.__self__", depth)  # e.g. a bound list.append
      self.tag("builtin", getattr(fn, "__module__", None),
               getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn))))
    elif hasattr(fn, "fingerprint_parts") and _is_library(type(fn)):
      # a library program transformation (ed.reparameterize): what it wraps, how
      self.tag("library", type(fn).__module__, type(fn).__qualname__)
      self.value(fn.fingerprint_parts(), where, depth)
    elif hasattr(fn, "python_function") and _is_library(type(fn)):  # a tf.function
      self.tag("tf.function", getattr(fn, "_jit_compile", None))
      self.function(fn.python_function, where, depth)
    else:
      self.instance(fn, where, depth)

  def python_function(self, fn, where, depth):
    if depth and _is_library(fn):
      self.tag("library", fn.__module__, fn.__qualname__)
      return
    if not self._visit(fn):
      return
    name = fn.__qualname__
    code_hex, global_names, attributes = code_summary(fn.__code__)
    self.tag("function", code_hex)
    self.value(fn.__defaults__, f"a default argument of '{name}'", depth + 1)
    self.value(fn.__kwdefaults__, f"a default argument of '{name}'", depth + 1)
    for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
      try:
        contents = cell.cell_contents
      except ValueError:
        self.tag("empty cell")
        continue
      self.value(contents, f"closure variable '{var}' of '{name}'", depth + 1, attributes)
    space, builtin = fn.__globals__, fn.__globals__.get("__builtins__", builtins)
    if isinstance(builtin, types.ModuleType):
      builtin = vars(builtin)
    for var in sorted(global_names):
      self.tag("global", var)
      if var in space:
        self.value(space[var], f"global '{var}' used by '{name}'", depth + 1, attributes)
      elif var in builtin:
        self.value(builtin[var], f"builtin '{var}' used by '{name}'", depth + 1, attributes)
      else:
        self.tag("undefined")

  def module(self, module, where, depth, names):
    """A library module by name; a user's module also by the attributes of it
    that the code reads (``config.SCALE``)."""
    self.tag("module", module.__name__)
    if _is_library_module(module.__name__) or not self._visit(module):
      return
    for attr in sorted(names):
      if attr in vars(module):
        self.tag("attribute", attr)
        self.value(vars(module)[attr], f"'{module.__name__}.{attr}'", depth, names)

  def cls(self, cls, where, depth):
    if _is_library(cls) or (depth and not self._visit(cls)):
      self.tag("class", cls.__module__, cls.__qualname__)
      return
    self.tag("class", cls.__qualname__)
    for base in cls.__bases__:
      self.cls(base, where, depth)
    for attr, value in sorted(vars(cls).items()):
      if attr in _CLASS_SKIP:
        continue
      self.tag("attribute", attr)
      if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
      elif isinstance(value, property):
        value = (value.fget, value.fset, value.fdel)
      elif isinstance(value, functools.cached_property):
        value = value.func
      elif type(value).__name__ == "_tuplegetter":  # namedtuple field
        self.tag(repr(value))
        continue
      self.value(value, f"attribute '{attr}' of class {cls.__qualname__}", depth + 1)

  def instance(self, value, where, depth):
    """An instance of a user's class, by its class and its attributes."""
    cls = type(value)
    if _is_library(cls) or not hasattr(value, "__dict__"):
      raise _Unknown(f"{where} (a {_type_name(value)} object)")
    if not self._visit(value):
      return
    self.cls(cls, where, depth)
    self.value(dict(vars(value)), f"{where}.__dict__", depth)


def digest(items, variables_by_value=True):
  """Hex digest of ``[(where, value), ...]``, or ``(None, reason)``."""
  hasher = _Hasher(variables_by_value)
  try:
    for where, value in items:
      hasher.tag(where)
      hasher.value(value, where)
  except _Unknown as e:
    return None, str(e)
  except RecursionError:
    return None, f"{where} (nested too deeply)"
  return hasher.hash.hexdigest(), None
