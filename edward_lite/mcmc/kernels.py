"""MCMC transition kernels over a flat, chain-batched state ``z[C, D]``.

The sampler hands each kernel a *preconditioned* log density: with the
diagonal inverse metric ``diag(s^2)`` adapted in warmup, a kernel sees
``f(z) = log p(s * z)``, so identity-metric dynamics in ``z`` are the
metric-``diag(s^-2)`` dynamics in the unconstrained space.  A kernel is a
small object with explicit state:

* ``init(z, fn, step_size) -> kstate``: kernel state at ``z``, where
  ``fn(z) -> [C]`` is the log density;
* ``one_step(kstate, step_size, seed, fn, step, adapt_state) -> (kstate, info)``, where
  ``step_size`` is ``[C, 1]`` (or ``[1, 1]`` shared) and ``info`` holds
  per-chain ``[C]`` statistics: ``accept_prob``, ``diverging``, ``n_grads``,
  ``tree_depth``, ``energy``, ``log_prob``;
* ``state(kstate) -> z``.

Kernels:

* ``RWMH`` -- random-walk Metropolis, ``z' = z + h * N(0, I)``; the proposal
  scale ``h`` is the "step size", adapted toward acceptance 0.234 (0.44 in 1-D);
* ``HMC`` -- leapfrog Hamiltonian Monte Carlo with a fixed or jittered
  number of steps;
* ``NUTS`` -- the iterative No-U-Turn sampler of ``edward_lite.mcmc.nuts``
  (multinomial sampling, generalized U-turn criterion, maximum tree depth,
  divergence detection), or TFP's (``TFPNUTS``);
* ``ChEES`` -- HMC whose trajectory length is adapted across chains by the
  ChEES criterion (Hoffman, Radul & Sountsov 2021) and jittered.

Normal and uniform draws use the threefry stateless generator under XLA
(on CPU an order of magnitude faster than TensorFlow's default algorithm)
and Philox outside XLA, where TensorFlow has no threefry kernel; the sampler
picks with ``random_algorithm`` while it traces.
"""

import collections
import contextlib

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["Kernel", "RWMH", "HMC", "NUTS", "ChEES", "TFPNUTS", "get_kernel"]

MAX_ENERGY_ERROR = 1000.  # |H' - H| above this is a divergence (as Stan)


_ALGORITHM = ["threefry"]


@contextlib.contextmanager
def random_algorithm(alg):
  """Kernels traced inside draw with ``alg`` ("threefry": XLA only; "philox")."""
  _ALGORITHM.append(alg)
  try:
    yield
  finally:
    _ALGORITHM.pop()


def stateless_normal(shape, seed, dtype):
  return tf.random.stateless_normal(shape, seed, dtype=dtype, alg=_ALGORITHM[-1])


def stateless_uniform(shape, seed, dtype, minval=0, maxval=None):
  return tf.random.stateless_uniform(shape, seed, minval, maxval, dtype=dtype,
                                     alg=_ALGORITHM[-1])


def _info(accept_prob, diverging, n_grads, tree_depth, energy, log_prob):
  return dict(accept_prob=accept_prob, diverging=diverging, n_grads=n_grads,
              tree_depth=tree_depth, energy=energy, log_prob=log_prob)


def _number(kernel, name, value, integer=False, low=None, high=None):
  """``value`` checked: a (whole, with ``integer``) number in ``(low, high)``
  (``low <= value`` for integers); a ValueError naming the setting otherwise."""
  kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
  ok = isinstance(value, kinds) and not isinstance(value, bool) and np.isfinite(value)
  if ok and low is not None:
    ok = value >= low if integer else value > low
  if ok and high is not None:
    ok = value < high
  if not ok:
    what = ("an integer" if integer else "a number") + (
        f" of at least {low}" if integer and low is not None else
        f" in ({low}, {high})" if high is not None else
        f" above {low}" if low is not None else "")
    raise ValueError(f"{kernel} {name} must be {what}; got {value!r}.")
  return int(value) if integer else float(value)


