"""edward_lite's own NUTS kernel against a recursive reference and TFP's.

The posterior checks of every kernel (analytic posteriors, eight schools)
are in test_mcmc.py; here the trajectory itself is checked: for the same
initial momenta and directions, the iterative, chain-batched tree must stop
exactly where the textbook recursive construction (Hoffman & Gelman 2014,
with Betancourt's generalized U-turn criterion) stops.
"""

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.mcmc import base, nuts
from edward_lite.mcmc.base import GradState

from tfp_nuts import TFPNUTS


def test_checkpoint_slots_are_the_subtrees_a_leaf_closes():
  depth_max = 6
  leaves = np.arange(2 ** depth_max)
  lo, hi = nuts._checkpoint_range(tf.constant(leaves, tf.int32))
  for n, a, b in zip(leaves, lo.numpy(), hi.numpy()):
    popcount = lambda k: bin(k).count("1")
    if n % 2 == 0:  # an even leaf stores its momentum in slot hi
      assert b == popcount(n >> 1)
      continue
    # Odd leaf n closes the aligned blocks [n - 2^j + 1, n], j = 1..t, t the
    # trailing ones of n; each block's first (even) leaf stored its slot.
    t = len(bin(n)) - len(bin(n).rstrip("1"))
    slots = sorted(popcount((n - 2 ** j + 1) >> 1) for j in range(1, t + 1))
    assert slots == list(range(a, b + 1)), n


def _reference_trajectory(log_prob, grad, z, p, h, directions, max_depth):
  """Recursive NUTS tree of one chain: (leapfrog steps, depth, diverging)."""
  h0 = -log_prob(z) + 0.5 * p @ p

  def turning(p_a, p_b, rho):
    r = rho - 0.5 * (p_a + p_b)
    return p_a @ r <= 0 or p_b @ r <= 0

  def build(point, v, depth):
    """(ok, far end, momentum sum, steps, diverging, first p, last p)."""
    if depth == 0:
      z, p = point
      p = p + 0.5 * v * h * grad(z)
      z = z + v * h * p
      p = p + 0.5 * v * h * grad(z)
      bad = not (-log_prob(z) + 0.5 * p @ p - h0 <= 1000.)
      return not bad, (z, p), p, 1, bad, p, p
    ok, far, rho, n, bad, first, last = build(point, v, depth - 1)
    if not ok:
      return False, far, rho, n, bad, first, last
    ok, far, rho2, n2, bad, _, last = build(far, v, depth - 1)
    if not ok:
      return False, far, rho, n + n2, bad, first, last
    rho = rho + rho2
    return not turning(first, last, rho), far, rho, n + n2, False, first, last

  left = right = (z, p)
  rho, steps = p.copy(), 0
  for depth in range(max_depth):
    v = directions[depth]
    ok, far, sub_rho, n, bad, _, _ = build(right if v > 0 else left, v, depth)
    steps += n
    if not ok:
      return steps, depth + 1, bad
    if v > 0:
      right = far
    else:
      left = far
    rho = rho + sub_rho
    if turning(left[1], right[1], rho):
      return steps, depth + 1, False
  return steps, max_depth, False


PRECISION = np.linalg.inv(np.array([[1., .8, 0.], [.8, 1., .3], [0., .3, 2.]]))


