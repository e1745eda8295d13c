"""Support checks for observed values, before compiled work.

Many TFP distributions do not check their support in ``log_prob``: a
``Poisson`` gives a finite density to 1.5 and to -2, a ``Dirichlet`` to a
vector that does not sum to one, a ``HalfNormal`` to a negative value, and a
``Bernoulli`` read labels {1, 2} as if 2 were a valid outcome.  Inference then
runs on a density that is not the model's.  ``check_observed_support`` tests
an observed value once, eagerly, and raises a ``ValueError`` in one sentence
that names the variable, the distribution and what it expects, with the
number of offending values and the first of them.

Three kinds of check, in this order:

1. Discrete distributions, by class: integers (also float-typed counts such
   as ``Poisson``'s), signs, ranges (``Bernoulli`` 0/1, ``Categorical``
   labels below its number of classes, ``OrderedLogistic`` categories up
   to its number of cutpoints, ``Binomial`` counts up to
   ``total_count``), one-hot vectors, ``Multinomial`` counts summing to
   ``total_count``.  ``Independent``, ``Sample``, ``BatchReshape`` and
   ``BatchBroadcast`` wrappers are looked through.
2. Continuous distributions whose support TFP describes by a default
   event-space bijector ``b`` (unconstrained -> support): a value ``x`` lies
   in the closure of the support iff ``b.forward(b.inverse(x))`` equals ``x``
   to ``sqrt(eps)`` of its dtype (off-support values come back as NaN or as
   another point: a Dirichlet value is renormalised, a non-symmetric matrix
   symmetrised).  A point of the boundary (``b.inverse(x)`` infinite:
   ``Gamma`` at 0) is accepted iff its log density is finite there
   (``Exponential`` and ``HalfNormal`` at 0 are fine, ``Gamma(2, 1)`` at 0 is
   not).  Values TensorFlow cannot invert (a Cholesky factorisation fails)
   are tested for symmetric positive-definiteness with NumPy.
3. Otherwise, when the distribution's parameters are given (see below) and
   its support is not the whole space: ``log_prob`` is ``-inf`` or NaN.

A ``Deterministic`` is checked against its ``loc`` (within ``atol`` and
``rtol``), and a ``Mixture`` against the union of its components' supports:
a value fails where every component's check fails.

Random parameters.  ``make_target`` calls this with the distribution built
from a prior draw of the latent variables, so a bound computed from a latent
(``Uniform(0., theta)``, ``Binomial(total_count=n_latent)``) is a random
number, not the model's bound, and checking data against it would reject
valid data.  The optional ``random`` argument answers, for any quantity
``fn(distribution)`` (a parameter, the support bijector), whether the
program computes it from latent values; ``make_target`` gets it from the
graph trace of the program (``control_flow.ProgramGraph.dependence``).  Only
bounds that are not random are used: structural constraints (integers,
signs, the simplex, the number of classes, positive-definiteness) always
apply, parameter bounds only when given by data or constants, and the
``log_prob`` fallback only when no parameter is random.  Without ``random``
every parameter is taken as given.

The checks of discrete distributions are in ``discrete_support``, those by the
support bijector (and the words for a support) in ``continuous_support``; this
module dispatches, falls back on ``log_prob`` and writes the sentence.

Values or parameters that are symbolic (inside a ``tf.function``) are not
checked.  Every check is vectorised (NumPy or one TensorFlow op per step):
a 100000 x 54 observation costs milliseconds.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

# ``support_text`` stays importable from here (``__all__``).
from edward_lite.checks.constant_parameters import WRAPPERS
from edward_lite.checks.continuous_support import UNEVALUATED, bijector_failure, support_text
from edward_lite.checks.discrete_support import DISCRETE, discrete_failure
from edward_lite.language import distributions
from edward_lite.language.bijectors import support_bijector

__all__ = ["check_observed_support", "support_text"]

tfd, tfb = tfp.distributions, tfp.bijectors



def check_observed_support(name, distribution, value, random=None,
                           what="Observed value of random variable"):
  """Raises ``ValueError`` if ``value`` lies outside ``distribution``'s support.

  Args:
    name: the random variable's name, for the message.
    distribution: its ``tfd.Distribution`` (eager).
    value: the observed value, shape ``sample_shape + batch_shape +
      event_shape`` and the distribution's dtype (a Tensor or array).
    random: optional ``random(fn) -> bool``: whether ``fn(distribution)``
      depends on latent values in the program (see the module docstring);
      default: no parameter is random.

  Raises:
    ValueError: one sentence naming the variable, the distribution class,
      the support expected, how many values are outside it and the first.
  """
  if not tf.executing_eagerly() or not _concrete(value):
    return
  try:
    array = np.asarray(value)
  except (TypeError, ValueError):  # not an array NumPy can read (ragged): not checkable here
    return
  if array.size == 0:
    return

  failure = _failure(name, distribution, value, array, random or (lambda fn: False))
  if failure is not None:
    _raise(name, type(distribution).__name__, array, *failure, what=what)


def _failure(name, distribution, value, array, random):
  """``(expected, bad mask, event_ndims)`` or None: the check of the module
  docstring for one distribution."""
  inner, path, aligned = _unwrap(distribution)
  inner_random = lambda fn: random(lambda d: fn(path(d)))  # pylint: disable=unnecessary-lambda-assignment
  if isinstance(inner, tfd.Mixture):
    return _mixture_failure(name, inner, value, array, inner_random)
  if isinstance(inner, tfd.Deterministic):
    return _point_failure(inner, array, inner_random, aligned)
  if isinstance(inner, DISCRETE):
    failure = discrete_failure(inner, array, inner_random, aligned)
    if failure is not None and np.any(failure[1]):
      return failure
    return _log_prob_failure(name, distribution, value, array, random)
  if not distribution.dtype.is_floating:
    return _log_prob_failure(name, distribution, value, array, random)
  bijector = support_bijector(distribution)
  if bijector is None:
    return _log_prob_failure(name, distribution, value, array, random)
  if isinstance(bijector, tfb.Identity):
    return None  # the whole space
  if random(lambda d: d.experimental_default_event_space_bijector()):
    return None  # the support's bounds are drawn from the prior: not checkable here
  return bijector_failure(distribution, bijector, value, array)


def _point_failure(dist, array, random, aligned):
  """A ``Deterministic``'s one point, ``|x - loc| <= atol + rtol |loc|``,
  when ``loc`` is given (not drawn from latents) and lines up with the value."""
  if not aligned or random(lambda d: d.loc):
    return None
  loc = np.asarray(dist.loc)
  slack = np.asarray(dist.atol if dist.atol is not None else 0.) + np.asarray(
      dist.rtol if dist.rtol is not None else 0.) * np.abs(loc)
  with np.errstate(invalid="ignore"):
    try:
      bad = np.broadcast_to(np.abs(array - loc) > slack, array.shape)
    except ValueError:  # shapes do not line up: not checkable here
      return None
  point = f" ({loc.flat[0]:g})" if loc.size and np.all(loc == loc.flat[0]) else ""
  return f"its loc{point}", bad, 0


def _mixture_failure(name, mixture, value, array, random):
  """A ``tfd.Mixture``'s support is the union of its components': a value
  fails where every component's check fails (a zero-inflated count written
  as a mixture of ``Deterministic(0)`` and a count distribution rejects -1,
  not 0 or 3).  None where any component cannot be checked or accepts
  everything, or the components' checks do not line up."""
  expected, bad, event_ndims = [], None, None
  for i, component in enumerate(mixture.components):
    failure = _failure(name, component, value, array,
                       lambda fn, i=i: random(lambda d: fn(d.components[i])))
    if failure is None:
      return None
    text, component_bad, component_ndims = failure
    component_bad = np.asarray(component_bad, bool)
    if bad is not None and (component_ndims != event_ndims or component_bad.shape != bad.shape):
      return None
    bad = component_bad if bad is None else bad & component_bad
    event_ndims = component_ndims
    expected.append(f"{type(component).__name__}: {text}")
  return f"a value of one of its components ({'; '.join(expected)})", bad, event_ndims