class Kernel:
  """Base class; subclasses set ``name`` and ``target_accept``."""

  name = "kernel"
  target_accept = 0.8
  # Kernels that can run several transitions per chain without the chains
  # waiting for each other implement ``run_rounds`` (see ``nuts.py``).
  supports_rounds = False
  # Kernels whose adaptation compares chains in one preconditioned space
  # (ChEES' trajectory criterion) need one metric for all chains:
  # ``sample`` refuses ``pooled=False`` for them.
  shared_metric = False

  def default_target_accept(self, dim):
    del dim
    return self.target_accept

  def settings(self):
    """Hashable description, checked when resuming from a checkpoint."""
    return (self.name,) + tuple(sorted(
        (k, v) for k, v in vars(self).items() if not k.startswith("_")))

  def __repr__(self):
    args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
    return f"{type(self).__name__}({args})"

  # Adaptation hooks (only ChEES adapts more than step size and metric).
  def adapt_init(self, chains, dtype):
    return ()

  def adapt_update(self, adapt_state, kstate_before, info, step_size, step):
    del kstate_before, info, step_size, step
    return adapt_state

  def finalize_adaptation(self, adapt_state):
    return adapt_state


GradState = collections.namedtuple("GradState", ["z", "log_prob", "grad"])


def _leapfrog(fn, z, p, grad, step_size, num_steps):
  """``num_steps`` (a scalar Tensor) leapfrog steps of size ``step_size``."""

  def body(i, z, p, lp, grad):
    p = p + 0.5 * step_size * grad
    z = z + step_size * p
    lp, grad = tfp.math.value_and_gradient(fn, z)
    p = p + 0.5 * step_size * grad
    return i + 1, z, p, lp, grad

  lp0 = tf.zeros(tf.shape(z)[:1], z.dtype)
  _, z, p, lp, grad = tf.while_loop(
      lambda i, *_: i < num_steps, body, (tf.constant(0), z, p, lp0, grad))
  return z, p, lp, grad


def _metropolis(seed, log_accept, new, old):
  """Accepts per chain with probability ``min(1, exp(log_accept))``."""
  log_accept = tf.where(tf.math.is_nan(log_accept), tf.constant(-np.inf, log_accept.dtype),
                        log_accept)
  u = stateless_uniform(tf.shape(log_accept), seed, log_accept.dtype)
  accept = tf.math.log(u) < log_accept
  pick = lambda a, b: tf.where(tf.reshape(accept, [-1] + [1] * (a.shape.rank - 1)), a, b)
  return tf.nest.map_structure(pick, new, old), accept


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
      scale = _number("RWMH", "scale", scale, low=0)
    if target_accept is not None:
      target_accept = _number("RWMH", "target_accept", target_accept, low=0, high=1)
    self.scale, self.adapt, self.target_accept = scale, adapt, target_accept

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
    seeds = tf.random.experimental.stateless_split(seed, 2)
    z_new = kstate.z + step_size * stateless_normal(tf.shape(kstate.z), seeds[0], kstate.z.dtype)
    lp_new = fn(z_new)
    log_accept = lp_new - kstate.log_prob
    (z, lp), _ = _metropolis(seeds[1], log_accept, (z_new, lp_new), (kstate.z, kstate.log_prob))
    accept_prob = tf.exp(tf.minimum(log_accept, 0.))
    accept_prob = tf.where(tf.math.is_nan(accept_prob), tf.zeros_like(accept_prob), accept_prob)
    zeros = tf.zeros_like(lp, tf.int32)
    return GradState(z, lp, ()), _info(accept_prob, ~tf.math.is_finite(lp_new), zeros,
                                       zeros, -lp, lp)


class HMC(Kernel):
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

  def __init__(self, num_leapfrog_steps=16, jitter=True, target_accept=0.8):
    self.num_leapfrog_steps = _number("HMC", "num_leapfrog_steps", num_leapfrog_steps,
                                      integer=True, low=1)
    self.jitter = bool(jitter)
    self.target_accept = _number("HMC", "target_accept", target_accept, low=0, high=1)

  def init(self, z, fn, step_size):
    del step_size
    lp, grad = tfp.math.value_and_gradient(fn, z)
    return GradState(z, lp, grad)

  def state(self, kstate):
    return kstate.z

  def num_steps(self, seed, step, step_size, adapt_state):
    del step, step_size, adapt_state
    if not self.jitter:
      return tf.constant(self.num_leapfrog_steps)
    return stateless_uniform([], seed, tf.int32, 1, 2 * self.num_leapfrog_steps)

  def one_step(self, kstate, step_size, seed, fn, step=0, adapt_state=()):
    seeds = tf.random.experimental.stateless_split(seed, 3)
    p0 = stateless_normal(tf.shape(kstate.z), seeds[0], kstate.z.dtype)
    steps = self.num_steps(seeds[2], step, step_size, adapt_state)
    z, p, lp, grad = _leapfrog(fn, kstate.z, p0, kstate.grad, step_size, steps)
    h0 = -kstate.log_prob + 0.5 * tf.reduce_sum(tf.square(p0), -1)
    h1 = -lp + 0.5 * tf.reduce_sum(tf.square(p), -1)
    energy_error = h1 - h0
    diverging = ~(tf.abs(energy_error) <= MAX_ENERGY_ERROR)  # NaN counts too
    log_accept = tf.where(diverging, tf.constant(-np.inf, energy_error.dtype), -energy_error)
    (new, energy), _ = _metropolis(seeds[1], log_accept, (GradState(z, lp, grad), h1),
                                   (kstate, h0))
    accept_prob = tf.exp(tf.minimum(log_accept, 0.))
    n_grads = tf.fill(tf.shape(lp), tf.cast(steps, tf.int32))
    info = _info(accept_prob, diverging, n_grads, tf.zeros_like(n_grads), energy, new.log_prob)
    info["_proposal"] = (z, p)  # for ChEES adaptation; keys with "_" are not recorded
    return new, info


