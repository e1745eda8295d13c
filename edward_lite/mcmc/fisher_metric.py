"""The metric from draws and gradients: the Fisher-divergence estimates of nutpie.

For a posterior ``p`` over the unconstrained ``u`` and an affine map
``u = A z``, HMC with the identity metric in ``z`` is HMC with the inverse
metric ``A A^T`` in ``u``.  Seyboldt, Carlson and Carpenter (2026) choose
``A`` to minimize the Fisher divergence between the pushed-forward
posterior of ``z`` and a standard normal,

    F(A) = E_p || A^T grad log p(u) + A^{-1} (u - m) ||^2,

which uses the gradients the sampler computes anyway as well as the draws.
For a Gaussian posterior ``N(m, S)`` its minimizer is ``A A^T = S`` exactly,
from any ``n >= D`` draws (``grad log p = -S^{-1} (u - m)``), where the draw
covariance alone needs many draws to get there.

* **Diagonal** (``A = diag(s)``): ``s_i^2 = sqrt(Var u_i / Var g_i)``, the
  geometric mean of the draws' variance and the inverse of the gradients'.
* **Low rank plus diagonal**: with ``s`` as above, draws and gradients are
  rescaled, ``x = (u - mean u) / s`` and ``y = (g - mean g) * s``, and
  ``A A^T = diag(s) M diag(s)`` where ``M`` is the SPD geometric mean of the
  regularized scatter matrices ``Cx = n cov(x) / gamma + I`` and
  ``Cy = n cov(y) / gamma + I`` (``n`` draws; as nutpie, whose ``gamma``
  regularizes the sums of outer products, so it fades as draws accumulate):
  the unique SPD ``M`` with ``M Cy M = Cx``,

      M = Cy^{-1/2} (Cy^{1/2} Cx Cy^{1/2})^{1/2} Cy^{-1/2}.

  Only the eigenpairs ``(lambda_k, v_k)`` of ``M`` with ``lambda_k`` outside
  ``[1/c, c]`` are kept (``c = cutoff``; the rest are set to 1), so

      A = diag(s) (I + V (sqrt(lambda) - 1) V^T),   V: [D, K] orthonormal.

  Directions the draws do not span get eigenvalue 1 (the ``+ I``), so the
  estimate is defined for ``n < D`` too.

* **Disagreement**: along an eigenvector ``v`` of a Gaussian posterior the
  draws' variance ``v^T cov(x) v`` and the inverse of the gradients'
  ``v^T cov(y) v`` agree (both are ``lambda``).  Where their product is far
  from 1 the curvature varies over the posterior (a latent Gaussian
  process's hyperparameters) and a metric fixed to an average curvature
  mixes worse along ``v`` than the diagonal alone (``disagreement``).

These run on the host in float64, from the moments the compiled loop
collects (``adaptation.WelfordState`` of the draws and of the gradients, per
chain, pooled here over chains exactly).  Estimates that come out
non-finite fall back to the identity in that coordinate (diagonal) or to the
diagonal alone (low rank).
"""

import numpy as np

__all__ = ["pooled_moments", "diagonal_scale", "low_rank", "disagreement",
           "spd_geometric_mean", "GAMMA", "CUTOFF", "CLIP", "MAX_DISAGREEMENT"]

GAMMA = 1e-5   # regularization of the covariances (nutpie's default)
CUTOFF = 2.    # eigenvalues of M in [1/CUTOFF, CUTOFF] are set to 1 (nutpie's default)
CLIP = 1e-20   # the diagonal's variances are clipped to [CLIP, 1 / CLIP]
MAX_DISAGREEMENT = 4.  # draws and gradients disagree more along a kept direction: diagonal


def pooled_moments(count, mean, m2):
  """The mean ``[D]`` and covariance (``[D, D]``, or the variances ``[D]``)
  of all chains' draws: ``count`` draws per chain with means ``mean [C,
  D]``, and ``m2`` the chains' summed squared deviations from their own
  means (``[D, D]`` outer products, or ``[D]``), combined exactly (Chan et
  al. 1979), population normalization (divide by the number of draws, as
  nutpie)."""
  mean, m2 = np.asarray(mean, np.float64), np.asarray(m2, np.float64)
  total = count * mean.shape[0]
  grand = mean.mean(axis=0)
  dev = mean - grand
  scatter = m2 + count * (dev.T @ dev if m2.ndim == 2 else (dev**2).sum(axis=0))
  return grand, scatter / max(total, 1.)


