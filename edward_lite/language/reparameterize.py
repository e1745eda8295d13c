"""Automatic (partial) non-centring of location-scale latents.

A hierarchical model written *centred*, ``theta ~ Normal(mu, tau)`` with
``mu`` and ``tau`` latent, has a posterior whose scale in ``theta`` changes
by orders of magnitude with ``tau`` (Neal's funnel) when the data say little
about ``theta``: NUTS's one step size cannot follow it and diverges.  The
*non-centred* program draws ``theta_tilde ~ Normal(0, 1)`` and sets
``theta = mu + tau * theta_tilde``, whose posterior is near the prior's
independent standard normal.  When the data do pin ``theta`` down the centred
form is the better one; in between lies a family (Gorinova, Moore and
Hoffman 2020, *Automatic reparameterisation of probabilistic programs*):
with *centredness* ``c`` in ``[0, 1]``, for ``x ~ F(mu, sigma)`` of a
location-scale family ``F`` (``x = mu + sigma z``, ``z ~ F(0, 1)``),

    x_tilde ~ F(c mu, sigma^c),
    x = mu + sigma^(1 - c) (x_tilde - c mu),

which gives ``x ~ F(mu, sigma)`` exactly for every ``c``: ``c = 0`` is fully
non-centred (``x_tilde ~ F(0, 1)``), ``c = 1`` the centred program.  The
map ``x_tilde -> x`` has Jacobian ``sigma^(1 - c)`` per element, so

    log F(x_tilde; c mu, sigma^c) = log F(x; mu, sigma) + (1 - c) log sigma,

the density of the new latent is the old one at the image point times the
Jacobian: the posterior over the other latents is unchanged.

``reparameterize(program)`` returns a program (same arguments) that, run
under the library's tracers, replaces each selected latent ``x`` by a new
latent named ``x_noncentred`` with the distribution above and records
``x`` itself as ``ed.Deterministic(x, name="x")``: the draws, ``summary()``
and ``to_arviz()`` keep the original names.  The families and what is
transformed:

* ``Normal``, ``Cauchy``, ``Laplace``, ``Logistic``, ``Gumbel``,
  ``StudentT``, ``HalfCauchy``, ``HalfStudentT`` (``loc``, ``scale``; a
  ``df`` is kept): the affine part;
* ``LogNormal(mu, sigma)``: in log space, ``x_tilde ~ Normal(c mu,
  sigma^c)``, ``x = exp(mu + sigma^(1 - c) (x_tilde - c mu))``.

Left alone: observed variables (the ``observed=`` of inference, which the
library tells the program through ``bind``), variables given ``value=``
inside the program (``ed.condition`` inside it), those of other families,
and -- unless named in ``variables=`` -- those whose ``loc`` and ``scale``
are both Python or NumPy numbers (a prior with fixed parameters: nothing to
decouple) and those named ``*_noncentred`` (made by this transformation,
when it is applied twice).  A Tensor parameter counts as possibly computed
from latents.
"""

import contextlib
import functools
import inspect
import threading

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tensorflow_probability.python.internal import dtype_util

from edward_lite.language import dtypes
from edward_lite.language.autograph import graph_program
from edward_lite.language.distributions import CONSTRUCTORS
from edward_lite.language.tracing import trace, traceable

__all__ = ["reparameterize", "Reparameterized", "NONCENTRED_SUFFIX", "FAMILIES"]

tfd = tfp.distributions

NONCENTRED_SUFFIX = "_noncentred"

# The original-name values being mapped to the new latents (``latent_values``):
# a stack of (name -> value given, name -> new latent's value found) per thread.
_INVERTING = threading.local()

# Location-scale families: class -> how its latent is rebuilt ("affine": the
# same family at (c mu, sigma^c); "log": a Normal in log space).
FAMILIES = {
    tfd.Normal: "affine", tfd.Cauchy: "affine", tfd.Laplace: "affine",
    tfd.Logistic: "affine", tfd.Gumbel: "affine", tfd.StudentT: "affine",
    tfd.HalfCauchy: "affine", tfd.HalfStudentT: "affine", tfd.LogNormal: "log",
}