@pytest.mark.parametrize("case", ["gaussian", "stiff"])
def test_tree_sizes_equal_the_recursive_construction(case):
  """Per chain: leapfrog steps, depth and divergence equal the reference's."""
  chains, dim, max_depth = 24, 3, 8
  if case == "gaussian":
    h, shift = 0.25, 0.
    log_prob_np = lambda z: -0.5 * z @ PRECISION @ z
    grad_np = lambda z: -PRECISION @ z
    fn = lambda z: -0.5 * tf.einsum("cd,de,ce->c", z, tf.constant(PRECISION), z)
  else:  # exp(4 z) walls: steps toward them diverge
    h, shift = 0.1, -0.5
    log_prob_np = lambda z: -np.sum(np.exp(4. * z) + 0.5 * z ** 2)
    grad_np = lambda z: -(4. * np.exp(4. * z) + z)
    fn = lambda z: -tf.reduce_sum(tf.exp(4. * z) + 0.5 * z ** 2, -1)
  rng = np.random.default_rng(0)
  z0 = rng.normal(size=(chains, dim)) + shift
  kernel = ed.mcmc.NUTS(max_tree_depth=max_depth)
  seed = tf.constant([3, 4], tf.int32)

  @tf.function
  def one_step(z):
    with base.random_algorithm("philox"):
      state = kernel.init(z, fn, h)
      new, info = kernel.one_step(state, tf.constant([[h]], tf.float64), seed, fn)
      # The kernel's initial momenta and directions, drawn as it draws them.
      p0, directions = nuts._momentum_and_directions(seed, chains, dim, max_depth, z.dtype)
    return new, info, p0, directions

  new, info, p0, directions = one_step(tf.constant(z0))
  expected = [_reference_trajectory(log_prob_np, grad_np, z0[c], p0.numpy()[c], h,
                                    directions.numpy()[c], max_depth) for c in range(chains)]
  steps, depth, diverging = map(np.array, zip(*expected))
  np.testing.assert_array_equal(info.n_grads.numpy(), steps)
  np.testing.assert_array_equal(info.tree_depth.numpy(), depth)
  np.testing.assert_array_equal(info.diverging.numpy(), diverging)
  assert len(set(steps)) > 3  # the chains' trees differ: lockstep is exercised
  if case == "stiff":
    assert 0 < diverging.sum() < chains
  # The new state is a point of each trajectory, with its density and gradient.
  np.testing.assert_allclose(new.log_prob.numpy(), fn(new.z).numpy(), rtol=1e-12)
  assert np.all(np.isfinite(new.z.numpy()))
  accept = info.accept_prob.numpy()
  assert np.all((accept >= 0) & (accept <= 1))


