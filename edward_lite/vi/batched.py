"""``S`` Gaussian variational fits at once, one per data set (for ``ed.sbc``).

Each data set ``s`` has its own surrogate on the unconstrained space,

    MeanField:  u = m_s + sigma_s * eps,     sigma_s = softplus(r_s),
    FullRank:   u = m_s + L_s eps,           L_s = diag(sigma_s) T_s,

``eps ~ N(0, I_D)``, ``T_s`` unit lower triangular (the parametrization of
``vi.families``), so ``log q_s(u) = log N(eps; 0, I) - sum_d log sigma_sd``.
The parameters carry a leading axis ``S`` (``loc [S, D]``, ``scale [S, D]``,
``scale_tril [S, D, D]``) and one step draws ``eps [S, M, D]``, evaluates
the ``S M`` log densities with a ``SimulationTarget`` of ``M`` chains per
data set, and ascends

    sum_s ELBO_s,   ELBO_s ~= (1/M) sum_m [log p(u_sm, y_s) + log|J| - log q_s(u_sm)].

The ``S`` objectives share no parameter, and Adam is elementwise, so this
is exactly ``S`` independent Adam fits (same learning-rate schedule:
cosine decay to a hundredth, as ``ed.vi.fit``'s default) in one compiled
``tf.while_loop``.  Unlike ``ed.vi.fit`` there is no L-BFGS start, warm
start or stopping rule: every fit starts at ``loc = 0``, ``sigma = 1`` and
runs ``steps`` steps.  A step whose gradient is not finite leaves that
data set's parameters where they were.

The flows (``realnvp``, ``maf``, ``iaf``) are not batched here; ``ed.sbc``
fits them one data set at a time with ``ed.vi.fit``.
"""

import numpy as np
import tensorflow as tf

__all__ = ["BatchedMeanField", "BatchedFullRank", "BATCHED_FAMILIES", "fit_batched",
           "draw_constrained"]


class BatchedMeanField:
  """Mean-field Gaussians for ``S`` data sets (module docstring)."""

  name = "meanfield"
  samples = 32
  learning_rate = 0.05

  def init(self, simulations, dim, dtype):
    """Initial parameters: dict name -> ``[S, ...]`` Tensors."""
    zeros = tf.zeros([simulations, dim], dtype)
    return {"loc": zeros, "scale": zeros + np.log(np.expm1(1.)).astype(dtype.as_numpy_dtype)}

  def scale(self, params):
    """``sigma [S, D]``."""
    return tf.nn.softplus(params["scale"])

  def transform(self, params, eps):
    """``u [S, M, D]`` from ``eps [S, M, D]``."""
    return params["loc"][:, None] + self.scale(params)[:, None] * eps

  def draw(self, params, eps):
    """``(u [S, M, D], log q(u) [S, M])``."""
    log_base = tf.reduce_sum(-0.5 * tf.square(eps) - 0.5 * np.log(2. * np.pi), -1)
    log_det = tf.reduce_sum(tf.math.log(self.scale(params)), -1)
    return self.transform(params, eps), log_base - log_det[:, None]


class BatchedFullRank(BatchedMeanField):
  """Full-rank Gaussians for ``S`` data sets (module docstring)."""

  name = "fullrank"
  samples = 64
  learning_rate = 0.02

  def init(self, simulations, dim, dtype):
    params = super().init(simulations, dim, dtype)
    params["scale_tril"] = tf.zeros([simulations, dim, dim], dtype)
    return params

  def transform(self, params, eps):
    strict = tf.linalg.band_part(params["scale_tril"], -1, 0) - tf.linalg.band_part(
        params["scale_tril"], 0, 0)
    unit = strict + tf.eye(tf.shape(eps)[-1], dtype=eps.dtype)
    tril = self.scale(params)[:, :, None] * unit
    return params["loc"][:, None] + tf.einsum("sij,smj->smi", tril, eps)


BATCHED_FAMILIES = {"meanfield": BatchedMeanField, "fullrank": BatchedFullRank}


