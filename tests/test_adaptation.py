"""Warmup adaptation pieces against hand computations and Stan's schedule."""

import math

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.mcmc import adaptation, metric_update, restarts, schedule


def test_dual_averaging_matches_hand_computed_steps():
  # Hoffman & Gelman (2014), Algorithm 5, in plain Python floats.
  eps0, delta, accepts = 0.5, 0.8, [0.3, 0.95, 0.6, 1.0, 0.85]
  mu, h_bar, x_bar, expected = math.log(10 * eps0), 0., math.log(eps0), []
  for t, a in enumerate(accepts, start=1):
    h_bar = (1 - 1 / (t + 10)) * h_bar + (delta - a) / (t + 10)
    x = mu - math.sqrt(t) / 0.05 * h_bar
    x_bar = t ** -0.75 * x + (1 - t ** -0.75) * x_bar
    expected.append((x, x_bar))
  state = adaptation.dual_averaging_init(tf.constant([eps0], tf.float64))
  for (x, x_bar), a in zip(expected, accepts):
    state = adaptation.dual_averaging_update(state, tf.constant([a], tf.float64), delta)
    np.testing.assert_allclose(state.log_step.numpy(), [x], rtol=1e-12)
    np.testing.assert_allclose(state.log_step_bar.numpy(), [x_bar], rtol=1e-12)


def test_dual_averaging_finds_the_step_size_of_the_target_acceptance():
  # Acceptance exp(-eps) per chain: the fixed point is eps* = -log(delta).
  state = adaptation.dual_averaging_init(tf.constant([0.01, 1., 5.], tf.float64))
  for _ in range(3000):
    state = adaptation.dual_averaging_update(state, tf.exp(-tf.exp(state.log_step)), 0.8)
  np.testing.assert_allclose(np.exp(state.log_step_bar.numpy()), -np.log(0.8), rtol=0.02)
  # A non-finite acceptance counts as zero: the step size shrinks.
  after = adaptation.dual_averaging_update(state, tf.constant([np.nan] * 3, tf.float64), 0.8)
  assert np.all(after.log_step.numpy() < state.log_step.numpy())


@pytest.mark.parametrize("dense", [False, True])
def test_welford_matches_numpy(dense):
  x = np.random.default_rng(0).normal(size=(40, 3, 4)) * [1., 2., 3., 0.5]  # [n, C, D]
  state = adaptation.welford_init([3, 4], tf.float64, dense=dense)
  for draw in x:
    state = adaptation.welford_update(state, tf.constant(draw))
  n, total = 40, 120
  shrink = lambda v, m: m / (m + 5.) * v + 1e-3 * 5. / (m + 5.)  # pylint: disable=unnecessary-lambda-assignment
  if dense:
    cov = np.cov(x.reshape(-1, 4), rowvar=False)
    np.testing.assert_allclose(adaptation.welford_covariance(state).numpy(),
                               total / (total + 5.) * cov + 1e-3 * 5. / (total + 5.) * np.eye(4),
                               rtol=1e-10)
    return
  np.testing.assert_allclose(adaptation.welford_variance(state, pooled=False).numpy(),
                             shrink(x.var(axis=0, ddof=1), n), rtol=1e-10)
  np.testing.assert_allclose(adaptation.welford_variance(state, pooled=True).numpy()[0],
                             shrink(x.reshape(-1, 4).var(axis=0, ddof=1), total), rtol=1e-10)
  np.testing.assert_allclose(
      adaptation.welford_variance(state, pooled=False, regularize=False).numpy(),
      x.var(axis=0, ddof=1), rtol=1e-10)


def _window(x, dense):
  """Welford moments of the draws ``x [n, C, D]``."""
  state = adaptation.welford_init(x.shape[1:], tf.float64, dense=dense)
  for draw in x:
    state = adaptation.welford_update(state, tf.constant(draw))
  return state


