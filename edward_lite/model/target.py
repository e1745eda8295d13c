"""The model target: a program and its data turned into a log density.

``make_target(program, *args, observed={...}, **kwargs)`` traces ``program``
once (twice, to check its structure is fixed) and builds a ``Target`` that
every inference algorithm consumes.  A target has two roles, one per module:

* the model's description (``description.ModelDescription``, its base
  class): the program, its ``model_data`` (``data.ModelData``; ``with_data``
  swaps it, a minibatch or a data shard, without re-tracing), its
  ``structure`` (``structure.Structure``: the latents -- named random
  variables neither observed nor fixed inside the program -- with their
  shapes, dtypes and constraining bijectors, and the fixed and deterministic
  ones), the ``layout`` (``layout.Layout``) of flat ``[C, D]`` states, the
  spaces, prior and predictive draws, log-likelihoods;
* the sampler's density (this module): one run of the program
  (``interpreter.run``) batched over ``C`` chains with the per-chain
  gradient of ``per_chain_gradient.log_density``, on dict or flat
  ``[C, D]`` states.  ``Density`` is the protocol samplers and optimizers
  use; ``distribute.ShardedTarget`` implements it too.

``log_prob(state)`` over *unconstrained*, chain-batched state
``{name: u[C, *U_name]}`` returns ``[C]`` values of

    log p(x(u), y) + log |det dx/du|,   x_name = b_name(u_name),

where ``b_name`` is the default event-space bijector of the distribution of
``name`` *as built in that run*, so supports that depend on other latents
(``Uniform(0., tau)``) are handled.  The program is written for one draw;
one call evaluates thousands of chains, inside
``tf.function(jit_compile=True)`` too.

All input checks happen in ``make_target``, before any compiled work.
"""

import copy
import inspect
from typing import Protocol, runtime_checkable
import weakref

import tensorflow as tf

from edward_lite.model import enumeration, enumeration_plan, per_chain_gradient
from edward_lite.language.bijectors import support_bijector
from edward_lite.model.description import ModelDescription, ProgramChangedError
from edward_lite.model.interpreter import Mode, log_prob_term, run
from edward_lite.model.layout import Layout
from edward_lite.model.structure import LatentInfo
from edward_lite.runtime import console

__all__ = ["Target", "make_target", "LatentInfo", "Mode", "Density", "ProgramChangedError",
           "flat_value_and_gradient",
           "support_bijector", "log_prob_term"]


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


@runtime_checkable
class Density(Protocol):
  """What samplers and optimizers use of a target; ``Target`` and
  ``distribute.ShardedTarget`` implement it.  ``C`` chains, ``D`` the
  unconstrained dimension."""
  names: tuple
  latents: dict
  dim: int
  dtype: tf.DType
  layout: Layout

  def log_prob(self, state):
    """``[C]`` log density at unconstrained state ``{name: [C, *U]}``."""

  def log_prob_flat(self, flat):
    """``[C]`` log density at ``[C, D]``."""

  def log_joint(self, values):
    """``[C]`` log p(x, data) at constrained values ``{name: [C, *S]}``."""

  def value_and_gradient_flat(self, flat):
    """``(log_prob [C], gradient [C, D])``."""

  def with_data(self, args=None, kwargs=None, observed=None, likelihood_scale=None):
    """The same density on other data (a minibatch)."""


