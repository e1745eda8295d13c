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

Convergence.  Each fit is diagnosed from the gradients its last tenth of
steps already computed (``W = max(steps // 10, 1)`` steps, ``M`` draws
each): the mean ELBO gradient over them, turned into one Newton step under
the curvature a Gaussian surrogate has at its optimum (``Sigma g`` for the
location, whose Hessian there is ``-Sigma^-1`` exactly; ``g / (1 +
Sigma_dd (Sigma^-1)_dd)`` for each log-scale, ``g / 2`` for mean-field),
expressed in posterior sds for a location and as a relative change for a
scale.  A fit whose step moves some coordinate by more than ``TOLERANCE``
and by more than ``fit_check.RISE_SE`` standard errors of that step has not
converged (``BatchedFit.converged``).  It is a stationarity test, not an
ELBO-change rule, because the learning rate decays to a hundredth: a fit
stuck far from its optimum has a flat ELBO over its last steps too (on the
model above, 50 steps left 88 of 100 mean-field fits more than 0.1 sd or
10% off their optimum, up to 171 sds; the mean ELBO of the last tenth of
the steps rose by more than ``ed.vi.fit``'s 1 nat over the tenth before in
none of them).

The flows (``realnvp``, ``maf``, ``iaf``) are not batched here; ``ed.sbc``
fits them one data set at a time with ``ed.vi.fit``.
"""

from typing import Any, Dict, NamedTuple

import numpy as np
import tensorflow as tf

from edward_lite.runtime import console
from edward_lite.vi.fit_check import RISE_SE

__all__ = ["BatchedMeanField", "BatchedFullRank", "BATCHED_FAMILIES", "BatchedFit",
           "fit_batched", "draw_constrained", "TOLERANCE"]

TOLERANCE = 0.1  # a Newton step this large (posterior sds / relative scale): not converged


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

  def newton_step(self, params, grads):
    """``[S, 2 D]``: the Newton step of the ELBO gradient ``grads`` (dict like
    ``params``) under the curvature at a Gaussian optimum, in posterior sds
    for the location, relative for the scales (module docstring)."""
    sigma = self.scale(params)
    # d ELBO / d log sigma from d ELBO / d softplus^-1(sigma).
    log_scale = grads["scale"] * sigma / tf.sigmoid(params["scale"])
    return tf.concat([sigma * grads["loc"], 0.5 * log_scale], -1)


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

  def tril(self, params):
    """``L [S, D, D]``, ``diag(sigma) T``."""
    raw = params["scale_tril"]
    strict = tf.linalg.band_part(raw, -1, 0) - tf.linalg.band_part(raw, 0, 0)
    unit = strict + tf.eye(tf.shape(raw)[-1], dtype=raw.dtype)
    return self.scale(params)[:, :, None] * unit

  def transform(self, params, eps):
    return params["loc"][:, None] + tf.einsum("sij,smj->smi", self.tril(params), eps)

  def newton_step(self, params, grads):
    tril = self.tril(params)
    sd = tf.sqrt(tf.reduce_sum(tf.square(tril), -1))  # marginal sds [S, D]
    loc = tf.einsum("sij,skj,sk->si", tril, tril, grads["loc"]) / sd
    inverse = tf.linalg.triangular_solve(tril, tf.eye(tf.shape(tril)[-1], dtype=tril.dtype))
    precision = tf.reduce_sum(tf.square(inverse), -2)  # diag(Sigma^-1) [S, D]
    sigma = self.scale(params)
    log_scale = grads["scale"] * sigma / tf.sigmoid(params["scale"])
    return tf.concat([loc, log_scale / (1. + tf.square(sd) * precision)], -1)


BATCHED_FAMILIES = {"meanfield": BatchedMeanField, "fullrank": BatchedFullRank}


class BatchedFit(NamedTuple):
  """What ``fit_batched`` returns.

  Attributes:
    params: dict name -> NumPy ``[S, ...]``, the fitted parameters.
    elbo: ``[S]``, each data set's ELBO estimate at the last step.
    converged: bool ``[S]``, the convergence test of the module docstring
      (True for a family without ``newton_step``; False for a fit whose
      every step of the window was not finite).
    distance: ``[S]``, each fit's largest Newton step over its coordinates
      (posterior sds for a location, relative for a scale; NaN where not
      computed).
    window: ``W``, the last steps whose gradients were averaged.
  """
  params: Dict[str, Any]
  elbo: np.ndarray
  converged: np.ndarray
  distance: np.ndarray
  window: int


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
    A ``BatchedFit``: the fitted parameters, each data set's last ELBO
    estimate and its convergence (module docstring).
  """
  sims, dim, dtype = target.simulations, target.dim, target.dtype
  if warm_start is None:
    warm_start = min(getattr(family, "warm_start", 0), steps)
  start = None
  if warm_start:
    mean_field = BatchedMeanField()
    start = _adam(target, mean_field, mean_field.init(sims, dim, dtype), warm_start,
                  samples, mean_field.learning_rate,
                  tf.random.experimental.stateless_split(seed, 2)[1], jit_compile, 0)[0]
  params = family.init(sims, dim, dtype) if start is None else family.init(sims, dim, dtype,
                                                                           start)
  window = max(steps // 10, 1)
  fitted, last, step_sum, step_square, count = _adam(target, family, params, steps, samples,
                                                     learning_rate, seed, jit_compile, window)
  converged, distance = np.ones([sims], bool), np.full([sims], np.nan)
  if step_sum is not None:
    converged, distance = _converged(step_sum.numpy(), step_square.numpy(), count.numpy())
  return BatchedFit({n: x.numpy() for n, x in fitted.items()}, last.numpy(), converged,
                    distance, window)


def _converged(step_sum, step_square, count):
  """``(converged [S], distance [S])`` from the sums of the Newton steps
  ``[S, K]`` and their squares over ``count [S]`` finite steps."""
  n = np.maximum(count, 1.)[:, None]
  mean = step_sum / n
  se = np.sqrt(np.maximum(step_square / n - np.square(mean), 0.) / n)
  distance = np.max(np.abs(mean), axis=1)
  off = np.abs(mean) > np.maximum(TOLERANCE, RISE_SE * se)
  converged = ~np.any(off, axis=1) & (count > 0)
  return converged, np.where(count > 0, distance, np.nan)


def _adam(target, family, params, steps, samples, learning_rate, seed, jit_compile, window):
  """``steps`` Adam steps of the ``S`` ELBOs from ``params``: ``(params dict
  name -> [S, ...] Tensors, last ELBO estimates [S], and over the last
  ``window`` steps the sums of ``family.newton_step`` [S, K] and of its
  squares and the count of finite steps [S])``; the sums are None when
  ``window`` is 0 or the family has no ``newton_step``."""
  sims, dim, dtype = target.simulations, target.dim, target.dtype
  names = sorted(params)
  b1, b2, tiny = 0.9, 0.999, 1e-7
  diagnose = bool(window) and hasattr(family, "newton_step")

  def elbo(p, t):
    eps = tf.random.stateless_normal([sims, samples, dim],
                                     tf.random.experimental.stateless_fold_in(seed, t),
                                     dtype=dtype)
    u, log_q = family.draw(p, eps)
    log_p = tf.reshape(target.log_prob_flat(tf.reshape(u, [sims * samples, dim])),
                       [sims, samples])
    return tf.reduce_mean(log_p - log_q, axis=1)

  def body(t, p, m, v, last, sums):
    with tf.GradientTape() as tape:
      tape.watch(p)
      values = elbo(p, t)
      loss = -tf.reduce_sum(tf.where(tf.math.is_finite(values), values, 0.))
    grads = tape.gradient(loss, p)
    tf_ = tf.cast(t + 1, dtype)
    decay = 0.01 + 0.99 * 0.5 * (1. + tf.cos(np.pi * tf.minimum(tf.cast(t, dtype) / steps, 1.)))
    rate = learning_rate * decay * tf.sqrt(1. - b2**tf_) / (1. - b1**tf_)
    new_p, new_m, new_v, all_ok = {}, {}, {}, tf.ones([sims], tf.bool)
    for n in names:
      g = grads[n]
      ok = tf.reduce_all(tf.math.is_finite(tf.reshape(g, [sims, -1])), axis=1)
      all_ok = all_ok & ok
      ok = tf.reshape(ok, [sims] + [1] * (g.shape.rank - 1))
      g = tf.where(ok, g, 0.)
      new_m[n] = tf.where(ok, b1 * m[n] + (1. - b1) * g, m[n])
      new_v[n] = tf.where(ok, b2 * v[n] + (1. - b2) * tf.square(g), v[n])
      new_p[n] = tf.where(ok, p[n] - rate * new_m[n] / (tf.sqrt(new_v[n]) + tiny), p[n])
    if diagnose:  # the ELBO's gradient is -grads; only the last `window` steps count
      step = family.newton_step(p, {n: -grads[n] for n in names})
      use = all_ok & tf.reduce_all(tf.math.is_finite(step), -1) & (t >= steps - window)
      step = tf.where(use[:, None], step, 0.)
      sums = (sums[0] + step, sums[1] + tf.square(step), sums[2] + tf.cast(use, dtype))
    return t + 1, new_p, new_m, new_v, values, sums

  @console.per_call_function(jit_compile=jit_compile)
  def run(p):
    zeros = {n: tf.zeros_like(x) for n, x in p.items()}
    sums = ()
    if diagnose:
      width = family.newton_step(p, p).shape[-1]
      sums = (tf.zeros([sims, width], dtype), tf.zeros([sims, width], dtype),
              tf.zeros([sims], dtype))
    out = tf.while_loop(lambda t, *_: t < steps, body,
                        (tf.constant(0), p, zeros, dict(zeros), tf.zeros([sims], dtype), sums))
    return (out[1], out[4]) + (tuple(out[5]) if diagnose else (None, None, None))

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
