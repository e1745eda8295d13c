"""One run of a traced program at given latent values (one chain, unbatched).

``run(target, values, mode)`` runs the program with every latent's value
set from ``values``, every observed one from the data, and sums the
log-probability terms.  The mode says what ``values`` are:

* ``Mode.UNCONSTRAINED``: ``u``, mapped to ``x = b(u)`` by the bijector of
  each latent's distribution *as built in this run* (so a support that
  depends on other latents, ``Uniform(0., tau)``, is right); the log density
  is ``log p(x(u), y) + log |det dx/du|`` -- what samplers need;
* ``Mode.CONSTRAINED``: ``x``, mapped to ``u = b^-1(x)``; the log density is
  the log joint ``log p(x, y)``, with no Jacobian.

Observed terms are multiplied by the data's ``likelihood_scale``, the
others (Jacobians too) by its ``prior_scale``.  Batching over chains
(``tf.vectorized_map``) and gradients are the caller's: ``Target`` and
``per_chain_gradient``.

``pointwise`` runs the program at constrained values for the elementwise
log-likelihood (LOO, WAIC) and the ``ed.Deterministic`` values.
"""

import enum
import functools
from typing import Dict, NamedTuple

import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.checks.program_errors import event_rank_hint, first_line
from edward_lite.language.bijectors import support_bijector
from edward_lite.language.random_variable import DeferredValue
from edward_lite.language.tracing import trace
from edward_lite.language.transformations import require_name

__all__ = ["Mode", "RunResult", "run", "pointwise", "log_prob_term"]

tfd = tfp.distributions
tfb = tfp.bijectors


class Mode(enum.Enum):
  """What the values given to ``run`` are (see the module docstring)."""
  UNCONSTRAINED = "unconstrained"
  CONSTRAINED = "constrained"


class RunResult(NamedTuple):
  """One run's results.

  ``log_prob``: the scalar sum of ``terms``; ``terms``: name -> scalar term
  (each random variable's, and ``"<latent> (Jacobian)"`` in the
  unconstrained mode), in program order; ``constrained`` / ``unconstrained``:
  latent name -> value; ``variables``: name -> the run's ``RandomVariable``.
  """
  log_prob: tf.Tensor
  terms: Dict[str, tf.Tensor]
  constrained: Dict[str, tf.Tensor]
  unconstrained: Dict[str, tf.Tensor]
  variables: Dict[str, object]


def run(target, values, mode=Mode.UNCONSTRAINED, enumerated=None, elementwise=False,
        densities=True):
  """Runs ``target``'s program once at latent ``values`` (name -> Tensor).

  ``target`` gives ``structure``, ``model_data`` and ``call_program``.
  ``enumerated``: values of the discrete latents summed out
  (``enumeration.py``), each its support's first value when not given.
  ``elementwise``: keep each random variable's term unreduced
  (``log_prob`` is then None).  ``densities=False``: compute no term (no
  log density, no Jacobian; ``log_prob`` None, ``terms`` empty), for a run
  that only maps values between the spaces, so that its trace holds none.
  Raises ValueError if the run's random variables differ from the traced
  structure (stochastic control flow, a repeated name).
  """
  enumerated = enumerated or {}
  structure, data = target.structure, target.model_data
  constrained, unconstrained, named_terms, variables = {}, {}, {}, {}

  def set_latent(name, dist):
    bijector = support_bijector(dist)
    value = tf.convert_to_tensor(values[name], dtype=dist.dtype)
    if mode is Mode.UNCONSTRAINED:
      u, x = value, bijector.forward(value)
      if densities:
        named_terms[f"{name} (Jacobian)"] = _scaled(_log_det_jacobian(bijector, u),
                                                   data.prior_scale)
    else:
      u, x = bijector.inverse(value), value
    constrained[name], unconstrained[name] = x, u
    return x

  def tracer(fn, *args, **kwargs):
    name = require_name(fn, kwargs)
    role = structure.role(name, data.observed)
    if name in variables or role is None:
      raise ValueError(
          f"Random variable '{name}' appeared in this run of the program but "
          "not as expected from make_target's trace (stochastic control flow "
          "or a repeated name).")
    if role == "observed":
      kwargs["value"] = data.observed[name]
    elif role == "latent":
      kwargs["value"] = DeferredValue(lambda dist: set_latent(name, dist))
    elif role == "enumerated":
      fill = enumerated.get(name, structure.enumerated[name].support[0])
      kwargs["value"] = DeferredValue(functools.partial(
          _enumerated_value, fill, kwargs.get("sample_shape", ())))
    rv = variables[name] = fn(*args, **kwargs)
    if role != "deterministic" and densities:
      term = _term(name, rv)
      named_terms[name] = _scaled(term if elementwise else tf.reduce_sum(term),
                                  data.scale_of(role == "observed"))
    return rv

  with trace(tracer):
    target.call_program()
  missing = [n for n in structure.latents if n not in variables]
  if missing:
    raise ValueError(f"Latent random variable(s) {missing} did not appear in "
                     "this run of the program (stochastic control flow).")
  log_prob = None if elementwise or not densities else tf.add_n(list(named_terms.values()))
  return RunResult(log_prob, named_terms, constrained, unconstrained, variables)


