"""The compiled chunk: ``n`` transitions of every chain and their bookkeeping.

One chunk is one ``tf.while_loop`` (XLA-compiled by ``program.Program``)
that advances all chains together and, per transition, updates the step
size adaptation, the kernel's own adaptation, the metric's moments, the
streaming statistics and the kept draws, each under a flag of
``ChunkInputs``.  With many chains NUTS runs *rounds* instead: up to 32
transitions per chain without waiting for the others (``kernel.run_rounds``),
then their bookkeeping, which reads the round's recorded transitions (the
same ``segments`` function serves both).  Warmup runs rounds of one
transition (the step size adapts after each), or with very many chains
rounds of ``WARMUP_ROUND`` with one step-size update per round.
"""

from typing import NamedTuple

import numpy as np
import tensorflow as tf

from edward_lite.mcmc import adaptation, base, streaming
from edward_lite.mcmc.metric import Metric, grad_to_u, to_u

__all__ = ["ChunkState", "ChunkInputs", "run_chunk", "ROUNDS_MIN_CHAINS",
           "WARMUP_ROUNDS_MIN_CHAINS", "EARLY_MAX_DEPTH"]

# NUTS samples in rounds (each chain runs its transitions without waiting for
# the others) from this many chains (per device) up; with fewer, lockstep
# wastes little and the rounds' code adds compile time (RESULTS section 3).
ROUNDS_MIN_CHAINS = 32
# From this many chains (per device) up, NUTS's warmup runs in rounds of
# WARMUP_ROUND transitions too, with one step-size update per round on each
# chain's acceptance over it: in lockstep every warmup transition waits
# for the longest of the chains' trajectories, which early in warmup (step
# sizes far apart, no metric yet) are hundreds of leapfrogs long for a few
# chains (RESULTS section 36).  Rounds of 8 lengthened kidiq's adaptive
# warmup from 215 to 343 iterations at 1000 chains; replaying a round's
# transitions through the per-transition update (feedback delayed by a
# round) made the step size oscillate (740 iterations).
WARMUP_ROUND = 4
WARMUP_ROUNDS_MIN_CHAINS = 256
# ... and until the bulk shares one step size, each chain's trajectories
# stop at this depth (63 leapfrog steps): there every chain has its own step
# size, 10x apart in kidiq's first iterations at 1000 chains, and a round
# waits for the chain with the smallest.  Warmup seconds after the compile,
# kidiq at 256 / 1000 chains: 7.1 -> 2.4 s / 10.2 -> 6.8 s, with the same
# metric, step size and gradients per draw (RESULTS section 38).
EARLY_MAX_DEPTH = 6

class ChunkState(NamedTuple):
  """The state a chunk carries from one call to the next."""
  u: tf.Tensor             # the chains' unconstrained states [C, D]
  # The same in the preconditioned space the kernel moves in (u = to_u(z,
  # metric)), carried so that a chunk boundary does not round-trip z through
  # u, which would make the draws depend on the chunking by round-off.
  z: tf.Tensor
  metric: Metric           # the preconditioning (metric.py)
  dual_avg: adaptation.DualAveragingState  # step sizes, [1 or C, 1] each
  moments: adaptation.MetricMoments        # this window's moments per chain
  previous: adaptation.MetricMoments       # the previous window's
  kernel_adapt: object     # the kernel's own adaptation (one for all chains)
  stream: streaming.StreamState            # streaming statistics per chain

  def chain_axes(self, pool_step, pool_metric):
    """The chain axis of every field (None: one value for all chains;
    ``adaptation.SUMMED``: a sum over the chains), as a structure like this
    state; chain groups split and concatenate the per-chain fields along
    it.  ``pool_step``, ``pool_metric``: ``adaptation.pool_flags``."""
    step_axis = None if pool_step is True else 0
    return ChunkState(
        u=0, z=0, metric=Metric(None if self.metric.scale.shape[0] == 1 else 0, None, None),
        dual_avg=tf.nest.map_structure(lambda _: step_axis, self.dual_avg),
        moments=self.moments.chain_axes(), previous=self.previous.chain_axes(),
        kernel_adapt=tf.nest.map_structure(lambda _: None, self.kernel_adapt),
        stream=streaming.STREAM_CHAIN_AXES)


