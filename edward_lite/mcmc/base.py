"""The kernel contract and what MCMC kernels share.

The sampler hands each kernel a *preconditioned* log density: with the
inverse metric ``A A^T`` adapted in warmup (``metric.py``), a kernel sees
``f(z) = log p(A z)``, so identity-metric dynamics in ``z`` are the
metric-``(A A^T)^{-1}`` dynamics in the unconstrained space.  A kernel
(``Kernel``) is a small object with explicit state over a flat,
chain-batched ``z[C, D]``:

* ``init(z, fn, step_size) -> kstate``: kernel state at ``z``, where
  ``fn(z) -> [C]`` is the log density;
* ``one_step(kstate, step_size, seed, fn, step, adapt_state) -> (kstate, info)``, where
  ``step_size`` is ``[C, 1]`` (or ``[1, 1]`` shared) and ``info`` is a
  ``TransitionInfo`` of per-chain ``[C]`` statistics (``STATISTICS``:
  ``accept_prob``, ``diverging``, ``n_grads``, ``tree_depth``, ``energy``,
  ``log_prob``) and a kernel's own ``extra`` values, which are not recorded;
* ``state(kstate) -> z``;
* the facts the sampler asks: ``default_target_accept(dim)``,
  ``initial_step_size(dim)``, ``adapts_step_size``, ``shared_metric``,
  ``has_gradients`` (then ``gradient(kstate)``),
  ``supports_rounds`` (then ``run_rounds``), and the adaptation hooks
  ``adapt_init`` / ``adapt_update`` / ``finalize_adaptation`` /
  ``trajectory_length``.

Normal and uniform draws use the threefry stateless generator under XLA
(on CPU an order of magnitude faster than TensorFlow's default algorithm)
and Philox outside XLA, where TensorFlow has no threefry kernel; the sampler
picks with ``random_algorithm`` while it traces.  The choice is per thread
(chain groups trace their programs from a thread pool).
"""

import collections
import contextlib
import threading
from typing import NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.mcmc import adaptation

__all__ = ["Kernel", "GradientKernel", "GradState", "MAX_ENERGY_ERROR", "STATISTICS",
           "TransitionInfo", "check_kernel", "check_number", "leapfrog", "metropolis",
           "random_algorithm", "stateless_normal", "stateless_uniform", "fold_in", "split"]

MAX_ENERGY_ERROR = 1000.  # |H' - H| above this is a divergence (as Stan)


_RANDOM = threading.local()  # .alg: the algorithm of the trace running in this thread


@contextlib.contextmanager
def random_algorithm(alg):
  """Kernels traced inside, in this thread, draw with ``alg`` ("threefry":
  XLA only; "philox")."""
  outer = _algorithm()
  _RANDOM.alg = alg
  try:
    yield
  finally:
    _RANDOM.alg = outer


def _algorithm():
  return getattr(_RANDOM, "alg", "threefry")


def stateless_normal(shape, seed, dtype):
  return tf.random.stateless_normal(shape, seed, dtype=dtype, alg=_algorithm())


def stateless_uniform(shape, seed, dtype, minval=0, maxval=None):
  return tf.random.stateless_uniform(shape, seed, minval, maxval, dtype=dtype,
                                     alg=_algorithm())


def split(seed, n):
  """``n`` new seed pairs ``[n, 2]`` from ``seed``: one draw keyed by it
  (``tf.random.experimental.stateless_split`` without its Philox scramble,
  as ``fold_in``)."""
  return tf.random.stateless_uniform([n, 2], seed, minval=None, maxval=None, dtype=seed.dtype,
                                     alg=_algorithm())


def fold_in(seed, data):
  """A new seed pair from ``seed`` (int32 ``[2]``) and ``data`` (a scalar
  int32): one draw of two full-range integers keyed by ``seed`` with
  ``data`` added to its second word, with the trace's algorithm.
  TensorFlow's ``stateless_fold_in`` first scrambles the seed with Philox
  (``StatelessRandomGetKeyCounter``), about 270 XLA instructions per call
  site; the chunk calls this once per transition (RESULTS section 37)."""
  return tf.random.stateless_uniform([2], seed + tf.stack([tf.zeros_like(data), data]),
                                     minval=None, maxval=None, dtype=seed.dtype,
                                     alg=_algorithm())