def reparameterize(program, variables=None, centeredness=0.):
  """Returns ``program`` with its location-scale latents (partially) non-centred.

  ``posterior = ed.mcmc.sample(ed.reparameterize(model), *args,
  observed={...})`` samples the same posterior as ``model``'s, in the
  coordinates ``x_noncentred`` (module docstring); ``posterior.draws`` holds
  both ``x`` (an ``ed.Deterministic``) and ``x_noncentred``.

  Args:
    program: an edward_lite program (callable building named random variables).
    variables: names of the latents to transform (an iterable of str), or
      None for every location-scale latent whose ``loc`` or ``scale`` is not a
      number.  A name that is not a location-scale random variable of the
      program is an error, raised when the program is first run (by
      ``make_target``, before any compiled work).
    centeredness: ``c`` in ``[0, 1]``: a float for every variable, or a dict
      name -> float or array (broadcast against the variable's value shape,
      one ``c`` per element; e.g. learned by ``ed.vi.learn_centeredness``);
      names absent from the dict get 0.  ``c = 1`` leaves the variable as it is.

  Returns:
    A ``Reparameterized`` program, called with ``program``'s arguments.
  """
  if not callable(program):
    raise TypeError(f"ed.reparameterize expects a callable program; got "
                    f"{type(program).__name__}.")
  if isinstance(variables, str):
    variables = (variables,)
  if variables is not None:
    variables = tuple(variables)
    bad = [v for v in variables if not isinstance(v, str)]
    if bad:
      raise TypeError(f"ed.reparameterize: variables= must hold random-variable names "
                      f"(str); got {bad[0]!r}.")
  return Reparameterized(program, variables, _check_centeredness(centeredness))


def _check_centeredness(centeredness):
  """``centeredness`` as a dict name -> value, or a float for all; checked."""
  items = centeredness.items() if isinstance(centeredness, dict) else [(None, centeredness)]
  for name, c in items:
    if callable(c) or tf.is_tensor(c) or isinstance(c, tf.Variable):
      continue  # computed in the run (learned): not checked here
    array = np.asarray(c, dtype=np.float64)
    if not np.all((array >= 0.) & (array <= 1.)):
      what = f" of '{name}'" if name is not None else ""
      raise ValueError(f"ed.reparameterize: centeredness{what} must lie in [0, 1] "
                       f"(0 non-centred, 1 centred); got {c!r}.")
  return dict(centeredness) if isinstance(centeredness, dict) else float(centeredness)


