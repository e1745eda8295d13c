"""The metric from draws and gradients (issue 29): estimators against exact
answers, the low-rank transform against the dense matrix it stands for, the
short-window schedule, and the adaptive warmup on posteriors with known
answers."""

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.mcmc import fisher_metric, metric, metric_update, schedule


def _gaussian(dim, seed, n):
  """Draws of N(m, S) and their gradients ``-S^{-1} (u - m)``."""
  rng = np.random.default_rng(seed)
  root = rng.normal(size=(dim, dim)) * rng.uniform(0.1, 10., size=dim)
  cov = root @ root.T + 0.1 * np.eye(dim)
  u = rng.multivariate_normal(np.full(dim, 5.), cov, size=n)
  grads = -(u - 5.) @ np.linalg.inv(cov)
  return cov, u, grads


def _pop_cov(x):
  return np.cov(x.T, bias=True)


def test_spd_geometric_mean_solves_m_b_m_equals_a():
  rng = np.random.default_rng(0)
  a, b = (x @ x.T + np.eye(4) for x in rng.normal(size=(2, 4, 4)))
  m = fisher_metric.spd_geometric_mean(a, b)
  np.testing.assert_allclose(m @ b @ m, a, rtol=1e-9, atol=1e-9)
  assert np.all(np.linalg.eigvalsh(m) > 0)
  # Diagonal matrices: the elementwise geometric mean of a and 1/b.
  m = fisher_metric.spd_geometric_mean(np.diag([1., 4., 8.]), np.diag([1., 1., .5]))
  np.testing.assert_allclose(m, np.diag([1., 2., 4.]), atol=1e-12)


@pytest.mark.parametrize("n", [8, 50])
def test_low_rank_with_every_eigenpair_recovers_a_gaussian_covariance(n):
  """For N(m, S) the Fisher-divergence metric is S exactly from any n >= D
  draws (the draws' covariance alone is off by its sampling error)."""
  cov, u, grads = _gaussian(6, seed=n, n=n)
  s, basis, lam = fisher_metric.low_rank(_pop_cov(u), _pop_cov(grads), n, 6, gamma=1e-12,
                                         cutoff=1.)
  a = np.diag(s) @ (np.eye(6) + (basis * (np.sqrt(lam) - 1.)) @ basis.T)
  np.testing.assert_allclose(a @ a.T, cov, rtol=1e-6, atol=1e-6 * np.abs(cov).max())
  assert np.abs(_pop_cov(u) - cov).max() > 1e-3 * np.abs(cov).max()  # draws alone are not


def test_low_rank_with_many_pooled_draws_keeps_the_full_eigenvalues():
  """The regularization fades as draws accumulate: with the default gamma
  and the pooled count of 1000 chains' window (10^5 draws), a direction 50
  times as wide as the rest keeps its eigenvalue 50 (it came out near
  sqrt(50) when the covariances were divided by n gamma instead)."""
  rng = np.random.default_rng(2)
  v = rng.normal(size=4)
  v /= np.linalg.norm(v)
  cov = np.eye(4) + 49. * np.outer(v, v)
  n = 100_000
  u = rng.multivariate_normal(np.zeros(4), cov, size=n)
  grads = -u @ np.linalg.inv(cov)
  s, basis, lam = fisher_metric.low_rank(_pop_cov(u), _pop_cov(grads), n, 4, cutoff=1.)
  a = np.diag(s) @ (np.eye(4) + (basis * (np.sqrt(lam) - 1.)) @ basis.T)
  root_inv = np.linalg.inv(np.linalg.cholesky(cov))
  ratio = np.linalg.eigvalsh(root_inv @ a @ a.T @ root_inv.T)
  np.testing.assert_allclose(ratio, 1., rtol=0.02)


