"""The metric: the preconditioning of the chains' states.

The kernel moves ``z`` in a preconditioned space with the identity metric;
the model sees the unconstrained ``u = A z``, so the kernel's dynamics are
those of the inverse metric ``A A^T`` in ``u``.  ``A`` is a ``Metric``:

* diagonal: ``A = diag(s)``, ``scale = s`` ``[1, D]`` (one for all chains)
  or ``[C, D]`` (per chain);
* low rank plus diagonal: ``A = diag(s) (I + V (r - 1) V^T)`` with ``V``
  ``[D, K]`` orthonormal columns and ``r = sqrt(lambda)`` ``[K]``
  (``fisher_metric.low_rank``): every operation costs ``O(D K)``.  Unused
  columns are zero with ``r = 1``, so ``K`` is fixed and the diagonal metric
  is the case ``K = 0``;
* dense: ``A = L``, the lower Cholesky factor of an estimated covariance,
  ``scale`` ``[1, D, D]`` (``adapt_metric="dense"`` with draws only).

It starts as the identity (or, for kernels with gradients, from the
gradients at the starting points) and is re-estimated during warmup
(``adaptation``; ``run.Run`` says when).
"""

from typing import NamedTuple

import numpy as np
import tensorflow as tf

__all__ = ["Metric", "to_u", "to_z", "grad_to_u", "identity", "inverse_metric"]


class Metric(NamedTuple):
  """``A`` of ``u = A z`` (module docstring)."""
  scale: tf.Tensor   # s [1 or C, D], or a dense Cholesky factor [1, D, D]
  basis: tf.Tensor   # V [D, K] (K = 0: no low-rank part)
  root: tf.Tensor    # r = sqrt(lambda) [K]


def _low_rank_apply(w, metric, power):
  """``(I + V (r^power - 1) V^T) w`` for ``w [C, D]``."""
  if metric.basis.shape[-1] == 0:
    return w
  coef = tf.matmul(w, metric.basis) * (metric.root**power - 1.)
  return w + tf.matmul(coef, metric.basis, transpose_b=True)


def to_u(z, metric):
  """Preconditioned ``z [C, D]`` -> unconstrained ``u = A z [C, D]``."""
  if metric.scale.shape.rank == 3:
    return tf.linalg.matvec(metric.scale, z)
  return metric.scale * _low_rank_apply(z, metric, 1.)


def to_z(u, metric):
  """``z = A^{-1} u``, the inverse of ``to_u``."""
  if metric.scale.shape.rank == 3:
    return tf.transpose(tf.linalg.triangular_solve(metric.scale[0], tf.transpose(u),
                                                   lower=True))
  return _low_rank_apply(u / metric.scale, metric, -1.)


def grad_to_u(grad_z, metric):
  """The gradient in ``u`` from the gradient in ``z``: ``A^{-T} grad_z``."""
  if metric.scale.shape.rank == 3:
    return tf.transpose(tf.linalg.triangular_solve(metric.scale[0], tf.transpose(grad_z),
                                                   lower=True, adjoint=True))
  return _low_rank_apply(grad_z, metric, -1.) / metric.scale


def identity(dim, chains, pooled, dense, rank, dtype):
  """The identity metric: dense ``[1, D, D]``, else ``scale [1 or C, D]``
  with a low-rank part of ``rank`` unused columns."""
  scale = (tf.eye(dim, batch_shape=[1], dtype=dtype) if dense
           else tf.ones([1 if pooled else chains, dim], dtype))
  return Metric(scale, tf.zeros([dim, rank], dtype), tf.ones([rank], dtype))


def inverse_metric(metric):
  """``A A^T`` as NumPy: ``[1 or C, D]`` for a diagonal metric (``s^2``),
  else ``[D, D]``."""
  scale, basis, root = (np.asarray(t) for t in metric)
  if scale.ndim == 3:
    return scale[0] @ scale[0].T
  if basis.shape[-1] == 0:
    return np.square(scale)
  inner = np.eye(basis.shape[0]) + (basis * (root**2 - 1.)) @ basis.T
  return scale[0][:, None] * inner * scale[0][None, :]
