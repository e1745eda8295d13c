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
``tf.while_loop``.  Every fit starts at ``loc = 0`` with ``ed.vi.fit``'s
starting scale ``sigma = 0.1`` (``init_scale``), and the full-rank family
first runs ``min(500, steps)`` mean-field steps (``warm_start``, at the
mean-field learning rate) from which it takes its location and scales, as
``ed.vi.fit`` does.  There is no L-BFGS start or stopping rule: every fit
runs ``steps`` steps.  A step whose gradient is not finite leaves that
data set's parameters where they were.

Why the start matters (measured on ``mu ~ N(0, 1), sigma ~ HalfNormal(1),
y ~ N(mu, sigma) x 10``, 100 data sets, against each data set's optimal
Gaussian by quadrature; ``tests/test_sbc.py``): a surrogate as wide as
``sigma = 1`` on the unconstrained space draws the positive scale near 0,
where the gradient of the log density is about a hundred times what it is
near the posterior (|g| 100-250 in the first steps, about 1 later).
Adam's second moment (``beta2 = 0.999``) keeps those first steps for about
a thousand steps, so the later steps were a tenth of the learning rate or
less.  From ``sigma = 1`` (and no warm start), 1,000 steps left 100 of 100
full-rank fits and 44 of 100 mean-field fits away from their optimum (more
than 0.1 optimal sd in location or 10% in sd; the full-rank sd of sigma's
coordinate 1.2-3.2 times its optimum), and SBC rejected the full-rank
family (sigma's rank mean 0.30, ECDF p = 0.00025 at 100 simulations) where
its optimum passes.  With this start every fit is within 0.09 sd and 3%.

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
  init_scale = 0.1  # ed.vi.fit's starting scale (vi.families.Family)
  warm_start = 0    # mean-field steps run first (fit_batched)

  def init(self, simulations, dim, dtype, start=None):
    """Initial parameters: dict name -> ``[S, ...]`` Tensors; ``start``, a
    mean-field fit's parameters, sets ``loc`` and ``scale``."""
    if start is not None:
      return {"loc": tf.identity(start["loc"]), "scale": tf.identity(start["scale"])}
    zeros = tf.zeros([simulations, dim], dtype)
    raw = np.log(np.expm1(self.init_scale)).astype(dtype.as_numpy_dtype)  # softplus inverse
    return {"loc": zeros, "scale": zeros + raw}

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
  warm_start = 500

  def init(self, simulations, dim, dtype, start=None):
    params = super().init(simulations, dim, dtype, start)
    params["scale_tril"] = tf.zeros([simulations, dim, dim], dtype)
    return params

  def transform(self, params, eps):
    strict = tf.linalg.band_part(params["scale_tril"], -1, 0) - tf.linalg.band_part(
        params["scale_tril"], 0, 0)
    unit = strict + tf.eye(tf.shape(eps)[-1], dtype=eps.dtype)
    tril = self.scale(params)[:, :, None] * unit
    return params["loc"][:, None] + tf.einsum("sij,smj->smi", tril, eps)


BATCHED_FAMILIES = {"meanfield": BatchedMeanField, "fullrank": BatchedFullRank}


def fit_batched(target, family, steps, samples, learning_rate, seed, jit_compile=True,
                warm_start=None):
  """Fits ``S`` surrogates of ``family``, one per data set of ``target``.

  Args:
    target: a ``SimulationTarget`` with ``chains_per_simulation == samples``.
    family: a ``BatchedMeanField``-like object.
    steps: Adam steps.
    samples: ``M``, draws per data set and step.
    learning_rate: Adam's initial learning rate.
    seed: stateless seed ``int32[2]``; step ``t`` draws with ``fold_in(seed, t)``.
    jit_compile: compile with XLA.
    warm_start: mean-field steps run first, whose location and scales
      start ``family`` (default ``min(family.warm_start, steps)``; 0 for
      mean-field); their draws use ``stateless_split(seed)[1]``.

  Returns:
    ``(params dict name -> [S, ...], elbo [S])``: the fitted parameters and
    each data set's ELBO estimate at the last step.
  """
  sims, dim, dtype = target.simulations, target.dim, target.dtype
  if warm_start is None:
    warm_start = min(getattr(family, "warm_start", 0), steps)
  start = None
  if warm_start:
    mean_field = BatchedMeanField()
    start, _ = _adam(target, mean_field, mean_field.init(sims, dim, dtype), warm_start,
                     samples, mean_field.learning_rate,
                     tf.random.experimental.stateless_split(seed, 2)[1], jit_compile)
  params = family.init(sims, dim, dtype) if start is None else family.init(sims, dim, dtype,
                                                                           start)
  fitted, last = _adam(target, family, params, steps, samples, learning_rate, seed,
                       jit_compile)
  return {n: x.numpy() for n, x in fitted.items()}, last.numpy()


def _adam(target, family, params, steps, samples, learning_rate, seed, jit_compile):
  """``steps`` Adam steps of the ``S`` ELBOs from ``params``:
  ``(params dict name -> [S, ...] Tensors, last ELBO estimates [S])``."""
  sims, dim, dtype = target.simulations, target.dim, target.dtype
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

  return run(params)


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