def test_low_rank_is_within_the_cutoff_of_the_covariance_in_every_direction():
  """Eigenvalues of the rescaled estimate inside [1/2, 2] are set to 1, so
  the metric is the covariance up to a factor 2 in every direction, with
  few columns: a Gaussian isotropic but for one direction 9 times as wide."""
  rng = np.random.default_rng(1)
  v = rng.normal(size=5)
  v /= np.linalg.norm(v)
  cov = np.eye(5) + 8. * np.outer(v, v)
  u = rng.multivariate_normal(np.zeros(5), cov, size=400)
  grads = -u @ np.linalg.inv(cov)
  s, basis, lam = fisher_metric.low_rank(_pop_cov(u), _pop_cov(grads), 400, 5)
  assert 1 <= (lam != 1.).sum() <= 2
  a = np.diag(s) @ (np.eye(5) + (basis * (np.sqrt(lam) - 1.)) @ basis.T)
  root_inv = np.linalg.inv(np.linalg.cholesky(cov))
  ratio = np.linalg.eigvalsh(root_inv @ a @ a.T @ root_inv.T)
  assert ratio.min() >= 0.5 - 1e-9 and ratio.max() <= 2. + 1e-9, ratio
  # The diagonal alone is off by a factor 3 or more along v.
  d = np.diag(s**2)
  assert np.linalg.eigvalsh(root_inv @ d @ root_inv.T).min() < 1. / 3.


def test_diagonal_scale_is_the_geometric_mean_of_draw_and_inverse_gradient_variances():
  s = fisher_metric.diagonal_scale([4., 9., 0.], [1., 1. / 9., 2.])
  np.testing.assert_allclose(s**2, [2., 9., 1.])  # a coordinate that never moved: 1


def test_disagreement_is_one_for_a_gaussian_and_large_where_curvature_varies():
  # Near 1 for a Gaussian, up to the sampling error of the draws' variance
  # along each direction (a product of two such factors, 1 +- 2 sqrt(2 / n)).
  _, u, grads = _gaussian(4, seed=3, n=20000)
  s, basis, _ = fisher_metric.low_rank(_pop_cov(u), _pop_cov(grads), 20000, 4, cutoff=1.)
  assert fisher_metric.disagreement(_pop_cov(u), _pop_cov(grads), s, basis) < 1.1
  # A scale mixture (a funnel's neck and mouth) in the first coordinate:
  # Var x = (0.2^2 + 5^2) / 2 and Var g = (0.2^-2 + 5^-2) / 2, whose product
  # is about 157, not 1.
  rng = np.random.default_rng(4)
  width = np.stack([np.where(rng.uniform(size=2000) < 0.5, 0.2, 5.), np.ones(2000)], 1)
  x = rng.normal(size=(2000, 2)) * width
  g = -x / width**2
  s, basis, _ = fisher_metric.low_rank(_pop_cov(x), _pop_cov(g), 2000, 2, cutoff=1.)
  assert fisher_metric.disagreement(_pop_cov(x), _pop_cov(g), s, basis) > 4.


def _metric(dim, rank, seed=0):
  rng = np.random.default_rng(seed)
  basis = np.linalg.qr(rng.normal(size=(dim, dim)))[0][:, :rank]
  root = rng.uniform(0.2, 3., size=rank)
  scale = rng.uniform(0.5, 2., size=(1, dim))
  return metric.Metric(tf.constant(scale), tf.constant(basis), tf.constant(root))


def test_the_low_rank_metric_is_the_affine_map_it_describes():
  m = _metric(5, 2)
  s, v, r = (t.numpy() for t in m)
  a = np.diag(s[0]) @ (np.eye(5) + (v * (r - 1.)) @ v.T)
  z = np.random.default_rng(1).normal(size=(3, 5))
  u = metric.to_u(tf.constant(z), m).numpy()
  np.testing.assert_allclose(u, z @ a.T, rtol=1e-12)
  np.testing.assert_allclose(metric.to_z(tf.constant(u), m).numpy(), z, rtol=1e-10)
  np.testing.assert_allclose(metric.inverse_metric(m), a @ a.T, rtol=1e-12)
  # The gradient in u of f(u) = -|B u|^2 / 2 from the gradient in z of f(A z).
  b = np.random.default_rng(2).normal(size=(5, 5))
  grad_u = -(u @ b.T) @ b
  grad_z = grad_u @ a
  np.testing.assert_allclose(metric.grad_to_u(tf.constant(grad_z), m).numpy(), grad_u,
                             rtol=1e-9)