def _log_det_jacobian(bijector, u):
  """``log |det d forward(u) / du|`` summed over all of ``u``'s axes; for the
  identity a constant zero rather than the ~17 ops its general form traces
  (and differentiates, and vectorizes over chains)."""
  if isinstance(bijector, tfb.Identity):
    return tf.zeros([], u.dtype)
  return tf.reduce_sum(bijector.forward_log_det_jacobian(u, event_ndims=u.shape.rank))


def pointwise(target, values):
  """One run at constrained latent ``values`` (unbatched): each observed
  variable's elementwise log-likelihood ``log p(y_i | x)`` (shape
  ``sample_shape + batch_shape``: one entry per observation) and each
  ``ed.Deterministic``'s value.  Returns ``(log_lik dict, deterministic dict)``.

  Discrete latents summed out of the density (``structure.enumerated``)
  must be in ``values`` (their draws, ``Target.derived``): the
  log-likelihood is then the one given them, not summed out
  (``Target.pointwise`` and ``Target.log_likelihood`` sum them out).
  ValueError when they are not: the program would draw them from their
  prior."""
  observed, deterministic_names = target.model_data.observed, target.structure.deterministic
  missing = [n for n in target.structure.enumerated if n not in values]
  if missing:
    raise ValueError(
        f"pointwise needs values of the summed-out discrete latents {missing} (draws from "
        "p(z | x, y), Target.derived); for the log-likelihood with them summed out use "
        "Target.pointwise or Target.log_likelihood.")
  log_lik, deterministic = {}, {}

  def tracer(fn, *args, **kwargs):
    name = kwargs.get("name")
    if name in observed:
      kwargs["value"] = observed[name]
    elif name in values:
      kwargs["value"] = values[name]
    rv = fn(*args, **kwargs)
    if name in observed:
      log_lik[name] = rv.distribution.log_prob(rv.value)
    elif name in deterministic_names:
      deterministic[name] = rv.value
    return rv

  with trace(tracer):
    target.call_program()
  return log_lik, deterministic


def _enumerated_value(fill, sample_shape, dist):
  """A summed-out latent's value: ``fill`` (one support value, or a whole
  value) broadcast to the shape of this run's variable, so a minibatch or a
  data shard of per-observation latents gets its own size."""
  shape = tf.concat([tf.reshape(tf.cast(sample_shape, tf.int32), [-1]),
                     dist.batch_shape_tensor(), dist.event_shape_tensor()], 0)
  return tf.broadcast_to(tf.cast(fill, dist.dtype), shape)


