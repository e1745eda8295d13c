"""A graph-only trace of a program, before compiled work.

Inference runs a program traced into a graph, where every latent value is
symbolic.  A Python ``if x > 0:`` on a latent ``x`` then either fails with a
TensorFlow error that names no variable or, under AutoGraph, silently turns
into a ``tf.cond`` that builds the branch's random variables twice.  Eagerly
(``make_target`` traces the program eagerly first) the same ``if`` just
follows the prior draw, because ``x > 0`` is an ordinary eager Tensor: no
eager hook can see that it was computed from ``x``.

``check_python_control_flow`` therefore traces the program once more into a
scratch graph, without AutoGraph, and translates a failing ``bool()`` into a
``TypeError`` naming the latent random variables the condition is computed
from (found by walking the graph back from the condition to their values)
and the line of the program.  It builds a graph only: nothing runs, nothing
compiles.  The trace is also the first to see ``tf.constant`` given a
Tensor (an argument: data reach the program as Tensors), which works eagerly
and fails only in a graph; it names the line and says what to write.  Any
other failure of this extra trace is left for the real runs to report.  A
distribution parameter known in the graph without the latents or the data
(a literal) and outside its domain is refused here too
(``constant_parameters``).

The same graph tells which quantities of an observed variable's distribution
are computed from latents (``ProgramGraph.dependence``): the support checks
of ``edward_lite.checks.support`` use it to test data against bounds given by the
program's data (``Binomial(total_count=n)``) but not against bounds drawn
from the prior (``Uniform(0., theta)`` with ``theta`` latent).
"""

import os

import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow.python.framework import func_graph  # pylint: disable=g-direct-tensorflow-import

from edward_lite.checks.constant_parameters import constant_domain_message
from edward_lite.checks.program_errors import program_site
from edward_lite.language.random_variable import RandomVariable
from edward_lite.language.symbolic_values import ControlFlowError, control_flow_error
from edward_lite.language.tracing import trace

__all__ = ["check_python_control_flow", "ProgramGraph", "ancestors", "tensor_key"]

class ProgramGraph:
  """What the graph trace of a program tells about its observed variables."""

  def __init__(self, graph=None, latents=None, observed=None):
    self._graph = graph
    self._latents = latents or {}
    self._observed = observed or {}

  def dependence(self, name):
    """``random(fn) -> bool`` for observed variable ``name``: whether
    ``fn(distribution)`` (a Tensor, a bijector, any nest of them) is computed
    from latent values in the program.  True when the trace could not tell.
    A ``DeferredTensor`` is read as its value: ``tfd.Inflated``'s
    ``Deterministic`` holds ``inflated_loc`` broadcast to the shape of its
    (random) probabilities, a constant, not a function of them."""
    dist = self._observed.get(name)
    if dist is None:
      return lambda fn: True

    def random(fn):
      try:
        with self._graph.as_default():
          value = tf.nest.map_structure(
              lambda v: tf.convert_to_tensor(v) if isinstance(v, tfp.util.DeferredTensor) else v,
              fn(dist))
          parts = tf.nest.flatten(value, expand_composites=True)
        if any(isinstance(t, tfp.distributions.Distribution) for t in parts):
          return True  # not a CompositeTensor: its parameters are hidden
        return any(ancestors(t, self._latents)
                   for t in parts if isinstance(t, tf.Tensor) and hasattr(t, "graph"))
      except Exception:  # pylint: disable=broad-except
        return True

    return random


