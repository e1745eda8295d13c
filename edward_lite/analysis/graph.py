"""A picture of a model: its random variables and what each depends on.

``ed.graph(model, *args, observed=..., **kwargs)`` traces the program once
(a graph trace: nothing is sampled or compiled) and returns a
``graphviz.Digraph`` (PyMC's ``model_to_graphviz``, NumPyro's
``render_model``): one node per named random variable -- latent variables
as ellipses, observed ones shaded, ``ed.Deterministic`` values as boxes --
labelled with the distribution and the value's shape, and an edge ``a ->
b`` when a parameter of ``b``'s distribution is computed from ``a``'s value.
A notebook shows it; ``.render("model", format="png")`` writes a file.

``model_graph`` gives the same nodes and edges without Graphviz.  Drawing
needs the optional extra ``pip install 'edward_lite[graph]'`` (the Python
package ``graphviz``) and Graphviz's ``dot`` program (``apt install
graphviz``, ``brew install graphviz``).
"""

from typing import NamedTuple, Tuple

import tensorflow as tf
from tensorflow.python.framework import func_graph  # pylint: disable=g-direct-tensorflow-import

from edward_lite.checks import control_flow
from edward_lite.language.random_variable import RandomVariable
from edward_lite.language.reparameterize import Reparameterized
from edward_lite.language.tracing import trace
from edward_lite.model.structure import DETERMINISTIC

__all__ = ["graph", "model_graph", "ModelGraph", "Node"]

KINDS = ("latent", "observed", "deterministic")


class Node(NamedTuple):
  """A random variable: ``kind`` one of ``KINDS``; ``shape`` its value's."""
  name: str
  distribution: str
  shape: Tuple[int, ...]
  kind: str


class ModelGraph(NamedTuple):
  """``nodes`` in program order; ``edges`` ``(parent, child)`` pairs."""
  nodes: Tuple[Node, ...]
  edges: Tuple[Tuple[str, str], ...]


def model_graph(model, *args, observed=None, **kwargs):
  """The ``ModelGraph`` of ``model(*args, **kwargs)`` with ``observed``
  values (dict name -> value): one graph trace of the program."""
  if not callable(model):
    raise TypeError(f"ed.graph expects a callable program; got {type(model).__name__}.")
  observed = dict(observed or {})
  if isinstance(model, Reparameterized):
    model = model.leaving(observed)  # data, not non-centred
  found = []  # (name, random variable)

  def tracer(fn, *fn_args, **fn_kwargs):
    name = fn_kwargs.get("name")
    if name in observed:
      fn_kwargs["value"] = observed[name]
    rv = fn(*fn_args, **fn_kwargs)
    if isinstance(rv, RandomVariable) and name is not None:
      found.append((name, rv))
    return rv

  with func_graph.FuncGraph("edward_lite_model_graph").as_default(), trace(tracer):
    model(*args, **kwargs)
  unknown = sorted(set(observed) - {name for name, _ in found})
  if unknown:
    raise ValueError(f"ed.graph: observed names {unknown} are not random variables of the "
                     f"program (it has {[name for name, _ in found]}).")
  values = {control_flow.tensor_key(rv.value): name for name, rv in found
            if _in_graph(rv.value)}
  nodes, edges = [], []
  for name, rv in found:
    kind = ("observed" if name in observed else
            "deterministic" if isinstance(rv.distribution, DETERMINISTIC) else "latent")
    nodes.append(Node(name, type(rv.distribution).__name__,
                      tuple(rv.value.shape.as_list()), kind))
    parents = set()
    # A parameter given as a random variable stands for its value.
    parameters = {k: v.value if isinstance(v, RandomVariable) else v
                  for k, v in rv.distribution.parameters.items()}
    for t in tf.nest.flatten(parameters, expand_composites=True):
      if _in_graph(t):
        parents |= control_flow.ancestors(t, values)
    own = control_flow.tensor_key(rv.value) if _in_graph(rv.value) else None
    edges += [(p, name) for p in sorted(parents) if values.get(own) != p]
  order = {node.name: i for i, node in enumerate(nodes)}
  return ModelGraph(tuple(nodes), tuple(sorted(edges, key=lambda e: (order[e[1]],
                                                                     order[e[0]]))))


def graph(model, *args, observed=None, **kwargs):
  """A ``graphviz.Digraph`` of ``model(*args, **kwargs)`` (module docstring)."""
  structure = model_graph(model, *args, observed=observed, **kwargs)
  try:
    import graphviz  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  except ImportError as e:
    raise ImportError("ed.graph draws with the Python package graphviz and Graphviz's dot "
                      "program: pip install 'edward_lite[graph]', and apt install graphviz "
                      "(or brew install graphviz).") from e
  name = getattr(model, "__name__", "model")
  dot = graphviz.Digraph(name=name, graph_attr={"rankdir": "TB"})
  for node in structure.nodes:
    shape = "x".join(str(d) for d in node.shape) if node.shape else "scalar"
    style = {"latent": dict(shape="ellipse"),
             "observed": dict(shape="ellipse", style="filled", fillcolor="lightgray"),
             "deterministic": dict(shape="box")}[node.kind]
    dot.node(node.name, f"{node.name}\n{node.distribution}\n{shape}", **style)
  for parent, child in structure.edges:
    dot.edge(parent, child)
  return dot


def _in_graph(t):
  return isinstance(t, tf.Tensor) and hasattr(t, "graph")
