"""The metric re-estimated at the end of a warmup window, on the host.

The compiled loop collects, per chain, Welford moments of the draws ``u``
and of the gradients ``grad log p(u)`` over a window (``adaptation.
MetricMoments``); at the window's end the host estimates the new metric in
float64 from them and re-expresses the chains' ``z`` in it.  Two regimes:

* **From draws and gradients** (kernels with gradients, the default): the
  Fisher-divergence estimates of ``fisher_metric`` -- diagonal, low rank
  plus diagonal (``rank`` columns) or dense (every eigenpair) -- from the
  window just ended and the one before it (so each estimate sees between
  one and two windows of draws, as nutpie's foreground and background
  estimators), after a start from the gradients at the initial points.
* **From draws only** (random-walk Metropolis): Stan's estimate from the
  window just ended, ``n/(n+5) S + 1e-3 5/(n+5) I`` of the draws' (co)variance.

One metric serves all chains unless ``pooled`` is False (diagonal only:
each chain's own).  ``settled`` says whether a new estimate is within a
factor ``SETTLED`` of the metric in use in every direction, which lets an
adaptive warmup end.  Where the draws and the gradients disagree about the
curvature along a settled low-rank part (``curvature_varies``), the run
goes on with the diagonal alone (``diagonal``).
"""

from typing import NamedTuple

import numpy as np
import tensorflow as tf

from edward_lite.mcmc import adaptation, fisher_metric
from edward_lite.mcmc.metric import Metric, to_z

__all__ = ["MetricSettings", "metric_settings", "initial_metric", "estimate", "end_window",
           "WindowEnd", "restart_step_size", "curvature_varies", "diagonal", "CURVATURE_STRIKES", "settled", "KINDS", "MAX_RANK",
           "MAX_DENSE_DIM", "SETTLED"]

KINDS = ("diag", "low_rank", "dense")
MAX_RANK = 64          # columns of the low-rank part (``dense``: D)
MAX_DENSE_DIM = 1000   # low rank and dense keep [D, D] moments and an eigh of [D, D]
SETTLED = 2.           # a new estimate within this factor of the metric in use: settled
CURVATURE_STRIKES = 2  # consecutive settled windows whose curvature varied: the diagonal


class MetricSettings(NamedTuple):
  """How warmup adapts the metric (``metric_settings``)."""
  kind: str         # "diag", "low_rank", "dense" or "none" (the identity, kept)
  pooled: bool      # one metric for all chains
  rank: int         # K, columns of the low-rank part (0 for a diagonal metric)
  gradients: bool   # estimated from draws and gradients (else draws only)

  @property
  def dense_moments(self):
    return self.rank > 0

  @property
  def adapts(self):
    return self.kind != "none"


def metric_settings(adapt_metric, kernel, dim, pooled):
  """``MetricSettings`` from ``sample``'s ``adapt_metric`` (True: the
  default, low rank up to ``MAX_DENSE_DIM`` dimensions, else diagonal;
  kernels without gradients adapt a diagonal from draws only), the kernel,
  ``D`` and the metric's pooling."""
  gradients = kernel.has_gradients
  if adapt_metric is False:
    return MetricSettings("none", pooled, 0, gradients)
  fits = dim <= MAX_DENSE_DIM
  if adapt_metric is True:
    kind = "low_rank" if gradients and pooled and fits else "diag"
  else:
    kind = adapt_metric
    if kind != "diag" and not fits:
      raise ValueError(
          f"adapt_metric={kind!r} keeps [D, D] moments and decomposes a [D, D] matrix; "
          f"with D={dim} latent dimensions that is too large (at most D={MAX_DENSE_DIM}): "
          f"use adapt_metric='diag'.")
    if kind == "low_rank" and not gradients:
      raise ValueError(f"adapt_metric='low_rank' is estimated from gradients; the "
                       f"{kernel.name} kernel has none: use 'diag' or 'dense'.")
  rank = {"diag": 0, "low_rank": min(dim, MAX_RANK), "dense": dim}[kind]
  return MetricSettings(kind, pooled or rank > 0, rank, gradients)


