"""A traced function kept as its function library and called by name
(runtime/kept_function.py): the kept copy computes what the trace computes,
after a round trip through its saved state, under names of its own."""

import collections
import pickle

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import function_pb2
from tensorflow.python.eager import context

from edward_lite.runtime.kept_function import KeptFunction

Pair = collections.namedtuple("Pair", ["total", "steps"])
DATA = tf.constant(np.linspace(0.5, 2., 4, dtype=np.float32))  # captured, not an argument


@tf.function(autograph=False)
def _inner(x):
  return tf.sin(x) * DATA


def _program(state, n, scale):
  """A loop (its body and condition are functions), a branch on data, a
  nested ``tf.function`` and captured data; outputs a namedtuple, a dict and
  a None.  ``scale`` is a Python value: part of the trace."""
  def body(i, x):
    return i + 1, tf.cond(tf.reduce_sum(x) > 0., lambda: _inner(x), lambda: x + 1.)
  _, x = tf.while_loop(lambda i, _: i < n, body, (tf.constant(0), state["x"]),
                       maximum_iterations=10)
  return Pair(total=tf.reduce_sum(x) * scale, steps=n * 2), {"x": x, "none": None}


def _same(a, b):
  assert (a is None) == (b is None)
  if a is not None:
    np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_kept_function_computes_what_its_trace_computes_after_a_round_trip(jit_compile):
  fn = tf.function(_program, autograph=False, jit_compile=jit_compile)
  args = ({"x": tf.constant([0.3, -0.1, 0.7, 0.2])}, tf.constant(3), 2.)
  concrete = fn.get_concrete_function(*args)
  tag = f"test{int(jit_compile)}"
  kept = KeptFunction.from_concrete(concrete, args, tag=tag, max_captured_bytes=1 << 20)
  library = function_pb2.FunctionDefLibrary.FromString(kept.library)
  names = {f.signature.name for f in library.function}
  for name in names:  # as in a new process: registered from the saved state
    context.context().remove_function(name)
  again = KeptFunction(**pickle.loads(pickle.dumps(kept.state())))
  expected = fn(*args)
  for result in (kept(*args), again(*args)):
    assert isinstance(result[0], Pair) and result[1]["none"] is None
    tf.nest.map_structure(_same, result, expected)
  other = ({"x": tf.constant([-5., 1., 1., 1.])}, tf.constant(2), 2.)  # the other branch
  tf.nest.map_structure(_same, again(*other), fn(*other))
  assert kept.top in names and all(n.endswith("_" + tag) for n in names)
  called = {v.func.name for f in library.function for node in f.node_def
            for v in node.attr.values() if v.HasField("func")}
  called |= {node.op for f in library.function for node in f.node_def if "inference" in node.op}
  assert len(called) >= 3 and called <= names  # the loop's body and condition, the branches


def test_what_a_copy_cannot_compute_is_not_kept():
  variable = tf.Variable(2.)
  reads = tf.function(lambda x: x * variable).get_concrete_function(tf.constant(1.))
  calls_python = tf.function(
      lambda x: tf.py_function(np.square, [x], tf.float32)).get_concrete_function(tf.constant(1.))
  big = tf.function(lambda x: x + DATA).get_concrete_function(tf.constant(1.))
  for concrete, limit in ((reads, 1 << 20), (calls_python, 1 << 20), (big, 8)):
    assert KeptFunction.from_concrete(concrete, (tf.constant(1.),), tag="t",
                                      max_captured_bytes=limit) is None
