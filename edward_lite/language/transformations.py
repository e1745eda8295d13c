"""Program transformations: log joint, value setting, conditioning, intervention.

A *program* is a Python callable that builds random variables with
``ed.<Distribution>(..., name=...)``.  These functions change what a program
means by running it under tracers; none of them edits the program's code.
"""

import contextlib
import inspect

import tensorflow as tf

from edward_lite.language.random_variable import RandomVariable
from edward_lite.language.tracing import check_unique_name, trace, traceable

__all__ = ["make_log_joint_fn", "make_value_setter", "condition", "do",
           "MissingValueError", "UnnamedRandomVariableError", "require_name"]


class MissingValueError(ValueError, LookupError):
  """A random variable has no value where one is needed (a LookupError, as
  in Edward2)."""


class UnnamedRandomVariableError(ValueError, KeyError):
  """A random variable has no ``name=`` where one is needed (a KeyError, as
  in Edward2)."""

  __str__ = ValueError.__str__  # KeyError would quote the message


def require_name(fn, kwargs, needs="inference needs a unique name on every random variable",
                 caller=None):
  """The ``name=`` of a random-variable constructor call ``fn(**kwargs)`` that a
  tracer sees; without one, ``UnnamedRandomVariableError`` saying what ``needs``
  it (after ``caller:``, if given)."""
  name = kwargs.get("name")
  if name is None:
    start = f"{caller}: the program" if caller else "The program"
    raise UnnamedRandomVariableError(
        f"{start} creates a random variable with {getattr(fn, '__name__', fn)} and no name=; "
        f"{needs}.")
  return name


def make_value_setter(**values):
  """Returns a tracer that sets the value of each named random variable.

  ``with ed.trace(ed.make_value_setter(y=y_obs)): model()`` runs ``model``
  with the random variable named ``y`` fixed to ``y_obs``.  (The older
  ``tfp.edward2`` entry point; ``ed.condition`` is the checked equivalent.)

  Args:
    **values: name -> value (Tensor-like).

  Returns:
    A tracer ``set_values(fn, *args, **kwargs)``.
  """

  def set_values(fn, *args, **kwargs):
    name = kwargs.get("name")
    if name in values:
      kwargs["value"] = values[name]
    return traceable(fn)(*args, **kwargs)

  return set_values


class _NameCheck:
  """Tracer wrapper that remembers the names it sees, to report unused keys."""

  def __init__(self, what, values, inner):
    self.what, self.values, self.inner, self.seen = what, values, inner, []

  def __call__(self, fn, *args, **kwargs):
    name = kwargs.get("name")
    if name is not None:
      self.seen.append(name)
    return self.inner(fn, *args, **kwargs)

  def check(self):
    unused = [n for n in self.values if n not in self.seen]
    if unused:
      raise ValueError(
          f"{self.what}: no random variable named {_names(unused)} was created "
          f"inside the block; random variables created: {_names(self.seen)}.")


@contextlib.contextmanager
def _checked(what, values, tracer):
  checker = _NameCheck(what, values, tracer)
  with trace(checker):
    yield
  checker.check()  # Only on normal exit: an exception inside wins.


def condition(**values):
  """Context manager fixing the values of named random variables.

  Inside ``with ed.condition(y=y_obs):`` the random variable named ``y`` takes
  the value ``y_obs`` (it still has its distribution and contributes density to
  a log joint).  A name that no random variable in the block carries is an
  error, raised when the block ends.

  Args:
    **values: name -> value.
  """
  return _checked("ed.condition", values, make_value_setter(**values))


def do(**values):
  """Context manager for Pearl's do-operator (an intervention).

  Inside ``with ed.do(x=x0):`` the random variable named ``x`` is not created:
  the program receives the constant Tensor ``x0`` instead (cast to the
  distribution's dtype and checked against its shape), which has no
  distribution and contributes no density to a log joint, and which tracers
  further out (``ed.tape``) never see.  Variables downstream of ``x`` are
  generated from ``x0``.  A name that no random variable in the block carries
  is an error, raised when the block ends.

  Args:
    **values: name -> value.
  """

  def intervene(fn, *args, **kwargs):
    name = kwargs.get("name")
    if name not in values:
      return traceable(fn)(*args, **kwargs)
    kwargs["value"] = values[name]
    # Built directly (not forwarded), so no outer tracer records it.
    constant = tf.identity(fn(*args, **kwargs).value)
    constant._ed_intervened = True  # pylint: disable=protected-access
    return constant

  return _checked("ed.do", values, intervene)


