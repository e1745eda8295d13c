"""A traced function kept as its function library and called by name.

A ``ConcreteFunction`` is a graph function registered in TensorFlow's
runtime under a name, with the functions it calls (loop bodies, branches),
its captured tensors (data), and a Python structure that packs its flat
outputs.  ``KeptFunction`` holds exactly those: the ``FunctionDef``s, the
captured values as NumPy arrays, and the output structure, so that another
process registers the definitions (``add_function_def``: no Python graph is
rebuilt, unlike a SavedModel's load) and calls the top one by name, which is
how TensorFlow itself runs a concrete function in eager mode.  A function
compiled with XLA (``jit_compile=True``) carries that in its definition
(``_XlaMustCompile``), so the call compiles, or finds in XLA's persistent
cache, the same executable.

Names: every function is renamed with a ``tag`` (the program cache's entry
name) before it is registered, in the first process as in later ones.  The
names are then the same in every process -- TensorFlow keys a cached XLA
executable by the function's name as well as its content -- and cannot meet
the name of a function some other trace registered.

Shapes of the arguments: a call takes the same Python structure as the
traced function, Tensors at the positions the trace saw Tensors (other
values are part of the trace, and of the program cache's key).
"""

import functools
import inspect

import tensorflow as tf
from tensorflow.core.framework import function_pb2

try:  # the eager call by name (not public API); without it nothing is kept
  from tensorflow.python.eager import context as _context  # pylint: disable=import-error
except ImportError:  # pragma: no cover
  _context = None

__all__ = ["KeptFunction", "available"]

# Ops that call back into Python: a kept copy cannot.
_PYTHON_OPS = frozenset(["PyFunc", "PyFuncStateless", "EagerPyFunc"])


@functools.lru_cache(maxsize=1)
def available():
  """Whether this TensorFlow offers the call by name this module needs
  (``Context.call_function(name, tensor_inputs, num_outputs)``, as in
  TensorFlow 2.21); without it nothing is kept and programs are traced."""
  call = getattr(_context and _context.Context, "call_function", None)
  try:
    return call is not None and list(inspect.signature(call).parameters) == [
        "self", "name", "tensor_inputs", "num_outputs"]
  except (TypeError, ValueError):
    return False


def _flat_tensors(args):
  """The Tensors among ``args``' leaves, in ``tf.nest`` order: a traced
  function's inputs, without its captures."""
  return [x for x in tf.nest.flatten(args, expand_composites=True) if isinstance(x, tf.Tensor)]


def _rename_attr(value, names):
  """Renames the functions an ``AttrValue`` names (a ``func`` or a list of them)."""
  funcs = [value.func] if value.HasField("func") else []
  if value.HasField("list"):
    funcs.extend(value.list.func)
  for func in funcs:
    func.name = names.get(func.name, func.name)
    for inner in func.attr.values():
      _rename_attr(inner, names)


def _renamed(functions, tag):
  """``functions`` (``FunctionDef``s, changed in place) with every name
  ``n`` among them replaced by ``n_tag``, in their signatures, the nodes that
  call them and the attributes that name them (loop bodies, branches)."""
  names = {f.signature.name: f"{f.signature.name}_{tag}" for f in functions}
  for function in functions:
    function.signature.name = names[function.signature.name]
    for value in function.attr.values():
      _rename_attr(value, names)
    for node in function.node_def:
      node.op = names.get(node.op, node.op)
      for value in node.attr.values():
        _rename_attr(value, names)
  return functions


class KeptFunction:
  """A concrete function's definitions, captured values and output
  structure (see the module docstring); ``state()`` is what is saved (plain
  bytes, NumPy arrays and the output structure), ``KeptFunction(**state)``
  registers it and ``__call__`` runs it."""

  def __init__(self, top, library, captures, outputs):
    """``top``: the called function's (renamed) name; ``library``: the
    serialized ``FunctionDefLibrary`` of it and every function it calls;
    ``captures``: its captured values (NumPy arrays), passed after the
    arguments; ``outputs``: the output structure with a ``tf.TensorSpec`` at
    each Tensor's place."""
    self.top, self.library, self.outputs = top, library, outputs
    self.captures = [tf.constant(c) for c in captures]
    self._slots = sum(isinstance(leaf, tf.TensorSpec) for leaf in tf.nest.flatten(outputs))
    library_proto = function_pb2.FunctionDefLibrary()
    library_proto.ParseFromString(library)
    ctx = _context.context()
    for function in library_proto.function:
      if not ctx.has_function(function.signature.name):
        ctx.add_function_def(function)

  @classmethod
  def from_concrete(cls, concrete, args, tag, max_captured_bytes):
    """The kept form of ``concrete`` (traced for ``args``), renamed with
    ``tag``; None when a kept copy would not compute what it computes (it
    reads a variable or another resource, whose live value a copy would not
    see, or calls Python), captures more than ``max_captured_bytes``, or
    cannot be called this way (an argument or output that is not a plain
    Tensor, or inputs that do not line up)."""
    if not available():
      return None
    captured = concrete.captured_inputs
    if (any(t.dtype in (tf.resource, tf.variant) for t in captured) or
        sum(t.shape.num_elements() * t.dtype.size for t in captured) > max_captured_bytes):
      return None
    graph = concrete.graph.as_graph_def()
    if any(node.op in _PYTHON_OPS for function in graph.library.function
           for node in function.node_def) or any(node.op in _PYTHON_OPS for node in graph.node):
      return None
    specs = [leaf for leaf in tf.nest.flatten(concrete.structured_input_signature,
                                              expand_composites=True)
             if isinstance(leaf, tf.TensorSpec)]
    flat = _flat_tensors(args)
    if len(specs) != len(flat) or not all(
        s.dtype == t.dtype and s.shape.is_compatible_with(t.shape) for s, t in zip(specs, flat)):
      return None
    top = concrete.function_def
    if len(top.signature.input_arg) != len(flat) + len(captured):
      return None
    structured = concrete.structured_outputs
    leaves = tf.nest.flatten(structured)
    if not all(leaf is None or isinstance(leaf, tf.Tensor) for leaf in leaves):
      return None
    outputs = tf.nest.map_structure(
        lambda t: tf.TensorSpec(t.shape, t.dtype) if isinstance(t, tf.Tensor) else t, structured)
    if sum(isinstance(leaf, tf.Tensor) for leaf in leaves) != len(top.signature.output_arg):
      return None
    library = function_pb2.FunctionDefLibrary()
    library.function.extend(graph.library.function)
    library.function.append(top)
    _renamed(library.function, tag)
    return cls(library.function[-1].signature.name, library.SerializeToString(),
               [t.numpy() for t in captured], outputs)

  def state(self):
    """What a later process needs to rebuild this (``KeptFunction(**state)``)."""
    return {"top": self.top, "library": self.library,
            "captures": [c.numpy() for c in self.captures], "outputs": self.outputs}

  def __call__(self, *args):
    flat = _context.context().call_function(
        self.top.encode(), _flat_tensors(args) + self.captures, self._slots) or []
    flat = iter(flat)
    return tf.nest.map_structure(
        lambda leaf: next(flat) if isinstance(leaf, tf.TensorSpec) else leaf, self.outputs)

