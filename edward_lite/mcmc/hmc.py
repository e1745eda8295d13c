"""Hamiltonian Monte Carlo: ``HMC`` with a fixed or jittered number of
leapfrog steps, and ``ChEES`` -- HMC whose trajectory length is adapted
across chains by the ChEES criterion (Hoffman, Radul & Sountsov 2021) and
jittered by a Halton sequence."""

import numpy as np
import tensorflow as tf

from edward_lite.mcmc.base import (GradState, GradientKernel, MAX_ENERGY_ERROR, check_number,
                                   leapfrog, metropolis, split, stateless_normal,
                                   stateless_uniform, TransitionInfo)

__all__ = ["HMC", "ChEES"]


class HMC(GradientKernel):
  """Hamiltonian Monte Carlo with an identity metric in the preconditioned space.

  Each transition draws ``p ~ N(0, I)``, runs ``L`` leapfrog steps and
  accepts with probability ``min(1, exp(H - H'))``,
  ``H = -log p(z) + |p|^2 / 2``.  ``|H' - H| > 1000`` or a non-finite ``H'``
  is a divergence (a rejection).

  Args:
    num_leapfrog_steps: ``L``.
    jitter: if True (default), ``L`` is drawn uniformly from ``1..2L-1``
      each transition (mean ``L``), shared by all chains; this breaks the
      periodicity of fixed-length trajectories (ESS collapses when ``L h``
      nears a period of the target).
    target_accept: acceptance probability targeted by step-size adaptation.
  """

  name = "hmc"
  constant_statistics = {"tree_depth": 0}  # no trees

  def __init__(self, num_leapfrog_steps=16, jitter=True, target_accept=0.8):
    self.num_leapfrog_steps = check_number("HMC", "num_leapfrog_steps", num_leapfrog_steps,
                                           integer=True, low=1)
    self.jitter = bool(jitter)
    self.target_accept = check_number("HMC", "target_accept", target_accept, low=0, high=1)

  def num_steps(self, seed, step, step_size, adapt_state):
    del step, step_size, adapt_state
    if not self.jitter:
      return tf.constant(self.num_leapfrog_steps)
    return stateless_uniform([], seed, tf.int32, 1, 2 * self.num_leapfrog_steps)

  def one_step(self, kstate, step_size, seed, fn, step=0, adapt_state=()):
    seeds = split(seed, 3)
    p0 = stateless_normal(tf.shape(kstate.z), seeds[0], kstate.z.dtype)
    steps = self.num_steps(seeds[2], step, step_size, adapt_state)
    z, p, lp, grad = leapfrog(fn, kstate.z, p0, kstate.grad, step_size, steps)
    h0 = -kstate.log_prob + 0.5 * tf.reduce_sum(tf.square(p0), -1)
    h1 = -lp + 0.5 * tf.reduce_sum(tf.square(p), -1)
    energy_error = h1 - h0
    diverging = ~(tf.abs(energy_error) <= MAX_ENERGY_ERROR)  # NaN counts too
    log_accept = tf.where(diverging, tf.constant(-np.inf, energy_error.dtype), -energy_error)
    (new, energy), accept_prob = metropolis(seeds[1], log_accept,
                                            (GradState(z, lp, grad), h1), (kstate, h0))
    n_grads = tf.fill(tf.shape(lp), tf.cast(steps, tf.int32))
    return new, TransitionInfo(accept_prob, diverging, n_grads, tf.zeros_like(n_grads), energy,
                               new.log_prob, extra={"proposal": (z, p)})  # for ChEES