class TFPNUTS(Kernel):
  """TFP's iterative, XLA-compilable No-U-Turn sampler (``NUTS(implementation="tfp")``).

  Args:
    max_tree_depth: a trajectory has at most ``2**max_tree_depth - 1``
      leapfrog steps.
    target_accept: acceptance statistic targeted by step-size adaptation.
  """

  name = "nuts"

  def __init__(self, max_tree_depth=10, target_accept=0.8):
    if not 1 <= _number("NUTS", "max_tree_depth", max_tree_depth, integer=True, low=1) <= 30:
      raise ValueError(f"NUTS max_tree_depth must be between 1 and 30; got {max_tree_depth}.")
    self.max_tree_depth = int(max_tree_depth)
    self.target_accept = _number("NUTS", "target_accept", target_accept, low=0, high=1)

  def _kernel(self, fn, step_size):
    return tfp.mcmc.NoUTurnSampler(fn, step_size=step_size,
                                   max_tree_depth=self.max_tree_depth,
                                   max_energy_diff=MAX_ENERGY_ERROR)

  def init(self, z, fn, step_size):
    return (z, self._kernel(fn, step_size).bootstrap_results(z))

  def state(self, kstate):
    return kstate[0]

  def one_step(self, kstate, step_size, seed, fn, step=0, adapt_state=()):
    del step, adapt_state
    z, results = kstate
    results = results._replace(step_size=step_size)
    z, results = self._kernel(fn, step_size).one_step(z, results, seed=seed)
    accept_prob = tf.exp(tf.minimum(results.log_accept_ratio, 0.))
    accept_prob = tf.where(tf.math.is_finite(accept_prob), accept_prob, 0.)
    leapfrogs = tf.cast(results.leapfrogs_taken, tf.int32)
    depth = tf.cast(tf.math.ceil(tf.math.log(tf.cast(leapfrogs, tf.float32) + 1.) / np.log(2.) - 1e-4),
                    tf.int32)
    return (z, results), _info(accept_prob, results.has_divergence, leapfrogs, depth,
                               results.energy, results.target_log_prob)


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
      initial_trajectory_length = _number("ChEES", "initial_trajectory_length",
                                          initial_trajectory_length, low=0)
    self.initial_trajectory_length = initial_trajectory_length
    self.max_leapfrog_steps = _number("ChEES", "max_leapfrog_steps", max_leapfrog_steps,
                                      integer=True, low=1)
    self.learning_rate = _number("ChEES", "learning_rate", learning_rate, low=0)
    self.target_accept = _number("ChEES", "target_accept", target_accept, low=0, high=1)
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
    z0, (z1, p1) = kstate_before.z, info["_proposal"]
    w = tf.where(tf.math.is_finite(info["accept_prob"]), info["accept_prob"], 0.)
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


# nuts.py builds on this module's base classes, so it is imported last.
from edward_lite.mcmc.nuts import NUTS  # pylint: disable=g-import-not-at-top,wrong-import-position

KERNELS = {"rwmh": RWMH, "hmc": HMC, "nuts": NUTS, "chees": ChEES}


def get_kernel(kernel):
  """A kernel object from a name (``"nuts"``, ...) or a Kernel instance."""
  if isinstance(kernel, Kernel):
    return kernel
  if isinstance(kernel, str) and kernel.lower() in KERNELS:
    return KERNELS[kernel.lower()]()
  raise ValueError(f"Unknown kernel {kernel!r}; use one of {sorted(KERNELS)} or a "
                   "kernel object such as ed.mcmc.NUTS(max_tree_depth=8).")
