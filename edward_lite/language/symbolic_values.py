"""A random variable's value inside a traced program is symbolic: the test for
it, and the error for Python control flow (or a Python number) that needs a
concrete value.

``is_symbolic(value)``: the value has no NumPy value here (a graph Tensor, a
variable read inside a traced function).  ``ControlFlowError`` (a
``TypeError``) says which random variables a ``bool()`` needed, in the one
sentence of ``control_flow_message``; ``RandomVariable`` raises it, and so
does ``checks.control_flow`` for a condition computed from random variables.
"""

import tensorflow as tf

__all__ = ["ControlFlowError", "control_flow_error", "control_flow_message", "is_symbolic"]


class ControlFlowError(TypeError):
  """Python control flow (or a Python number) needs a random variable's
  concrete value, which a traced program does not have.

  ``names`` holds the random variables whose value a Python ``bool()`` needed
  (empty for other uses such as ``float()``).
  """

  names = ()
  # AutoGraph would re-raise it from a tf.function as a StagingError (not a
  # TypeError); the message is complete as it is.
  ag_pass_through = True


def control_flow_error(names, where=""):
  """The ``ControlFlowError`` for a ``bool()`` on random variables ``names``."""
  error = ControlFlowError(control_flow_message(names, where))
  error.names = tuple(sorted(set(names)))
  return error


def control_flow_message(names, where=""):
  """The one-sentence message for Python control flow on random variables."""
  names = sorted(set(names))
  label = ("random variable " if len(names) == 1 else "random variables ") + ", ".join(
      f"'{n}'" for n in names)
  return (f"Python control flow on the value of {label}{where} is not allowed inside a "
          "model, whose values are symbolic when it is traced for inference (an if, "
          "while, and/or/not or bool() on a random variable or on a Tensor computed "
          "from one): use tf.where(cond, a, b) or tf.cond instead.")


def is_symbolic(value):
  """True if ``value`` has no concrete (NumPy) value here: a graph Tensor, or
  a variable read inside a traced function."""
  if isinstance(value, tf.Variable):
    return not tf.executing_eagerly()
  return not hasattr(value, "numpy")
