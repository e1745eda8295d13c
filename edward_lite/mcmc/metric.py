"""The metric: the preconditioning of the chains' states.

The kernel moves ``z`` in a preconditioned space; the model sees the
unconstrained ``u``.  The ``scale`` is the square root of the inverse mass
matrix:

* diagonal, ``[1, D]`` (one for all chains) or ``[C, D]`` (per chain):
  ``u = scale * z``;
* dense, ``[1, D, D]``, the lower Cholesky factor ``L`` of the estimated
  covariance: ``u = L z``.

It starts as the identity and is re-estimated at the end of each slow
warmup window from the Welford moments of the window's draws
(``adaptation.welford_variance`` / ``welford_covariance``, regularized as
Stan's).
"""

import tensorflow as tf

from edward_lite.mcmc import adaptation

__all__ = ["to_u", "to_z", "identity_scale", "estimate_scale", "end_window"]


def to_u(z, scale):
  """Preconditioned ``z [C, D]`` -> unconstrained ``u [C, D]``."""
  return tf.linalg.matvec(scale, z) if scale.shape.rank == 3 else z * scale


def to_z(u, scale):
  """Inverse of ``to_u``."""
  if scale.shape.rank == 3:
    return tf.transpose(tf.linalg.triangular_solve(scale[0], tf.transpose(u), lower=True))
  return u / scale


def identity_scale(dim, chains, pooled, dense, dtype):
  """The identity metric's scale: ``[1, D, D]`` dense, else ``[1 or C, D]``."""
  if dense:
    return tf.eye(dim, batch_shape=[1], dtype=dtype)
  return tf.ones([1 if pooled else chains, dim], dtype)


def estimate_scale(moments, pooled, dtype):
  """The scale from a window's Welford moments (one for all chains if
  ``pooled``; dense moments give a Cholesky factor)."""
  if moments.m2.shape.rank == 3:
    scale = tf.linalg.cholesky(adaptation.welford_covariance(moments))[None]
  else:
    scale = tf.sqrt(adaptation.welford_variance(moments, pooled=pooled))
  return tf.cast(scale, dtype)


def end_window(state, pooled, dtype):
  """A ``ChunkState`` at the end of a slow window: the new metric, ``z``
  re-expressed in it, the step-size adaptation restarted from the averaged
  step size, and fresh moments for the next window."""
  scale = estimate_scale(state.metric, pooled, dtype)
  return state._replace(
      z=to_z(state.u, scale), scale=scale,
      dual_avg=adaptation.dual_averaging_init(tf.exp(state.dual_avg.log_step_bar)),
      metric=adaptation.welford_init(state.metric.mean.shape, dtype,
                                     state.metric.m2.shape.rank == 3))