@pytest.mark.parametrize("case", ["gaussian", "stiff"])
def test_rounds_run_each_chains_trajectories_without_waiting(case):
  """``run_rounds``: transition k of each chain starts where its transition
  k - 1 ended, with transition k's momenta and directions, and its tree
  equals the recursive reference; the loop takes as many leapfrog
  iterations as the busiest chain needs (no chain waits for another)."""
  chains, dim, max_depth, rounds = 24, 3, 8, 5
  if case == "gaussian":
    h, shift = 0.25, 0.
    log_prob_np = lambda z: -0.5 * z @ PRECISION @ z
    grad_np = lambda z: -PRECISION @ z
    density = lambda z: -0.5 * tf.einsum("cd,de,ce->c", z, tf.constant(PRECISION), z)
  else:
    h, shift = 0.1, -0.5
    log_prob_np = lambda z: -np.sum(np.exp(4. * z) + 0.5 * z ** 2)
    grad_np = lambda z: -(4. * np.exp(4. * z) + z)
    density = lambda z: -tf.reduce_sum(tf.exp(4. * z) + 0.5 * z ** 2, -1)
  calls = tf.Variable(0)

  def fn(z):
    calls.assign_add(1)
    return density(z)

  z0 = np.random.default_rng(1).normal(size=(chains, dim)) + shift
  kernel = ed.mcmc.NUTS(max_tree_depth=max_depth)
  seed = tf.constant([5, 6], tf.int32)
  transition_seed = lambda k: tf.random.experimental.stateless_fold_in(seed, k)

  @tf.function
  def run(z):
    with base.random_algorithm("philox"):
      state = kernel.init(z, fn, h)
      calls.assign(0)
      new, zs, info = kernel.run_rounds(state, tf.constant([[h]], tf.float64), transition_seed,
                                        tf.constant(rounds), rounds + 2, fn)
      draws = []
      for k in range(rounds):
        draws.append(nuts._momentum_and_directions(transition_seed(tf.constant(k)), chains, dim,
                                                   max_depth, z.dtype))
    return new, zs, info, draws

  new, states, info, draws = run(tf.constant(z0))
  zs, info = states.z.numpy(), tf.nest.map_structure(lambda v: v.numpy(), info)
  # Each transition's state comes with its log density and gradient.
  for k in range(rounds):
    np.testing.assert_allclose(states.log_prob[k].numpy(), [log_prob_np(z) for z in zs[k]],
                               rtol=1e-10)
    np.testing.assert_allclose(states.grad[k].numpy(), [grad_np(z) for z in zs[k]], rtol=1e-10)
  starts = [z0] + [zs[k] for k in range(rounds - 1)]
  for k in range(rounds):
    p0, directions = (x.numpy() for x in draws[k])
    expected = [_reference_trajectory(log_prob_np, grad_np, starts[k][c], p0[c], h,
                                      directions[c], max_depth) for c in range(chains)]
    steps, depth, diverging = map(np.array, zip(*expected))
    np.testing.assert_array_equal(info.n_grads[k], steps, err_msg=f"transition {k}")
    np.testing.assert_array_equal(info.tree_depth[k], depth)
    np.testing.assert_array_equal(info.diverging[k], diverging)
  np.testing.assert_array_equal(zs[rounds - 1], new.z.numpy())

  # A round of one transition is the lockstep transition, bit for bit.
  @tf.function
  def one_round_and_one_step(z):
    with base.random_algorithm("philox"):
      state = kernel.init(z, density, h)
      step = tf.constant([[h]], tf.float64)
      a, za, info_a = kernel.run_rounds(state, step, transition_seed, tf.constant(1), 1, density)
      b, info_b = kernel.one_step(state, step, transition_seed(tf.constant(0)), density)
    return a, za.z[0], tf.nest.map_structure(lambda v: v[0], info_a), b, info_b

  a, za, info_a, b, info_b = one_round_and_one_step(tf.constant(z0))
  np.testing.assert_array_equal(za, b.z.numpy())
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    np.testing.assert_array_equal(x, y)
  for key, value in info_b.statistics().items():
    np.testing.assert_array_equal(getattr(info_a, key), value, err_msg=key)
  per_chain = info.n_grads[:rounds].sum(0)
  assert int(calls.numpy()) == per_chain.max()
  lockstep = info.n_grads[:rounds].max(1).sum()  # each transition waits for its longest
  assert per_chain.max() < lockstep, (per_chain.max(), lockstep)
  if case == "stiff":
    assert 0 < info.diverging[:rounds].sum()


def test_a_depth_limit_stops_rounds_trajectories_as_a_lower_max_tree_depth():
  """``run_rounds(depth_limit=d)`` (early warmup with many chains) builds the
  trees of the recursive reference with ``max_depth = d``."""
  chains, dim, max_depth, limit = 24, 3, 8, 2
  h = 0.05  # short steps: most trees would grow past the limit
  log_prob_np = lambda z: -0.5 * z @ PRECISION @ z
  grad_np = lambda z: -PRECISION @ z
  fn = lambda z: -0.5 * tf.einsum("cd,de,ce->c", z, tf.constant(PRECISION), z)
  z0 = np.random.default_rng(2).normal(size=(chains, dim))
  kernel = ed.mcmc.NUTS(max_tree_depth=max_depth)
  seed = tf.constant([7, 8], tf.int32)
  transition_seed = lambda k: tf.random.experimental.stateless_fold_in(seed, k)

  @tf.function
  def run(z):
    with base.random_algorithm("philox"):
      state = kernel.init(z, fn, h)
      _, _, info = kernel.run_rounds(state, tf.constant([[h]], tf.float64), transition_seed,
                                     tf.constant(1), 1, fn, depth_limit=tf.constant(limit))
      p0, directions = nuts._momentum_and_directions(transition_seed(tf.constant(0)), chains,
                                                     dim, max_depth, z.dtype)
    return info, p0, directions

  info, p0, directions = run(tf.constant(z0))
  expected = [_reference_trajectory(log_prob_np, grad_np, z0[c], p0.numpy()[c], h,
                                    directions.numpy()[c], limit) for c in range(chains)]
  steps, depth, _ = map(np.array, zip(*expected))
  np.testing.assert_array_equal(info.n_grads.numpy()[0], steps)
  np.testing.assert_array_equal(info.tree_depth.numpy()[0], depth)
  assert (depth == limit).sum() > chains // 2  # the limit stopped most trees


