"""A program's structure: its random variables, traced once and checked.

``trace_model`` runs the program eagerly (``structure_checks`` times, with
prior draws) and sorts its named random variables into

* *latents* -- neither observed nor fixed inside the program -- each with a
  ``LatentInfo`` (shapes, dtype, the constraining bijector);
* *observed* -- named in ``observed=`` (their values converted and checked
  against the distribution's support once);
* *fixed* -- given a ``value=`` inside the program (``ed.condition``);
* *deterministic* -- ``ed.Deterministic``: a recorded function of the
  latents, not a term of the log density;
* *enumerated* -- discrete latents with finite support, summed out of the
  log density (``enumeration.py``).

Every input check that needs the program (unknown observed names, a
structure that changes between runs, discrete latents, a dtype conflict, a
failing op) raises here, before any compiled work, with a message that names
the variable and, for a failing op, the line of the user's program.
"""

import collections
import dataclasses
from typing import Any, Dict

import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.language import terms
from edward_lite.model import enumeration_plan
from edward_lite.language.bijectors import support_bijector
from edward_lite.checks.control_flow import check_python_control_flow
from edward_lite.model.data import ModelData, call_program, check_finite, prepare_arguments
from edward_lite.checks.program_errors import (describe_arguments, first_line, index_dtype_hint,
                                               integer_arguments, is_dtype_conflict,
                                               outside_data_hint, program_site, strings_hint)
from edward_lite.language.random_variable import RandomVariable
from edward_lite.checks.support import check_observed_support
from edward_lite.language.tracing import check_unique_name, trace
from edward_lite.language.transformations import require_name

__all__ = ["LatentInfo", "Structure", "trace_model", "DtypeConflictError",
           "is_dtype_conflict", "DETERMINISTIC"]

tfd = tfp.distributions

# ed.Deterministic(value, name=...) records a function of the latents: not a
# latent, no term of the log density; its values are kept with the draws.
DETERMINISTIC = (tfd.Deterministic, tfd.VectorDeterministic)

LatentInfo = collections.namedtuple(
    "LatentInfo", ["name", "shape", "dtype", "bijector", "unconstrained_shape",
                   "distribution"])
LatentInfo.__doc__ = """Static description of one latent variable.

Fields: ``name``; ``shape`` (constrained value shape, a ``tf.TensorShape``);
``dtype``; ``bijector`` (unconstrained -> constrained, from the structure
trace; the one applied in a run is rebuilt from that run's distribution);
``unconstrained_shape``; ``distribution`` (the class name).
"""


@dataclasses.dataclass(frozen=True)
class Structure:
  """The random variables of a program, by role (see the module docstring)."""
  latents: Dict[str, LatentInfo]
  fixed: Dict[str, Any]
  deterministic: Dict[str, tf.TensorShape]
  enumerated: Dict[str, "enumeration_plan.EnumeratedInfo"] = dataclasses.field(default_factory=dict)

  def role(self, name, observed):
    """``"latent"``, ``"observed"``, ``"fixed"``, ``"deterministic"``,
    ``"enumerated"`` or None."""
    if name in observed:
      return "observed"
    for role, names in (("latent", self.latents), ("fixed", self.fixed),
                        ("deterministic", self.deterministic),
                        ("enumerated", self.enumerated)):
      if name in names:
        return role
    return None


def _latent_floats(found, observed):
  """The floating dtypes of the latent random variables of one trace."""
  return {rv.value.dtype for name, (rv, fixed) in found.items()
          if name not in observed and not fixed and rv.value.dtype.is_floating}


class DtypeConflictError(TypeError):
  """The program combines floating dtypes that do not match."""


