"""The model target: a program and its data turned into a log density.

``make_target(program, *args, observed={...}, **kwargs)`` traces ``program``
once (twice, to check its structure is fixed) and builds a ``Target`` that
every inference algorithm consumes:

* the *latent* variables -- named random variables that are neither observed
  nor fixed inside the program -- with their shapes, dtypes and constraining
  bijectors (TFP's default event-space bijector of each distribution);
* ``log_prob(state)`` over *unconstrained*, chain-batched state: for a state
  ``{name: u[C, *U_name]}`` it returns ``[C]`` values of

      log p(x(u), y) + log |det dx/du|,   x_name = b_name(u_name),

  where ``b_name`` is the default event-space bijector of the distribution of
  ``name`` *as built in that run*, so supports that depend on other latents
  (``Uniform(0., tau)``) are handled.  The program is vectorized over the
  leading chain dimension with ``tf.vectorized_map``: it is written for one
  draw, and one call evaluates thousands of chains.  Works inside
  ``tf.function(jit_compile=True)``;
* ``constrain`` / ``unconstrain`` and ``flatten`` / ``unflatten`` to and from
  a single ``[C, D]`` vector.

All input checks (unknown observed names; wrong shape, dtype or non-finite
data; discrete latents; a structure that changes between runs) happen in
``make_target``, before any compiled work.
"""

import collections
import copy
import inspect
import linecache
import os
import re

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.bijectors import support_bijector
from edward_lite.control_flow import check_python_control_flow
from edward_lite import dtypes, per_chain_gradient, simulation, terms
from edward_lite.random_variable import DeferredValue, RandomVariable
from edward_lite.support import check_observed_support
from edward_lite.tracing import check_unique_name, trace

__all__ = ["Target", "make_target", "LatentInfo", "support_bijector"]

tfd, tfb = tfp.distributions, tfp.bijectors

# ed.Deterministic(value, name=...) records a function of the latents: not a
# latent, no term of the log density; its values are kept with the draws.
_DETERMINISTIC = (tfd.Deterministic, tfd.VectorDeterministic)

LatentInfo = collections.namedtuple(
    "LatentInfo", ["name", "shape", "dtype", "bijector", "unconstrained_shape",
                   "distribution"])
LatentInfo.__doc__ = """Static description of one latent variable.

Fields: ``name``; ``shape`` (constrained value shape, a ``tf.TensorShape``);
``dtype``; ``bijector`` (unconstrained -> constrained, from the structure
trace; the one applied in ``log_prob`` is rebuilt each run); 
``unconstrained_shape``; ``distribution`` (the class name).
"""


def make_target(program, *args, observed=None, structure_checks=2, dtype=None, **kwargs):
  """Builds the inference target of ``program(*args, **kwargs)`` given data.

  Args:
    program: callable building named random variables.
    *args: positional arguments of ``program`` (NumPy arrays become Tensors).
    observed: dict from random-variable name to observed value.
    structure_checks: how many times the program is run with prior draws to
      check that its set of latent variables and their shapes are fixed.
    dtype: the model's floating dtype (default ``tf.float32``): NumPy and
      Python floating data and the float literals of the program's
      random-variable constructors are converted to it (``ed.dtypes``);
      ``tf.float64`` runs the whole model in double precision.  A program
      with a ``dtype`` parameter of its own receives it as well.
    **kwargs: keyword arguments of ``program``.

  Returns:
    A ``Target``.
  """
  if dtype is not None and _takes_parameter(program, "dtype"):
    kwargs["dtype"] = dtype  # the program's own dtype parameter gets it too
  return Target(program, args, kwargs, observed, structure_checks, dtype)


def _takes_parameter(fn, name):
  try:
    return name in inspect.signature(fn).parameters
  except (TypeError, ValueError):
    return False


def _is_array_like(x):
  return (isinstance(x, (np.ndarray, np.generic, list, tuple)) or
          hasattr(x, "__array__")) and not isinstance(x, str)


def _is_foreign_array(x):
  """An array of another library that NumPy can read (a pandas Series, an
  xarray DataArray, ...): not a NumPy or TensorFlow value, a Python sequence,
  a random variable, or a table the program indexes by column name (a
  pandas DataFrame)."""
  return (hasattr(x, "__array__") and not hasattr(x, "columns") and not tf.is_tensor(x) and
          not isinstance(x, (np.ndarray, np.generic, list, tuple, str, tf.Variable,
                             RandomVariable)))