class ChunkInputs(NamedTuple):
  """The chunk's settings, all Tensors (one compiled program for all)."""
  final_step: tf.Tensor     # step sizes after warmup, [1 or C, 1]
  seed: tf.Tensor           # the run's seed pair; transition t uses fold_in(seed, t)
  start: tf.Tensor          # the iteration the chunk starts at
  n: tf.Tensor              # transitions to run
  adapt_step: tf.Tensor     # bool: adapt the step size (warmup)
  share: tf.Tensor          # bool: the bulk shares one step size
  collect: tf.Tensor        # bool: collect the metric's moments
  sampling: tf.Tensor       # bool: after warmup (streaming statistics)
  keep: tf.Tensor           # bool: keep draws
  thin: tf.Tensor           # keep every thin-th draw
  target_accept: tf.Tensor  # the step-size adaptation's target
  split_at: tf.Tensor       # the iteration the second half of the draws starts at


def run_chunk(target, density, kernel, state, inputs, capacity, collects=True):
  """Runs ``inputs.n`` transitions from ``state``; keeps up to ``capacity``
  draws.

  Args:
    target: the model's ``Target`` (``constrain_flat``, ``constrained_dim``).
    density: the ``Density`` whose ``log_prob_flat`` the kernel moves on
      (the target itself, or a ``ShardedTarget`` of it).
    kernel: a ``base.Kernel``.
    state: a ``ChunkState``.
    inputs: a ``ChunkInputs`` of Tensors, so one trace serves every call.
    capacity: a Python int (it fixes buffer shapes, so XLA sees static
      shapes).
    collects: a Python bool: whether any chunk of the run collects the
      metric's moments (``inputs.collect``).  A run whose metric is fixed
      (``adapt_metric=False``) compiles without their update, which is
      otherwise computed at every transition and selected away.

  Returns:
    ``(new ChunkState, {"kept": buffers [capacity + 1, C, ...] of draws
    and statistics (the kept draws in order, then the scratch row; empty
    when ``capacity`` is 0), "totals": per-chain sums [C]})``.
  """
  (final_step, seed, start, n, adapt_step, share, collect, sampling, keep, thin,
   target_accept, split_at) = inputs
  metric = state.metric
  dtype = state.u.dtype
  chains = state.u.shape[0]

  def log_prob(z):
    return density.log_prob_flat(to_u(z, metric))

  # No energy for a kernel without momentum, no buffer for a statistic the
  # kernel gives one value always (``MCMCResult.build`` restores them).
  stat_dtypes = base.TransitionInfo.dtypes(dtype, kernel)
  # One row more than the kept draws: a transition not kept writes there.
  # Under a tf.cond instead, XLA copied the whole buffers at every
  # transition (128 MB at 10^4 chains of 10 parameters and 200 rows: a
  # fifth of the run's seconds; RESULTS section 47).
  rows = capacity + 1 if capacity else 0
  buffers = {key: tf.zeros([rows, chains], d) for key, d in stat_dtypes.items()}
  buffers["draws"] = tf.zeros([rows, chains, target.constrained_dim], dtype)
  step0 = tf.where(adapt_step, tf.exp(state.dual_avg.log_step), final_step)
  rounds_mode = kernel.supports_rounds and chains >= ROUNDS_MIN_CHAINS
  warmup_rounds = rounds_mode and chains >= WARMUP_ROUNDS_MIN_CHAINS and WARMUP_ROUND > 1
  kstate = kernel.init(state.z, log_prob, step0)
  totals = dict(n_grads=tf.zeros([chains], tf.int32), diverging=tf.zeros([chains], tf.int32),
                accept_prob=tf.zeros([chains], dtype),
                log_prob=tf.zeros([chains], dtype), log_prob_sq=tf.zeros([chains], dtype))
  # Transitions whose tree reached the kernel's maximum depth (NUTS): the
  # summary's warning, with or without kept draws.
  max_depth = getattr(kernel, "max_tree_depth", None)
  if "tree_depth" in stat_dtypes and max_depth is not None:
    totals["at_max_depth"] = tf.zeros([chains], tf.int32)

  def one_step(i, kstate, step_size, kadapt):
    """One kernel step: the new kernel state, the chains' states ``z``, the
    log density's gradient there (None for kernels without) and the step's
    statistics."""
    t = start + i
    kstate, info = kernel.one_step(kstate, step_size, base.fold_in(seed, t), log_prob, step=t,
                                   adapt_state=kadapt)
    grad = kernel.gradient(kstate) if kernel.has_gradients else None
    return kstate, kernel.state(kstate), grad, info

  def body(i, kstate, dual_avg, moments, kadapt, acc, buffers, totals, transition):
    """One transition and its bookkeeping.  A chunk is all warmup or all
    sampling; the flags select (``tf.where``: a ``tf.cond`` per
    transition costs more than elementwise work), except around the step
    size's update, which sorts the chains."""
    step_size = tf.where(adapt_step, tf.exp(dual_avg.log_step), final_step)
    new_kstate, z, grad_z, info = transition(i, kstate, step_size, kadapt)
    counts = dict(n_grads=info.n_grads, diverging=tf.cast(info.diverging, tf.int32),
                  accept_prob=info.accept_prob, log_prob=info.log_prob,
                  log_prob_sq=tf.square(info.log_prob))
    if "at_max_depth" in totals:
      counts["at_max_depth"] = tf.cast(info.tree_depth >= max_depth, tf.int32)
    totals = {key: totals[key] + counts[key] for key in totals}
    u = to_u(z, metric)
    # After warmup a tf.cond skips the step size's update: it sorts the
    # chains (the bulk's median), which costs more than a cheap density's
    # whole transition at 1000 chains (RESULTS section 21).
    # A kernel with a fixed step size never adapts it (no tf.cond in the
    # loop: passing its state through one copies it at every transition).
    if kernel.adapts_step_size and not warmup_rounds:  # else once per round
      dual_avg = tf.cond(adapt_step, lambda: adaptation.step_size_update(
          dual_avg, info.accept_prob, target_accept, share, kernel.bulk_accept_power),
                         lambda: dual_avg)
    kadapt = _select(adapt_step, kernel.adapt_update(kadapt, kstate, info, step_size,
                                                     start + i), kadapt)
    def update_moments():
      grad = None if grad_z is None else grad_to_u(grad_z, metric)
      return adaptation.metric_moments_update(moments, u, grad)

    if collects and isinstance(moments.draws, adaptation.DenseWelfordState):
      # O(C D^2) products, skipped when not collecting.
      moments = tf.cond(collect, update_moments, lambda: moments)
    elif collects:
      moments = _select(collect, update_moments(), moments)
    x = target.constrain_flat(u)
    acc = _select(sampling, streaming.accumulate(acc, x), acc)
    if capacity:
      buffers = write(buffers, tf.where(keep & (i % thin == 0),
                                        tf.minimum(i // thin, capacity - 1), capacity), x, info)
    return i + 1, new_kstate, dual_avg, moments, kadapt, acc, buffers, totals

  def write(buffers, row, x, info):
    row = tf.reshape(row, [1, 1])
    out = {"draws": tf.tensor_scatter_nd_update(buffers["draws"], row, x[None])}
    for key in stat_dtypes:
      out[key] = tf.tensor_scatter_nd_update(buffers[key], row, getattr(info, key)[None])
    return out

  def segments(i, last, carry, transition):
    """Transitions ``i .. last - 1`` in segments that end at the end of
    the current batch of the streaming statistics or of the first half
    (when sampling); each segment's bookkeeping closes it.  The
    per-transition loop only carries an ``Accumulator`` of the statistics
    (no gather or scatter by half)."""

    def segment(i, kstate, dual_avg, moments, kadapt, stream, buffers, totals):
      end = tf.minimum(last, i + stream.batch_size - stream.in_batch)
      end = tf.where(start + i < split_at, tf.minimum(end, split_at - start), end)
      end = tf.where(sampling, end, last)
      second_half = start + i >= split_at
      # The run's sums are shifted by the chains' current draws.
      shift = target.constrain_flat(to_u(kernel.state(kstate), metric))
      j, kstate, dual_avg, moments, kadapt, acc, buffers, totals = tf.while_loop(
          lambda j, *_: j < end, lambda *v: body(*v, transition),
          (i, kstate, dual_avg, moments, kadapt,
           streaming.run_begin(stream, shift), buffers, totals))
      stream = streaming.stream_close(streaming.run_end(stream, acc, second_half))
      return j, kstate, dual_avg, moments, kadapt, stream, buffers, totals

    return tf.while_loop(lambda i, *_: i < last, segment, (i,) + carry)

  def round_of_transitions(i, kstate, dual_avg, *carry):
    """Up to ``round_capacity`` transitions run by the kernel with no
    chain waiting for another (in warmup one, where the step size adapts
    after every transition, or from ``WARMUP_ROUNDS_MIN_CHAINS`` chains
    up ``WARMUP_ROUND``, with the step size's update after the round),
    then their bookkeeping."""
    warmup_round = min(WARMUP_ROUND, round_capacity) if warmup_rounds else 1
    rounds = tf.minimum(tf.where(adapt_step, warmup_round, round_capacity), n - i)
    step_size = tf.where(adapt_step, tf.exp(dual_avg.log_step), final_step)
    depth_limit = None
    if warmup_rounds:  # each chain's own step size (not shared yet): its trees capped
      depth_limit = tf.where(adapt_step & ~share, EARLY_MAX_DEPTH, kernel.max_tree_depth)
    kstate, states, info_all = kernel.run_rounds(
        kstate, step_size,
        lambda k: base.fold_in(seed, start + i + k), rounds,
        round_capacity, log_prob, record_gradients=collect, depth_limit=depth_limit)

    # The round has already advanced ``kstate``; the bookkeeping reads its
    # transitions' states and statistics (``base.check_kernel`` refuses a
    # kernel whose adapt_update would need the state before each one).
    def transition(j, kstate, step_size, kadapt):
      del step_size, kadapt
      return (kstate, tf.gather(states.z, j - i), tf.gather(states.grad, j - i),
              tf.nest.map_structure(lambda value: tf.gather(value, j - i), info_all))

    j, kstate, dual_avg, *carry = segments(i, i + rounds, (kstate, dual_avg) + carry,
                                           transition)
    if not warmup_rounds:
      return (j, kstate, dual_avg, *carry)
    # Warmup in rounds: one dual-averaging step per round (the step size was
    # the same for all of its transitions), on each chain's power mean of
    # its acceptance over them, the one the bulk's shared step size takes
    # over chains (harmonic for NUTS): the bulk's is then that over all of
    # the round's transitions, as in lockstep.  The arithmetic mean here let
    # eight schools' shared step size run hot at 512 chains (217 divergences
    # against lockstep's 11; RESULTS section 36).
    mask = tf.cast(tf.range(info_all.accept_prob.shape[0]) < rounds, dtype)[:, None]
    finite = tf.where(tf.math.is_finite(info_all.accept_prob), info_all.accept_prob, 0.)
    accept = adaptation.power_mean(finite, mask, kernel.bulk_accept_power, axis=0)
    dual_avg = tf.cond(adapt_step, lambda: adaptation.step_size_update(
        dual_avg, accept, target_accept, share, kernel.bulk_accept_power), lambda: dual_avg)
    return (j, kstate, dual_avg, *carry)

  carry = (kstate, state.dual_avg, state.moments, state.kernel_adapt, state.stream, buffers,
           totals)
  if rounds_mode:
    round_capacity = _round_capacity(chains, target.dim)
    carry = tf.while_loop(lambda i, *_: i < n, round_of_transitions,
                          (tf.constant(0),) + carry)[1:]
  else:
    carry = segments(tf.constant(0), n, carry, one_step)[1:]
  kstate, dual_avg, moments, kadapt, stream, buffers, totals = carry
  z = kernel.state(kstate)
  new_state = ChunkState(to_u(z, metric), z, metric, dual_avg, moments, state.previous, kadapt,
                         stream)
  # The whole buffers, scratch row included: the host reads the kept rows
  # (``kept_draws.chunk_outputs``).  Slicing to the kept count here would
  # make it a compile-time constant (a program per chunk length), and any
  # slice copies the buffers (a chunk's kept draws twice in memory).
  return new_state, {"kept": buffers, "totals": totals}


def _round_capacity(chains, dim):
  """Transitions per round of a kernel that runs rounds (NUTS): up to 32,
  fewer when the round's momenta, states and gradients (``3 * K * C * D``
  numbers) would exceed ``3 * 2^22``."""
  return int(np.clip(2 ** 22 // (chains * dim), 1, 32))


def _select(flag, a, b):
  return tf.nest.map_structure(lambda x, y: tf.where(flag, x, y), a, b)