def trace_model(program, args, kwargs, observed, structure_checks, float_dtype):
  """Prepares the data and traces the program.

  Args:
    program: the callable.
    args, kwargs: its arguments as given.
    observed: dict name -> observed value.
    structure_checks: how many traced runs must agree (at least one).
    float_dtype: the model's floating dtype, or None to keep the data's
      (NumPy float64 data meeting a float32 program then become float32).

  Returns:
    ``(ModelData, Structure)``.
  """
  if not callable(program):
    raise TypeError(f"make_target expects a callable program; got {type(program).__name__}.")
  if observed is None:
    observed = {}
  if not isinstance(observed, collections.abc.Mapping):
    raise TypeError("observed= must be a dict from random-variable name to "
                    f"value; got {type(observed).__name__}.")
  args_t, kwargs_t = prepare_arguments(program, args, kwargs, float_dtype)
  for name, value in observed.items():
    check_finite(f"Observed data for random variable '{name}'", value)
  data = ModelData(args_t, kwargs_t, dict(observed))
  try:
    found = _trace(program, data, float_dtype)
    conflict = float_dtype is None and len(_latent_floats(found, data.observed)) > 1
  except DtypeConflictError:
    if float_dtype is not None:
      raise
    conflict = True
  if conflict:
    # NumPy's float64 data meeting a float32 program, in one op or in the
    # latents' dtypes (a Dirichlet on float64 concentrations beside a
    # float32 location): run it in float32, as any other data.
    data = data.replace(**dict(zip(("args", "kwargs"),
                                   prepare_arguments(program, args, kwargs, tf.float32))))
    found = _trace(program, data, float_dtype)
  unknown = [n for n in data.observed if n not in found]
  if unknown:
    raise ValueError(
        f"Observed name(s) {unknown} are not random variables of the program; "
        f"its random variables are {list(found)}.")
  for _ in range(max(structure_checks, 1) - 1):
    _check_same_structure(found, _trace(program, data, float_dtype))
  graph = check_python_control_flow(
      lambda: call_program(program, data, float_dtype, autograph=False),
      observed={n: found[n][0].value for n in data.observed})

  observed_values, fixed = {}, {}
  deterministic, latents = collections.OrderedDict(), collections.OrderedDict()
  enumerated = collections.OrderedDict()
  for name, (rv, is_fixed) in found.items():
    if name in data.observed:
      observed_values[name] = rv.value  # converted and checked once
      check_observed_support(name, rv.distribution, rv.value, graph.dependence(name))
    elif is_fixed:
      check_finite(f"Value fixed inside the program for random variable '{name}'", rv.value)
      fixed[name] = rv.value
    elif isinstance(rv.distribution, DETERMINISTIC):
      deterministic[name] = rv.value.shape
    elif _finite_support(rv) is not None:
      enumerated[name] = enumeration_plan.info(name, rv, _finite_support(rv))
    else:
      latents[name] = _latent_info(name, rv)
  data = data.replace(observed={n: observed_values[n] for n in data.observed})
  return data, Structure(latents, fixed, deterministic, enumerated)


def _finite_support(rv):
  """The support of a discrete latent that can be summed out, else None."""
  if rv.dtype.is_floating and support_bijector(rv.distribution) is not None:
    return None
  return enumeration_plan.support_values(rv.distribution)