def _check_finite(what, value):
  """Raises ValueError if a numeric, eager value holds NaN or infinity."""
  if isinstance(value, RandomVariable):
    value = value.value
  if tf.is_tensor(value) and not hasattr(value, "numpy"):
    return  # symbolic: cannot check here
  frame = None
  try:
    if hasattr(value, "select_dtypes"):  # a pandas DataFrame: its numeric columns
      frame = value.select_dtypes(include="number")
      value = frame.to_numpy(dtype=np.float64, na_value=np.nan)
    elif hasattr(value, "to_numpy") and getattr(value.dtype, "kind", "") in "fiuc":
      value = value.to_numpy(dtype=np.float64, na_value=np.nan)  # a (nullable) Series
    array = np.asarray(value)
  except Exception:  # pylint: disable=broad-except
    return
  if array.dtype.kind in "fc" and not np.all(np.isfinite(array)):
    bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
    first = np.argwhere(~np.isfinite(array))[0]
    at = f", the first at index {tuple(int(i) for i in first)}" if array.ndim > 1 else (
        f", the first at index {int(first[0])}" if array.ndim == 1 else "")
    if frame is not None:  # by the table's own names
      at = (f", the first in column '{frame.columns[first[1]]}' at row "
            f"{frame.index[first[0]]!r}")
    raise ValueError(f"{what} contains {bad} non-finite value(s) (NaN or inf){at}; "
                     "remove or impute them before inference.")