def test_dense_moments_of_two_windows_pool_every_chain_and_draw():
  """The metric's covariance from this window's and the previous one's
  moments -- per-chain means and variances and one sum of outer products
  over the chains -- is the population covariance of all their draws; the
  per-chain variances are each chain's over both windows."""
  rng = np.random.default_rng(2)
  mix = np.array([[1., 0., 0.], [0.8, 0.6, 0.], [0., -0.5, 2.]])
  first = rng.normal(size=(30, 5, 3)) @ mix.T + rng.normal(size=(1, 5, 3))  # [n, C, D]
  second = rng.normal(size=(50, 5, 3)) @ mix.T + 0.3
  groups = metric_update._groups(_window(second, True), _window(first, True))  # pylint: disable=protected-access
  total, cov, chain_var = metric_update._combine(groups)  # pylint: disable=protected-access
  both = np.concatenate([first, second])
  assert total == 80
  np.testing.assert_allclose(cov, np.cov(both.reshape(-1, 3), rowvar=False, bias=True),
                             rtol=1e-10)
  np.testing.assert_allclose(chain_var, both.var(axis=0), rtol=1e-10)
  # Diagonal moments give the variances alone, the same.
  _, var, _ = metric_update._combine(metric_update._groups(_window(second, False),  # pylint: disable=protected-access
                                                           _window(first, False)))
  np.testing.assert_allclose(var, np.diag(cov), rtol=1e-10)


@pytest.mark.parametrize("dense", [False, True])
def test_moved_chains_take_their_donors_moments(dense):
  """A stuck chain continues from a donor with the donor's moments.  The
  dense state sums the chains' outer products, so its sum is rescaled: its
  diagonal is the moved chains' summed variances and its correlations stay."""
  rng = np.random.default_rng(3)
  x = rng.normal(size=(40, 4, 3)) @ np.array([[1., 0., 0.], [0.9, 0.4, 0.], [0., 0., 3.]]).T
  x[:, 2] *= 0.01  # chain 2 barely moves
  source = np.array([0, 1, 3, 3])
  state = _window(x, dense)
  moments = adaptation.MetricMoments(state, state)
  moved = restarts._moved(moments, source).draws  # pylint: disable=protected-access
  want = _window(x[:, source], dense)
  np.testing.assert_allclose(moved.mean, want.mean, rtol=1e-12)
  np.testing.assert_allclose(moved.m2, want.m2, rtol=1e-12)
  if dense:
    np.testing.assert_allclose(np.diag(moved.scatter), np.diag(want.scatter), rtol=1e-10)
    corr = lambda s: s / np.sqrt(np.outer(np.diag(s), np.diag(s)))  # pylint: disable=unnecessary-lambda-assignment
    np.testing.assert_allclose(corr(moved.scatter.numpy()), corr(state.scatter.numpy()),
                               rtol=1e-10)


@pytest.mark.parametrize("warmup, windows", [
    # Stan's defaults (init_buffer 75, window 25, term_buffer 50): slow
    # windows end at 100, 150, 250, 450 and 950 for 1000 warmup iterations.
    (1000, [(75, 100), (100, 150), (150, 250), (250, 450), (450, 950)]),
    (500, [(75, 100), (100, 150), (150, 250), (250, 450)]),
    (150, [(75, 100)]),
    # Too short for the defaults: 15% / 75% / 10%, as Stan prints it.
    (100, [(15, 90)]),
    (19, []),
])
def test_warmup_windows_follow_stan(warmup, windows):
  assert schedule.warmup_windows(warmup) == windows