def _trace(program, data, float_dtype):
  """Runs the program eagerly: name -> (RandomVariable, value fixed?)."""
  found = collections.OrderedDict()
  float_name = (float_dtype or tf.float32).name

  def tracer(fn, *args, **kwargs):
    name = require_name(fn, kwargs)
    check_unique_name(name, found)
    fixed = kwargs.get("value") is not None
    if name in data.observed:
      if fn is terms._factor:  # pylint: disable=protected-access
        raise ValueError(f"Observed name '{name}' is an ed.Factor, a term added to the log "
                         "density, not a random variable with data; remove it from "
                         "observed=.")
      kwargs["value"] = data.observed[name]
    try:
      rv = fn(*args, **kwargs)
    except (TypeError, ValueError, tf.errors.InvalidArgumentError) as e:
      if is_dtype_conflict(e) and not integer_arguments(program, data, e):
        raise DtypeConflictError(
            f"Random variable '{name}' mixes floating dtypes in its parameters "
            f"({first_line(e)}); the model runs in {float_name}: build the "
            f"Tensors the program makes in that dtype, or pass dtype= to choose "
            f"another.{outside_data_hint(program)}") from e
      raise
    if isinstance(rv, RandomVariable):
      found[name] = (rv, fixed)
    return rv

  with trace(tracer):
    try:
      call_program(program, data, float_dtype)
    except (TypeError, ValueError, tf.errors.OpError) as e:
      after = f" after random variable '{next(reversed(found))}'" if found else ""
      where = f"The program {getattr(program, '__name__', '')} failed{after}"
      integers = integer_arguments(program, data, e)
      if integers:
        # Integer data (a count column) met floats in a density or a Factor:
        # name the argument, not the random variable built last.
        raise TypeError(_integer_message(program, e, integers, float_name)) from e
      strings = strings_hint(program, data)
      if not is_dtype_conflict(e) and (isinstance(e, tf.errors.OpError) or strings):
        # A TensorFlow op of the program failed (shapes, most often), or
        # strings met a numeric op: say where, and with which arguments,
        # instead of the bare op error.
        error = ValueError if isinstance(e, tf.errors.OpError) else TypeError
        raise error(f"{where}{program_site(e.__traceback__)}: {first_line(e)}; its "
                    f"arguments: {describe_arguments(program, data)}{strings}."
                    f"{index_dtype_hint(e)}") from e
      if first_line(e).startswith("Tensor conversion requested dtype") and not (
          is_dtype_conflict(e)):
        # tf.convert_to_tensor(data, dtype=...) on an argument: NumPy and
        # pandas data arrive as Tensors, which it does not cast.
        raise TypeError(
            f"{where}{program_site(e.__traceback__)}: "
            f"{first_line(e).split(': <tf.Tensor')[0]}; "
            "NumPy and pandas data reach the program as Tensors (converted once, "
            "before tracing), so change their dtype with tf.cast, not "
            f"tf.convert_to_tensor(..., dtype=...); its arguments: "
            f"{describe_arguments(program, data)}.") from e
      if not is_dtype_conflict(e) or str(e).startswith("Random variable '"):
        raise
      # A variable of another dtype (its distribution built by the user
      # from float64 numbers) is the culprit, not the one built last.
      odd = [f"random variable '{n}' is {rv.dtype.name}" for n, (rv, _) in found.items()
             if rv.dtype.is_floating and rv.dtype.name != float_name]
      culprit = ", but " + ", ".join(odd) if odd else ""
      raise DtypeConflictError(
          f"The program mixes floating dtypes{after} ({first_line(e)}); the model "
          f"runs in {float_name}{culprit}: build the Tensors the program makes in that "
          f"dtype, or pass dtype= to choose another.{outside_data_hint(program)}") from e
  return found


def _integer_message(program, error, integers, float_name):
  """The program met floats with the integer arguments ``[(name, dtype)]``."""
  name, dtype = integers[0]
  names = " or ".join(f"'{n}'" for n, _ in integers)
  return (f"The program {getattr(program, '__name__', '')} failed"
          f"{program_site(error.__traceback__)}: {first_line(error).split(': <tf.Tensor')[0]}; "
          f"its integer argument {names} ({dtype}) meets floats there, which TensorFlow does "
          "not mix with integers (integer arguments are kept integer, as indices must be): "
          f"cast it, tf.cast({name}, tf.{float_name}).")


def _check_same_structure(first, second):
  def describe(structure):
    return {n: (fixed, tuple(rv.shape.as_list()), rv.dtype.name)
            for n, (rv, fixed) in structure.items()}
  a, b = describe(first), describe(second)
  changed = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
  if changed:
    details = "; ".join(
        f"'{n}': {_shape_text(a.get(n))} then {_shape_text(b.get(n))}" for n in changed)
    raise ValueError(
        f"The program's random variables change from run to run "
        f"(stochastic control flow): {details}. Gradient-based inference needs "
        "a fixed set of latent variables with fixed shapes.")


def _latent_info(name, rv):
  dist = rv.distribution
  kind = type(dist).__name__
  bijector = support_bijector(dist)
  if bijector is None:
    raise ValueError(
        f"Latent random variable '{name}' ({kind}, dtype {dist.dtype.name}) has "
        "discrete support (or a support TFP gives no bijector for); gradient-based "
        "inference needs continuous latents, and only finite supports (Bernoulli, "
        "Categorical, OneHotCategorical, Binomial, FiniteDiscrete) are summed out "
        "automatically: observe it or marginalize it out (for example with ed.Mixture "
        "or ed.MixtureSameFamily).")
  shape = rv.value.shape
  if not shape.is_fully_defined():
    raise ValueError(f"Latent random variable '{name}' has a shape not known "
                     f"statically ({shape}); give its shape with sample_shape=.")
  return LatentInfo(name, shape, rv.dtype, bijector,
                    tf.TensorShape(bijector.inverse_event_shape(shape)), kind)


def _shape_text(desc):
  if desc is None:
    return "absent"
  fixed, shape, dtype = desc
  return f"{'fixed' if fixed else 'latent'} {list(shape)} {dtype}"
