"""A program's own body converted by AutoGraph (``graph_program``).

Python ``for``/``if`` over tensors in a model become graph control flow when
the library traces it, as in a ``tf.function``.
"""

import tensorflow as tf

__all__ = ["graph_program"]

_CONVERTED = {}  # id(program) -> (program, its AutoGraph conversion)


def graph_program(program):
  """``program`` with its own body converted by AutoGraph, once per program.

  The library traces its functions without AutoGraph (``tf.function(...,
  autograph=False)``, as TFP does): converting every function on the way from
  a compiled chunk to the program took most of the seconds before the first
  draw (benchmarks/RESULTS.md §24).  The program's own body still is, so a
  ``for i in tf.range(n)`` or an ``if`` on data in it becomes graph control
  flow as a ``tf.function`` user expects; the functions it calls run as
  written (write their loops with ``tf.scan``/``tf.while_loop``).  A program
  AutoGraph cannot read (no source, e.g. typed at a prompt; a builtin) runs
  as written.
  """
  hit = _CONVERTED.get(id(program))
  if hit is None:
    try:
      converted = tf.autograph.to_graph(program, recursive=False)
    except Exception:  # pylint: disable=broad-except
      # Broad: AutoGraph fails on valid Python not only with ConversionError (for/else
      # raises NotImplementedError); the program then runs as written.
      converted = program
    hit = _CONVERTED[id(program)] = (program, converted)
  return hit[1]