class Reparameterized:
  """A program with some location-scale latents non-centred (``reparameterize``).

  Called as the original program.  ``bind(observed, autograph)`` is the hook
  the library's runs use (``edward_lite.model.data.call_program``): it tells
  the transformation which names are observed in that run (left alone) and
  whether to run the original program converted by AutoGraph.
  """

  def __init__(self, program, variables, centeredness, observed=()):
    functools.update_wrapper(self, program)  # name, docstring, signature
    self.program = program
    self.variables = variables
    self.centeredness = centeredness
    self.observed = frozenset(observed)

  def fingerprint_parts(self):
    """What identifies this program by content (``runtime/fingerprints.py``)."""
    return (self.program, self.variables, self.centeredness, sorted(self.observed))

  def leaving(self, observed):
    """The same transformation, leaving the names ``observed`` alone in every
    run (posterior predictive runs: the fitted data's names)."""
    return Reparameterized(self.program, self.variables, self.centeredness,
                           self.observed | frozenset(observed))

  def __call__(self, *args, **kwargs):
    return self.bind()(*args, **kwargs)

  def __repr__(self):
    return (f"reparameterize({getattr(self.program, '__name__', self.program)}, "
            f"variables={self.variables}, centeredness={self.centeredness})")

  def original_names(self, latent_names):
    """``x -> x_noncentred`` for the latents among ``latent_names`` that
    this transformation made: a value for ``x`` (the original variable, now
    an ``ed.Deterministic``) can stand for one of ``x_noncentred``."""
    return {n[:-len(NONCENTRED_SUFFIX)]: n for n in latent_names
            if n.endswith(NONCENTRED_SUFFIX) and len(n) > len(NONCENTRED_SUFFIX)}

  def latent_values(self, target, values):
    """Constrained values in the original names, mapped to the latents.

    Args:
      target: the ``Target`` of this program (its data and latents).
      values: dict name -> ``[C, *shape]``: for every latent of ``target``
        either its value or, for a latent ``x_noncentred``, the value of
        ``x`` (``original_names``).

    Returns:
      dict latent name -> NumPy ``[C, *shape]``: ``x_noncentred`` at the
      value whose image is the given ``x`` (module docstring: ``x_tilde = c
      mu + (x - mu) / sigma^(1 - c)``, ``log x`` for a ``LogNormal``) with
      ``mu`` and ``sigma`` computed by one run of the program at the other
      values, chain by chain.

    Raises:
      ValueError: a value maps to a non-finite one (outside the support of
        the original distribution, or a zero scale there).
    """
    originals = {x: n for x, n in self.original_names(target.names).items() if x in values}
    if not originals:
      return values
    dtype = target.dtype
    others = {n: tf.convert_to_tensor(v, target.latents[n].dtype)
              for n, v in values.items() if n in target.names}
    given = {x: tf.convert_to_tensor(values[x], dtype) for x in originals}
    seed = tf.zeros([2], tf.int32)  # every latent is set: nothing random is used

    def one(args):
      with _inverting(args[1]) as found:
        target.simulate(args[0], seed)
      missing = [x for x in args[1] if x not in found]
      if missing:
        raise ValueError(f"ed.reparameterize: {missing} were not transformed in a run at "
                         "the given values, so their init values cannot be mapped.")
      return {originals[x]: found[x] for x in args[1]}

    mapped = {n: v.numpy() for n, v in tf.vectorized_map(one, (others, given)).items()}
    bad = [x for x, n in originals.items() if not np.all(np.isfinite(mapped[n]))]
    if bad:
      raise ValueError(
          f"init values for {bad} map to non-finite values of "
          f"{[originals[x] for x in bad]} (ed.reparameterize's latents): a value is outside "
          "the support of its distribution (e.g. not positive for a LogNormal) or its scale "
          "is 0 at the other latents' values.")
    out = {n: np.asarray(v) for n, v in values.items() if n in target.names}
    out.update(mapped)
    return out

  def bind(self, observed=(), autograph=False):
    """The program to run when the names ``observed`` carry data: a callable
    with ``program``'s arguments.  ``autograph``: run ``program`` converted
    (``graph_program``), as the library does inside a ``tf.function``."""
    observed = self.observed | frozenset(observed)
    program = self.program
    if isinstance(program, Reparameterized):  # transformed twice: it needs the names too
      program = program.bind(observed, autograph)
    elif autograph:
      program = graph_program(program)

    def run(*args, **kwargs):
      tracer = _NonCentring(self.variables, self.centeredness, observed)
      with trace(tracer):
        out = program(*args, **kwargs)
      tracer.check()
      return out

    return run


class _NonCentring:
  """The tracer of one run: rewrites each selected latent as it is built."""

  def __init__(self, variables, centeredness, observed):
    self.variables, self.centeredness, self.observed = variables, centeredness, observed
    self.seen = {}  # name -> distribution class name

  def __call__(self, fn, *args, **kwargs):
    name = kwargs.get("name")
    cls = getattr(fn, "distribution_cls", None)
    if name is not None:
      self.seen[name] = getattr(cls, "__name__", getattr(fn, "__name__", "?"))
    # by default every candidate but one this transformation made (applied twice)
    chosen = (name in self.variables if self.variables is not None else
              name is not None and not name.endswith(NONCENTRED_SUFFIX))
    if (name is None or not chosen or name in self.observed or
        kwargs.get("value") is not None or cls not in FAMILIES):
      return traceable(fn)(*args, **kwargs)
    c = self._centeredness(name)
    if c is None:
      return traceable(fn)(*args, **kwargs)
    params = _parameters(cls, args, kwargs)
    loc, scale = params.pop("loc", 0.), params.pop("scale", None)
    if scale is None or (self.variables is None and _is_number(loc) and _is_number(scale)):
      return traceable(fn)(*args, **kwargs)
    return _non_centre(fn, cls, name, loc, scale, c, params, kwargs.get("sample_shape", ()),
                       _given(name))

  def _centeredness(self, name):
    """The variable's ``c`` (a float or Tensor), None when it is 1 (centred)."""
    c = self.centeredness
    if isinstance(c, dict):
      c = c.get(name, 0.)
    if callable(c):
      c = c()
    if not tf.is_tensor(c) and not isinstance(c, tf.Variable) and np.all(np.asarray(c) == 1.):
      return None
    return c

  def check(self):
    """Raises ValueError for a name in ``variables`` that cannot be transformed."""
    names = list(self.variables or ())
    if isinstance(self.centeredness, dict):
      names += [n for n in self.centeredness if n not in names]
    for name in names:
      if name not in self.seen:
        raise ValueError(
            f"ed.reparameterize: '{name}' is not a random variable of the program, "
            f"whose random variables are {list(self.seen)}.")
      if self.seen[name] not in {c.__name__ for c in FAMILIES} and name not in self.observed:
        raise ValueError(
            f"ed.reparameterize: '{name}' is a {self.seen[name]}, not a location-scale "
            f"family it can non-centre ({', '.join(sorted(c.__name__ for c in FAMILIES))}).")