def check_python_control_flow(program, args=(), kwargs=None, observed=None):
  """Raises ``TypeError`` if ``program`` branches in Python on a latent value.

  Args:
    program: the model, a callable building named random variables.
    args, kwargs: its arguments.
    observed: dict name -> value of observed random variables (their values
      are data: control flow on them is allowed).

  Returns:
    A ``ProgramGraph`` (empty if the graph trace failed for another reason).

  Raises:
    TypeError: ``bool()`` of a latent random variable, or of a Tensor
      computed from one, in ``if``/``while``/``and``/``or``/``not``; the
      message names the variables and the program line.  Also
      ``tf.constant`` of a Tensor, naming the program line.
  """
  observed = observed or {}
  latents = {}  # (graph id, tensor name) -> random-variable name
  observed_dists = {}
  constants_outside = []  # constant_parameters' sentences

  def tracer(fn, *fn_args, **fn_kwargs):
    name = fn_kwargs.get("name")
    latent = fn_kwargs.get("value") is None and name not in observed
    if name in observed:
      fn_kwargs["value"] = observed[name]
    rv = fn(*fn_args, **fn_kwargs)
    if not isinstance(rv, RandomVariable) or name is None:
      return rv
    message = constant_domain_message(name, rv.distribution)
    if message:
      constants_outside.append(message)
    if name in observed:
      observed_dists[name] = rv.distribution
    elif latent and isinstance(rv.value, tf.Tensor) and hasattr(rv.value, "graph"):
      latents[tensor_key(rv.value)] = name
    return rv

  def checked(program_graph):
    """The graph trace's result, unless a constant parameter was out of its domain."""
    if constants_outside:
      raise ValueError(constants_outside[0])
    return program_graph

  graph = func_graph.FuncGraph("edward_lite_program_check")
  try:
    with graph.as_default(), trace(tracer):
      program(*args, **(kwargs or {}))
  except ControlFlowError as e:  # bool()/float() of a random variable itself
    if not e.names:
      raise
    _, where = _bool_site(e.__traceback__)
    raise control_flow_error(e.names, where) from None
  except tf.errors.OperatorNotAllowedInGraphError as e:
    condition, where = _bool_site(e.__traceback__)
    names = ancestors(condition, latents) if condition is not None else set()
    if names:
      raise control_flow_error(names, where) from None
    return checked(ProgramGraph())
  except TypeError as e:
    if not _is_constant_of_tensor(e):
      return checked(ProgramGraph())
    _, where = _bool_site(e.__traceback__)
    raise TypeError(
        f"tf.constant was given a Tensor{where}, which it takes only eagerly: traced for "
        "inference, the program's arguments (NumPy and pandas data are converted to "
        "Tensors once, before tracing) and random variables, and all it computes from them, "
        "are graph Tensors; use the Tensor as it is (x[:-1], not tf.constant(x[:-1])), or write "
        "tf.convert_to_tensor(x) for a value that may or may not be a Tensor.") from e
  except Exception:  # pylint: disable=broad-except
    # Broad: the user's program may raise anything in this graph trace; the real runs report it.
    return checked(ProgramGraph())
  return checked(ProgramGraph(graph, latents, observed_dists))


def _is_constant_of_tensor(error):
  """Whether ``error`` is ``tf.constant``'s refusal of a graph Tensor."""
  tb = error.__traceback__
  while tb is not None:
    if os.path.basename(tb.tb_frame.f_code.co_filename) == "constant_op.py":
      return "Expected any non-tensor type" in str(error)
    tb = tb.tb_next
  return False


def tensor_key(tensor):
  """A graph tensor's identity: ``(id of its graph, its name)``."""
  return id(tensor.graph), tensor.name


def _bool_site(tb):
  """The Tensor that was used as a bool and the program line that did it."""
  cast = tb
  while cast is not None and cast.tb_frame.f_code.co_name != "_disallow_bool_casting":
    cast = cast.tb_next
  condition = cast.tb_frame.f_locals.get("self") if cast is not None else None
  return (condition if isinstance(condition, tf.Tensor) else None), program_site(tb, until=cast)


def ancestors(tensor, latents):
  """Names of the random variables ``tensor`` is computed from: ``latents``
  maps ``tensor_key`` of their values to their names (a graph walk that
  stops at each such value and follows captures out of inner graphs)."""
  found, seen, stack = set(), set(), [tensor]
  captured = {}  # graph id -> {internal tensor name: external tensor}
  while stack:
    t = stack.pop()
    key = tensor_key(t)
    if key in seen:
      continue
    seen.add(key)
    if key in latents:
      found.add(latents[key])
      continue
    op = t.op
    stack.extend(op.inputs)
    if op.type == "Placeholder" and isinstance(t.graph, func_graph.FuncGraph):
      gid = id(t.graph)
      if gid not in captured:
        captured[gid] = {internal.name: external for external, internal in t.graph.captures}
      outer = captured[gid].get(t.name)
      if outer is not None and hasattr(outer, "graph"):
        stack.append(outer)
  return found
