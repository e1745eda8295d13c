"""The No-U-Turn sampler, iterative and batched over chains.

One transition of chains ``z[C, D]`` (identity metric: the sampler hands the
kernel its preconditioned log density ``f``):

1. ``p ~ N(0, I)``, ``H0 = -f(z) + |p|^2 / 2``.
2. The trajectory doubles, depth ``d = 0, 1, ...``: in a random direction
   ``v = +-1`` a subtree of ``2^d`` leapfrog steps of size ``v h`` grows from
   that end of the tree.  A leaf with energy ``H`` has weight
   ``w = exp(H0 - H)``.  Inside a subtree the proposal is drawn by
   progressive uniform sampling (leaf ``i`` replaces it with probability
   ``w_i / sum_{j<=i} w_j``); a finished subtree's proposal replaces the
   tree's with probability ``min(1, W_subtree / W_tree)`` (biased progressive
   sampling, Betancourt 2017, as Stan and NumPyro).
3. U-turns, by the generalized criterion (Betancourt 2013): a trajectory with
   end momenta ``p-``, ``p+`` and momentum sum ``rho`` is turning when
   ``p- . r <= 0`` or ``p+ . r <= 0`` for ``r = rho - (p- + p+) / 2``.  The
   whole tree is checked after each doubling; inside a subtree every
   sub-subtree that a new leaf completes is checked against momentum
   checkpoints, as in the iterative NUTS of Phan, Pradhan & Jankowiak (2019):
   ``O(max_tree_depth D)`` memory per chain, no recursion.
4. A subtree that turns or diverges (``H - H0 > 1000`` or not finite) is
   discarded and the trajectory ends, as it does at ``max_tree_depth``.

One iteration of the loop is one leapfrog step (one batched gradient) of
every chain still building its trajectory.  Each chain keeps its own depth,
leaf index, direction and checkpoints, so no chain waits for another at a
doubling.  In lockstep (``one_step``, and every warmup transition, after
which the pooled step size adapts) a finished chain idles until the longest
trajectory of the batch is done; ``run_rounds`` instead lets each chain start
its next transition at once, for up to 32 transitions, so with hundreds of
chains the batched leapfrog steps stay busy (the sampler's sampling phase).
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.mcmc.base import (GradState, GradientKernel, MAX_ENERGY_ERROR, check_number,
                                   stateless_normal, stateless_uniform, STATISTICS, TransitionInfo)

__all__ = ["NUTS"]

_Point = collections.namedtuple("_Point", ["z", "p", "grad"])

_Tree = collections.namedtuple("_Tree", [
    "done", "depth", "leaf",          # [C] bool, [C] int32, [C] int32 (index in subtree)
    "cursor",                         # the last leaf computed (_Point)
    "left", "right",                  # the tree's ends (_Point)
    "proposal", "energy",             # GradState, and its H [C]
    "log_w", "rho",                   # log sum of weights [C], momentum sum [C, D]
    "sub_proposal", "sub_energy", "sub_log_w", "sub_rho",  # the growing subtree
    "ckpt_p", "ckpt_rho",             # checkpoints: momentum a_k, and the subtree's
    "ckpt_pp", "ckpt_prho",           # momentum sum before it b_k [C, K, D]; a.a, a.b [C, K]
    "sum_accept", "n_grads",          # sum_i min(1, w_i) [C], leaves computed [C]
    "diverging"])                     # [C] bool


class NUTS(GradientKernel):
  """The No-U-Turn sampler (multinomial, generalized U-turn criterion).

  Args:
    max_tree_depth: a trajectory has at most ``2**max_tree_depth - 1``
      leapfrog steps.
    target_accept: acceptance statistic targeted by step-size adaptation
      (the mean of ``min(1, exp(H0 - H))`` over the trajectory's leaves).
  """

  name = "nuts"

  supports_rounds = True

  def __init__(self, max_tree_depth=10, target_accept=0.8):
    if not 1 <= check_number("NUTS", "max_tree_depth", max_tree_depth, integer=True, low=1) <= 30:
      raise ValueError(f"NUTS max_tree_depth must be between 1 and 30; got {max_tree_depth}.")
    self.max_tree_depth = int(max_tree_depth)
    self.target_accept = check_number("NUTS", "target_accept", target_accept, low=0, high=1)

  def one_step(self, kstate, step_size, seed, fn, step=0, adapt_state=()):
    del step, adapt_state
    # The lockstep transition.  run_rounds with one round gives the same
    # (tested), but its bookkeeping compiles slower.
    depth_max = self.max_tree_depth
    z, dtype = kstate.z, kstate.z.dtype
    p0, directions = _momentum_and_directions(seed, z.shape[0], z.shape[1], depth_max, dtype)
    tree = _new_tree(kstate, p0, depth_max)
    h0 = tree.energy

    def body(i, tree):
      return i + 1, _leapfrog_leaf(tree, fn, step_size, directions, h0, _leaf_seed(seed, i),
                                   depth_max)

    _, tree = tf.while_loop(lambda i, tree: ~tf.reduce_all(tree.done), body,
                            (tf.constant(0), tree))
    accept = tree.sum_accept / tf.cast(tf.maximum(tree.n_grads, 1), dtype)
    return tree.proposal, TransitionInfo(accept, tree.diverging, tree.n_grads, tree.depth,
                                         tree.energy, tree.proposal.log_prob)

  def run_rounds(self, kstate, step_size, transition_seed, rounds, capacity, fn,
                 record_gradients=True, depth_limit=None):
    """``rounds`` transitions of every chain, each chain starting its next
    trajectory as soon as its last one ends.

    In lockstep (``rounds = 1``) every chain waits for the longest
    trajectory of the batch; here a chain waits only at the end of its
    ``rounds``-th transition, so with many chains the batched leapfrog steps
    stay busy.  Transition ``k`` of a chain draws its momentum and
    directions from ``transition_seed(k)``, as ``one_step`` does; the
    uniforms of the multinomial choices come from the leapfrog iteration of
    the round, so a round of one transition is exactly ``one_step``
    (tested).

    Args:
      kstate: ``GradState`` of ``C`` chains.
      step_size: ``[C or 1, 1]``.
      transition_seed: ``k -> seed`` (``k`` a scalar int32 Tensor).
      rounds: scalar int32 Tensor, ``1 <= rounds <= capacity``.
      capacity: Python int, the size of the per-transition outputs.
      fn: the log density ``[C, D] -> [C]``.
      record_gradients: scalar bool (Python or Tensor): record each
        transition's gradient in ``states.grad`` (warmup's metric reads
        them); otherwise those rows stay zero.
      depth_limit: None, or a scalar int32 Tensor: trajectories stop at this
        depth when it is below ``max_tree_depth`` (early warmup with many
        chains, where a round waits for its longest trajectories).

    Returns:
      ``(kstate, states, info)``: the last state, the states after each
      transition (a ``GradState`` of ``z [capacity, C, D]``, ``log_prob
      [capacity, C]`` and ``grad [capacity, C, D]``) and the per-transition
      statistics ``[capacity, C]`` (rows ``>= rounds`` unspecified).
    """
    depth_max = self.max_tree_depth
    z0, dtype = kstate.z, kstate.z.dtype
    chains, dim = z0.shape[0], z0.shape[1]

    # Momenta and directions of every transition of the round, drawn as in
    # lockstep from the transition's seed: one buffer [K, C, D + depth], so
    # a leaf gathers the next transition's draws in one op.
    def draw(k, draws):
      p, d = _momentum_and_directions(transition_seed(k), chains, dim, depth_max, dtype)
      return k + 1, tf.tensor_scatter_nd_update(draws, [[k]], tf.concat([p, d], -1)[None])

    draws = tf.while_loop(lambda k, _: k < rounds, draw,
                          (tf.constant(0), tf.zeros([capacity, chains, dim + depth_max], dtype)))[1]
    leaf_seed = transition_seed(tf.constant(0))
    chain_index = tf.range(chains)

    def next_draws(k):
      """Momentum ``[C, D]`` and directions ``[C, depth]`` of each chain's
      transition ``k_c``."""
      row = tf.gather_nd(draws, tf.stack([tf.minimum(k, capacity - 1), chain_index], -1))
      return row[:, :dim], row[:, dim:]

    def restart(tree, h0, directions, chains_to_restart, k):
      """The chains in ``chains_to_restart`` start transition ``k_c`` from
      their proposal.  Only what a new trajectory reads before writing is
      reset: the cursor, the subtree's sums and the checkpoints are
      overwritten at its first leaf."""
      p0, new_directions = next_draws(k)
      state = tree.proposal
      new_h0 = -state.log_prob + 0.5 * tf.reduce_sum(tf.square(p0), -1)
      end = _Point(state.z, p0, state.grad)
      m = chains_to_restart
      zeros_c = tf.zeros_like(h0)
      reset = lambda new, old: _where(m, new, old)
      tree = tree._replace(
          done=tree.done & ~m, depth=tf.where(m, 0, tree.depth), leaf=tf.where(m, 0, tree.leaf),
          left=reset(end, tree.left), right=reset(end, tree.right),
          energy=tf.where(m, new_h0, tree.energy), log_w=tf.where(m, zeros_c, tree.log_w),
          rho=reset(p0, tree.rho), sum_accept=tf.where(m, zeros_c, tree.sum_accept),
          n_grads=tf.where(m, 0, tree.n_grads), diverging=tree.diverging & ~m)
      return tree, tf.where(m, new_h0, h0), reset(new_directions, directions)

    # Per transition, one row [C, D + 6]: the state, then the statistics
    # (integers and booleans are exact in floating point), and with
    # record_gradients one [C, D] of gradients; a scratch row at ``capacity``
    # takes the writes of unfinished chains.
    p0, directions = next_draws(tf.zeros([chains], tf.int32))
    tree = _new_tree(kstate, p0, depth_max)

    def body(i, k, tree, h0, directions, out, grads):
      tree = _leapfrog_leaf(tree, fn, step_size, directions, h0, _leaf_seed(leaf_seed, i),
                            depth_max, depth_limit)
      finished = tree.done & (k < rounds)
      accept = tree.sum_accept / tf.cast(tf.maximum(tree.n_grads, 1), dtype)
      values = TransitionInfo(accept, tree.diverging, tree.n_grads, tree.depth, tree.energy,
                              tree.proposal.log_prob).statistics()
      row = tf.concat([tree.proposal.z] + [tf.cast(v, dtype)[:, None] for v in values.values()],
                      -1)
      index = tf.stack([tf.where(finished, k, capacity), chain_index], -1)
      out = tf.tensor_scatter_nd_update(out, index, row)
      grads = tf.tensor_scatter_nd_update(grads, tf.stack(
          [tf.where(finished & record_gradients, k, capacity), chain_index], -1), tree.proposal.grad)
      k = k + tf.cast(finished, tf.int32)
      tree, h0, directions = restart(tree, h0, directions, finished & (k < rounds), k)
      return i + 1, k, tree, h0, directions, out, grads

    _, _, tree, _, _, out, grads = tf.while_loop(
        lambda i, k, *_: tf.reduce_any(k < rounds), body,
        (tf.constant(0), tf.zeros([chains], tf.int32), tree, tree.energy, directions,
         tf.zeros([capacity + 1, chains, dim + len(STATISTICS)], dtype),
         tf.zeros([capacity + 1, chains, dim], dtype)))
    out = out[:capacity]
    info = TransitionInfo(*(out[..., dim + j] for j in range(len(STATISTICS))))
    info = info._replace(diverging=info.diverging > 0.5,
                         n_grads=tf.cast(info.n_grads, tf.int32),
                         tree_depth=tf.cast(info.tree_depth, tf.int32))
    states = GradState(out[..., :dim], info.log_prob, grads[:capacity])
    return tree.proposal, states, info


def _momentum_and_directions(seed, chains, dim, depth_max, dtype):
  """A transition's momentum ``p ~ N(0, I)`` ``[C, D]`` and its doubling
  directions ``+-1`` ``[C, depth_max]`` (the signs of ``depth_max`` more
  standard normals), from one random op.

  Each random op of the compiled chunk is a full threefry expansion (about
  a hundred XLA instructions); the chunk's compile time fell by a third when
  a transition's six ops became three (RESULTS section 37).
  """
  x = stateless_normal([chains, dim + depth_max], seed, dtype)
  return x[:, :dim], tf.where(x[:, dim:] < 0., tf.constant(-1., dtype), tf.constant(1., dtype))


def _leaf_seed(seed, i):
  """The seed of the leaf uniforms of leapfrog iteration ``i`` of a
  transition (or round) whose seed is ``seed`` (a pair, already a hash of
  the run's seed and the transition's index): its second word offset by
  ``1 + i``.  As in Random123's counter-based streams, distinct keys give
  independent streams, so no hash op (``stateless_fold_in``) runs per leaf;
  a leaf's key equals another transition's only if the two 32-bit hashes'
  first words collide, with probability ``2^-32`` per pair.
  """
  return seed + tf.stack([tf.zeros_like(i), 1 + i])


def _new_tree(state, p0, depth_max):
  """The one-leaf trajectory at ``state`` (``GradState``) with momentum ``p0``."""
  chains, dim = p0.shape[0], p0.shape[1]
  dtype = p0.dtype
  h0 = -state.log_prob + 0.5 * tf.reduce_sum(tf.square(p0), -1)
  start = _Point(state.z, p0, state.grad)
  zeros_c = tf.zeros([chains], dtype)
  return _Tree(
      done=tf.zeros([chains], tf.bool), depth=tf.zeros([chains], tf.int32),
      leaf=tf.zeros([chains], tf.int32), cursor=start, left=start, right=start,
      proposal=state, energy=h0, log_w=zeros_c, rho=p0,
      sub_proposal=state, sub_energy=h0, sub_log_w=zeros_c, sub_rho=tf.zeros_like(p0),
      ckpt_p=tf.zeros([chains, depth_max, dim], dtype),
      ckpt_rho=tf.zeros([chains, depth_max, dim], dtype),
      ckpt_pp=tf.zeros([chains, depth_max], dtype),
      ckpt_prho=tf.zeros([chains, depth_max], dtype),
      sum_accept=zeros_c, n_grads=tf.zeros([chains], tf.int32),
      diverging=tf.zeros([chains], tf.bool))


def _where(mask, new, old):
  """Per-chain select of two structures of ``[C, ...]`` tensors (``mask``
  reshaped once per rank: each reshape is two more ops to trace)."""
  masks = {1: mask}

  def select(a, b):
    rank = a.shape.rank
    if rank not in masks:
      masks[rank] = _mask(mask, a)
    return tf.where(masks[rank], a, b)

  return tf.nest.map_structure(select, new, old)


def _mask(mask, x):
  """``mask [C]`` reshaped to broadcast against ``x [C, ...]``."""
  return tf.reshape(mask, [-1] + [1] * (x.shape.rank - 1))


def _turning(p_left, p_right, rho):
  """Generalized U-turn criterion over the last axis (any leading shape)."""
  r = rho - 0.5 * (p_left + p_right)
  return (tf.reduce_sum(p_left * r, -1) <= 0.) | (tf.reduce_sum(p_right * r, -1) <= 0.)


def _checkpoint_range(leaf):
  """Checkpoint slots ``[lo, hi]`` that leaf ``n`` of a subtree involves.

  An even leaf stores its momentum (and the running momentum sum) in slot
  ``hi = popcount(n >> 1)``; an odd leaf closes ``t`` nested sub-subtrees,
  ``t`` the number of trailing one bits of ``n``, whose first leaves sit in
  slots ``hi - t + 1 .. hi``.
  """
  popcount = lambda x: tf.cast(tf.raw_ops.PopulationCount(x=x), leaf.dtype)
  hi = popcount(tf.bitwise.right_shift(leaf, 1))
  trailing = popcount(tf.bitwise.bitwise_xor(leaf, leaf + 1)) - 1  # n ^ (n + 1) = 2^(t+1) - 1
  return hi - trailing + 1, hi


def _leapfrog_leaf(tree, fn, step_size, directions, h0, seed, depth_max, depth_limit=None):
  """One leapfrog step of every running chain, and the tree bookkeeping."""
  dtype = h0.dtype
  active = ~tree.done
  first = tree.leaf == 0  # the leaf starts a new subtree
  v = tf.gather(directions, tf.minimum(tree.depth, depth_max - 1), batch_dims=1)
  forward = v > 0.
  end = _where(forward, tree.right, tree.left)
  z, p, grad = _where(first, end, tree.cursor)
  eps = v[:, None] * step_size
  p = p + 0.5 * eps * grad
  z = z + eps * p
  log_prob, grad = tfp.math.value_and_gradient(fn, z)
  p = p + 0.5 * eps * grad
  leaf_point = _Point(z, p, grad)

  energy = -log_prob + 0.5 * tf.reduce_sum(tf.square(p), -1)
  delta = energy - h0
  bad_energy = ~(delta <= MAX_ENERGY_ERROR)  # NaN too
  log_w_leaf = tf.where(bad_energy, tf.constant(-np.inf, dtype), -delta)
  accept_leaf = tf.where(bad_energy, tf.zeros_like(delta), tf.exp(tf.minimum(-delta, 0.)))
  u = stateless_uniform([2, tf.shape(z)[0]], seed, dtype)

  # Progressive uniform sampling inside the subtree.
  sub_log_w_old = tf.where(first, tf.constant(-np.inf, dtype), tree.sub_log_w)
  sub_log_w = tf.experimental.numpy.logaddexp(sub_log_w_old, log_w_leaf)
  take_leaf = first | (tf.math.log(u[0]) < log_w_leaf - sub_log_w)
  sub_proposal = _where(take_leaf, GradState(z, log_prob, grad), tree.sub_proposal)
  sub_energy = tf.where(take_leaf, energy, tree.sub_energy)
  rho_before = tf.where(first[:, None], tf.zeros_like(p), tree.sub_rho)
  sub_rho = rho_before + p

  # Checkpoints, and the U-turns of the sub-subtrees this leaf completes.
  # Sub-subtree k (first leaf momentum a, momentum sum before it b) ends at
  # this leaf (momentum p, subtree sum rho): its sum is S = rho - b and, with
  # r = S - (a + p) / 2,  a.r = a.rho - a.b - a.a/2 - a.p/2  and
  # p.r = p.rho - p.b - p.a/2 - p.p/2, with a.a and a.b stored with the
  # checkpoint: three [C, K] dot products per leaf for all slots at once.
  lo, hi = _checkpoint_range(tree.leaf)
  even = tf.equal(tf.math.floormod(tree.leaf, 2), 0)
  slot = tf.stack([tf.range(tf.shape(hi)[0]), hi], -1)

  def store(ckpt, value):
    return tf.tensor_scatter_nd_update(
        ckpt, slot, tf.where(_mask(even, value), value, tf.gather_nd(ckpt, slot)))

  ckpt_p, ckpt_rho = store(tree.ckpt_p, p), store(tree.ckpt_rho, rho_before)
  ckpt_pp = store(tree.ckpt_pp, tf.reduce_sum(p * p, -1))
  ckpt_prho = store(tree.ckpt_prho, tf.reduce_sum(p * rho_before, -1))
  a_rho = tf.reduce_sum(ckpt_p * sub_rho[:, None], -1)  # [C, K]
  a_p = tf.reduce_sum(ckpt_p * p[:, None], -1)
  b_dot_p = tf.reduce_sum(ckpt_rho * p[:, None], -1)
  a_r = a_rho - ckpt_prho - 0.5 * ckpt_pp - 0.5 * a_p
  p_r = (tf.reduce_sum(p * sub_rho, -1)[:, None] - b_dot_p - 0.5 * a_p
         - 0.5 * tf.reduce_sum(p * p, -1)[:, None])
  slots = tf.range(depth_max)[None]
  checked = (~even)[:, None] & (slots >= lo[:, None]) & (slots <= hi[:, None])
  sub_turning = tf.reduce_any(checked & ((a_r <= 0.) | (p_r <= 0.)), -1)
  sub_bad = bad_energy | sub_turning
  leaf = tree.leaf + 1
  sub_done = sub_bad | tf.equal(leaf, tf.bitwise.left_shift(tf.ones_like(leaf), tree.depth))

  # A finished subtree joins the tree (biased progressive sampling).
  merge = sub_done & ~sub_bad
  take_sub = merge & (tf.math.log(u[1]) < sub_log_w - tree.log_w)
  proposal = _where(take_sub, sub_proposal, tree.proposal)
  tree_energy = tf.where(take_sub, sub_energy, tree.energy)
  log_w = tf.where(merge, tf.experimental.numpy.logaddexp(tree.log_w, sub_log_w), tree.log_w)
  rho = tf.where(merge[:, None], tree.rho + sub_rho, tree.rho)
  left = _where(merge & ~forward, leaf_point, tree.left)
  right = _where(merge & forward, leaf_point, tree.right)
  turning = merge & _turning(left.p, right.p, rho)
  depth = tf.where(sub_done, tree.depth + 1, tree.depth)
  limit = depth_max if depth_limit is None else tf.minimum(depth_limit, depth_max)
  done = sub_bad | turning | (sub_done & (depth >= limit))

  # A finished chain's trajectory state may go on changing (it is never read
  # again); what it reports stays as it was.
  def keep(new, old):
    return _where(active, new, old)

  return _Tree(
      done=tree.done | done, depth=keep(depth, tree.depth), leaf=tf.where(sub_done, 0, leaf),
      cursor=leaf_point, left=left, right=right,
      proposal=keep(proposal, tree.proposal), energy=keep(tree_energy, tree.energy),
      log_w=log_w, rho=rho, sub_proposal=sub_proposal, sub_energy=sub_energy,
      sub_log_w=sub_log_w, sub_rho=sub_rho, ckpt_p=ckpt_p, ckpt_rho=ckpt_rho,
      ckpt_pp=ckpt_pp, ckpt_prho=ckpt_prho,
      sum_accept=tree.sum_accept + tf.where(active, accept_leaf, 0.),
      n_grads=tree.n_grads + tf.cast(active, tf.int32),
      diverging=tree.diverging | (active & bad_energy))