def _scaled(term, scale):
  return term if scale is None else term * tf.cast(scale, term.dtype)


def _term(name, rv):
  """``log_prob_term`` of the random variable ``name``; TFP's error when
  the distribution cannot give its log density (often a shape mistake that
  sampling let through) is raised again naming the variable."""
  try:
    return log_prob_term(rv.distribution, rv.value)
  except (TypeError, ValueError, NotImplementedError) as e:
    kind = next(k for k in (TypeError, NotImplementedError, ValueError) if isinstance(e, k))
    hint = event_rank_hint(rv.distribution)
    raise kind(f"The log density of random variable '{name}' "
               f"({type(rv.distribution).__name__}) cannot be computed: "
               f"{first_line(e).rstrip('.')}.{' ' + hint if hint else ''}") from e


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
  if type(dist) is tfd.OrderedLogistic:  # pylint: disable=unidiomatic-typecheck
    term = _ordered_logistic_log_prob(dist, value)
    if term is not None:
      return term
  return dist.log_prob(value)


def _ordered_logistic_log_prob(dist, value):
  """An ``OrderedLogistic``'s log probability with cutpoints ``c [K-1]``
  shared by the batch, from the two cutpoints around each category only:

      P(k) = sigmoid(eta - c_{k-1}) - sigmoid(eta - c_k)
      log P(k) = log sigmoid(eta - c_{k-1}) + log sigmoid(c_k - eta)
                 + log(1 - exp(-(c_k - c_{k-1})))

  (``c_{-1} = -inf``, ``c_{K-1} = +inf``: the edge categories keep one term).
  TFP's form builds all ``K`` probabilities of every row: this takes a
  seventh of its time for the value and gradient at 1,000 chains and more
  (RESULTS sections 49, 52), and where cutpoints are close its float32
  error is 10-1000 times smaller (the gap's term depends on the cutpoints
  alone).  None (TFP's form is used) where cutpoints vary over the batch or
  a shape is not static."""
  cutpoints = tf.convert_to_tensor(dist.cutpoints)
  if cutpoints.shape.rank != 1 or not cutpoints.shape.is_fully_defined() or not cutpoints.shape[0]:
    return None
  loc = tf.convert_to_tensor(dist.loc)
  k = tf.cast(value, tf.int32)
  shape = tf.broadcast_static_shape(loc.shape, k.shape)
  if not shape.is_fully_defined():
    return None
  loc, k = tf.broadcast_to(loc, shape), tf.broadcast_to(k, shape)
  last = cutpoints.shape[0] - 1
  lower, upper = k > 0, k <= last
  both = lower & upper
  c_lower = tf.gather(cutpoints, tf.clip_by_value(k - 1, 0, last))
  c_upper = tf.gather(cutpoints, tf.clip_by_value(k, 0, last))
  zero = tf.zeros_like(loc)
  gap = tf.where(both, c_upper - c_lower, tf.ones_like(loc))  # finite where unused: safe gradients
  return (tf.where(lower, tf.math.log_sigmoid(loc - c_lower), zero) +
          tf.where(upper, tf.math.log_sigmoid(c_upper - loc), zero) +
          tf.where(both, _log1mexp(gap), zero))


def _log1mexp(x):
  """``log(1 - exp(-x))`` for ``x > 0``, accurate near 0 (``expm1``) and far
  out (``log1p``), each branch fed only its own range so that the gradient
  of the other is finite.  NaN for ``x < 0``: between cutpoints out of
  order the "probability" is negative (``tfp.math.log1mexp`` takes ``|x|``,
  and TFP's ``OrderedLogistic`` gives ``log |P|``: both would hide it)."""
  log_2 = tf.constant(0.6931471805599453, x.dtype)
  small = x < log_2
  near = tf.math.log(-tf.math.expm1(-tf.where(small, x, log_2)))
  far = tf.math.log1p(-tf.exp(-tf.where(small, log_2, x)))
  return tf.where(small, near, far)