class ChEES(HMC):
  """ChEES-HMC (Hoffman, Radul & Sountsov 2021): jittered HMC whose
  trajectory length ``T`` is adapted in warmup, across chains, to maximize
  the Change in the Estimator of the Expected Square.

  Transition ``t`` runs ``ceil(u_t T / h)`` leapfrog steps, ``u_t`` the
  base-2 Halton (van der Corput) sequence, shared by all chains.  In warmup
  ``log T`` follows RMSProp ascent on the ChEES gradient estimate

      g = T sum_c w_c (|z'_c - m'|^2 - |z_c - m|^2) ((z'_c - m') . p'_c) u_t,

  ``w_c`` the normalized acceptance probabilities, ``m, m'`` the mean over
  chains of the states before and of the proposals, ``p'`` the proposals'
  end momenta.  After warmup ``T`` is fixed at its Polyak average.

  Args:
    initial_trajectory_length: ``T`` at the start (default: one step).
    max_leapfrog_steps: cap on the steps of one transition.
    learning_rate: RMSProp learning rate for ``log T``.
    target_accept: acceptance statistic targeted by step-size adaptation
      (0.651, optimal for HMC in high dimension).
  """

  name = "chees"
  shared_metric = True

  def __init__(self, initial_trajectory_length=None, max_leapfrog_steps=1000,
               learning_rate=0.025, target_accept=0.651):
    if initial_trajectory_length is not None:
      initial_trajectory_length = check_number("ChEES", "initial_trajectory_length",
                                          initial_trajectory_length, low=0)
    self.initial_trajectory_length = initial_trajectory_length
    self.max_leapfrog_steps = check_number("ChEES", "max_leapfrog_steps", max_leapfrog_steps,
                                      integer=True, low=1)
    self.learning_rate = check_number("ChEES", "learning_rate", learning_rate, low=0)
    self.target_accept = check_number("ChEES", "target_accept", target_accept, low=0, high=1)
    self.jitter = True

  def adapt_init(self, chains, dtype):
    t0 = self.initial_trajectory_length
    log_t = tf.constant(np.log(t0) if t0 else -np.inf, dtype)
    zero = tf.zeros([], dtype)
    # (log T, running mean of squared gradients, updates so far, Polyak mean of log T)
    return (log_t, zero, zero, log_t)

  def _log_t(self, adapt_state, step_size):
    log_t = adapt_state[0]
    return tf.where(tf.math.is_finite(log_t), log_t, tf.math.log(tf.reduce_mean(step_size)))

  def num_steps(self, seed, step, step_size, adapt_state):
    del seed
    t = tf.exp(self._log_t(adapt_state, step_size))
    steps = tf.math.ceil(tf.cast(_halton(step + 1), t.dtype) * t / tf.reduce_mean(step_size))
    return tf.cast(tf.clip_by_value(steps, 1., float(self.max_leapfrog_steps)), tf.int32)

  def adapt_update(self, adapt_state, kstate_before, info, step_size, step):
    _, sq_avg, k, log_t_avg = adapt_state
    log_t = self._log_t(adapt_state, step_size)
    z0, (z1, p1) = kstate_before.z, info.extra["proposal"]
    w = tf.where(tf.math.is_finite(info.accept_prob), info.accept_prob, 0.)
    w = w / tf.maximum(tf.reduce_sum(w), 1e-20)
    c0 = z0 - tf.reduce_mean(z0, 0, keepdims=True)
    c1 = z1 - tf.reduce_mean(z1, 0, keepdims=True)
    chees_diff = tf.reduce_sum(tf.square(c1), -1) - tf.reduce_sum(tf.square(c0), -1)
    u = tf.cast(_halton(step + 1), z0.dtype)
    g = tf.exp(log_t) * u * tf.reduce_sum(w * chees_diff * tf.reduce_sum(c1 * p1, -1))
    g = tf.where(tf.math.is_finite(g), g, 0.)
    sq_avg = tf.where(k > 0., 0.5 * sq_avg + 0.5 * g * g, g * g)
    log_t = log_t + self.learning_rate * g / (tf.sqrt(sq_avg) + 1e-10)
    log_t = tf.minimum(log_t, tf.math.log(tf.reduce_mean(step_size) * self.max_leapfrog_steps))
    k = k + 1.
    weight = tf.pow(k, -0.75)
    log_t_avg = tf.where(k > 1., (1. - weight) * log_t_avg + weight * log_t, log_t)
    return (log_t, sq_avg, k, log_t_avg)

  def finalize_adaptation(self, adapt_state):
    """Fixes ``T`` at its Polyak average for sampling."""
    return (adapt_state[3],) + tuple(adapt_state[1:])

  def trajectory_length(self, adapt_state):
    return float(np.exp(adapt_state[0]))


def _halton(i):
  """Base-2 van der Corput sequence at integer Tensor ``i >= 1``, in (0, 1)."""
  i = tf.cast(i, tf.int64)
  result, f = tf.constant(0., tf.float64), 1.
  for _ in range(31):
    f /= 2.
    result += f * tf.cast(i % 2, tf.float64)
    i //= 2
  return result