class TransitionInfo(NamedTuple):
  """The per-chain ``[C]`` statistics of one transition (``[R, C]`` for
  ``R`` transitions of ``run_rounds``).  ``extra`` holds values a kernel's
  own adaptation reads (ChEES: the proposal); they are not recorded."""
  accept_prob: tf.Tensor   # mean Metropolis acceptance probability (float)
  diverging: tf.Tensor     # bool: energy error above MAX_ENERGY_ERROR, or not finite
  n_grads: tf.Tensor       # int32: gradient evaluations
  tree_depth: tf.Tensor    # int32: NUTS tree depth (0 for other kernels)
  energy: tf.Tensor        # Hamiltonian at the new state (float)
  log_prob: tf.Tensor      # log density at the new state (float)
  extra: dict = {}

  def statistics(self):
    """The recorded statistics, ``{name: value}`` in ``STATISTICS`` order."""
    return {name: getattr(self, name) for name in STATISTICS}

  @staticmethod
  def dtypes(float_dtype, kernel=None):
    """The statistics ``kernel``'s transitions record per chain, ``{name:
    dtype}``: not ``energy`` for a kernel without momentum, nor those the
    kernel gives one value always (``Kernel.constant_statistics``); all
    of them without ``kernel``."""
    out = dict(accept_prob=float_dtype, diverging=tf.bool, n_grads=tf.int32,
               tree_depth=tf.int32, energy=float_dtype, log_prob=float_dtype)
    if kernel is None:
      return out
    if not kernel.has_gradients:
      del out["energy"]
    return {k: v for k, v in out.items() if k not in kernel.constant_statistics}


STATISTICS = TransitionInfo._fields[:-1]


def check_number(kernel, name, value, integer=False, low=None, high=None):
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

  # Statistics every transition of the kernel gives the same value (name ->
  # value): not written per transition, and not kept per draw; the result
  # holds them as read-only broadcast arrays (``MCMCResult.build``).
  constant_statistics = {}

  # Whether warmup adapts the step size (RWMH(adapt=False) keeps its scale).
  adapts_step_size = True
  # Whether ``gradient(kstate)`` gives the log density's gradient at the
  # state, from which warmup estimates the metric (``metric_update``).
  has_gradients = False
  # The power mean of the bulk's acceptances that its shared step size is
  # tuned on (``adaptation.step_size_update``): harmonic for gradient-based
  # kernels, whose acceptances sit close together unless the posterior's
  # curvature varies.
  bulk_accept_power = adaptation.ACCEPT_POWER

  def default_target_accept(self, dim):
    del dim
    return self.target_accept

  def initial_step_size(self, dim):
    """The step size warmup starts from (``sample(step_size=)`` overrides)."""
    del dim
    return 0.1

  def settings(self):
    """Hashable description, checked when resuming from a checkpoint."""
    return (self.name,) + tuple(sorted(
        (k, v) for k, v in vars(self).items() if not k.startswith("_")))

  def __repr__(self):
    args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
    return f"{type(self).__name__}({args})"

  def gradient(self, kstate):
    """The gradient of the log density at the state ``[C, D]`` (in ``z``),
    for kernels with ``has_gradients``."""
    raise NotImplementedError(f"the {self.name} kernel has no gradients")

  # Adaptation hooks (only ChEES adapts more than step size and metric).
  def adapt_init(self, chains, dtype):
    return ()

  def adapt_update(self, adapt_state, kstate_before, info, step_size, step):
    del kstate_before, info, step_size, step
    return adapt_state

  def finalize_adaptation(self, adapt_state):
    return adapt_state

  def trajectory_length(self, adapt_state):
    """The adapted trajectory length, for kernels that adapt one (else None)."""
    del adapt_state


def check_kernel(kernel):
  """Refuses a kernel that breaks a rule of the sampler: the sampler runs a
  kernel's transitions in rounds (``supports_rounds``) only when its
  ``adapt_update`` needs nothing from before each transition, since the
  bookkeeping of a round sees the states after it."""
  if kernel.supports_rounds and type(kernel).adapt_update is not Kernel.adapt_update:
    raise TypeError(f"{type(kernel).__name__} runs rounds (supports_rounds) and overrides "
                    "adapt_update, which would see the states after the round; a kernel "
                    "may do one or the other.")
  return kernel


GradState = collections.namedtuple("GradState", ["z", "log_prob", "grad"])


class GradientKernel(Kernel):
  """A kernel whose state is a ``GradState``: the chains' position with its
  log density and gradient (HMC, ChEES, NUTS)."""

  has_gradients = True

  def gradient(self, kstate):
    return kstate.grad

  def init(self, z, fn, step_size):
    del step_size
    lp, grad = tfp.math.value_and_gradient(fn, z)
    return GradState(z, lp, grad)

  def state(self, kstate):
    return kstate.z


def leapfrog(fn, z, p, grad, step_size, num_steps):
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


def metropolis(seed, log_accept, new, old):
  """Accepts per chain with probability ``a = min(1, exp(log_accept))``
  (0 where ``log_accept`` is NaN): ``new`` where ``u < a``, ``u ~ U[0, 1)``.
  Returns the picked structure and ``a`` (the transition's acceptance
  statistic: one exponential per chain, no logarithm of ``u``)."""
  accept_prob = tf.exp(tf.minimum(log_accept, 0.))
  accept_prob = tf.where(tf.math.is_nan(accept_prob), tf.zeros_like(accept_prob), accept_prob)
  u = stateless_uniform(tf.shape(log_accept), seed, log_accept.dtype)
  accept = u < accept_prob
  pick = lambda a, b: tf.where(tf.reshape(accept, [-1] + [1] * (a.shape.rank - 1)), a, b)
  return tf.nest.map_structure(pick, new, old), accept_prob