# -- helpers ----------------------------------------------------------------


def _concrete(value):
  if isinstance(value, tf.Variable):
    return True
  return not tf.is_tensor(value) or hasattr(value, "numpy")


def _unwrap(dist):
  """Looks through batch/event wrappers to the distribution of each element.

  Returns ``(inner, path, aligned)``: ``path(d)`` maps the wrapper to its
  inner distribution (applied to the program graph's twin by ``random``);
  ``aligned`` is False when the value's layout no longer ends with the
  inner batch shape (``Sample`` inserts sample dimensions), so parameter
  bounds cannot be broadcast against it.
  """
  steps, aligned = [], True
  while isinstance(dist, WRAPPERS):
    if isinstance(dist, (tfd.Sample, tfd.BatchReshape)):
      aligned = False
    dist = dist.distribution
    steps.append(lambda d: d.distribution)

  def path(d):
    for step in steps:
      d = step(d)
    return d

  return dist, path, aligned


def _log_prob_failure(name, dist, value, array, random):
  """Zero-probability values when no parameter is random, as ``(expected,
  bad mask, event_ndims)``, or None."""
  if random(lambda d: d.parameters):
    return None
  try:
    log_prob = np.asarray(dist.log_prob(value))
  except UNEVALUATED:  # a log_prob TFP cannot compute here: the target's reports it
    return None
  with np.errstate(invalid="ignore"):
    bad = np.isnan(log_prob) | (log_prob == -np.inf)
  if not bad.any():
    return None
  event_ndims = array.ndim - log_prob.ndim
  if event_ndims < 0 or array.shape[:log_prob.ndim] != log_prob.shape:
    raise ValueError(
        f"Observed value of random variable '{name}' has zero probability under its "
        f"{type(dist).__name__} distribution: log_prob is -inf or NaN for {int(bad.sum())} of "
        f"{bad.size} values.")
  return "values of non-zero probability (log_prob is -inf or NaN)", bad, event_ndims


_UNITS = {0: "values", 1: "vectors", 2: "matrices"}


def _raise(name, kind, array, expected, bad, event_ndims,
           what="Observed value of random variable"):
  bad = np.asarray(bad, bool)
  count = int(np.count_nonzero(bad))
  if not count:
    return
  first = tuple(int(i) for i in np.argwhere(bad)[0])
  shown = array[first] if first else array
  if event_ndims:
    shown = " ".join(np.array2string(np.asarray(shown), threshold=8, precision=4, separator=", ",
                                     max_line_width=10**6).split())
  else:
    shown = f"{np.asarray(shown).item():g}" if np.asarray(shown).dtype.kind in "fiu" else str(
        np.asarray(shown).item())
  unit = _UNITS.get(event_ndims, f"rank-{event_ndims} events")
  where = f" at index {list(first)}" if first else ""
  raise ValueError(
      f"{what} '{name}' is outside the support of its {kind} "
      f"distribution, which expects {expected}: {count} of {bad.size} {unit} are not, "
      f"the first{where} is {shown}.")


def _check_given_value(name, distribution, value):
  """``value=`` given to a random variable's constructor outside inference."""
  check_observed_support(name or "(unnamed)", distribution, value,
                         what="The value= given to random variable")


distributions.VALUE_CHECKS.append(_check_given_value)