def _parameters(cls, args, kwargs):
  """The distribution's parameters by name, from a constructor call."""
  given = {k: v for k, v in kwargs.items() if k not in ("sample_shape", "value", "name")}
  bound = inspect.signature(cls.__init__).bind(None, *args, **given)
  params = dict(bound.arguments)
  params.pop(next(iter(params)))  # self
  params.pop("name", None)
  return params


def _is_number(x):
  return isinstance(x, (int, float, np.ndarray, np.generic)) and not isinstance(x, bool)


@contextlib.contextmanager
def _inverting(given):
  """Inside the block, a run of the program sets each new latent ``x_tilde``
  to the value whose image is ``given[x]`` and records it in the dict yielded."""
  stack = _INVERTING.__dict__.setdefault("stack", [])
  found = {}
  stack.append((given, found))
  try:
    yield found
  finally:
    stack.pop()


def _given(name):
  """``(value, found)`` when ``name``'s value is being mapped (``_inverting``), else None."""
  stack = getattr(_INVERTING, "stack", None)
  if stack and name in stack[-1][0]:
    return stack[-1][0][name], stack[-1][1]
  return None


def _non_centre(fn, cls, name, loc, scale, c, others, sample_shape, given=None):
  """Builds ``name + NONCENTRED_SUFFIX`` and returns ``ed.Deterministic(x, name)``;
  with ``given = (x, found)`` (``_inverting``), sets the new latent to the
  value whose image is ``x`` and records it in ``found[name]``."""
  loc, scale = dtypes.cast_parameter(loc), dtypes.cast_parameter(scale)
  dtype = dtype_util.common_dtype([loc, scale],
                                  dtype_hint=dtypes.float_dtype() or tf.float32)
  loc = tf.convert_to_tensor(loc, dtype)
  scale = tf.convert_to_tensor(scale, dtype)
  c_given, c = c, tf.cast(c, dtype)
  if c.shape.rank:  # one c per element: the new latent carries the value's shape
    shape = tf.concat([tf.reshape(tf.cast(sample_shape, tf.int32), [-1]),
                       tf.broadcast_dynamic_shape(tf.shape(loc), tf.shape(scale))], 0)
    shape = tf.broadcast_dynamic_shape(shape, tf.shape(c))
    loc, scale, sample_shape = tf.broadcast_to(loc, shape), tf.broadcast_to(scale, shape), ()
  batch = tf.broadcast_static_shape(loc.shape, scale.shape)
  if not tf.is_tensor(c_given) and np.ndim(c_given) == 0 and c_given == 0. and (
      batch.is_fully_defined()):
    # fully non-centred: F(0, 1), built from no other variable (ed.graph shows no edge)
    new_loc, new_scale = tf.zeros(batch, dtype), tf.ones(batch, dtype)
  else:
    new_loc, new_scale = c * loc, tf.pow(scale, c)
  value = None
  if given is not None:  # the inverse map: x_tilde = c mu + (x - mu) / sigma^(1 - c)
    x = tf.cast(given[0], dtype)
    if FAMILIES[cls] == "log":
      x = tf.math.log(x)
    value = new_loc + (x - loc) / tf.pow(scale, 1. - c)
    given[1][name] = value
  if FAMILIES[cls] == "log":
    tilde = CONSTRUCTORS["Normal"](new_loc, new_scale, sample_shape=sample_shape,
                                   name=name + NONCENTRED_SUFFIX, value=value)
  else:
    tilde = traceable(fn)(loc=new_loc, scale=new_scale, sample_shape=sample_shape,
                          name=name + NONCENTRED_SUFFIX, value=value, **others)
  x = loc + tf.pow(scale, 1. - c) * (tf.convert_to_tensor(tilde) - new_loc)
  if FAMILIES[cls] == "log":
    x = tf.exp(x)
  return CONSTRUCTORS["Deterministic"](x, name=name)