def test_the_schedule_tiles_the_run_with_stans_phases():
  Phase = schedule.Phase
  run = schedule.build_schedule(500, 300, adapt_metric=True, bulk=True)
  assert run == [Phase(0, 75, True, False, False, False),     # initial fast window
                 Phase(75, 100, True, True, True, True, True, late=True),   # slow windows:
                 Phase(100, 150, True, True, True, True, True, late=True),  # moments collected,
                 Phase(150, 250, True, True, True, True, True, late=True),  # metric estimated,
                 Phase(250, 450, True, True, True, True, True, late=True),  # step size restarted
                 Phase(450, 500, True, False, True, False),   # final fast window
                 Phase(500, 800, False, False, False, False)]  # sampling
  assert schedule.phase_at(run, 449) == run[4] and schedule.phase_at(run, 450) == run[5]
  with pytest.raises(ValueError, match="outside the run"):
    schedule.phase_at(run, 800)
  # Without the bulk no phase shares; without metric adaptation (or with
  # warmup too short for a window) warmup is one phase; no warmup, none.
  assert not any(p.share for p in schedule.build_schedule(500, 300, bulk=False))
  for run in (schedule.build_schedule(500, 300, adapt_metric=False, bulk=True),
              schedule.build_schedule(19, 300, bulk=True)):
    assert [p[:2] for p in run] == [(0, run[0].end), (run[0].end, run[0].end + 300)]
    assert not run[0].collect and not run[0].share and not run[0].end_window
  assert schedule.build_schedule(0, 300) == [Phase(0, 300, False, False, False, False)]


def test_the_bulk_is_the_chains_near_the_median_acceptance_deficit():
  deficit = tf.constant([[0.], [0.01], [0.7], [0.02]], tf.float64)
  bulk, median_chain = adaptation.bulk_chains(deficit)
  assert bulk.numpy()[:, 0].tolist() == [True, True, False, True]
  assert int(median_chain) == 1
  bulk, _ = adaptation.bulk_chains(tf.constant([[0.], [0.2], [-0.2], [0.05]], tf.float64))
  assert bulk.numpy().all()


