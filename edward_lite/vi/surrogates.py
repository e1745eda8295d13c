"""Surrogate posteriors: a flat family composed with the model's bijectors,
or a user-written variational program.

Both expose the same small interface to the fit and the result, over a
batch of ``n`` draws:

* ``variables``: the trainable ``tf.Variable`` list (one flat vector for a
  family); ``named(values)`` maps values aligned with it (e.g. gradients) to
  a dict by parameter name;
* ``draw(n, seed, stl)`` -> ``(state, log_q[n])``, reparameterized, where
  ``state`` is what ``model_log_prob`` takes;
* ``model_log_prob(target, state)`` -> ``[n]`` log density of the model on
  the surrogate's space, so ``log p - log q`` is the ELBO integrand and the
  log importance weight;
* ``constrained(target, state)`` -> dict ``name -> [n, *shape]``;
* ``log_prob(target, values)`` -> ``log q(x)`` at constrained values.

A flat family lives on the unconstrained space ``u``: the model term is the
target's ``log p(x(u), y) + log|det dx/du|`` and ``log q(u)``.  A variational
program draws constrained values ``x`` directly: the model term is
``log p(x, y)`` and ``log q(x)``.  Either way ``log p - log q`` is the same
ratio of densities on the same space, so the ELBO and the importance weights
do not depend on the parameterization.
"""

import collections
import typing
import zlib

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.model import per_chain_gradient
from edward_lite.language.random_variable import DeferredValue
from edward_lite.language.tracing import trace
from edward_lite.vi.families import Family

__all__ = ["Surrogate", "FlatSurrogate", "ProgramSurrogate", "is_variational_program"]


@typing.runtime_checkable
class Surrogate(typing.Protocol):
  """The contract of a surrogate posterior (see the module docstring), as
  ``stages.py``, ``elbo.py``, ``elbo_diagnosis.py`` and ``VIResult`` use it."""
  variables: list

  def named(self, values) -> dict:
    """``values`` aligned with ``variables`` as ``name -> value``."""

  def draw(self, n, seed, stl=False):
    """``(state, log_q[n])``, reparameterized."""

  def model_log_prob(self, target, state):
    """``[n]``: the model's log density on the surrogate's space."""

  def constrained(self, target, state) -> dict:
    """``name -> [n, *shape]`` constrained values of ``state``."""

  def log_prob(self, target, values):
    """``log q(x)`` at constrained ``values``."""


class FlatSurrogate:
  """``q(u)`` from a flat family (``families.py``) over the target's ``[D]``."""

  def __init__(self, family, target, loc, scale=None):
    self.family = family
    self.dim = target.dim
    init = family.init(self.dim, target.dtype.as_numpy_dtype, loc, scale)
    self.parameter_names = list(init)
    self._shapes = [tuple(value.shape) for value in init.values()]
    # One flat variable for all parameters: per variable, an optimizer step
    # inside the compiled loop costs several microseconds (Adam's slots, the
    # loop state), which dominated small flows (an IAF's 20 tensors).
    self.variables = [tf.Variable(
        tf.concat([tf.reshape(value, [-1]) for value in init.values()], 0), name="params")]

  def named(self, values):
    """``values`` aligned with ``variables`` (the flat vector, its gradient)
    as a dict ``name -> Tensor`` in the parameters' shapes."""
    sizes = [int(np.prod(shape)) for shape in self._shapes]
    parts = tf.split(tf.convert_to_tensor(values[0]), sizes)
    return {name: tf.reshape(part, shape)
            for name, part, shape in zip(self.parameter_names, parts, self._shapes)}

  def params(self, stop_gradient=False):
    """Current parameters as a dict of Tensors."""
    flat = tf.convert_to_tensor(self.variables[0])
    return self.named([tf.stop_gradient(flat) if stop_gradient else flat])

  def distribution(self, stop_gradient=False):
    return self.family.distribution(self.params(stop_gradient), self.dim)

  def draw(self, n, seed, stl=False):
    """``(u[n, D], log q(u)[n])``; with ``stl`` the density's parameters are
    held fixed (sticking the landing, Roeder et al. 2017): the path
    derivative only, which has zero variance when ``q`` equals the posterior."""
    fast = getattr(self.family, "sample_and_log_prob", None)
    out = fast(self.params(), self.dim, n, seed) if fast else None
    if out is None:
      out = self.distribution().experimental_sample_and_log_prob(n, seed=seed)
    u, log_q = out
    if stl:
      log_q = self.distribution(stop_gradient=True).log_prob(u)
    return u, log_q

  @staticmethod
  def model_log_prob(target, u):
    return target.log_prob_flat(u)

  @staticmethod
  def constrained(target, u):
    return target.constrain(target.unflatten(u))

  def log_prob(self, target, values):
    """``log q(x) = log q(u) - log|det dx/du|`` at constrained values."""
    u = target.flatten(target.unconstrain(values))
    return self.distribution().log_prob(u) - target.log_det_jacobian_flat(u)