def test_the_dense_metric_maps_gradients_as_the_chain_rule():
  """``u = L z``: ``grad_to_u`` takes the gradient in ``z`` of ``f(L z)``
  to the gradient of ``f`` at ``u`` (both by autodiff here)."""
  rng = np.random.default_rng(3)
  lower = np.tril(rng.normal(size=(4, 4))) + 3. * np.eye(4)
  m = metric.Metric(tf.constant(lower[None]), tf.zeros([4, 0], tf.float64),
                    tf.ones([0], tf.float64))
  z = tf.constant(rng.normal(size=(3, 4)))
  b = tf.constant(rng.normal(size=(4, 4)))
  f = lambda u: -0.5 * tf.reduce_sum(tf.square(tf.matmul(u, b, transpose_b=True)), -1)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(z)
    u = metric.to_u(z, m)
    fz = f(u)
  grad_z, grad_u = tape.gradient(fz, z), tape.gradient(fz, u)
  np.testing.assert_allclose(metric.grad_to_u(grad_z, m).numpy(), grad_u.numpy(), rtol=1e-10)


def test_short_windows_tile_the_warmup_and_grow():
  run = schedule.short_windows_schedule(1000, 200, adaptive=True, bulk=True)
  assert [p[:2] for p in run][:3] == [(0, 10), (10, 20), (20, 30)]
  windows = [p for p in run if p.end_window]
  assert all(a.end == b.start for a, b in zip(run, run[1:])) and run[-1].end == 1200
  sizes = [p.end - p.start for p in windows]
  # Growing to MAX_WINDOW; the last takes what is left before the final window.
  assert sizes[:-1] == sorted(sizes[:-1]) and max(sizes[:-1]) <= schedule.MAX_WINDOW
  assert sizes[-1] < 2 * schedule.MAX_WINDOW
  assert windows[0].restart and not any(p.restart for p in windows[1:])
  assert windows[-1].final and not any(p.final for p in run if p is not windows[-1])
  assert not any(p.may_stop for p in windows if p.end < schedule.MIN_WARMUP)
  assert all(p.may_stop for p in windows[:-1] if p.end >= schedule.MIN_WARMUP)
  assert [p.late for p in windows] == [p.end >= schedule.MIN_WARMUP for p in windows]
  final, sampling = run[-2], run[-1]
  assert (final.start, final.end) == (950, 1000) and final.warmup and not final.collect
  assert not sampling.warmup
  # The bulk shares a step size only after SHARE_AFTER iterations.
  assert not any(p.share for p in windows if p.start < schedule.SHARE_AFTER)
  # An early end keeps the windows done, then the final window and sampling.
  stop = windows[8].end
  short = schedule.end_warmup(run, stop, 200)
  assert short[-2][:2] == (stop, stop + 50) and short[-1][:2] == (stop + 50, stop + 250)
  assert schedule.warmup_length(short) == stop + 50


def test_metric_settings_choose_by_kernel_size_and_request():
  nuts, rwmh = ed.mcmc.NUTS(), ed.mcmc.RWMH()
  assert metric_update.metric_settings(True, nuts, 10, True).kind == "low_rank"
  assert metric_update.metric_settings(True, nuts, 10, False).kind == "diag"
  assert metric_update.metric_settings(True, nuts, 5000, True).kind == "diag"
  assert metric_update.metric_settings(True, rwmh, 10, True).kind == "diag"
  dense = metric_update.metric_settings("dense", nuts, 10, False)
  assert dense.rank == 10 and dense.pooled  # one metric for all chains
  with pytest.raises(ValueError, match="too large"):
    metric_update.metric_settings("low_rank", nuts, 5000, True)


def test_the_step_size_restarts_for_the_final_window_only_with_a_diagonal_metric():
  run = schedule.short_windows_schedule(1000, 200, adaptive=True, bulk=True)
  windows = [p for p in run if p.end_window]
  first, middle, last = windows[0], windows[3], windows[-1]
  for kind in ("low_rank", "dense", "diag"):
    assert schedule.restarts_step_size(first, kind)  # the metric leaves its start
    assert not schedule.restarts_step_size(middle, kind)
  # Run on through the final window (nutpie's way) unless the metric is
  # diagonal, where the restarted window's smaller step keeps divergences down.
  assert not schedule.restarts_step_size(last, "low_rank")
  assert not schedule.restarts_step_size(middle, "low_rank", stopping=True)
  assert schedule.restarts_step_size(last, "diag")
  assert schedule.restarts_step_size(middle, "diag", stopping=True)
