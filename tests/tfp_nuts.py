"""TFP's ``NoUTurnSampler`` as an edward_lite kernel (``kernel=TFPNUTS()``):
the other NUTS the own one is compared with, in ``tests/test_nuts.py`` (same
distribution, same tree sizes) and ``benchmarks/mcmc_nuts.py``
(``edward_lite_tfp``).  Also an example of a kernel written outside the
library against ``ed.mcmc.Kernel``."""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.mcmc.base import Kernel, MAX_ENERGY_ERROR, check_number, TransitionInfo

__all__ = ["TFPNUTS"]


class TFPNUTS(Kernel):
  """TFP's iterative, XLA-compilable No-U-Turn sampler as an edward_lite kernel.

  Args:
    max_tree_depth: a trajectory has at most ``2**max_tree_depth - 1``
      leapfrog steps.
    target_accept: acceptance statistic targeted by step-size adaptation.
  """

  name = "nuts"

  def __init__(self, max_tree_depth=10, target_accept=0.8):
    if not 1 <= check_number("NUTS", "max_tree_depth", max_tree_depth, integer=True, low=1) <= 30:
      raise ValueError(f"NUTS max_tree_depth must be between 1 and 30; got {max_tree_depth}.")
    self.max_tree_depth = int(max_tree_depth)
    self.target_accept = check_number("NUTS", "target_accept", target_accept, low=0, high=1)

  def _kernel(self, fn, step_size):
    return tfp.mcmc.NoUTurnSampler(fn, step_size=step_size,
                                   max_tree_depth=self.max_tree_depth,
                                   max_energy_diff=MAX_ENERGY_ERROR)

  def init(self, z, fn, step_size):
    return (z, self._kernel(fn, step_size).bootstrap_results(z))

  def state(self, kstate):
    return kstate[0]

  has_gradients = True  # warmup estimates the metric from draws and gradients

  def gradient(self, kstate):
    grad = kstate[1].grads_target_log_prob
    return grad[0] if isinstance(grad, (list, tuple)) else grad

  def one_step(self, kstate, step_size, seed, fn, step=0, adapt_state=()):
    del step, adapt_state
    z, results = kstate
    results = results._replace(step_size=step_size)
    z, results = self._kernel(fn, step_size).one_step(z, results, seed=seed)
    accept_prob = tf.exp(tf.minimum(results.log_accept_ratio, 0.))
    accept_prob = tf.where(tf.math.is_finite(accept_prob), accept_prob, 0.)
    leapfrogs = tf.cast(results.leapfrogs_taken, tf.int32)
    depth = tf.math.log(tf.cast(leapfrogs, tf.float32) + 1.) / np.log(2.)
    depth = tf.cast(tf.math.ceil(depth - 1e-4), tf.int32)
    return (z, results), TransitionInfo(accept_prob, results.has_divergence, leapfrogs, depth,
                                        results.energy, results.target_log_prob)
