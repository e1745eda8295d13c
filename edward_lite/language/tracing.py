"""The tracer stack: how a program's random variables are intercepted.

A *tracer* is any callable ``tracer(fn, *args, **kwargs)``.  Every traceable
function (each random-variable constructor is one) hands its call to the
innermost tracer on a thread-local stack instead of running itself.  The
tracer may

* forward the call to the next tracer out with ``traceable(fn)(*args, **kwargs)``
  (possibly after changing the arguments, e.g. setting ``value=``), or
* stop the chain by calling ``fn(*args, **kwargs)`` directly, or by returning
  something else altogether.

While a tracer runs it is taken off the stack, so a traceable call made from
inside it goes to the next tracer out.  The bottom of the stack is a tracer
that simply calls ``fn``.

These semantics are those of Edward2's TensorFlow backend; the older
``tfp.edward2`` names (``interception``, ``interceptable``,
``get_next_interceptor``) are provided as aliases.
"""

import collections
import contextlib
import functools
import threading

__all__ = [
    "trace",
    "traceable",
    "get_next_tracer",
    "active_tracers",
    "tape",
    "interception",
    "interceptable",
    "get_next_interceptor",
]


def _call(fn, *args, **kwargs):
  """The bottom tracer: runs ``fn`` unchanged."""
  return fn(*args, **kwargs)


class _TracerStack(threading.local):
  """One stack of tracers per thread; the bottom entry is ``_call``."""

  def __init__(self):
    super().__init__()
    self.stack = [_call]


_STACK = _TracerStack()


@contextlib.contextmanager
def trace(tracer):
  """Context manager that pushes ``tracer`` on the tracer stack.

  Inside the block every traceable call goes to ``tracer`` first (innermost
  ``trace`` block first).  The tracer is popped on exit, also on exceptions.

  Args:
    tracer: callable ``tracer(fn, *args, **kwargs)``.

  Yields:
    None.
  """
  if not callable(tracer):
    raise TypeError(f"ed.trace expects a callable tracer(fn, *args, **kwargs); "
                    f"got {type(tracer).__name__}.")
  stack = _STACK.stack
  stack.append(tracer)
  try:
    yield
  finally:
    # Remove exactly the tracer we pushed, even if the block mangled the stack.
    for i in range(len(stack) - 1, 0, -1):
      if stack[i] is tracer:
        del stack[i]
        break


def active_tracers():
  """The tracers on the stack above the bottom one, outermost first."""
  return tuple(_STACK.stack[1:])


@contextlib.contextmanager
def get_next_tracer():
  """Context manager yielding the innermost tracer, off the stack meanwhile.

  While the block runs the yielded tracer is not on the stack, so traceable
  calls made inside it reach the next tracer out; it is put back on exit.
  The bottom tracer (which just calls the function) is never removed.
  """
  stack = _STACK.stack
  if len(stack) == 1:
    yield stack[0]
    return
  tracer = stack.pop()
  try:
    yield tracer
  finally:
    stack.append(tracer)


def traceable(fn):
  """Decorator: calls of ``fn`` go through the tracer stack.

  Args:
    fn: any callable.

  Returns:
    A function with the signature of ``fn`` that calls
    ``tracer(fn, *args, **kwargs)`` with the innermost tracer.
  """

  @functools.wraps(fn)
  def traced(*args, **kwargs):
    with get_next_tracer() as tracer:
      if tracer is _call:
        return tracer(fn, *args, **kwargs)
      _STACK.handling = getattr(_STACK, "handling", 0) + 1
      try:
        return tracer(fn, *args, **kwargs)
      finally:
        _STACK.handling -= 1

  return traced


def direct_call():
  """Whether the traceable call running now was made with no tracer on the
  stack or handling a call (a user's own call, not one a tracer or an
  inference run makes or handles)."""
  return getattr(_STACK, "handling", 0) == 0 and len(_STACK.stack) == 1


@contextlib.contextmanager
def tape():
  """Context manager recording every named random variable created inside it.

  Yields:
    An ``OrderedDict`` from name to the output of each named traceable call
    (a ``RandomVariable``, or what an inner tracer returned instead), in
    creation order, filled in as the block runs.  Variables removed by
    ``ed.do`` are not recorded.  A name created twice in the block is an
    error: names must be unique within one program run.
  """
  recorded = collections.OrderedDict()

  def record(fn, *args, **kwargs):
    out = traceable(fn)(*args, **kwargs)
    name = kwargs.get("name")
    if name is not None and not getattr(out, "_ed_intervened", False):
      check_unique_name(name, recorded)
      recorded[name] = out
    return out

  with trace(record):
    yield recorded


def check_unique_name(name, seen):
  """Raises ValueError if ``name`` is already a key of ``seen``."""
  if name in seen:
    raise ValueError(
        f"Random variable name '{name}' is used twice in one program run; "
        "give each random variable a unique name=.")


# Older tfp.edward2 names.
interception = trace
interceptable = traceable
get_next_interceptor = get_next_tracer