def initial_metric(metric, grad_u, settings):
  """The metric a run starts from: the identity, or for estimates from
  gradients the diagonal ``s_i^2 = 1 / mean_c |g_ci|`` of the gradients
  ``[C, D]`` at the starting points (nutpie's start; 1 where a gradient is
  0 or not finite), so the first trajectories are not tuned to the unit
  scale of a posterior far from it."""
  if not (settings.gradients and settings.adapts):
    return metric
  g = np.abs(np.asarray(grad_u, np.float64))
  g = g.mean(axis=0, keepdims=True) if metric.scale.shape[0] == 1 else g
  var = np.where(np.isfinite(g) & (g > 0), 1. / np.where(g > 0, g, 1.), 1.)
  var = np.clip(var, fisher_metric.CLIP, 1. / fisher_metric.CLIP)
  return metric._replace(scale=tf.constant(np.sqrt(var), metric.scale.dtype))


def _groups(*states):
  """``(count, mean [C, D], m2 [C, D], scatter [D, D] or None)`` of every
  Welford state with draws."""
  return [(float(s.count), s.mean.numpy(), s.m2.numpy(), _scatter(s))
          for s in states if float(s.count) > 0]


def _scatter(state):
  return state.scatter.numpy() if isinstance(state, adaptation.DenseWelfordState) else None


@np.errstate(over="ignore", invalid="ignore")  # moments that overflowed are refused later
def _combine(groups):
  """Mean and (co)variance over every chain and group (population
  normalization), from Welford moments; also the variances per chain.  The
  covariance when every group has its ``scatter``, else the variances."""
  total = sum(n for n, _, _, _ in groups)
  chain_mean = sum(n * mean for n, mean, _, _ in groups) / total          # [C, D]
  chain_m2, scatter = 0., 0.
  for n, mean, m2, group_scatter in groups:
    dev = mean - chain_mean
    chain_m2 = chain_m2 + m2 + n * dev**2
    if group_scatter is not None:  # the same sum over chains, with the products
      scatter = scatter + group_scatter + n * dev.T @ dev
  dense = all(g[3] is not None for g in groups)
  _, pooled = fisher_metric.pooled_moments(total, chain_mean,
                                           scatter if dense else chain_m2.sum(axis=0))
  return total, pooled, chain_m2 / total


def estimate(moments, previous, settings):
  """The new metric's NumPy parts ``(s, V or None, r or None)`` from this
  window's and the previous window's moments, and the low-rank part's
  ``fisher_metric.disagreement``; ``(None, 1.)`` when there are too few
  draws."""
  draws = _groups(moments.draws, *((previous.draws,) if settings.gradients else ()))
  if not draws or sum(g[0] for g in draws) < 3:
    return None, 1.
  count, draw_cov, chain_var = _combine(draws)
  pooled_count = count * moments.draws.mean.shape[0]
  diagonal = settings.kind == "diag"
  if settings.gradients:
    _, grad_cov, chain_grad_var = _combine(_groups(moments.grads, previous.grads))
    if not diagonal:
      cutoff = fisher_metric.CUTOFF if settings.kind == "low_rank" else 1.
      s, basis, lam = fisher_metric.low_rank(draw_cov, grad_cov, pooled_count, settings.rank,
                                             cutoff=cutoff)
      return (s[None], basis, np.sqrt(lam)), fisher_metric.disagreement(draw_cov, grad_cov, s,
                                                                       basis)
    if settings.pooled:
      return (fisher_metric.diagonal_scale(_diag(draw_cov), _diag(grad_cov))[None], None,
              None), 1.
    return (fisher_metric.diagonal_scale(chain_var, chain_grad_var), None, None), 1.
  # Draws only (Stan): the (co)variance of this window, regularized.
  n = pooled_count if settings.pooled else count
  shrink = n / (n + 5.)
  if not diagonal:
    cov = shrink * draw_cov + 1e-3 * (1. - shrink) * np.eye(draw_cov.shape[0])
    s = np.sqrt(np.diag(cov))
    lam, vecs = np.linalg.eigh(cov / np.outer(s, s))
    return (s[None], vecs, np.sqrt(np.maximum(lam, fisher_metric.CLIP))), 1.
  var = _diag(draw_cov)[None] if settings.pooled else chain_var
  return (np.sqrt(shrink * var + 1e-3 * (1. - shrink)), None, None), 1.


def _diag(cov):
  """The variances of a covariance matrix ``[D, D]`` or of variances ``[D]``."""
  return np.diag(cov) if cov.ndim == 2 else cov


