"""A target pulled back through a transport map: the space flow-preconditioned
MCMC moves in (neural transport, Hoffman et al. 2019).

A ``Transport`` is a bijection ``u = T(v)`` of ``R^D`` (the target's flat
unconstrained space) with its log-Jacobian, e.g. a normalizing flow fitted
by VI to the posterior.  The posterior of ``v`` is

    log p_v(v) = log p_u(T(v)) + log|det dT/dv|,

close to ``N(0, I)`` where ``T`` pushes ``N(0, I)`` close to the posterior:
a funnel's neck and mouth, or a latent GP's coupled coordinates, become one
scale for the sampler.  ``TransportedTarget`` is that density with the
model's description (names, layout, constrain, predictions): its
"unconstrained" state is ``v``, and constraining applies ``T`` first, so
draws, summaries and checkpoints are those of any target.
"""

import weakref
from typing import Callable, NamedTuple

import tensorflow as tf

from edward_lite.model.target import Target, flat_value_and_gradient

__all__ = ["Transport", "TransportedTarget"]


class Transport(NamedTuple):
  """``u = T(v)`` on ``R^D``.

  forward_and_log_det: ``v [C, D] -> (u [C, D], log|det dT/dv| [C])``.
  inverse: ``u [C, D] -> v [C, D]`` (starting points given as values).
  key: a string identifying ``T`` by content (its family and parameters):
    part of the compiled program's cache key and of a checkpoint's identity.
  description: a short phrase for messages and the summary.
  """
  forward_and_log_det: Callable
  inverse: Callable
  key: str
  description: str = "a transport map"


class TransportedTarget(Target):
  """``base``'s posterior in ``v``, where ``u = transport(v)`` (module docstring).

  Shares ``base``'s program, data, structure and layout (``v`` has ``u``'s
  layout: ``D`` numbers, split by latent as ``u`` is, though a coordinate of
  ``v`` is no longer one latent's).  Evaluations in ``u`` (a program's
  terms, ``nonfinite`` diagnosis) go to ``base`` at ``T(v)``.
  """

  def __init__(self, base, transport):  # pylint: disable=super-init-not-called
    self.__dict__.update(base.__dict__)  # share program, data, structure, layout, plan
    self._shared_densities, self._graph_densities = {}, weakref.WeakKeyDictionary()
    self.base, self.transport = base, transport

  def __repr__(self):
    return f"<ed.TransportedTarget of {self.base!r} through {self.transport.description}>"

  def to_u(self, flat):
    """``T(v)``: ``[C, D]`` -> ``[C, D]``."""
    return self.transport.forward_and_log_det(tf.convert_to_tensor(flat, self.dtype))[0]

  def log_prob_flat(self, flat):
    """``log p_u(T(v)) + log|det dT/dv|``: ``[C, D]`` -> ``[C]``."""
    u, log_det = self.transport.forward_and_log_det(tf.convert_to_tensor(flat, self.dtype))
    return self.base.log_prob_flat(u) + log_det

  def log_prob(self, state):
    return self.log_prob_flat(self.flatten(self._layout.as_dict(state)))

  def value_and_gradient_flat(self, flat):
    return flat_value_and_gradient(self, flat)

  def value_and_gradient(self, state):
    value, grad = self.value_and_gradient_flat(self.flatten(self._layout.as_dict(state)))
    return value, self.unflatten(grad)

  def log_det_jacobian_flat(self, flat):
    """``log|det dx/dv|`` (the constraining bijectors' and ``T``'s): ``[C]``."""
    u, log_det = self.transport.forward_and_log_det(tf.convert_to_tensor(flat, self.dtype))
    return self.base.log_det_jacobian_flat(u) + log_det

  def log_prob_terms_flat(self, flat):
    """``base``'s terms at ``T(v)`` and ``"transport (Jacobian)"``."""
    u, log_det = self.transport.forward_and_log_det(tf.convert_to_tensor(flat, self.dtype))
    return {**self.base.log_prob_terms_flat(u), "transport (Jacobian)": log_det}

  def constrain(self, state):
    return self.base.constrain(self.base.unflatten(self.to_u(self.flatten(state))))

  def constrain_flat(self, flat):
    return self.base.constrain_flat(self.to_u(flat))

  def unconstrain(self, values):
    u = self.base.flatten(self.base.unconstrain(values))
    return self.unflatten(self.transport.inverse(u))

  def retrace(self, args, kwargs, observed, structure_checks=1):
    return TransportedTarget(self.base.retrace(args, kwargs, observed, structure_checks),
                             self.transport)

  def with_data(self, args=None, kwargs=None, observed=None, likelihood_scale=None,
                prior_scale=None):
    return TransportedTarget(self.base.with_data(args, kwargs, observed, likelihood_scale,
                                                 prior_scale), self.transport)