def test_max_tree_depth_caps_the_trajectory():
  fn = lambda z: -0.5 * tf.reduce_sum(z ** 2, -1)
  kernel = ed.mcmc.NUTS(max_tree_depth=2)
  z = tf.zeros([16, 2], tf.float64) + 0.1
  with base.random_algorithm("philox"):
    state = kernel.init(z, fn, 0.01)
    _, info = kernel.one_step(state, tf.constant([[0.01]], tf.float64),
                              tf.constant([1, 2]), fn)
  # A step size of 0.01 never turns within 3 steps: every tree is full.
  np.testing.assert_array_equal(info.n_grads.numpy(), 3)
  np.testing.assert_array_equal(info.tree_depth.numpy(), 2)


@pytest.mark.slow
def test_own_and_tfp_nuts_agree_in_distribution():
  """Both implementations under the same sampler: a correlated Gaussian's
  moments agree within Monte Carlo error, and so do their mean tree sizes."""
  cov = np.array([[1., 1.8], [1.8, 4.]], np.float32)

  def model():
    return ed.MultivariateNormalTriL(loc=[1., -2.], scale_tril=np.linalg.cholesky(cov), name="x")

  runs = {impl: ed.mcmc.sample(model, kernel=kernel, chains=8,
                               warmup=300, draws=500, seed=2, progress=False)
          for impl, kernel in (("edward_lite", ed.mcmc.NUTS()), ("tfp", TFPNUTS()))}
  x = {k: r.draws["x"].astype(np.float64) for k, r in runs.items()}
  from edward_lite.analysis import diagnostics
  ess = {k: np.asarray(diagnostics.ess_bulk(v)) for k, v in x.items()}
  mcse = {k: np.sqrt(np.diag(cov)) / np.sqrt(ess[k]) for k in x}
  diff = np.abs(x["edward_lite"].mean((0, 1)) - x["tfp"].mean((0, 1)))
  assert np.all(diff < 5 * np.hypot(mcse["edward_lite"], mcse["tfp"])), diff
  grads = {k: r.sample_stats["num_gradients"].mean() for k, r in runs.items()}
  assert abs(grads["edward_lite"] / grads["tfp"] - 1) < 0.25, grads


def test_nuts_state_is_a_grad_state():
  assert isinstance(ed.mcmc.NUTS().init(tf.zeros([2, 1]), lambda z: -tf.reduce_sum(z ** 2, -1),
                                        0.1), GradState)


def test_random_algorithm_is_chosen_per_thread():
  # Chain groups trace their programs from a thread pool: one thread's choice
  # must not reach a trace running in another, nor outlive its block.
  import threading  # pylint: disable=g-import-not-at-top
  seen = {}
  inside, leave = threading.Event(), threading.Event()

  def other():
    with base.random_algorithm("philox"):
      seen["other"] = base._algorithm()  # pylint: disable=protected-access
      inside.set()
      leave.wait(10)

  thread = threading.Thread(target=other)
  thread.start()
  inside.wait(10)
  seen["main while other is inside"] = base._algorithm()  # pylint: disable=protected-access
  leave.set()
  thread.join()
  with base.random_algorithm("philox"):
    with base.random_algorithm("threefry"):
      seen["nested"] = base._algorithm()  # pylint: disable=protected-access
    seen["restored"] = base._algorithm()  # pylint: disable=protected-access
  assert seen == {"other": "philox", "main while other is inside": "threefry",
                  "nested": "threefry", "restored": "philox"}


def test_transition_info_names_its_statistics_and_their_dtypes_once():
  assert tuple(base.TransitionInfo.dtypes(tf.float64)) == base.STATISTICS
  assert base.STATISTICS == ("accept_prob", "diverging", "n_grads", "tree_depth", "energy",
                             "log_prob")