def _to_metric(parts, like):
  scale, basis, root = parts
  dtype = like.scale.dtype
  return Metric(tf.constant(np.reshape(scale, like.scale.shape), dtype),
                tf.zeros_like(like.basis) if basis is None else tf.constant(basis, dtype),
                tf.ones_like(like.root) if root is None else tf.constant(root, dtype))


def settled(old, new):
  """Whether ``new`` is within a factor ``SETTLED`` of ``old`` in every
  direction: the eigenvalues of ``A_old^{-1} A_new A_new^T A_old^{-T}``
  (per chain for per-chain diagonal metrics) lie in ``[1/SETTLED, SETTLED]``."""
  inverse_old = _inverse_factor(old)
  for a_old_inv, a_new in zip(inverse_old, _factor(new)):
    m = a_old_inv @ a_new
    if not np.all(np.isfinite(m)):
      return False
    vals = np.linalg.eigvalsh(m @ m.T)
    if not (np.all(np.isfinite(vals)) and vals.min() >= 1. / SETTLED and vals.max() <= SETTLED):
      return False
  return True


def _factor(metric):
  """``A`` per metric row as ``[D, D]`` NumPy arrays (diagonal: one per chain)."""
  scale, basis, root = (np.asarray(t, np.float64) for t in metric)
  inner = np.eye(scale.shape[-1]) + (basis * (root - 1.)) @ basis.T
  return [s[:, None] * inner for s in scale]


def _inverse_factor(metric):
  scale, basis, root = (np.asarray(t, np.float64) for t in metric)
  inner = np.eye(scale.shape[-1]) + (basis * (1. / root - 1.)) @ basis.T
  return [inner / s[None, :] for s in scale]


class WindowEnd(NamedTuple):
  """What the host learned at the end of a window (``end_window``)."""
  settled: bool        # the new metric is within SETTLED of the old one
  disagreement: float  # fisher_metric.disagreement of its low-rank part


def end_window(state, settings, restart):
  """A ``ChunkState`` at the end of a window: the new metric (unless there
  were too few draws), ``z`` re-expressed in it, this window's moments kept
  as the previous ones and fresh moments for the next; with ``restart``
  the step size's dual averaging restarts from its average.

  Returns:
    ``(state, WindowEnd)``.
  """
  parts, disagreement = estimate(state.moments, state.previous, settings)
  if parts is not None and not all(np.all(np.isfinite(p)) for p in parts if p is not None):
    parts = None  # moments that overflowed: keep the metric in use
  metric = state.metric if parts is None else _to_metric(parts, state.metric)
  is_settled = parts is not None and settled(state.metric, metric)
  dense = settings.dense_moments
  chains, dim = state.u.shape
  fresh = adaptation.metric_moments_init(chains, dim, state.u.dtype, dense)
  state = state._replace(z=to_z(state.u, metric), metric=metric, moments=fresh,
                         previous=state.moments if settings.gradients else fresh)
  if restart:
    state = restart_step_size(state)
  return state, WindowEnd(is_settled, disagreement)


def restart_step_size(state):
  """The step size's dual averaging restarted from its average."""
  return state._replace(dual_avg=adaptation.dual_averaging_init(
      tf.exp(state.dual_avg.log_step_bar)))


def curvature_varies(window_end):
  """Whether a settled low-rank estimate's draws and gradients disagree
  along it by more than ``fisher_metric.MAX_DISAGREEMENT``: the curvature
  varies over the posterior, where the diagonal mixes better.  While the
  metric is still moving, chains on their way to the posterior disagree
  anyway: the driver goes diagonal after ``CURVATURE_STRIKES`` such windows
  in a row, with the chains agreeing, counted only from ``MIN_WARMUP``
  iterations on (``schedule.Phase.late``): earlier, a posterior with one
  thin direction (an intercept against the slope of an uncentred
  predictor) disagreed by a factor 79 and then 6 at iterations 40 and 53
  on its way in, and fell back to the diagonal for good."""
  return window_end.settled and window_end.disagreement > fisher_metric.MAX_DISAGREEMENT


def diagonal(state):
  """The state with the metric's low-rank part dropped."""
  metric = state.metric._replace(basis=tf.zeros_like(state.metric.basis),
                                 root=tf.ones_like(state.metric.root))
  return state._replace(metric=metric, z=to_z(state.u, metric))