def _names(names):
  return "[" + ", ".join(f"'{n}'" for n in names) + "]"


def _program_parameters(program):
  """(parameter names a keyword may set, accepts **kwargs) of ``program``."""
  try:
    params = inspect.signature(program).parameters.values()
  except (TypeError, ValueError):
    return set(), True
  names = {p.name for p in params
           if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
  return names, any(p.kind == p.VAR_KEYWORD for p in params)


def make_log_joint_fn(program):
  """Returns the log joint density of a program as a function.

  ``log_joint(*args, **kwargs)`` runs ``program``; each keyword that names a
  random variable sets its value, the other keywords go to ``program``.  The
  result is ``sum_v sum(v.distribution.log_prob(v.value))`` over every random
  variable ``v`` the program creates, a scalar Tensor.

  A random variable whose value is fixed inside the program (by ``value=``,
  ``ed.condition`` or a value setter, inside the program or around the call)
  uses that value when no keyword gives one.  A random variable removed by
  ``ed.do`` contributes nothing.

  Args:
    program: callable building named random variables.

  Returns:
    ``log_joint(*args, **kwargs) -> scalar Tensor``.

  Raises (when called):
    ValueError: a random variable has no value (neither keyword nor fixed in
      the program), a keyword names neither a random variable nor a parameter
      of ``program``, a random variable has no name, or a name is used twice.
  """
  if not callable(program):
    raise TypeError(f"make_log_joint_fn expects a callable program; got "
                    f"{type(program).__name__}.")
  params, var_keyword = _program_parameters(program)

  def log_joint_fn(*args, **kwargs):
    program_kwargs = {k: v for k, v in kwargs.items() if k in params}
    values = {k: v for k, v in kwargs.items() if k not in params}
    if var_keyword:  # the program takes **kwargs: pass it what is not a value
      program_kwargs.update(values)
    parts, missing = {}, []

    def tracer(fn, *rv_args, **rv_kwargs):
      name = require_name(fn, rv_kwargs, "every random variable needs a unique name to be "
                          "given a value", caller="make_log_joint_fn")
      check_unique_name(name, parts)
      built = {}

      def build(*a, **kw):
        if name in values:  # an explicit keyword wins over fixed values
          kw["value"] = values[name]
        elif kw.get("value") is None:
          missing.append(name)
        built["rv"] = fn(*a, **kw)
        return built["rv"]

      out = traceable(build)(*rv_args, **rv_kwargs)
      rv = built.get("rv")
      if isinstance(rv, RandomVariable) and out is rv:  # not intervened on
        parts[name] = tf.reduce_sum(rv.distribution.log_prob(rv.value))
      else:  # removed by an ed.do around the call
        if name in values:
          raise ValueError(
              f"make_log_joint_fn: keyword {_names([name])} sets a random "
              "variable that ed.do has replaced by a constant; drop the keyword "
              "or the intervention.")
        parts.setdefault(name, None)
        if name in missing:
          missing.remove(name)
      return out

    with trace(tracer):
      program(*args, **program_kwargs)
    if missing:
      raise MissingValueError(
          f"make_log_joint_fn: no value for random variable {_names(missing)}; "
          "pass it as a keyword of the log joint or fix it in the program with "
          "value= or ed.condition.")
    unknown = [k for k in values if k not in parts]
    if unknown and not var_keyword:
      raise ValueError(
          f"make_log_joint_fn: keyword {_names(unknown)} names neither a random "
          f"variable of the program {_names(parts)} nor a parameter of it "
          f"{_names(sorted(params))}.")
    terms = [t for t in parts.values() if t is not None]
    if not terms:
      return tf.constant(0.)
    return tf.add_n(terms)

  return log_joint_fn