def fit_batched(target, family, steps, samples, learning_rate, seed, jit_compile=True):
  """Fits ``S`` surrogates of ``family``, one per data set of ``target``.

  Args:
    target: a ``SimulationTarget`` with ``chains_per_simulation == samples``.
    family: a ``BatchedMeanField``-like object.
    steps: Adam steps.
    samples: ``M``, draws per data set and step.
    learning_rate: Adam's initial learning rate.
    seed: stateless seed ``int32[2]``; step ``t`` draws with ``fold_in(seed, t)``.
    jit_compile: compile with XLA.

  Returns:
    ``(params dict name -> [S, ...], elbo [S])``: the fitted parameters and
    each data set's ELBO estimate at the last step.
  """
  sims, dim, dtype = target.simulations, target.dim, target.dtype
  params = family.init(sims, dim, dtype)
  names = sorted(params)
  b1, b2, tiny = 0.9, 0.999, 1e-7

  def elbo(p, t):
    eps = tf.random.stateless_normal([sims, samples, dim],
                                     tf.random.experimental.stateless_fold_in(seed, t),
                                     dtype=dtype)
    u, log_q = family.draw(p, eps)
    log_p = tf.reshape(target.log_prob_flat(tf.reshape(u, [sims * samples, dim])),
                       [sims, samples])
    return tf.reduce_mean(log_p - log_q, axis=1)

  def body(t, p, m, v, last):
    with tf.GradientTape() as tape:
      tape.watch(p)
      values = elbo(p, t)
      loss = -tf.reduce_sum(tf.where(tf.math.is_finite(values), values, 0.))
    grads = tape.gradient(loss, p)
    tf_ = tf.cast(t + 1, dtype)
    decay = 0.01 + 0.99 * 0.5 * (1. + tf.cos(np.pi * tf.minimum(tf.cast(t, dtype) / steps, 1.)))
    rate = learning_rate * decay * tf.sqrt(1. - b2**tf_) / (1. - b1**tf_)
    new_p, new_m, new_v = {}, {}, {}
    for n in names:
      g = grads[n]
      ok = tf.reduce_all(tf.math.is_finite(tf.reshape(g, [sims, -1])), axis=1)
      ok = tf.reshape(ok, [sims] + [1] * (g.shape.rank - 1))
      g = tf.where(ok, g, 0.)
      new_m[n] = tf.where(ok, b1 * m[n] + (1. - b1) * g, m[n])
      new_v[n] = tf.where(ok, b2 * v[n] + (1. - b2) * tf.square(g), v[n])
      new_p[n] = tf.where(ok, p[n] - rate * new_m[n] / (tf.sqrt(new_v[n]) + tiny), p[n])
    return t + 1, new_p, new_m, new_v, values

  @tf.function(jit_compile=jit_compile, autograph=False)
  def run(p):
    zeros = {n: tf.zeros_like(x) for n, x in p.items()}
    out = tf.while_loop(lambda t, *_: t < steps, body,
                        (tf.constant(0), p, zeros, dict(zeros), tf.zeros([sims], dtype)))
    return out[1], out[4]

  fitted, last = run(params)
  return {n: x.numpy() for n, x in fitted.items()}, last.numpy()


def draw_constrained(target, family, params, count, seed):
  """``count`` draws per data set from the fitted surrogates, constrained:
  dict name -> NumPy ``[S, count, *shape]`` (``target``: the fit's
  ``SimulationTarget``; constraining reads no data)."""
  params = {n: tf.constant(v) for n, v in params.items()}
  sims, dim = target.simulations, target.dim
  eps = tf.random.stateless_normal([sims, count, dim], seed, dtype=target.dtype)
  u = tf.reshape(family.transform(params, eps), [sims * count, dim])
  values = target.constrain(target.unflatten(u))
  return {n: tf.reshape(values[n], [sims, count] + values[n].shape.as_list()[1:]).numpy()
          for n in target.names}