class ProgramSurrogate:
  """A variational program: an edward_lite program whose random variables
  carry the latent names of the model and whose parameters are
  ``tf.Variable`` (or Keras weights) it reads.

  Each random variable must be reparameterized (TFP's
  ``FULLY_REPARAMETERIZED``, as Normal, Gamma, LogNormal, ...), since the
  ELBO gradient flows through its draws.
  """

  def __init__(self, program, target, args=(), kwargs=None):
    self.program, self.args, self.kwargs = program, tuple(args), dict(kwargs or {})
    self.latents = target.latents
    with tf.GradientTape() as tape:  # also builds Keras layers on first call
      values, _ = self._draw_one(tf.constant([0, 0], tf.int32), check=True)
    missing = [n for n in self.latents if n not in values]
    if missing:
      raise ValueError(f"The variational program has no random variable for latent(s) "
                       f"{missing}; it must draw every latent of the model "
                       f"{list(self.latents)} under the same name.")
    for name, info in self.latents.items():
      value = values[name]
      if value.shape != info.shape or value.dtype != info.dtype:
        raise ValueError(
            f"The variational program draws '{name}' with shape {value.shape.as_list()} and "
            f"dtype {value.dtype.name}; the model's latent has shape {info.shape.as_list()} "
            f"and dtype {info.dtype.name}.")
    self.variables = [v for v in tape.watched_variables() if v.trainable]
    if not self.variables:
      raise ValueError("The variational program reads no trainable tf.Variable: there is "
                       "nothing to fit. Create its parameters as tf.Variable (or Keras "
                       "layers) outside the program and use them inside.")
    self.parameter_names = [v.name for v in self.variables]

  def named(self, values):
    """``values`` aligned with ``variables`` as a dict ``name -> value``."""
    return dict(zip(self.parameter_names, values))

  def _draw_one(self, seed, values=None, check=False):
    """One run: ``(dict name -> x, log q(x))``; draws each latent with a
    stateless seed from ``seed`` and its name, or takes it from ``values``."""
    out, terms = collections.OrderedDict(), []

    def tracer(fn, *args, **kwargs):
      name = kwargs.get("name")
      if name not in self.latents:
        raise ValueError(
            f"The variational program creates random variable {name!r}, which is not a "
            f"latent variable of the model; its latents are {list(self.latents)}.")
      if name in out:
        raise ValueError(f"The variational program creates '{name}' twice.")
      if values is not None:
        kwargs["value"] = values[name]
      else:
        rv_seed = tf.random.experimental.stateless_fold_in(
            seed, zlib.crc32(name.encode()) >> 1)
        shape = kwargs.get("sample_shape", ())
        kwargs["value"] = DeferredValue(lambda dist: dist.sample(shape, seed=rv_seed))
      rv = fn(*args, **kwargs)
      if check and rv.distribution.reparameterization_type != \
          tfp.distributions.FULLY_REPARAMETERIZED:
        raise ValueError(
            f"Random variable '{name}' of the variational program "
            f"({type(rv.distribution).__name__}) is not reparameterized, so the ELBO "
            "gradient cannot flow through its draws; use a reparameterized distribution.")
      out[name] = rv.value
      terms.append(tf.reduce_sum(rv.distribution.log_prob(rv.value)))
      return rv

    with trace(tracer):
      self.program(*self.args, **self.kwargs)
    if not terms:
      raise ValueError("The variational program creates no random variables.")
    return out, tf.add_n(terms)

  def draw(self, n, seed, stl=False):
    if stl:
      raise ValueError("stl=True (sticking the landing) needs the surrogate density with its "
                       "parameters held fixed, which a variational program cannot give; "
                       "use stl=False.")
    seeds = tf.random.experimental.stateless_split(seed, n)
    names = list(self.latents)

    # The parameters' gradient is a vector-Jacobian product per draw.
    @tf.custom_gradient
    def draws(seeds):
      values, log_q = tf.vectorized_map(self._draw_one, seeds)

      def grad_fn(*upstream, variables=None):
        def inner_product(example):
          one_seed, cotangents = example
          x, lq = self._draw_one(one_seed)
          return cotangents[-1] * lq + tf.add_n(
              [tf.reduce_sum(c * x[k]) for k, c in zip(names, cotangents[:-1])])

        return None, per_chain_gradient.summed_parameter_gradient(
            inner_product, (seeds, upstream), variables)

      return tuple(values[k] for k in names) + (log_q,), grad_fn

    out = draws(seeds)
    return dict(zip(names, out[:-1])), out[-1]

  @staticmethod
  def model_log_prob(target, values):
    return target.log_joint(values)

  @staticmethod
  def constrained(target, values):
    del target
    return values

  def log_prob(self, target, values):
    values = target.layout.as_dict(values, constrained=True)
    dummy = tf.constant([0, 0], tf.int32)
    return tf.vectorized_map(lambda v: self._draw_one(dummy, values=v)[1], values)


def is_variational_program(family):
  """A callable that is not a family object or name is a variational program."""
  return callable(family) and not isinstance(family, (Family, str, type))