class Target:
  """Log density of a program's latent variables over unconstrained state.

  Build with ``ed.make_target``.  Shapes: ``C`` is the chain (batch)
  dimension, ``U_n`` the unconstrained shape of latent ``n``, ``D`` the total
  unconstrained dimension ``sum_n prod(U_n)``.
  """

  def __init__(self, program, args=(), kwargs=None, observed=None,
               structure_checks=2, dtype=None):
    if not callable(program):
      raise TypeError(f"make_target expects a callable program; got {type(program).__name__}.")
    if observed is None:
      observed = {}
    if not isinstance(observed, collections.abc.Mapping):
      raise TypeError("observed= must be a dict from random-variable name to "
                      f"value; got {type(observed).__name__}.")
    self._program = program
    # None: data keep their dtypes unless they conflict with the program's
    # (then floating NumPy data become float32); else the model's dtype.
    self._float = None if dtype is None else dtypes.check_float_dtype(dtype)
    self._has_loops = None
    self._likelihood_scale = None
    self._prior_scale = None
    self._args, self._kwargs = self._prepare_arguments(program, args, kwargs or {},
                                                       self._float)
    for name, value in observed.items():
      _check_finite(f"Observed data for random variable '{name}'", value)
    self._observed = dict(observed)

    try:
      structure = self._trace_structure()
    except DtypeConflictError:
      if dtype is not None:
        raise
      # NumPy's float64 data meeting a float32 program: run it in float32.
      self._args, self._kwargs = self._prepare_arguments(program, args, kwargs or {},
                                                         tf.float32)
      structure = self._trace_structure()
    unknown = [n for n in self._observed if n not in structure]
    if unknown:
      raise ValueError(
          f"Observed name(s) {unknown} are not random variables of the program; "
          f"its random variables are {list(structure)}.")
    for _ in range(max(structure_checks, 1) - 1):
      self._check_same_structure(structure, self._trace_structure())
    graph = check_python_control_flow(self._call_program, observed={
        n: structure[n][0].value for n in self._observed})

    self._fixed = {}
    self._deterministic = collections.OrderedDict()
    self._latents = collections.OrderedDict()
    for name, (rv, fixed) in structure.items():
      if name in self._observed:
        self._observed[name] = rv.value  # converted and checked once
        check_observed_support(name, rv.distribution, rv.value, graph.dependence(name))
      elif fixed:
        _check_finite(f"Value fixed inside the program for random variable '{name}'", rv.value)
        self._fixed[name] = rv.value
      elif isinstance(rv.distribution, _DETERMINISTIC):
        self._deterministic[name] = rv.value.shape
      else:
        self._latents[name] = self._latent_info(name, rv)
    latent_dtypes = {info.dtype for info in self._latents.values()}
    self._dtype = latent_dtypes.pop() if len(latent_dtypes) == 1 else None

  # -- construction ---------------------------------------------------------

  @staticmethod
  def _prepare_arguments(program, args, kwargs, float_dtype):
    """Checks data arguments are finite; NumPy arrays become Tensors once,
    floating ones in ``float_dtype``."""
    try:
      bound = inspect.signature(program).bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
      bound = {f"#{i}": a for i, a in enumerate(args)}
      bound.update(kwargs)
    for pname, value in bound.items():
      values = value if isinstance(value, dict) else {pname: value}
      for vname, v in values.items():
        if _is_array_like(v) or tf.is_tensor(v) or (
            isinstance(v, (float, complex)) and not isinstance(v, bool)):
          _check_finite(f"Argument '{vname}' of the program", v)

    def convert(v):
      if _is_foreign_array(v):  # a pandas Series or DataFrame, ...: its values
        v = np.asarray(v)
      if isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind in "fiubc":
        return tf.convert_to_tensor(dtypes.cast_data(v, float_dtype) if float_dtype else v)
      return v

    return tuple(convert(a) for a in args), {k: convert(v) for k, v in kwargs.items()}

  def _trace_structure(self):
    """Runs the program eagerly: name -> (RandomVariable, value fixed?)."""
    found = collections.OrderedDict()

    def tracer(fn, *args, **kwargs):
      name = self._require_name(fn, kwargs)
      check_unique_name(name, found)
      fixed = kwargs.get("value") is not None
      if name in self._observed:
        if fn is terms._factor:  # pylint: disable=protected-access
          raise ValueError(f"Observed name '{name}' is an ed.Factor, a term added to the log "
                           "density, not a random variable with data; remove it from "
                           "observed=.")
        kwargs["value"] = self._observed[name]
      try:
        rv = fn(*args, **kwargs)
      except (TypeError, ValueError, tf.errors.InvalidArgumentError) as e:
        if _is_dtype_conflict(e):
          raise DtypeConflictError(
              f"Random variable '{name}' mixes floating dtypes in its parameters "
              f"({_first_line(e)}); the model runs in {self._float_name}: build the "
              f"Tensors the program makes in that dtype, or pass dtype= to choose "
              "another.") from e
        raise
      if isinstance(rv, RandomVariable):
        found[name] = (rv, fixed)
      return rv

    with trace(tracer):
      try:
        self._call_program()
      except (TypeError, ValueError, tf.errors.OpError) as e:
        after = f" after random variable '{next(reversed(found))}'" if found else ""
        if isinstance(e, tf.errors.OpError) and not _is_dtype_conflict(e):
          # A TensorFlow op of the program failed (shapes, most often): say
          # where, and with which arguments, instead of the bare op error.
          raise ValueError(
              f"The program {getattr(self._program, '__name__', '')} failed{after}"
              f"{_program_site(e.__traceback__)}: "
              f"{_OP_PREFIX.sub('', _first_line(e))}; its arguments: "
              f"{self._describe_arguments()}.") from e
        if _first_line(e).startswith("Tensor conversion requested dtype") and not (
            _is_dtype_conflict(e)):
          # tf.convert_to_tensor(data, dtype=...) on an argument: NumPy and
          # pandas data arrive as Tensors, which it does not cast.
          raise TypeError(
              f"The program {getattr(self._program, '__name__', '')} failed{after}"
              f"{_program_site(e.__traceback__)}: {_first_line(e).split(': <tf.Tensor')[0]}; "
              "NumPy and pandas data reach the program as Tensors (converted once, "
              "before tracing), so change their dtype with tf.cast, not "
              f"tf.convert_to_tensor(..., dtype=...); its arguments: "
              f"{self._describe_arguments()}.") from e
        if not _is_dtype_conflict(e) or str(e).startswith("Random variable '"):
          raise
        raise DtypeConflictError(
            f"The program mixes floating dtypes{after} ({_first_line(e)}); the model "
            f"runs in {self._float_name}: build the Tensors the program makes in that "
            "dtype, or pass dtype= to choose another.") from e
    return found

  def _describe_arguments(self):
    """'x: float32 [3, 5], n: 3' -- the program's arguments as given to it."""
    try:
      bound = inspect.signature(self._program).bind_partial(*self._args, **self._kwargs)
      items = bound.arguments.items()
    except (TypeError, ValueError):
      items = [(f"#{i}", a) for i, a in enumerate(self._args)] + list(self._kwargs.items())
    parts = []
    for name, value in items:
      if tf.is_tensor(value) or isinstance(value, np.ndarray):
        parts.append(f"{name}: {tf.as_dtype(value.dtype).name} {list(value.shape)}")
      else:
        parts.append(f"{name}: {type(value).__name__}")
    return ", ".join(parts) or "none"

  @property
  def _float_name(self):
    return (self._float or tf.float32).name

  def _call_program(self):
    """Runs the program (inside a tracer) in the model's floating dtype."""
    with dtypes.float_scope(self._float):
      return self._program(*self._args, **self._kwargs)

  @staticmethod
  def _require_name(fn, kwargs):
    name = kwargs.get("name")
    if name is None:
      raise ValueError(
          f"The program creates a random variable with "
          f"{getattr(fn, '__name__', fn)} and no name=; inference needs a "
          "unique name on every random variable.")
    return name

  @staticmethod
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

  @staticmethod
  def _latent_info(name, rv):
    dist = rv.distribution
    kind = type(dist).__name__
    bijector = support_bijector(dist)
    if bijector is None:
      raise ValueError(
          f"Latent random variable '{name}' ({kind}, dtype {dist.dtype.name}) has "
          "discrete support (or a support TFP gives no bijector for); gradient-based "
          "inference needs continuous latents: observe it or marginalize it out (for "
          "example with ed.Mixture or ed.MixtureSameFamily).")
    shape = rv.value.shape
    if not shape.is_fully_defined():
      raise ValueError(f"Latent random variable '{name}' has a shape not known "
                       f"statically ({shape}); give its shape with sample_shape=.")
    return LatentInfo(name, shape, rv.dtype, bijector,
                      tf.TensorShape(bijector.inverse_event_shape(shape)), kind)

  # -- static description ---------------------------------------------------

  @property
  def names(self):
    """Latent variable names, in program order."""
    return tuple(self._latents)

  @property
  def deterministic_names(self):
    """Names of the ``ed.Deterministic`` variables, in program order."""
    return tuple(self._deterministic)

  @property
  def latents(self):
    """OrderedDict name -> ``LatentInfo``."""
    return self._latents.copy()

  @property
  def observed(self):
    """Observed values (Tensors), by name."""
    return dict(self._observed)

  @property
  def data(self):
    """``(args, kwargs, observed)``: the program's arguments (converted) and
    the observed values."""
    return tuple(self._args), dict(self._kwargs), dict(self._observed)

  @property
  def fixed(self):
    """Values fixed inside the program (``value=``, ``ed.condition``)."""
    return dict(self._fixed)

  @property
  def dtype(self):
    """The common dtype of the latents (None if they differ)."""
    return self._dtype

  @property
  def dim(self):
    """Total unconstrained dimension ``D``."""
    return sum(info.unconstrained_shape.num_elements() for info in self._latents.values())

  def __repr__(self):
    parts = ", ".join(f"{n}: {i.distribution}{i.shape.as_list()}"
                      for n, i in self._latents.items())
    return f"<ed.Target latents=({parts}) observed={list(self._observed)} dim={self.dim}>"

  # -- one run of the program -----------------------------------------------

  def _run(self, values, inverse=False, jacobian=True, named_terms=None, record=None):
    """Runs the program once for one (unbatched) state.

    Args:
      values: name -> Tensor, unconstrained (``inverse=False``) or constrained.
      inverse: map constrained values to unconstrained instead.
      jacobian: add ``log|det dx/du|`` of the constraining bijectors.
      named_terms: optional dict filled with each random variable's
        log-probability term (and each latent's ``"<name> (Jacobian)"``).
      record: optional dict filled with each random variable of the run
        (its distribution and value), by name.

    Returns:
      (log_prob scalar, constrained dict, unconstrained dict).  Observed
      terms are multiplied by the likelihood scale of ``with_data``, the
      others (and the Jacobian terms) by its prior scale.
    """
    constrained, unconstrained, seen = {}, {}, set()
    named_terms = {} if named_terms is None else named_terms

    def tracer(fn, *args, **kwargs):
      name = self._require_name(fn, kwargs)
      if name in seen or name not in self._latents and name not in self._observed \
          and name not in self._fixed and name not in self._deterministic:
        raise ValueError(
            f"Random variable '{name}' appeared in this run of the program but "
            "not as expected from make_target's trace (stochastic control flow "
            "or a repeated name).")
      seen.add(name)
      if name in self._observed:
        kwargs["value"] = self._observed[name]
      elif name in self._latents:
        kwargs["value"] = DeferredValue(
            lambda dist: self._transform(name, dist, values[name], inverse, jacobian,
                                         named_terms, constrained, unconstrained,
                                         self._prior_scale))
      rv = fn(*args, **kwargs)
      if record is not None:
        record[name] = rv
      if name in self._deterministic:
        return rv
      term = tf.reduce_sum(log_prob_term(rv.distribution, rv.value))
      scale = self._likelihood_scale if name in self._observed else self._prior_scale
      if scale is not None:
        term = term * tf.cast(scale, term.dtype)
      named_terms[name] = term
      return rv

    with trace(tracer):
      self._call_program()
    missing = [n for n in self._latents if n not in seen]
    if missing:
      raise ValueError(f"Latent random variable(s) {missing} did not appear in "
                       "this run of the program (stochastic control flow).")
    return tf.add_n(list(named_terms.values())), constrained, unconstrained

  @staticmethod
  def _transform(name, dist, value, inverse, jacobian, named_terms, constrained,
                 unconstrained, prior_scale=None):
    bijector = support_bijector(dist)
    if inverse:
      x = tf.convert_to_tensor(value, dtype=dist.dtype)
      u = bijector.inverse(x)
    else:
      u = tf.convert_to_tensor(value, dtype=dist.dtype)
      x = bijector.forward(u)
    if jacobian:
      term = tf.reduce_sum(bijector.forward_log_det_jacobian(u, event_ndims=u.shape.rank))
      if prior_scale is not None:
        term = term * tf.cast(prior_scale, term.dtype)
      named_terms[f"{name} (Jacobian)"] = term
    constrained[name], unconstrained[name] = x, u
    return x

  def _simulate(self, values, seed):
    """Runs the program once with ``values`` (constrained, unbatched) for the
    latents they name; every other random variable that the program does not
    fix is drawn (``simulation.simulate``).  Returns name -> value."""
    return simulation.simulate(self._call_program, values, seed)

  def _pointwise(self, values):
    """One run at constrained latent ``values`` (unbatched): each observed
    variable's elementwise log-likelihood ``log p(y_i | x)`` (shape
    ``sample_shape + batch_shape``: one entry per observation) and each
    ``ed.Deterministic``'s value.  Returns ``(log_lik dict, deterministic dict)``."""
    log_lik, deterministic = {}, {}

    def tracer(fn, *args, **kwargs):
      name = kwargs.get("name")
      if name in self._observed:
        kwargs["value"] = self._observed[name]
      elif name in values:
        kwargs["value"] = values[name]
      rv = fn(*args, **kwargs)
      if name in self._observed:
        log_lik[name] = rv.distribution.log_prob(rv.value)
      elif name in self._deterministic:
        deterministic[name] = rv.value
      return rv

    with trace(tracer):
      self._call_program()
    return log_lik, deterministic

  def log_likelihood(self, values):
    """Pointwise log-likelihood of every observed variable at draws.

    Args:
      values: dict ``name -> [S, *shape]`` of constrained latent draws.

    Returns:
      dict ``observed name -> NumPy [S, *obs_shape]``: ``log p(y_i | x_s)``
      per draw ``s`` and observation ``i`` (the observation axes are the
      variable's sample and batch axes; an event is one observation),
      computed in one compiled pass (``simulation.map_draws``).
    """
    values = {n: values[n] for n in self._latents}
    return simulation.map_draws(lambda v: self._pointwise(v)[0], values)

  def deterministic(self, values):
    """The ``ed.Deterministic`` variables at draws: dict ``name -> NumPy
    [S, *shape]`` from latent draws ``name -> [S, *shape]`` (constrained)."""
    if not self._deterministic:
      return {}
    values = {n: values[n] for n in self._latents}
    return simulation.map_draws(lambda v: self._pointwise(v)[1], values)

  def sample_prior(self, chains, seed):
    """Prior draws of the latents: dict ``name -> [chains, *shape]`` (constrained).

    Args:
      chains: number of draws.
      seed: stateless seed, a shape-[2] int Tensor or an int.
    """
    seeds = tf.random.experimental.stateless_split(simulation.seed_tensor(seed), chains)
    draws = tf.vectorized_map(lambda s: self._simulate({}, s), seeds)
    return {n: draws[n] for n in self._latents}

  def predict(self, values, seed):
    """Simulates the program at given latent values (e.g. posterior draws).

    Args:
      values: dict ``name -> [N, *shape]`` of constrained values for the
        latents (all of them).
      seed: stateless seed.

    Returns:
      dict ``name -> [N, ...]`` for every random variable of the program,
      observed ones redrawn: the (posterior) predictive distribution.
    """
    values = self._as_dict(values, constrained=True)
    count = tf.shape(next(iter(values.values())))[0]
    seeds = tf.random.experimental.stateless_split(simulation.seed_tensor(seed), count)
    return tf.vectorized_map(lambda args: self._simulate(args[0], args[1]), (values, seeds))

  # -- batched API ----------------------------------------------------------

  def _as_dict(self, state, constrained=False):
    """Accepts a dict or a sequence (in ``names`` order); checks shapes."""
    if isinstance(state, collections.abc.Mapping):
      extra = [k for k in state if k not in self._latents]
      missing = [k for k in self._latents if k not in state]
      if extra or missing:
        raise ValueError(f"State must have one entry per latent variable "
                         f"{list(self._latents)}; missing {missing}, unknown {extra}.")
      state = dict(state)
    elif isinstance(state, (list, tuple)):
      if len(state) != len(self._latents):
        raise ValueError(f"State has {len(state)} parts; the latents are "
                         f"{list(self._latents)}.")
      state = dict(zip(self._latents, state))
    else:
      raise TypeError("State must be a dict name -> Tensor or a list in `names` order.")
    chains = set()
    for name, info in self._latents.items():
      value = tf.convert_to_tensor(state[name], dtype=info.dtype)
      event = info.shape if constrained else info.unconstrained_shape
      if value.shape.rank is not None and (
          value.shape.rank != event.rank + 1 or
          not value.shape[1:].is_compatible_with(event)):
        raise ValueError(
            f"State for latent '{name}' has shape {value.shape.as_list()}; expected "
            f"[chains] + {event.as_list()} ({'constrained' if constrained else 'unconstrained'}).")
      if value.shape.rank and value.shape[0] is not None:
        chains.add(value.shape[0])
      state[name] = value
    if len(chains) > 1:
      raise ValueError(f"State parts disagree on the number of chains: {sorted(chains)}.")
    return state

  def log_prob(self, state):
    """Log density at unconstrained, chain-batched state.

    Args:
      state: dict ``name -> u[C, *U_name]`` (or a list in ``names`` order).

    Returns:
      ``[C]`` Tensor: ``log p(x(u), data) + log|det dx/du|`` per chain.  Its
      gradient is computed per chain inside the vectorized program (first
      derivatives only).
    """
    state = self._as_dict(state)
    if not self._latents:
      raise ValueError("The program has no latent variables: nothing to infer.")
    return self._per_chain_gradient(lambda s: self._run(s)[0], state)

  def _per_chain_gradient(self, one_chain_fn, state):
    """``one_chain_fn`` vectorized over the chains of ``state``, with a custom
    gradient that differentiates one chain's program and vectorizes that."""
    names = list(self._latents)

    @tf.custom_gradient
    def value(*parts):
      lp, grads = self._vectorized_value_and_gradient(dict(zip(names, parts)), one_chain_fn)

      def grad_fn(upstream, variables=None):
        state_grads = [tf.reshape(upstream, [-1] + [1] * (grads[n].shape.rank - 1)) * grads[n]
                       for n in names]
        if not variables:
          return state_grads
        # The program reads variables (e.g. Keras weights): differentiate the
        # vectorized program for them.
        with tf.GradientTape() as tape:
          tape.watch(variables)
          lp_again = tf.vectorized_map(one_chain_fn, dict(zip(names, parts)))
          total = tf.reduce_sum(tf.stop_gradient(upstream) * lp_again)
        var_grads = tape.gradient(total, variables,
                                  unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return state_grads, var_grads

      return lp, grad_fn

    return value(*[state[n] for n in names])

  def _vectorized_value_and_gradient(self, state, one_chain_fn=None):
    """``(lp [C], grads dict)``, differentiating one chain's program and then
    batching the result over chains.

    Without loops the per-chain gradient is vectorized (``tf.vectorized_map``).
    (Differentiating the vectorized program instead puts reductions in the
    gradient whose axes XLA treats as compile-time constants, so every new
    state value would recompile: RESULTS section 1.)  A program with a loop
    whose inputs differ per chain (``tf.scan``, ``tf.while_loop``,
    ``tfd.HiddenMarkovModel``, ...) cannot be vectorized that way: TensorFlow's
    vectorizer cannot batch the gradient of a loop, and the gradient of the
    vectorized loop does not compile with XLA.  Its chains are then
    evaluated one after another by ``tf.map_fn`` inside the same compiled
    program: the cost grows linearly with the number of chains.
    """
    one_chain_fn = one_chain_fn or (lambda s: self._run(s)[0])

    if not self.has_loops:
      return per_chain_gradient.vectorized_value_and_gradient(one_chain_fn, state)
    signature = (self._dtype or next(iter(state.values())).dtype,
                 {n: tf.TensorSpec(None, v.dtype) for n, v in state.items()})
    return tf.map_fn(lambda s: per_chain_gradient.value_and_gradient(one_chain_fn, s),
                     state, fn_output_signature=signature)

  @property
  def has_loops(self):
    """Whether one run of the program holds a loop (a ``While`` op, e.g.
    from ``tf.scan``, ``tf.while_loop`` or a TFP distribution that loops in
    ``log_prob``); decides how gradients are batched over chains."""
    if self._has_loops is None:
      spec = {n: tf.TensorSpec(i.unconstrained_shape, i.dtype)
              for n, i in self._latents.items()}
      graph = tf.function(lambda s: self._run(s)[0]).get_concrete_function(spec).graph
      graph_def = graph.as_graph_def()
      ops = {n.op for n in graph_def.node}
      ops.update(n.op for f in graph_def.library.function for n in f.node_def)
      self._has_loops = bool(ops & {"While", "StatelessWhile"})
      self._unbounded_loops = any(
          op.type in ("While", "StatelessWhile") and _is_minus_one(op.inputs[1])
          for op in graph.get_operations())
    return self._has_loops

  @property
  def has_unbounded_loops(self):
    """Whether the program holds a ``tf.while_loop`` without
    ``maximum_iterations``: XLA cannot compile its gradient, so such a
    program runs without XLA."""
    return self.has_loops and self._unbounded_loops

  def value_and_gradient(self, state):
    """``(log_prob [C], gradient dict name -> [C, *U_name])``."""
    state = self._as_dict(state)
    if not self._latents:
      raise ValueError("The program has no latent variables: nothing to infer.")
    return self._vectorized_value_and_gradient(state)

  def constrain(self, state):
    """Unconstrained state ``{name: u[C, *U]}`` -> constrained ``{name: x[C, *shape]}``."""
    state = self._as_dict(state)
    return tf.vectorized_map(lambda s: self._run(s)[1], state)

  def unconstrain(self, values):
    """Constrained values ``{name: x[C, *shape]}`` -> unconstrained ``{name: u[C, *U]}``."""
    values = self._as_dict(values, constrained=True)
    return tf.vectorized_map(lambda s: self._run(s, inverse=True)[2], values)

  def flatten(self, state):
    """Unconstrained state dict -> ``[C, D]`` (latents in ``names`` order)."""
    state = self._as_dict(state)
    self._require_common_dtype()
    chains = tf.shape(next(iter(state.values())))[0] if state else 0
    return tf.concat([tf.reshape(state[n], [chains, -1]) for n in self._latents], axis=-1)

  def unflatten(self, flat):
    """``[C, D]`` -> unconstrained state dict ``{name: [C, *U_name]}``."""
    self._require_common_dtype()
    flat = tf.convert_to_tensor(flat, dtype=self._dtype)
    if flat.shape.rank is not None and (flat.shape.rank != 2 or
                                        flat.shape[-1] not in (None, self.dim)):
      raise ValueError(f"Flat state has shape {flat.shape.as_list()}; expected "
                       f"[chains, {self.dim}].")
    sizes = [i.unconstrained_shape.num_elements() for i in self._latents.values()]
    parts = tf.split(flat, sizes, axis=-1)
    return {n: tf.reshape(p, [-1] + i.unconstrained_shape.as_list())
            for (n, i), p in zip(self._latents.items(), parts)}

  @property
  def constrained_dim(self):
    """Total constrained dimension ``sum_n prod(shape_n)``."""
    return sum(info.shape.num_elements() for info in self._latents.values())

  def constrain_flat(self, flat):
    """``[C, D]`` unconstrained -> ``[C, D_c]`` constrained, latents in ``names`` order."""
    values = self.constrain(self.unflatten(flat))
    return tf.concat([tf.reshape(values[n], [tf.shape(flat)[0], -1]) for n in self._latents],
                     axis=-1)

  def split_constrained(self, flat):
    """NumPy ``[..., D_c]`` -> dict ``name -> [..., *shape_name]``."""
    flat = np.asarray(flat)
    out, offset = {}, 0
    for name, info in self._latents.items():
      size = info.shape.num_elements()
      out[name] = flat[..., offset:offset + size].reshape(flat.shape[:-1] + tuple(info.shape))
      offset += size
    return out

  def log_prob_flat(self, flat):
    """``log_prob`` of a flat ``[C, D]`` state; returns ``[C]``."""
    return self.log_prob(self.unflatten(flat))

  def value_and_gradient_flat(self, flat):
    """``(log_prob [C], gradient [C, D])`` of a flat state."""
    flat = tf.convert_to_tensor(flat, dtype=self._dtype)
    with tf.GradientTape() as tape:
      tape.watch(flat)
      lp = self.log_prob_flat(flat)
    return lp, tape.gradient(lp, flat)

  def log_joint(self, values):
    """``log p(x, data)`` at constrained, batched values (no Jacobian).

    Args:
      values: dict ``name -> x[C, *shape_name]`` for every latent.

    Returns:
      ``[C]`` Tensor; its gradient is computed per draw, as ``log_prob``'s.
    """
    values = self._as_dict(values, constrained=True)
    return self._per_chain_gradient(
        lambda s: self._run(s, inverse=True, jacobian=False)[0], values)

  def log_det_jacobian_flat(self, flat):
    """``log|det dx/du|`` of the constraining bijectors at ``[C, D]``; ``[C]``."""
    def one(s):
      terms = {}
      self._run(s, named_terms=terms)
      return tf.add_n([terms[f"{n} (Jacobian)"] for n in self._latents])
    return tf.vectorized_map(one, self.unflatten(flat))

  def log_prob_terms_flat(self, flat):
    """Each random variable's log-probability term at ``[C, D]``.

    Returns:
      dict ``name -> [C]`` in program order (observed terms scaled as in
      ``log_prob``), plus ``"<latent> (Jacobian)"`` entries; they sum to
      ``log_prob_flat(flat)``.
    """
    def one(s):
      terms = {}
      self._run(s, named_terms=terms)
      return terms
    return tf.vectorized_map(one, self.unflatten(flat))

  def with_data(self, args=None, kwargs=None, observed=None, likelihood_scale=None,
                prior_scale=None):
    """The same target on other data, e.g. a minibatch, without re-tracing.

    Args:
      args, kwargs: replacement program arguments (None keeps the current).
      observed: dict replacing some observed values (same names).
      likelihood_scale: multiplies every observed random variable's
        log-probability term, e.g. ``N / B`` for a minibatch of ``B`` of
        ``N`` exchangeable observations, which keeps the log density (and
        the ELBO) unbiased: ``E_batch[log p_batch] = log p``.
      prior_scale: multiplies every other term (latent log-densities and
        Jacobians), e.g. ``1 / R`` on each of ``R`` data shards so that their
        sum counts the prior once.

    Returns:
      A ``Target`` sharing this one's latents.  Shapes are not re-checked:
      check once eagerly with ``make_target`` on a batch.
    """
    other = copy.copy(self)
    if args is not None:
      other._args = tuple(args)
    if kwargs is not None:
      other._kwargs = dict(kwargs)
    if observed:
      unknown = [n for n in observed if n not in self._observed]
      if unknown:
        raise ValueError(f"with_data: {unknown} are not observed variables of the target; "
                         f"they are {list(self._observed)}.")
      other._observed = {**self._observed, **observed}
    other._likelihood_scale = likelihood_scale
    other._prior_scale = prior_scale
    return other

  def _require_common_dtype(self):
    if self._dtype is None:
      dtypes = {n: i.dtype.name for n, i in self._latents.items()}
      raise TypeError(f"Flattening needs one dtype for all latents; they have {dtypes}.")


def log_prob_term(dist, value):
  """``dist.log_prob(value)``, by a shorter formula where one is known.

  A ``Bernoulli`` given by logits ``l``: ``log p(y) = -softplus-cross-entropy
  = y l - softplus(l)``, as ``tf.nn.sigmoid_cross_entropy_with_logits``.
  Inside the per-chain program that ``vectorized_map`` batches, TFP's general
  form is markedly slower under XLA, and the logistic regression is the most
  common data-heavy likelihood.
  """
  if type(dist) is tfd.Bernoulli and dist.logits is not None:  # pylint: disable=unidiomatic-typecheck
    logits = tf.convert_to_tensor(dist.logits)
    labels = tf.cast(value, logits.dtype)
    shape = tf.broadcast_static_shape(logits.shape, labels.shape)
    if shape.is_fully_defined():
      return -tf.nn.sigmoid_cross_entropy_with_logits(
          labels=tf.broadcast_to(labels, shape), logits=tf.broadcast_to(logits, shape))
  return dist.log_prob(value)


class DtypeConflictError(TypeError):
  """The program combines floating dtypes that do not match."""


def _is_minus_one(tensor):
  """True if ``tensor`` is the constant -1 (a while loop's absent maximum)."""
  value = tf.get_static_value(tensor)
  return value is not None and int(value) == -1


def _is_dtype_conflict(error):
  text = _first_line(error)
  return (("float64" in text and "float32" in text) or "incompatible dtypes" in text or
          ("float tensor" in text and "double tensor" in text))


_OP_PREFIX = re.compile(r"\{\{function_node [^}]*\}\}\s*")  # TensorFlow's op-location prefix


def _program_site(tb):
  """' at file.py:12 (code)': the last frame of the failing traceback in the
  user's code (not TensorFlow's, TFP's or edward_lite's), or ''."""
  from edward_lite.control_flow import _LIBRARY_DIRS  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  where = ""
  while tb is not None:
    filename = tb.tb_frame.f_code.co_filename
    if not filename.startswith(_LIBRARY_DIRS) and os.path.basename(filename) != "contextlib.py":
      line = linecache.getline(filename, tb.tb_lineno).strip()
      where = f" at {os.path.basename(filename)}:{tb.tb_lineno}" + (f" ({line})" if line else "")
    tb = tb.tb_next
  return where


def _first_line(error):
  return str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__


def _shape_text(desc):
  if desc is None:
    return "absent"
  fixed, shape, dtype = desc
  return f"{'fixed' if fixed else 'latent'} {list(shape)} {dtype}"