def diagonal_scale(draw_var, grad_var):
  """``s [D]`` with ``s^2 = sqrt(draw_var / grad_var)``, clipped to
  ``[CLIP, 1/CLIP]``; 1 where that is not finite (a coordinate that never
  moved, or whose gradient never changed)."""
  var = np.sqrt(np.asarray(draw_var, np.float64) / np.asarray(grad_var, np.float64))
  var = np.where(np.isfinite(var) & (var > 0), np.clip(var, CLIP, 1. / CLIP), 1.)
  return np.sqrt(var)


def _sqrt_and_inverse_sqrt(matrix):
  if not np.all(np.isfinite(matrix)):
    raise np.linalg.LinAlgError("not finite")
  vals, vecs = np.linalg.eigh(matrix)
  vals = np.maximum(vals, np.finfo(np.float64).tiny)
  return (vecs * np.sqrt(vals)) @ vecs.T, (vecs / np.sqrt(vals)) @ vecs.T


def spd_geometric_mean(cx, cy):
  """The SPD ``M`` with ``M cy M = cx`` (both SPD ``[D, D]``)."""
  root, inv_root = _sqrt_and_inverse_sqrt(cy)
  middle, _ = _sqrt_and_inverse_sqrt(root @ cx @ root)
  m = inv_root @ middle @ inv_root
  return (m + m.T) / 2.


def low_rank(draw_cov, grad_cov, count, max_rank, gamma=GAMMA, cutoff=CUTOFF):
  """The low-rank-plus-diagonal metric from the covariances of the draws
  and of the gradients (``[D, D]`` each, over ``count`` draws).

  Returns:
    ``(s [D], V [D, K], lam [K])`` with ``K = max_rank`` (the kept
    eigenpairs, largest ``|log lambda|`` first, padded with zero columns and
    ``lambda = 1``), so that ``A = diag(s) (I + V (sqrt(lam) - 1) V^T)``.
  """
  draw_cov = np.asarray(draw_cov, np.float64)
  grad_cov = np.asarray(grad_cov, np.float64)
  dim = draw_cov.shape[0]
  s = diagonal_scale(np.diag(draw_cov), np.diag(grad_cov))
  basis, lam = np.zeros([dim, max_rank]), np.ones([max_rank])
  if max_rank == 0:
    return s, basis, lam
  # Scaled by n / gamma, not 1 / (n gamma): the latter (an earlier nutpie's
  # form, harmless at its few hundred draws per chain) shrinks every
  # eigenvalue lambda of M to about sqrt(lambda) once n gamma reaches 1, which
  # 1000 chains' pooled windows do (RESULTS section 36).
  scale = gamma / count
  eye = np.eye(dim)
  cx = draw_cov / np.outer(s, s) / scale + eye
  cy = grad_cov * np.outer(s, s) / scale + eye
  if not (np.all(np.isfinite(cx)) and np.all(np.isfinite(cy))):
    return s, basis, lam
  try:
    with np.errstate(over="ignore", invalid="ignore"):
      vals, vecs = np.linalg.eigh(spd_geometric_mean(cx, cy))
  except np.linalg.LinAlgError:  # not finite after all (an overflow): the diagonal alone
    return s, basis, lam
  if not (np.all(np.isfinite(vals)) and np.all(vals > 0.) and np.all(np.isfinite(vecs))):
    return s, basis, lam
  keep = np.flatnonzero((vals > cutoff) | (vals < 1. / cutoff))
  keep = keep[np.argsort(-np.abs(np.log(vals[keep])))][:max_rank]
  basis[:, :len(keep)] = vecs[:, keep]
  lam[:len(keep)] = vals[keep]
  return s, basis, lam


def disagreement(draw_cov, grad_cov, s, basis):
  """The largest factor ``max(r, 1/r)``, over the used columns ``v`` of
  ``basis`` ``[D, K]``, by which ``r = (v^T cov(x) v) (v^T cov(y) v)`` (the
  rescaled covariances, module docstring) differs from its Gaussian value 1;
  1 without a low-rank part."""
  used = np.any(basis != 0., axis=0)
  if not used.any():
    return 1.
  v = basis[:, used]
  outer = np.outer(s, s)
  r = (np.einsum("dk,de,ek->k", v, np.asarray(draw_cov, np.float64) / outer, v) *
       np.einsum("dk,de,ek->k", v, np.asarray(grad_cov, np.float64) * outer, v))
  with np.errstate(divide="ignore", invalid="ignore"):
    factor = np.maximum(r, 1. / r)
  return float(np.max(np.where(np.isfinite(factor), factor, np.inf)))