def _values(rng, chains, kind):
  if kind == 0:  # spread over 60 orders of magnitude
    return rng.normal(size=chains) * 10.0**rng.integers(-30, 30, chains)
  if kind == 1:  # many ties
    return rng.integers(-3, 3, chains).astype(float)
  return rng.choice([0., -0., np.inf, -np.inf, 1.5, -2.], chains)  # signed zeros, infinities


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_the_median_chain_is_argsorts_without_the_sort(dtype):
  # bulk_chains' median chain by bisection on the floats' order-preserving
  # integer keys equals tf.argsort's (ties in index order).  Any number of
  # chains in one graph; compiled with XLA, as in the chunk, for a few.
  rng = np.random.default_rng(0)
  graph = tf.function(adaptation.order_statistic_index, input_signature=[
      tf.TensorSpec([None], dtype), tf.TensorSpec([], tf.int32)])
  compiled = tf.function(adaptation.order_statistic_index, jit_compile=True)
  runs = [(graph, int(rng.integers(1, 400)), t % 3) for t in range(60)]
  runs += [(compiled, chains, kind) for chains in (1, 1000) for kind in range(3)]
  for select, chains, kind in runs:
    x = tf.constant(_values(rng, chains, kind), dtype)
    for rank in {0, (chains - 1) // 2, chains - 1}:
      assert int(select(x, tf.constant(rank))) == int(tf.argsort(x)[rank]), (chains, kind, rank)


def test_the_shared_bulk_state_is_dual_averaging_on_the_harmonic_mean_acceptance():
  # Five chains whose acceptances stay near each other: with ``share`` every
  # chain holds the state of one dual averaging fed the harmonic mean of
  # their acceptances (floored at ACCEPT_FLOOR).  A sixth chain that accepts
  # nothing leaves the bulk after a few iterations and then runs its own
  # dual averaging on its own acceptance, from the shared state it left.
  floor = adaptation.ACCEPT_FLOOR

  def harmonic_mean(a):
    return (1. / np.mean(1. / np.maximum(a, floor)))[None, None]

  rng = np.random.default_rng(0)
  accepts = np.concatenate([rng.uniform(0.6, 1., (40, 5)), np.zeros((40, 1))], axis=1)
  state = adaptation.dual_averaging_init(tf.fill([6, 1], tf.constant(0.3, tf.float64)))
  pooled = adaptation.dual_averaging_init(tf.fill([1, 1], tf.constant(0.3, tf.float64)))
  alone, left = None, None
  for t, a in enumerate(accepts):
    bulk, _ = adaptation.bulk_chains(state.deficit * 0.9 + 0.1 * (0.8 - a[:, None]))
    state = adaptation.step_size_update(state, tf.constant(a), 0.8, tf.constant(True))
    assert bulk.numpy()[:5].all()
    if bulk.numpy()[5]:
      pooled = adaptation.dual_averaging_update(pooled, tf.constant(harmonic_mean(a)), 0.8)
    else:
      if left is None:  # the outlier starts from the shared state it left
        left = t
        alone = adaptation.dual_averaging_update(pooled, tf.constant([[0.]], tf.float64), 0.8)
      else:
        alone = adaptation.dual_averaging_update(alone, tf.constant([[0.]], tf.float64), 0.8)
      pooled = adaptation.dual_averaging_update(pooled, tf.constant(harmonic_mean(a[:5])), 0.8)
      np.testing.assert_allclose(state.log_step.numpy()[5], alone.log_step.numpy()[0],
                                 rtol=1e-12)
    np.testing.assert_allclose(state.log_step.numpy()[:5],
                               np.broadcast_to(pooled.log_step.numpy(), [5, 1]), rtol=1e-12)
    np.testing.assert_allclose(state.log_step_bar.numpy()[:5],
                               np.broadcast_to(pooled.log_step_bar.numpy(), [5, 1]), rtol=1e-12)
  assert 1 <= left <= 5
  # Without ``share`` every chain runs its own dual averaging.
  state = adaptation.dual_averaging_init(tf.fill([6, 1], tf.constant(0.3, tf.float64)))
  own = adaptation.dual_averaging_init(tf.fill([6, 1], tf.constant(0.3, tf.float64)))
  for a in accepts[:5]:
    state = adaptation.step_size_update(state, tf.constant(a), 0.8, tf.constant(False))
    own = adaptation.dual_averaging_update(own, tf.constant(a[:, None]), 0.8)
  np.testing.assert_allclose(state.log_step.numpy(), own.log_step.numpy(), rtol=1e-12)


def test_power_mean_of_floored_acceptances_over_a_round():
  """Warmup in rounds feeds each chain's power mean over the round's
  transitions (rows past the round weighted 0): harmonic and geometric
  means computed by hand, every value floored at ``ACCEPT_FLOOR``."""
  a = np.array([[0.9, 0.5], [0.6, 0.01], [0.3, 0.2]])  # [R = 3 rows, C = 2]
  w = np.array([[1.], [1.], [0.]])                     # a round of 2, broadcast over chains
  floored = np.maximum(a[:2], adaptation.ACCEPT_FLOOR)
  harmonic = adaptation.power_mean(tf.constant(a), tf.constant(w), -1., axis=0)
  np.testing.assert_allclose(harmonic, 2. / (1. / floored).sum(0), rtol=1e-12)
  geometric = adaptation.power_mean(tf.constant(a), tf.constant(w), 0, axis=0)
  np.testing.assert_allclose(geometric, np.sqrt(floored.prod(0)), rtol=1e-12)


def test_random_walk_bulk_is_tuned_on_the_geometric_mean_acceptance():
  # A random walk's acceptance probabilities spread over [0, 1] on any
  # posterior; RWMH's bulk uses the geometric mean (power 0), the gradient
  # kernels the harmonic mean.
  assert ed.mcmc.RWMH().bulk_accept_power == 0. and ed.mcmc.NUTS().bulk_accept_power == -1.
  a = np.array([0.05, 0.3, 0.6, 0.9, 0.45])
  state = adaptation.dual_averaging_init(tf.fill([5, 1], tf.constant(0.3, tf.float64)))
  shared = adaptation.step_size_update(state, tf.constant(a), 0.234, tf.constant(True), power=0.)
  pooled = adaptation.dual_averaging_update(
      adaptation.dual_averaging_init(tf.fill([1, 1], tf.constant(0.3, tf.float64))),
      tf.constant(np.exp(np.mean(np.log(a)))[None, None]), 0.234)
  np.testing.assert_allclose(shared.log_step.numpy(),
                             np.broadcast_to(pooled.log_step.numpy(), [5, 1]), rtol=1e-12)
