"""Random-walk Metropolis: ``z' = z + h * N(0, I)``; the proposal scale ``h``
is the "step size", adapted toward acceptance 0.234 (0.44 in 1-D)."""

import numpy as np
import tensorflow as tf

from edward_lite.mcmc.base import (GradState, Kernel, check_number, metropolis,
                                   split, stateless_normal, TransitionInfo)

__all__ = ["RWMH"]


class RWMH(Kernel):
  """Random-walk Metropolis: ``z' = z + h eps``, ``eps ~ N(0, I)``.

  Args:
    scale: initial (or, with ``adapt=False``, fixed) proposal scale ``h``
      in the preconditioned space.
    adapt: adapt ``h`` by dual averaging in warmup.
    target_accept: acceptance rate to adapt to; default 0.44 in one
      dimension, 0.234 otherwise (Roberts, Gelman & Gilks 1997).
  """

  name = "rwmh"

  def __init__(self, scale=None, adapt=True, target_accept=None):
    if scale is not None:
      scale = check_number("RWMH", "scale", scale, low=0)
    if target_accept is not None:
      target_accept = check_number("RWMH", "target_accept", target_accept, low=0, high=1)
    self.scale, self.adapt, self.target_accept = scale, adapt, target_accept

  # A random walk's acceptance probabilities are spread over [0, 1] on any
  # posterior, so a harmonic mean would sit far below their mean and shrink
  # the scale: the geometric mean.
  bulk_accept_power = 0.
  # No gradients, no trees.
  constant_statistics = {"n_grads": 0, "tree_depth": 0}

  @property
  def adapts_step_size(self):
    return self.adapt

  def initial_step_size(self, dim):
    """``scale``, or ``2.38 / sqrt(D)`` (Roberts, Gelman & Gilks 1997)."""
    return self.scale if self.scale is not None else 2.38 / np.sqrt(dim)

  def default_target_accept(self, dim):
    if self.target_accept is not None:
      return self.target_accept
    return 0.44 if dim == 1 else 0.234

  def init(self, z, fn, step_size):
    del step_size
    return GradState(z, fn(z), ())

  def state(self, kstate):
    return kstate.z

  def one_step(self, kstate, step_size, seed, fn, step=0, adapt_state=()):
    del step, adapt_state
    seeds = split(seed, 2)
    z_new = kstate.z + step_size * stateless_normal(tf.shape(kstate.z), seeds[0], kstate.z.dtype)
    lp_new = fn(z_new)
    log_accept = lp_new - kstate.log_prob
    (z, lp), accept_prob = metropolis(seeds[1], log_accept, (z_new, lp_new),
                                      (kstate.z, kstate.log_prob))
    zeros = tf.zeros_like(lp, tf.int32)
    return GradState(z, lp, ()), TransitionInfo(accept_prob, ~tf.math.is_finite(lp_new), zeros,
                                                zeros, -lp, lp)
