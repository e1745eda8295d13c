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

``without_xla`` makes a copy of a kept function that TensorFlow runs op by
op, without XLA: the same graph, so no second trace, under other names,
and

- its ``Assert`` and ``Print`` ops removed (XLA drops them: a copy that
  kept them could fail where the compiled function does not);
- each stateless random op (``StatelessRandomNormalV2`` and its kin) called
  as a one-op function compiled by XLA, so the copy draws the numbers the
  compiled function draws (TensorFlow has no threefry kernel, and its
  Philox kernel's numbers are not XLA's);
- called with Grappler's graph rewrites off (they took a third of its
  first call and do not speed up a call of a few transitions).

So the copy computes what the compiled function computes, up to XLA's
round-off.  ``mcmc.compiled`` runs a new run's first chunk with it while
XLA compiles.
"""

import contextlib
import functools
import inspect

import tensorflow as tf
from tensorflow.core.framework import function_pb2
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.framework import op_def_registry  # pylint: disable=import-error

try:  # the eager call by name (not public API); without it nothing is kept
  from tensorflow.python.eager import context as _context  # pylint: disable=import-error
except ImportError:  # pragma: no cover
  _context = None

__all__ = ["KeptFunction", "available"]

# Ops that call back into Python: a kept copy cannot.
_PYTHON_OPS = frozenset(["PyFunc", "PyFuncStateless", "EagerPyFunc"])
# Ops XLA drops from a compiled function, and so does a copy without XLA.
_DROPPED_BY_XLA = frozenset(["Assert", "Print", "PrintV2"])
# Random ops whose numbers depend on the compiler: the copy runs them with XLA.
_RANDOM_OPS = frozenset(["StatelessRandomNormalV2", "StatelessRandomUniformV2",
                         "StatelessRandomUniformIntV2", "StatelessRandomUniformFullIntV2",
                         "StatelessTruncatedNormalV2"])


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


@contextlib.contextmanager
def _without_graph_rewrites():
  """Functions first called in this block, in this thread, are run without
  Grappler's rewrites (the thread's ``FunctionCallOptions``)."""
  if _context is None:  # pragma: no cover
    yield
    return
  ctx = _context.context()
  options = ctx.function_call_options
  config = config_pb2.ConfigProto()
  config.ParseFromString(options.config_proto_serialized)
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  ctx.function_call_options = _context.FunctionCallOptions(options.executor_type, config)
  try:
    yield
  finally:
    ctx.function_call_options = options


def _drop_ops(function, ops):
  """Removes ``function``'s nodes whose op is in ``ops`` (they have no
  outputs) and the control edges to them (``^name`` inputs, control
  returns)."""
  dropped = {node.name for node in function.node_def if node.op in ops}
  if not dropped:
    return
  kept = [node for node in function.node_def if node.name not in dropped]
  for node in kept:
    inputs = [i for i in node.input if not (i.startswith("^") and i[1:] in dropped)]
    del node.input[:]
    node.input.extend(inputs)
  del function.node_def[:]
  function.node_def.extend(kept)
  for name in [k for k, v in function.control_ret.items() if v in dropped]:
    del function.control_ret[name]
  outputs = [o for o in function.signature.control_output if o not in function.control_ret]
  for name in outputs:
    function.signature.control_output.remove(name)


def _random_ops_compiled(function, wrappers):
  """Makes each random op of ``function`` (``_RANDOM_OPS``) a call of a
  one-op function compiled by XLA (added to ``wrappers``, a dict name ->
  ``FunctionDef``, one per op and types); the call's output keeps the op's
  output name, so the nodes that read it are unchanged."""
  for node in function.node_def:
    if node.op not in _RANDOM_OPS:
      continue
    op_def = op_def_registry.get(node.op)
    types = [arg.type or node.attr[arg.type_attr].type for arg in op_def.input_arg]
    out_type = node.attr[op_def.output_arg[0].type_attr].type
    name = "_".join([node.op, "xla"] + [str(t) for t in types + [out_type]])
    if name not in wrappers:
      wrapper = wrappers[name] = function_pb2.FunctionDef()
      wrapper.signature.name = name
      for arg, dtype in zip(op_def.input_arg, types):
        wrapper.signature.input_arg.add(name=arg.name, type=dtype)
      wrapper.signature.output_arg.add(name="output", type=out_type)
      inner = wrapper.node_def.add(name="random", op=node.op,
                                   input=[arg.name for arg in op_def.input_arg])
      for key in ("dtype", "Tshape"):
        inner.attr[key].CopyFrom(node.attr[key])
      wrapper.ret["output"] = f"random:{op_def.output_arg[0].name}:0"
      wrapper.attr["_XlaMustCompile"].b = True
      wrapper.attr["_noinline"].b = True
    node.op = "PartitionedCall"  # its output is named "output", as the random ops' are
    for key in ("dtype", "Tshape", "seed", "seed2"):
      if key in node.attr:
        del node.attr[key]
    node.attr["f"].func.name = name
    node.attr["Tin"].list.type.extend(types)
    node.attr["Tout"].list.type.append(out_type)
    for key in ("config", "config_proto", "executor_type"):
      node.attr[key].s = b""
    node.attr["_XlaMustCompile"].b = True


class KeptFunction:
  """A concrete function's definitions, captured values and output
  structure (see the module docstring); ``state()`` is what is saved (plain
  bytes, NumPy arrays and the output structure), ``KeptFunction(**state)``
  registers it and ``__call__`` runs it."""

  def __init__(self, top, library, captures, outputs, optimize=True):
    """``top``: the called function's (renamed) name; ``library``: the
    serialized ``FunctionDefLibrary`` of it and every function it calls;
    ``captures``: its captured values (NumPy arrays or Tensors), passed after the
    arguments; ``outputs``: the output structure with a ``tf.TensorSpec`` at
    each Tensor's place; ``optimize``: call it with Grappler's rewrites."""
    self.top, self.library, self.outputs, self.optimize = top, library, outputs, optimize
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

  def without_xla(self, tag):
    """A copy of this function run without XLA (module docstring), its
    names tagged again with ``tag``; None if it was not compiled with XLA."""
    library = function_pb2.FunctionDefLibrary()
    library.ParseFromString(self.library)
    top = next(f for f in library.function if f.signature.name == self.top)
    if "_XlaMustCompile" not in top.attr or not top.attr["_XlaMustCompile"].b:
      return None
    del top.attr["_XlaMustCompile"]
    wrappers = {}
    for function in library.function:
      _drop_ops(function, _DROPPED_BY_XLA)
      _random_ops_compiled(function, wrappers)
    library.function.extend(wrappers.values())
    _renamed(library.function, tag)
    return KeptFunction(f"{self.top}_{tag}", library.SerializeToString(), self.captures,
                        self.outputs, optimize=False)

  def state(self):
    """What a later process needs to rebuild this (``KeptFunction(**state)``)."""
    return {"top": self.top, "library": self.library,
            "captures": [c.numpy() for c in self.captures], "outputs": self.outputs}

  def __call__(self, *args):
    ctx = _context.context()
    inputs = _flat_tensors(args) + self.captures
    if self.optimize:
      flat = ctx.call_function(self.top.encode(), inputs, self._slots)
    else:
      with _without_graph_rewrites():
        flat = ctx.call_function(self.top.encode(), inputs, self._slots)
    flat = flat or []
    flat = iter(flat)
    return tf.nest.map_structure(
        lambda leaf: next(flat) if isinstance(leaf, tf.TensorSpec) else leaf, self.outputs)