class Target(ModelDescription):
  """Log density of a program's latent variables over unconstrained state.

  Build with ``ed.make_target``.  The model's description (names, layout,
  ``constrain``, prior and predictive draws, log-likelihood) is the base
  class's, ``description.ModelDescription``; this class adds the
  chain-batched log density (``Density``).  Shapes: ``C`` is the chain
  (batch) dimension, ``U_n`` the unconstrained shape of latent ``n``, ``D``
  the total unconstrained dimension ``sum_n prod(U_n)``.
  """

  def _forget_compiled(self):
    super()._forget_compiled()
    self._shared_densities = {}  # mode -> tf.function (_traced)
    self._graph_densities = weakref.WeakKeyDictionary()  # graph -> mode -> tf.function

  def __repr__(self):
    parts = ", ".join(f"{n}: {i.distribution}{i.shape.as_list()}"
                      for n, i in self._structure.latents.items())
    summed = (f" summed out: {enumeration_plan.describe(self._plan)}" if self._plan else "")
    return (f"<ed.Target latents=({parts}) observed={list(self._data.observed)} "
            f"dim={self.dim}{summed}>")

  # -- one chain ----------------------------------------------------------------

  def density_fn(self, mode=Mode.UNCONSTRAINED):
    """One chain's log density, ``values -> scalar``: ``log_prob``'s
    (unconstrained) or ``log_joint``'s (constrained); enumerated latents
    summed out."""
    if self._plan is None:
      return lambda values: run(self, values, mode).log_prob
    return lambda values: enumeration.log_density(self._terms_fn(values, mode), self._plan)

  # -- chain-batched densities ------------------------------------------------

  def _density(self, state, mode):
    if not self._structure.latents:
      raise ValueError("The program has no latent variables: nothing to infer.")
    fn = self.density_fn(mode)
    if self.sums_out_in_pairs:
      return per_chain_gradient.log_density(
          fn, state, batched=lambda s: self.batched_value_and_gradient(mode, s))
    if self.has_loops:
      return per_chain_gradient.log_density(fn, state, self.has_loops)
    return per_chain_gradient.log_density(fn, state, batched=lambda s: self._traced(mode, s))

  def _traced(self, mode, state):
    """``batched_value_and_gradient(density_fn(mode), state)`` through a
    ``tf.function`` that one trace serves everywhere it is called: a
    chunk's first state and its leapfrog steps, the sampler's separate
    value-and-gradient function, and eager calls.  A trace that captured a symbolic tensor
    (data bound to a program's arguments, such as minibatches) serves only
    the program being traced (its outermost graph).  Programs with loops
    are excluded: XLA cannot compile their chain-by-chain gradient across
    a function call (it needs the loops' lengths as constants)."""
    graph = tf.compat.v1.get_default_graph()
    while getattr(graph, "outer_graph", None) is not None:
      graph = graph.outer_graph
    own = self._graph_densities.setdefault(graph, {})
    traced = self._shared_densities.get(mode) or own.get(mode)
    if traced is None:
      fn = self.density_fn(mode)
      traced = console.per_call_function(  # traced once per shape of the state
          lambda s: per_chain_gradient.batched_value_and_gradient(fn, s))
      captured = traced.get_concrete_function(state).captured_inputs
      eager = not any(tf.is_symbolic_tensor(t) for t in captured)
      (self._shared_densities if eager else own)[mode] = traced
    return traced(state)

  def log_prob(self, state):
    """Log density at unconstrained, chain-batched state.

    Args:
      state: dict ``name -> u[C, *U_name]`` (or a list in ``names`` order).

    Returns:
      ``[C]`` Tensor: ``log p(x(u), data) + log|det dx/du|`` per chain.  Its
      gradient is computed per chain inside the vectorized program (first
      derivatives only).
    """
    return self._density(self._layout.as_dict(state), Mode.UNCONSTRAINED)

  def log_joint(self, values):
    """``log p(x, data)`` at constrained, batched values (no Jacobian).

    Args:
      values: dict ``name -> x[C, *shape_name]`` for every latent.

    Returns:
      ``[C]`` Tensor; its gradient is computed per draw, as ``log_prob``'s.
    """
    return self._density(self._layout.as_dict(values, constrained=True), Mode.CONSTRAINED)

  def value_and_gradient(self, state):
    """``(log_prob [C], gradient dict name -> [C, *U_name])``."""
    state = self._layout.as_dict(state)
    if not self._structure.latents:
      raise ValueError("The program has no latent variables: nothing to infer.")
    return self.batched_value_and_gradient(Mode.UNCONSTRAINED, state)

  def batched_value_and_gradient(self, mode, state):
    """``(density [C], gradient dict)`` of ``density_fn(mode)`` over the
    chains of ``state`` (dict ``name -> [C, ...]``): vectorized, chain by
    chain for a program with loops, or over (chain, configuration) pairs
    (``sums_out_in_pairs``).  Called eagerly, the vectorized form runs
    through ``_traced``'s one trace (``tf.vectorized_map`` called eagerly
    traces anew at every call: 0.1-0.2 s each, and TensorFlow's retracing
    warning from the fifth)."""
    if self.sums_out_in_pairs:
      return self._pairs(mode, state)
    if tf.executing_eagerly() and not self.has_loops:
      return self._traced(mode, state)
    return per_chain_gradient.batched_value_and_gradient(self.density_fn(mode), state,
                                                         self.has_loops)

  def _pairs(self, mode, state):
    return enumeration.pairs_value_and_gradient(lambda values: self._terms_fn(values, mode),
                                                self._plan, state)

  def log_prob_flat(self, flat):
    """``log_prob`` of a flat ``[C, D]`` state; returns ``[C]``."""
    return self.log_prob(self.unflatten(flat))

  def value_and_gradient_flat(self, flat):
    """``(log_prob [C], gradient [C, D])`` of a flat state."""
    return flat_value_and_gradient(self, flat)

  def log_det_jacobian_flat(self, flat):
    """``log|det dx/du|`` of the constraining bijectors at ``[C, D]``; ``[C]``."""
    def one(values):
      terms = run(self, values).terms
      return tf.add_n([terms[f"{n} (Jacobian)"] for n in self.names])
    return self._eager_function("log_det_jacobian", lambda u: tf.vectorized_map(
        one, self.unflatten(u)))(flat)

  def log_prob_terms_flat(self, flat):
    """Each random variable's log-probability term at ``[C, D]``.

    Returns:
      dict ``name -> [C]`` in program order (observed terms scaled as in
      ``log_prob``), plus ``"<latent> (Jacobian)"`` entries; they sum to
      ``log_prob_flat(flat)``.  With discrete latents summed out, each
      group of them (``enumeration``) has one term ``"z (summed out)"``,
      ``log sum_z`` of the group's terms (the latents' own and those of the
      variables that change with them), in place of those terms.
    """
    if self._plan is None:
      one = lambda values: run(self, values).terms  # pylint: disable=unnecessary-lambda-assignment
    else:
      one = lambda values: enumeration.log_density_terms(  # pylint: disable=unnecessary-lambda-assignment
          self._terms_fn(values, Mode.UNCONSTRAINED), self._plan)
    return self._eager_function("terms", lambda u: tf.vectorized_map(
        one, self.unflatten(u)))(flat)

  # -- other data -------------------------------------------------------------------

  def retrace(self, args, kwargs, observed, structure_checks=1):
    """A new target of the same program and dtype on other data, traced and
    checked again (unlike ``with_data``)."""
    return Target(self._program, args, kwargs, observed, structure_checks, self._float)

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
      check once eagerly with ``make_target`` (or ``retrace``) on a batch.
    """
    data = self._data
    if observed:
      unknown = [n for n in observed if n not in data.observed]
      if unknown:
        raise ValueError(f"with_data: {unknown} are not observed variables of the target; "
                         f"they are {list(data.observed)}.")
    other = copy.copy(self)
    other._forget_compiled()  # pylint: disable=protected-access
    other._data = data.replace(  # pylint: disable=protected-access
        args=data.args if args is None else tuple(args),
        kwargs=data.kwargs if kwargs is None else dict(kwargs),
        observed={**data.observed, **(observed or {})},
        likelihood_scale=likelihood_scale, prior_scale=prior_scale)
    return other


def flat_value_and_gradient(density, flat):
  """``(log_prob [C], gradient [C, D])`` of ``density.log_prob_flat`` at ``flat``."""
  flat = tf.convert_to_tensor(flat, dtype=density.dtype)
  with tf.GradientTape() as tape:
    tape.watch(flat)
    lp = density.log_prob_flat(flat)
  return lp, tape.gradient(lp, flat)
