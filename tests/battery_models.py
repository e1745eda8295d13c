"""The robustness battery's models and their reference posteriors (issue 17).

Standard models written the way their Stan originals are (flat priors where
Stan states none, constrained types as ``ed.Flat(low=..., high=...)`` or
``ed.Flat(support=...)`` plus an ``ed.Factor`` for the prior statement, loops
as ``tf.scan``), each on small data simulated here by seeded NumPy, and each
with a reference posterior computed another way: exactly (conjugate
Gaussian parts integrated analytically, the rest by a fine 1-D quadrature)
where that is possible, otherwise by quadrature on a grid in the
unconstrained space (whitened around the mode; the mass on the grid's
faces is checked to be negligible).  References are computed in float64
and cached in memory only.

Shared by ``tests/test_battery.py`` (the bounded CI part),
``benchmarks/robustness_battery.py`` (every model at 4, 8 and 64 chains and
three seeds) and ``benchmarks/adaptation.py`` (nine models against nutpie
and NumPyro, whose draws ``agreement`` checks alike).

A run passes when no chain is stuck (``result.stuck_chains()`` empty), the
largest R-hat over every latent is below 1.01, and every checked quantity's
posterior mean and sd lie within ``Z_MAX`` Monte Carlo standard errors of
the reference (MCSE of the mean from the bulk ESS; MCSE of the sd from the
ESS of the squared deviations, as the ``posterior`` R package).
"""

import dataclasses
import functools
import itertools
import time
import warnings

import numpy as np
import scipy.optimize
import scipy.special
import scipy.stats

import edward_lite as ed  # first: it imports TensorFlow without its start-up logs
import tensorflow as tf  # pylint: disable=g-bad-import-order
import tensorflow_probability as tfp  # pylint: disable=g-bad-import-order

import posteriordb_models as pdb  # pylint: disable=g-bad-import-order
import zoo  # pylint: disable=g-bad-import-order

tfd = tfp.distributions
psd = tfp.math.psd_kernels

Z_MAX = 4.          # |estimate - reference| / MCSE allowed, for means and sds
RHAT_MAX = 1.01
# Grid quadrature: the largest fraction of the mass allowed on the grid's
# faces.  On ARMA(1,1) (3e-5 on the faces at +-7 sd) the means and sds move
# by under 2e-4 sd from +-7 to +-12 sd; a Monte Carlo error is >= 4e-3 sd
# even at 64 chains x 1000 draws.
FACE_MAX = 1e-4


@dataclasses.dataclass
class Model:
  name: str
  stan: str                       # the Stan original, in one line
  program: object                 # the edward_lite program
  data: object                    # () -> (args, observed)
  quantities: object              # draws dict -> {label: [draws, chains, *shape]}
  reference: object               # () -> {label: (mean, sd)} (arrays like one draw)
  reference_kind: str             # "exact", "1-D quadrature", "4-D grid", ...
  kernel: object = "nuts"         # default NUTS unless Stan's reference needs more
  note: str = ""
  loops: bool = False             # tf.scan: each chain's gradient in turn
  check_sd: tuple = None          # labels whose sd is checked (None: all)
  options: dict = dataclasses.field(default_factory=dict)  # more arguments of sample
  in_ci: bool = True              # in tests/test_battery.py (else tested elsewhere)
  # Why no NUTS sampler matches this model's reference (it is in the battery
  # to check that such a run is flagged, not trusted); "" for the others.
  known_hard: str = ""


MODELS = {}


def register(**kwargs):
  model = Model(**kwargs)
  model.reference = functools.lru_cache(maxsize=None)(model.reference)
  MODELS[model.name] = model
  return model


# -- quadrature helpers ----------------------------------------------------------

def _trapezoid_1d(log_density, grid):
  """Normalized weights of a 1-D grid (log density on the grid)."""
  lp = log_density(grid)
  w = np.exp(lp - lp.max())
  assert w[0] < 1e-12 * w.max() and w[-1] < 1e-12 * w.max(), "1-D grid too narrow"
  return w / w.sum()


def _moments(w, values):
  """Mean and sd over a grid with weights ``w`` of ``values[i, ...]``."""
  values = np.asarray(values, np.float64)
  w = w.reshape((-1,) + (1,) * (values.ndim - 1))
  mean = np.sum(w * values, axis=0)
  return mean, np.sqrt(np.maximum(np.sum(w * values**2, axis=0) - mean**2, 0.))


def grid_reference(log_density, functions, start, points=25, width=7., chunk=200_000,
                   unit_dim=None, unit_points=48):
  """Posterior means and sds of ``functions(u)`` by quadrature on a grid.

  ``log_density(u)`` is the unnormalized log density of the unconstrained
  parameters ``u`` (``[M, D]`` -> ``[M]``, float64, Jacobians included);
  ``functions(u)`` -> dict label -> ``[M, ...]``.  The grid is ``points``
  per dimension over ``+-width`` standard deviations of the Laplace
  approximation, in its whitened coordinates (equal weights: the trapezoid
  rule, spectrally accurate for a smooth density that vanishes at the
  faces).  Asserts that the faces carry under ``FACE_MAX`` of the mass.

  ``unit_dim``: a coordinate that is ``logit(p)`` of a ``p`` in (0, 1) whose
  density reaches the ends of the interval (a flat prior on a fraction the
  data hardly inform: its tails in ``u`` are exponential).  It is
  integrated over ``p`` by ``unit_points``-point Gauss-Legendre instead, and
  the other coordinates on a whitened grid around their conditional mode
  at each node.
  """
  start = np.asarray(start, np.float64)
  mode = _mode(log_density, start)
  acc = _Accumulator(functions, -float(log_dims(log_density, mode)))
  if unit_dim is None:
    acc.add_grid(log_density, mode, _laplace_chol(log_density, mode), points, width, chunk)
    return acc.result()
  rest = [d for d in range(len(start)) if d != unit_dim]
  nodes, weights = np.polynomial.legendre.leggauss(unit_points)
  p, weights = (nodes + 1) / 2, weights / 2
  cond_mode = mode[rest]
  for p_i, w_i in zip(p, weights):
    u_unit = np.log(p_i / (1 - p_i))

    def conditional(v, u_unit=u_unit):
      u = np.empty((len(v), len(start)))
      u[:, rest], u[:, unit_dim] = v, u_unit
      return log_density(u)
    cond_mode = _mode(conditional, cond_mode, polish=False)
    chol = _laplace_chol(conditional, cond_mode)
    # du_unit = dp / (p (1 - p)); the whitened grid's volume is |det chol|.
    log_weight = np.log(w_i / (p_i * (1 - p_i))) + np.sum(np.log(np.diag(chol)))
    acc.add_grid(conditional, cond_mode, chol, points, width, chunk, log_weight,
                 lift=lambda v, u_unit=u_unit: np.insert(v, unit_dim, u_unit, axis=1))
  return acc.result()


def log_dims(log_density, u):
  return log_density(np.asarray(u, np.float64)[None])[0]


def _mode(log_density, start, polish=True):
  """The mode (only the grid's centre: it need not be exact)."""
  neg = lambda u: -float(log_dims(log_density, u))
  opt = scipy.optimize.minimize(neg, start, method="BFGS", options=dict(gtol=1e-6))
  if polish:
    opt = scipy.optimize.minimize(neg, opt.x, method="Nelder-Mead",
                                  options=dict(xatol=1e-8, fatol=1e-10, maxiter=5000))
  return opt.x


def _laplace_chol(log_density, mode):
  return np.linalg.cholesky(np.linalg.inv(_hessian(
      lambda u: -float(log_dims(log_density, u)), mode)))


class _Accumulator:
  """Weighted sums of ``functions`` and their squares over grid points."""

  def __init__(self, functions, log_scale):
    self.functions, self.log_scale = functions, log_scale
    self.total, self.face, self.sums, self.squares = 0., 0., {}, {}

  def add_grid(self, log_density, mode, chol, points, width, chunk, log_weight=0.,
               lift=lambda v: v):
    z1 = np.linspace(-width, width, points)
    grid = itertools.product(range(points), repeat=len(mode))
    while True:
      idx = np.array(list(itertools.islice(grid, chunk)))
      if len(idx) == 0:
        break
      v = mode + z1[idx] @ chol.T
      lp = log_density(v)
      w = np.exp(np.where(np.isfinite(lp), lp + log_weight + self.log_scale, -np.inf))
      self.face += float(np.sum(w * np.any((idx == 0) | (idx == points - 1), axis=1)))
      self.total += w.sum()
      for label, value in self.functions(lift(v)).items():
        value = np.asarray(value, np.float64)
        ww = w.reshape((-1,) + (1,) * (value.ndim - 1))
        self.sums[label] = self.sums.get(label, 0.) + np.sum(ww * value, axis=0)
        self.squares[label] = self.squares.get(label, 0.) + np.sum(ww * value**2, axis=0)

  def result(self):
    assert self.face < FACE_MAX * self.total, (
        f"grid too narrow: {self.face / self.total:.1e} of the mass on its faces")
    out = {}
    for label in self.sums:
      mean = self.sums[label] / self.total
      out[label] = (mean, np.sqrt(np.maximum(self.squares[label] / self.total - mean**2, 0.)))
    return out


def _hessian(f, x, eps=1e-4):
  dim = len(x)
  h = np.zeros((dim, dim))
  for i in range(dim):
    for j in range(i, dim):
      ei, ej = np.eye(dim)[i] * eps, np.eye(dim)[j] * eps
      h[i, j] = h[j, i] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej)
                           + f(x - ei - ej)) / (4 * eps**2)
  return h


def _norm_logpdf(x, loc, scale):
  return -0.5 * ((x - loc) / scale)**2 - np.log(scale) - 0.5 * np.log(2 * np.pi)


def _halfcauchy_logpdf(x, scale):
  return np.log(2 / (np.pi * scale)) - np.log1p((x / scale)**2)


# -- linear regressions with flat coefficients (exact) -------------------------

def flat_regression_reference(x, y, log_prior_sigma):
  """``y ~ N(X b, sigma)``, flat ``b``: ``b | sigma, y ~ N(b_hat, sigma^2
  (X'X)^-1)`` and ``p(sigma | y) ~ p(sigma) sigma^-(N-p) exp(-SSE / 2
  sigma^2)``; ``sigma``'s moments by a fine quadrature on log sigma, then
  ``E b = b_hat``, ``Var b = E[sigma^2] (X'X)^-1`` exactly."""
  n, p = x.shape
  b_hat = np.linalg.lstsq(x, y, rcond=None)[0]
  sse = np.sum((y - x @ b_hat)**2)
  s = np.linspace(np.log(np.sqrt(sse / n)) - 3., np.log(np.sqrt(sse / n)) + 3., 60001)
  sigma = np.exp(s)
  w = _trapezoid_1d(lambda s_: log_prior_sigma(np.exp(s_)) + s_ - (n - p) * s_
                    - sse / (2 * np.exp(2 * s_)), s)
  sigma_mean, sigma_sd = _moments(w, sigma)
  e_sigma2 = np.sum(w * sigma**2)
  b_sd = np.sqrt(e_sigma2 * np.diag(np.linalg.inv(x.T @ x)))
  return {"b": (b_hat, b_sd), "sigma": (sigma_mean, sigma_sd)}


def kid_score_data(n=434, seed=1):
  rng = np.random.default_rng(seed)
  hs = (rng.uniform(size=n) < 0.79) * 1.
  iq = rng.normal(100., 15., n)
  return (hs, iq), {"kid_score": 26. + 6. * hs + 0.56 * iq + rng.normal(0., 18., n)}


def kid_score(mom_hs, mom_iq):
  b = ed.Flat(shape=3, name="b")
  sigma = ed.HalfCauchy(0., 2.5, name="sigma")
  return ed.Normal(b[0] + b[1] * mom_hs + b[2] * mom_iq, sigma, name="kid_score")


def _kid_score_reference():
  (hs, iq), obs = kid_score_data()
  x = np.stack([np.ones_like(hs), hs, iq], 1)
  return flat_regression_reference(x, obs["kid_score"], lambda s: _halfcauchy_logpdf(s, 2.5))


register(
    name="linreg", program=kid_score, data=kid_score_data,
    stan="kidiq kidscore_momhsiq: vector[3] beta (flat); sigma ~ cauchy(0, 2.5); 434 rows",
    quantities=lambda d: {"b": d["b"], "sigma": d["sigma"]},
    reference=_kid_score_reference, reference_kind="exact (1-D quadrature in sigma)")


def earnings_data(n=300, seed=2):
  rng = np.random.default_rng(seed)
  male = (rng.uniform(size=n) < 0.4) * 1.
  height = rng.normal(64. + 5. * male, 3.)
  earn = np.exp(5.8 + 0.05 * height + 0.4 * male + rng.normal(0., 0.85, n))
  return (height, male), {"earn": earn}


def log_earnings(height, male, earn):
  """Stan's log-earnings regression: the log taken inside the model."""
  b = ed.Flat(shape=3, name="b")
  sigma = ed.Flat(low=0., name="sigma")
  log_earn = tf.math.log(tf.convert_to_tensor(earn, tf.float32))
  ed.Factor(tfd.Normal(b[0] + b[1] * height + b[2] * male, sigma).log_prob(log_earn),
            name="log_earn")


def _log_earnings_data():
  (height, male), obs = earnings_data()
  return (height, male, obs["earn"]), {}


def _log_earnings_reference():
  (height, male), obs = earnings_data()
  x = np.stack([np.ones_like(height), height, male], 1)
  return flat_regression_reference(x, np.log(obs["earn"]), lambda s: 0. * s)


register(
    name="loglinreg", program=log_earnings, data=_log_earnings_data,
    stan="earnings logearn_height_male: log(earn) ~ normal(X beta, sigma), all flat; 300 rows",
    quantities=lambda d: {"b": d["b"], "sigma": d["sigma"]},
    reference=_log_earnings_reference, reference_kind="exact (1-D quadrature in sigma)")


def wide_regression_data(n=200, p=10, seed=3):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, p - 1)) * rng.uniform(0.5, 3., p - 1)
  beta = rng.normal(0., 1., p)
  return (x,), {"y": beta[0] + x @ beta[1:] + rng.normal(0., 2., n)}


def wide_regression(x):
  b = ed.Flat(shape=10, name="b")
  sigma = ed.Flat(low=0., name="sigma")
  return ed.Normal(b[0] + tf.linalg.matvec(tf.cast(x, tf.float32), b[1:]), sigma, name="y")


def _wide_reference():
  (x,), obs = wide_regression_data()
  xx = np.concatenate([np.ones((len(x), 1)), x], 1)
  return flat_regression_reference(xx, obs["y"], lambda s: 0. * s)


register(
    name="linreg10", program=wide_regression, data=wide_regression_data,
    stan="10-coefficient linear regression, vector[10] beta and sigma flat; 200 rows",
    quantities=lambda d: {"b": d["b"], "sigma": d["sigma"]},
    reference=_wide_reference, reference_kind="exact (1-D quadrature in sigma)")


# -- GLMs (grid) -------------------------------------------------------------------

def wells_data(n=250, seed=4):
  rng = np.random.default_rng(seed)
  dist100 = rng.gamma(2., 0.25, n)
  arsenic = rng.gamma(2., 0.8, n)
  eta = 0.0 - 0.9 * dist100 + 0.45 * arsenic
  return (dist100, arsenic), {"switched": (rng.uniform(size=n) < 1 / (1 + np.exp(-eta))) * 1}


def wells(dist100, arsenic):
  beta = ed.Flat(shape=3, name="beta")
  return ed.Bernoulli(logits=beta[0] + beta[1] * dist100 + beta[2] * arsenic, name="switched")


def _wells_reference():
  (d, a), obs = wells_data()
  x, y = np.stack([np.ones_like(d), d, a], 1), obs["switched"]

  def log_density(u):
    eta = u @ x.T
    return np.sum(y * eta - np.logaddexp(0., eta), axis=1)
  return grid_reference(log_density, lambda u: {"beta": u}, np.zeros(3), points=41, width=8.)


register(
    name="logistic", program=wells, data=wells_data,
    stan="wells dist+arsenic: switched ~ bernoulli_logit(X beta), beta flat; 250 rows",
    quantities=lambda d: {"beta": d["beta"]},
    reference=_wells_reference, reference_kind="3-D grid")


def roaches_data(n=120, seed=5):
  rng = np.random.default_rng(seed)
  roach1 = rng.gamma(1.5, 1., n)
  treatment = (rng.uniform(size=n) < 0.5) * 1.
  exposure = rng.uniform(0.6, 1.4, n)
  eta = np.log(exposure) + 1.2 + 0.35 * roach1 - 0.5 * treatment
  return (roach1, treatment, exposure), {"y": rng.poisson(np.exp(eta))}


def roaches(roach1, treatment, exposure):
  beta = ed.Normal(0., 2.5, sample_shape=3, name="beta")
  eta = beta[0] + beta[1] * roach1 + beta[2] * treatment + tf.math.log(
      tf.convert_to_tensor(exposure, tf.float32))
  return ed.Poisson(log_rate=eta, name="y")


def _roaches_reference():
  (r, t, e), obs = roaches_data()
  x, y, off = np.stack([np.ones_like(r), r, t], 1), obs["y"], np.log(e)

  def log_density(u):
    eta = off + u @ x.T
    return np.sum(y * eta - np.exp(eta), axis=1) + np.sum(_norm_logpdf(u, 0., 2.5), axis=1)
  return grid_reference(log_density, lambda u: {"beta": u}, np.zeros(3), points=41, width=8.)


register(
    name="poisson", program=roaches, data=roaches_data,
    stan="roaches Poisson: y ~ poisson_log(log(exposure) + X beta), beta ~ normal(0, 2.5); 120 rows",
    quantities=lambda d: {"beta": d["beta"]},
    reference=_roaches_reference, reference_kind="3-D grid")


# -- AR(K) (exact) ----------------------------------------------------------------

AR_K = 3


def ar_data(n=200, seed=6):
  rng = np.random.default_rng(seed)
  coef, y = np.array([0.5, -0.3, 0.2]), np.zeros(n + 50)
  for t in range(AR_K, n + 50):
    y[t] = 0.3 + coef @ y[t - AR_K:t][::-1] + rng.normal(0., 0.7)
  return (y[50:],), {}


def ar_k(y):
  """Stan's arK: mu[t] = alpha + sum_k beta[k] y[t-k] for t > K."""
  alpha = ed.Normal(0., 10., name="alpha")
  beta = ed.Normal(0., 10., sample_shape=AR_K, name="beta")
  sigma = ed.HalfCauchy(0., 2.5, name="sigma")
  y = tf.convert_to_tensor(y, tf.float32)
  n = y.shape[0]
  mu = alpha
  for k in range(AR_K):
    mu = mu + beta[k] * y[AR_K - 1 - k:n - 1 - k]
  ed.Factor(tfd.Normal(mu, sigma).log_prob(y[AR_K:]), name="y")


def _ar_reference():
  """Given sigma, (alpha, beta) are Gaussian with the N(0, 10^2) prior
  (conjugate); sigma by a fine 1-D quadrature of ``p(sigma) p(y | sigma)``."""
  (y,), _ = ar_data()
  x = np.stack([np.ones(len(y) - AR_K)] + [y[AR_K - 1 - k:len(y) - 1 - k] for k in range(AR_K)], 1)
  t = y[AR_K:]
  n, p = x.shape
  xtx, xty = x.T @ x, x.T @ t
  s = np.linspace(np.log(0.2), np.log(3.), 20001)

  def parts(sig):
    prec = xtx / sig**2 + np.eye(p) / 100.
    cov = np.linalg.inv(prec)
    m = cov @ xty / sig**2
    log_marg = (-n * np.log(sig) - t @ t / (2 * sig**2) + 0.5 * m @ prec @ m
                + 0.5 * np.linalg.slogdet(cov)[1] - p * np.log(10.))
    return m, cov, log_marg
  sig = np.exp(s)
  all_parts = [parts(v) for v in sig]
  lp = np.array([q[2] for q in all_parts]) + _halfcauchy_logpdf(sig, 2.5) + s
  w = np.exp(lp - lp.max())
  assert w[0] < 1e-12 and w[-1] < 1e-12
  w /= w.sum()
  ms = np.array([q[0] for q in all_parts])
  vs = np.array([np.diag(q[1]) for q in all_parts])
  mean = w @ ms
  sd = np.sqrt(w @ (vs + ms**2) - mean**2)
  return {"alpha": (mean[0], sd[0]), "beta": (mean[1:], sd[1:]), "sigma": _moments(w, sig)}


register(
    name="ar3", program=ar_k, data=ar_data,
    stan="arK (K=3): alpha, beta ~ normal(0, 10), sigma ~ cauchy(0, 2.5); 200 steps",
    quantities=lambda d: {"alpha": d["alpha"], "beta": d["beta"], "sigma": d["sigma"]},
    reference=_ar_reference, reference_kind="exact (conjugate given sigma, 1-D quadrature)")


# -- ARMA(1,1) (tf.scan, grid) ------------------------------------------------------

def arma_data(n=120, seed=7):
  rng = np.random.default_rng(seed)
  mu, phi, theta, sigma = 1., 0.6, 0.3, 0.8
  y, err = np.zeros(n), 0.
  prev = mu / (1 - phi)
  for t in range(n):
    e = rng.normal(0., sigma)
    y[t] = mu + phi * prev + theta * err + e
    prev, err = y[t], e
  return (y,), {}


def arma11(y):
  """Stan's arma11: nu[1] = mu + phi mu, err[t] = y[t] - nu[t],
  nu[t] = mu + phi y[t-1] + theta err[t-1] (a tf.scan over the errors);
  |phi| < 1 and |theta| < 1 as bounded reals with normal(0, 2) statements."""
  mu = ed.Normal(0., 10., name="mu")
  phi = ed.Flat(low=-1., high=1., name="phi")
  theta = ed.Flat(low=-1., high=1., name="theta")
  sigma = ed.HalfCauchy(0., 5., name="sigma")
  ed.Factor(tfd.Normal(0., 2.).log_prob(phi) + tfd.Normal(0., 2.).log_prob(theta),
            name="phi_theta_prior")
  y = tf.convert_to_tensor(y, tf.float32)
  err1 = y[0] - (mu + phi * mu)
  drive = y[1:] - mu - phi * y[:-1]          # err[t] = drive[t] - theta err[t-1]
  err = tf.scan(lambda prev, d: d - theta * prev, drive, initializer=err1)
  ed.Factor(tfd.Normal(0., sigma).log_prob(tf.concat([err1[None], err], 0)), name="err")


def _arma_reference():
  """Grid coordinates: the process mean ``m = mu / (1 - phi)`` (``mu`` and
  ``phi`` are strongly correlated), atanh(phi), atanh(theta), log sigma."""
  (y,), _ = arma_data()

  def constrain(u):
    phi = np.tanh(u[:, 1])
    return u[:, 0] * (1 - phi), phi, np.tanh(u[:, 2]), np.exp(u[:, 3])

  def log_density(u):
    mu, phi, theta, sigma = constrain(u)
    err = y[0] - (mu + phi * mu)
    ss = err**2
    for t in range(1, len(y)):
      err = y[t] - mu - phi * y[t - 1] - theta * err
      ss += err**2
    lp = -len(y) * np.log(sigma) - ss / (2 * sigma**2)
    lp += _norm_logpdf(mu, 0., 10.) + _norm_logpdf(phi, 0., 2.) + _norm_logpdf(theta, 0., 2.)
    lp += _halfcauchy_logpdf(sigma, 5.)
    return lp + np.log(1 - phi) + np.log1p(-phi**2) + np.log1p(-theta**2) + u[:, 3]

  def functions(u):
    return dict(zip(("mu", "phi", "theta", "sigma"), constrain(u)))
  return grid_reference(log_density, functions, [2.5, 0.5, 0.2, 0.], points=27, width=7.)


register(
    name="arma11", program=arma11, data=arma_data, loops=True,
    stan="arma11: mu ~ normal(0, 10), phi, theta in (-1, 1) ~ normal(0, 2), "
         "sigma ~ cauchy(0, 5); 120 steps",
    quantities=lambda d: {k: d[k] for k in ("mu", "phi", "theta", "sigma")},
    reference=_arma_reference, reference_kind="4-D grid")


# -- GARCH(1,1) (tf.scan, grid) -------------------------------------------------

GARCH_SIGMA1 = 1.


def garch_data(n=150, seed=8):
  rng = np.random.default_rng(seed)
  mu, alpha0, alpha1, beta1 = 0.2, 0.3, 0.3, 0.5
  r, var = np.zeros(n), GARCH_SIGMA1**2
  for t in range(n):
    if t > 0:
      var = alpha0 + alpha1 * (r[t - 1] - mu)**2 + beta1 * var
    r[t] = mu + np.sqrt(var) * rng.normal()
  return (r,), {"r": r}


def garch11(r):
  """Stan's garch11: all flat, alpha1 in (0, 1), beta1 in (0, 1 - alpha1);
  sigma[t]^2 = alpha0 + alpha1 (r[t-1] - mu)^2 + beta1 sigma[t-1]^2, sigma[1]
  given: a tf.scan over the conditional variances."""
  r = tf.convert_to_tensor(r, tf.float32)
  mu = ed.Flat(name="mu")
  alpha0 = ed.Flat(low=0., name="alpha0")
  alpha1 = ed.Flat(low=0., high=1., name="alpha1")
  beta1 = ed.Flat(low=0., high=1. - alpha1, name="beta1")
  shock = alpha0 + alpha1 * (r[:-1] - mu)**2
  var1 = tf.constant(GARCH_SIGMA1**2)
  var = tf.scan(lambda prev, a: a + beta1 * prev, shock, initializer=var1)
  return ed.Normal(mu, tf.sqrt(tf.concat([var1[None], var], 0)), name="r")


def _garch_reference():
  r = garch_data()[1]["r"]

  def constrain(u):
    a1 = scipy.special.expit(u[:, 2])
    return u[:, 0], np.exp(u[:, 1]), a1, (1 - a1) * scipy.special.expit(u[:, 3])

  def log_density(u):
    mu, a0, a1, b1 = constrain(u)
    var = np.full(len(u), GARCH_SIGMA1**2)
    lp = _norm_logpdf(r[0], mu, np.sqrt(var))
    for t in range(1, len(r)):
      var = a0 + a1 * (r[t - 1] - mu)**2 + b1 * var
      lp += _norm_logpdf(r[t], mu, np.sqrt(var))
    s2 = scipy.special.expit(u[:, 3])
    return lp + u[:, 1] + np.log(a1 * (1 - a1)) + np.log((1 - a1) * s2 * (1 - s2))

  def functions(u):
    return dict(zip(("mu", "alpha0", "alpha1", "beta1"), constrain(u)))
  return grid_reference(log_density, functions, [0.2, np.log(0.3), -0.8, 0.], points=21,
                        width=7., unit_dim=3, unit_points=24)


register(
    name="garch11", program=garch11, data=garch_data, loops=True,
    stan="garch11: mu, alpha0 > 0, alpha1 in (0, 1), beta1 in (0, 1 - alpha1), all flat; "
         "150 steps",
    quantities=lambda d: {k: d[k] for k in ("mu", "alpha0", "alpha1", "beta1")},
    reference=_garch_reference, reference_kind="4-D grid")


# -- Gaussian mixture with ordered means (grid) -----------------------------------

def mixture_data(n=150, seed=9):
  rng = np.random.default_rng(seed)
  z = rng.uniform(size=n) < 0.4
  return (n,), {"y": np.where(z, rng.normal(-2., 1., n), rng.normal(2., 1., n))}


def gauss_mix(n):
  """Stan's low_dim_gauss_mix_collapse: ordered[2] mu ~ normal(0, 2),
  sigma ~ normal(0, 2) (half), theta ~ beta(5, 5), log_mix(theta, ...)."""
  mu = ed.Flat(support="ordered", shape=2, name="mu")
  ed.Factor(tfd.Normal(0., 2.).log_prob(mu), name="mu_prior")
  sigma = ed.HalfNormal(2., name="sigma")
  theta = ed.Beta(5., 5., name="theta")
  return ed.MixtureSameFamily(tfd.Categorical(probs=tf.stack([theta, 1. - theta])),
                              tfd.Normal(mu, sigma), sample_shape=n, name="y")


def _mixture_reference():
  y = mixture_data()[1]["y"]

  def log_density(u):  # mu1, log(mu2 - mu1), log sigma, logit theta
    mu1, mu2 = u[:, 0], u[:, 0] + np.exp(u[:, 1])
    sigma, theta = np.exp(u[:, 2]), scipy.special.expit(u[:, 3])
    lp = np.zeros(len(u))
    for chunk in np.array_split(y, 10):
      l1 = np.log(theta)[:, None] + _norm_logpdf(chunk, mu1[:, None], sigma[:, None])
      l2 = np.log1p(-theta)[:, None] + _norm_logpdf(chunk, mu2[:, None], sigma[:, None])
      lp += np.sum(np.logaddexp(l1, l2), axis=1)
    lp += _norm_logpdf(mu1, 0., 2.) + _norm_logpdf(mu2, 0., 2.)
    lp += _norm_logpdf(sigma, 0., 2.) + scipy.stats.beta(5., 5.).logpdf(theta)
    return lp + u[:, 1] + u[:, 2] + np.log(theta * (1 - theta))

  def functions(u):
    return {"mu": np.stack([u[:, 0], u[:, 0] + np.exp(u[:, 1])], 1),
            "sigma": np.exp(u[:, 2]), "theta": scipy.special.expit(u[:, 3])}
  return grid_reference(log_density, functions, [-2., np.log(4.), 0., 0.], points=21,
                        width=7.)


register(
    name="gauss_mix", program=gauss_mix, data=mixture_data,
    stan="low_dim_gauss_mix_collapse: ordered[2] mu ~ normal(0, 2), sigma ~ normal(0, 2), "
         "theta ~ beta(5, 5); 150 rows",
    quantities=lambda d: {k: d[k] for k in ("mu", "sigma", "theta")},
    reference=_mixture_reference, reference_kind="4-D grid")


# -- GP regression, marginal likelihood (grid) --------------------------------------

def gp_data(n=24, seed=10):
  rng = np.random.default_rng(seed)
  x = np.sort(rng.uniform(-5., 5., n))
  f = 1.2 * np.sin(x) + 0.3 * x
  return (x[:, None],), {"y": f + rng.normal(0., 0.4, n)}


def gp_regression(x):
  """Stan user's guide GP: rho ~ inv_gamma(5, 5), alpha ~ std_normal(),
  sigma ~ std_normal() (half), y ~ multi_normal_cholesky(0, L(K + sigma^2 I))."""
  rho = ed.InverseGamma(5., 5., name="rho")
  alpha = ed.HalfNormal(1., name="alpha")
  sigma = ed.HalfNormal(1., name="sigma")
  x = tf.convert_to_tensor(x, tf.float32)
  k = psd.ExponentiatedQuadratic(amplitude=alpha, length_scale=rho).matrix(x, x)
  k += (sigma**2 + 1e-6) * tf.eye(x.shape[0])
  return ed.MultivariateNormalTriL(tf.zeros(x.shape[0]), tf.linalg.cholesky(k), name="y")


def _gp_reference():
  (x,), obs = gp_data()
  y, d2 = obs["y"], (x - x.T)**2

  def log_density(u):
    rho, alpha, sigma = np.exp(u[:, 0]), np.exp(u[:, 1]), np.exp(u[:, 2])
    k = alpha[:, None, None]**2 * np.exp(-0.5 * d2 / rho[:, None, None]**2)
    k += (sigma**2 + 1e-6)[:, None, None] * np.eye(len(y))
    chol = np.linalg.cholesky(k)
    z = np.linalg.solve(chol, np.broadcast_to(y[:, None], (len(u), len(y), 1)))[..., 0]
    lp = -0.5 * np.sum(z**2, 1) - np.sum(np.log(np.diagonal(chol, axis1=1, axis2=2)), 1)
    lp += scipy.stats.invgamma(5., scale=5.).logpdf(rho)
    lp += _norm_logpdf(alpha, 0., 1.) + _norm_logpdf(sigma, 0., 1.)
    return lp + u.sum(1)
  return grid_reference(log_density, lambda u: {"rho": np.exp(u[:, 0]),
                                                "alpha": np.exp(u[:, 1]),
                                                "sigma": np.exp(u[:, 2])},
                        np.log([1.5, 1., 0.4]), points=37, width=7., chunk=20_000)


register(
    name="gp", program=gp_regression, data=gp_data,
    stan="user's guide GP regression, marginal likelihood: rho ~ inv_gamma(5, 5), "
         "alpha, sigma ~ normal(0, 1); 24 points",
    quantities=lambda d: {k: d[k] for k in ("rho", "alpha", "sigma")},
    reference=_gp_reference, reference_kind="3-D grid")


# -- GP Poisson regression, latent and non-centred (nested quadrature) --------------------

GP_POISSON_X = np.arange(-10., 11., 2.)
GP_POISSON_K = np.array([40, 37, 29, 12, 4, 3, 9, 19, 77, 82, 33])


def gp_poisson(x):
  """posteriordb's gp_pois_regr: rho ~ gamma(25, 4), alpha ~ normal(0, 2)
  (half), f_tilde ~ std_normal(), f = cholesky(cov_exp_quad(x, alpha, rho)
  + 1e-10 I) f_tilde, k ~ poisson_log(f).  Written in float64 as Stan's is:
  in float32 a 1e-10 jitter leaves the covariance numerically singular."""
  rho = ed.Gamma(25., 4., name="rho")
  alpha = ed.HalfNormal(2., name="alpha")
  f_tilde = ed.Normal(0., 1., sample_shape=len(x), name="f_tilde")
  cov = psd.ExponentiatedQuadratic(alpha, rho).matrix(x[:, None], x[:, None])
  cov += 1e-10 * tf.eye(len(x), dtype=cov.dtype)
  f = ed.Deterministic(tf.linalg.matvec(tf.linalg.cholesky(cov), f_tilde), name="f")
  return ed.Poisson(log_rate=f, name="k")


def _gp_poisson_reference(points=41, draws=8000, seed=12):
  """Quadrature over ``(log rho, log alpha)`` of ``p(k | rho, alpha)`` and of
  the moments of ``f`` given them, each by importance sampling in
  ``f_tilde`` (11-D) from a multivariate t (8 degrees of freedom) at the
  conditional mode with the Laplace covariance, fresh draws at each node
  (their errors average out over the nodes; with the same draws at every
  node the means of ``f`` moved by 0.04 sd between seeds).  The conditional posterior of ``f_tilde`` is near Gaussian (counts
  3-82), so every node with over 1e-6 of the mass keeps over 40% of its
  draws as effective sample size (asserted); the grid spans +-7 sds of the coarse pass's marginal."""
  x, k = GP_POISSON_X, GP_POISSON_K.astype(np.float64)
  n, d2 = len(x), (x[:, None] - x[None, :])**2
  rng = np.random.default_rng(seed)
  df = 8.
  log_t_norm = (scipy.special.gammaln((df + n) / 2) - scipy.special.gammaln(df / 2)
                - 0.5 * n * np.log(df * np.pi))
  log_k_factorial = scipy.special.gammaln(k + 1).sum()

  def node(log_rho, log_alpha):
    """(log p(k | rho, alpha), E[f | .], E[f^2 | .], relative IS ESS)."""
    chol = np.linalg.cholesky(np.exp(2 * log_alpha - 0.5 * d2 * np.exp(-2 * log_rho))
                              + 1e-10 * np.eye(n))
    phi = lambda v: -0.5 * v @ v + k @ (chol @ v) - np.exp(chol @ v).sum()
    v = np.zeros(n)
    for _ in range(100):  # damped Newton in f_tilde
      rate = np.exp(chol @ v)
      hess = np.eye(n) + chol.T @ (rate[:, None] * chol)
      step = np.linalg.solve(hess, chol.T @ (k - rate) - v)
      t = 1.
      while phi(v + t * step) < phi(v) and t > 1e-8:
        t /= 2
      v = v + t * step
      if np.max(np.abs(t * step)) < 1e-10:
        break
    rate = np.exp(chol @ v)
    c = np.linalg.cholesky(np.linalg.inv(np.eye(n) + chol.T @ (rate[:, None] * chol)))
    t_draws = rng.standard_normal((draws, n)) / np.sqrt(rng.chisquare(df, (draws, 1)) / df)
    log_t = log_t_norm - 0.5 * (df + n) * np.log1p(np.sum(t_draws**2, 1) / df)
    v = v + t_draws @ c.T
    f = v @ chol.T
    lw = (-0.5 * np.sum(v**2, 1) - 0.5 * n * np.log(2 * np.pi) + f @ k - np.exp(f).sum(1)
          - log_k_factorial - log_t + np.sum(np.log(np.diag(c))))
    top = lw.max()
    w = np.exp(lw - top)
    log_z = top + np.log(w.mean())
    w /= w.sum()
    return log_z, w @ f, w @ f**2, 1. / np.sum(w**2) / draws

  def log_prior(log_rho, log_alpha):
    rho, alpha = np.exp(log_rho), np.exp(log_alpha)
    return (scipy.stats.gamma(25., scale=0.25).logpdf(rho) + _norm_logpdf(alpha, 0., 2.)
            + np.log(2.) + log_rho + log_alpha)

  def grid(centre, half_width, size):
    axes = [np.linspace(c - h, c + h, size) for c, h in zip(centre, half_width)]
    lp, eff = np.empty((size, size)), np.empty((size, size))
    m1, m2 = np.empty((size, size, n)), np.empty((size, size, n))
    for i, j in itertools.product(range(size), repeat=2):
      log_z, m1[i, j], m2[i, j], eff[i, j] = node(axes[0][i], axes[1][j])
      lp[i, j] = log_z + log_prior(axes[0][i], axes[1][j])
    w = np.exp(lp - lp.max())
    w /= w.sum()
    worst = eff[w > 1e-6].min()
    assert worst > 0.4, f"importance sampling at a node kept {worst:.2f} of its draws"
    return axes, w, m1, m2

  axes, w, _, _ = grid(np.log([5.5, 3.]), [1., 1.5], 15)
  centre = [w.sum(1 - a) @ axes[a] for a in (0, 1)]
  sd = [np.sqrt(w.sum(1 - a) @ (axes[a] - centre[a])**2) for a in (0, 1)]
  axes, w, m1, m2 = grid(centre, [7 * s for s in sd], points)
  face = w[0].sum() + w[-1].sum() + w[:, 0].sum() + w[:, -1].sum()
  assert face < FACE_MAX, f"grid too narrow: {face:.1e} of the mass on its faces"
  rho, alpha = np.meshgrid(np.exp(axes[0]), np.exp(axes[1]), indexing="ij")
  mean_f = np.einsum("ij,ijk->k", w, m1)
  return {"rho": _moments(w.ravel(), rho.ravel()), "alpha": _moments(w.ravel(), alpha.ravel()),
          "f": (mean_f, np.sqrt(np.einsum("ij,ijk->k", w, m2) - mean_f**2))}


register(
    name="gp_poisson", program=gp_poisson,
    data=lambda: ((GP_POISSON_X,), {"k": GP_POISSON_K}),
    stan="posteriordb gp_pois_regr: latent non-centred GP, 11 counts, "
         "rho ~ gamma(25, 4), alpha ~ normal(0, 2)",
    quantities=lambda d: {k: d[k] for k in ("rho", "alpha", "f")},
    reference=_gp_poisson_reference,
    reference_kind="2-D grid of 11-D importance sampling", options={"dtype": tf.float64},
    note="dtype=tf.float64, as Stan's double: a 1e-10 jitter needs it")


# -- hierarchical normal: centred and non-centred (exact) ------------------------

EIGHT_SCHOOLS_Y = zoo.EIGHT_SCHOOLS_Y.astype(np.float64)
EIGHT_SCHOOLS_SIGMA = zoo.EIGHT_SCHOOLS_SIGMA.astype(np.float64)


def informative_schools_data(seed=11):
  """Eight schools with well-measured effects (sigma_j 1-3, tau 8): the
  regime where the centred parameterization is the right one."""
  rng = np.random.default_rng(seed)
  sigma = rng.uniform(1., 3., 8)
  return (sigma,), {"y": 4. + 8. * rng.normal(size=8) + sigma * rng.normal(size=8)}


def hierarchical_reference(y, sigma, mu_scale=5., tau_scale=5.):
  """y_j ~ N(theta_j, sigma_j), theta_j ~ N(mu, tau), mu ~ N(0, mu_scale),
  tau ~ HalfCauchy(0, tau_scale): given tau everything is Gaussian (BDA
  5.4); tau by a fine quadrature on log tau."""
  s = np.linspace(-12., 8., 40001)
  tau = np.exp(s)[:, None]
  v = sigma**2 + tau**2                                  # [G, J]
  prec_mu = 1 / mu_scale**2 + np.sum(1 / v, 1)
  mean_mu = np.sum(y / v, 1) / prec_mu
  log_marg = (-0.5 * np.sum(np.log(v), 1) - 0.5 * np.sum(y**2 / v, 1)
              + 0.5 * mean_mu**2 * prec_mu - 0.5 * np.log(prec_mu) - np.log(mu_scale))
  lp = log_marg + _halfcauchy_logpdf(tau[:, 0], tau_scale) + s
  w = np.exp(lp - lp.max())
  assert w[-1] < 1e-10 * w.max()
  w /= w.sum()
  prec_j = 1 / sigma**2 + 1 / tau**2
  shrink = (1 / tau**2) / prec_j                         # weight of mu in E[theta_j]
  m_theta = (y / sigma**2) / prec_j + shrink * mean_mu[:, None]
  v_theta = 1 / prec_j + shrink**2 / prec_mu[:, None]
  mu_m = w @ mean_mu
  theta_m = w @ m_theta
  return {"mu": (mu_m, np.sqrt(w @ (1 / prec_mu + mean_mu**2) - mu_m**2)),
          "tau": _moments(w, tau[:, 0]),
          "theta": (theta_m, np.sqrt(w @ (v_theta + m_theta**2) - theta_m**2))}


def schools_centred(sigma):
  mu = ed.Normal(0., 5., name="mu")
  tau = ed.HalfCauchy(0., 5., name="tau")
  theta = ed.Normal(mu, tau, sample_shape=8, name="theta")
  return ed.Normal(theta, sigma, name="y")


def schools_noncentred(sigma):
  mu = ed.Normal(0., 5., name="mu")
  tau = ed.HalfCauchy(0., 5., name="tau")
  theta_tilde = ed.Normal(0., 1., sample_shape=8, name="theta_tilde")
  return ed.Normal(mu + tau * theta_tilde, sigma, name="y")


def _eight_schools_data():
  return (EIGHT_SCHOOLS_SIGMA,), {"y": EIGHT_SCHOOLS_Y}


register(
    name="hier_centred", program=schools_centred, data=informative_schools_data,
    stan="eight_schools_centered on well-measured schools (sigma_j 1-3): "
         "mu ~ normal(0, 5), tau ~ cauchy(0, 5)",
    quantities=lambda d: {k: d[k] for k in ("mu", "tau", "theta")},
    reference=lambda: hierarchical_reference(informative_schools_data()[1]["y"],
                                             informative_schools_data()[0][0]),
    reference_kind="exact (Gaussian given tau, 1-D quadrature)")

register(
    name="hier_noncentred", program=schools_noncentred, data=_eight_schools_data,
    stan="eight_schools_noncentered (the original data): theta = mu + tau theta_tilde",
    quantities=lambda d: {"mu": d["mu"], "tau": d["tau"],
                          "theta": d["mu"][..., None] + d["tau"][..., None] * d["theta_tilde"]},
    reference=lambda: hierarchical_reference(EIGHT_SCHOOLS_Y, EIGHT_SCHOOLS_SIGMA),
    reference_kind="exact (Gaussian given tau, 1-D quadrature)")


# -- Neal's funnel (exact marginals) -------------------------------------------------

def funnel():
  """Neal's funnel as in Stan's user guide: y ~ normal(0, 3),
  x ~ normal(0, exp(y / 2)), 9 x's."""
  v = ed.Normal(0., 3., name="v")
  return ed.Normal(0., tf.exp(v / 2.), sample_shape=9, name="x")


def funnel_noncentred():
  v = ed.Normal(0., 3., name="v")
  x_raw = ed.Normal(0., 1., sample_shape=9, name="x_raw")
  return ed.Deterministic(tf.exp(v / 2.) * x_raw, name="x")


FUNNEL_REFERENCE = {"v": (0., 3.), "x": (np.zeros(9), np.full(9, np.exp(9. / 4.)))}

register(
    name="funnel", program=funnel, data=lambda: ((), {}),
    stan="Neal's funnel, centred: v ~ normal(0, 3), x[9] ~ normal(0, exp(v / 2))",
    quantities=lambda d: {"v": d["v"], "x": d["x"]},
    reference=lambda: FUNNEL_REFERENCE, reference_kind="exact marginals",
    kernel=ed.mcmc.NUTS(target_accept=0.99), check_sd=("v",),
    note="target_accept=0.99 (Stan's user guide: the centred funnel needs "
         "adapt_delta near 1 and still diverges)",
    known_hard="the neck's curvature changes by orders of magnitude, which one step size "
               "per chain cannot follow (Stan's user guide; NumPyro's NUTS fails it too, "
               "benchmarks/RESULTS.md section 17)")

register(
    name="funnel_noncentred", program=funnel_noncentred, data=lambda: ((), {}),
    stan="Neal's funnel, non-centred: x = exp(v / 2) x_raw, x_raw ~ normal(0, 1)",
    quantities=lambda d: {"v": d["v"], "x": d["x"]},
    reference=lambda: FUNNEL_REFERENCE, reference_kind="exact marginals", check_sd=("v",))


# -- the public reference posteriors (tests/posteriordb_models.py) ---------------------


def _register_posteriordb(name, stan):
  """A posteriordb posterior as a battery model: its reference is a long Stan
  run, so each ``(mean, sd)`` comes with its own MCSEs (``agreement``).  In CI
  through ``tests/test_posteriordb.py``; here at every chain count and seed."""
  posterior = functools.lru_cache(maxsize=None)(lambda: pdb.load(name))
  register(
      name="pdb_" + name, stan=stan, program=posterior().program,
      data=lambda: (posterior().args, posterior().observed),
      quantities=lambda d: {k: v for k, v in posterior().values(d).items()
                            if k in posterior().reference},
      reference=lambda: {k: (r["mean"], r["sd"], r["mcse_mean"], r.get("mcse_sd", 0.))
                         for k, r in posterior().reference.items()},
      reference_kind="posteriordb (Stan, 10,000 draws)", in_ci=False)


_register_posteriordb("kidiq", "kidiq-kidscore_momhsiq: kid_score ~ normal(b0 + b1 hs + b2 iq, "
                      "sigma), flat b")
_register_posteriordb("earnings", "earnings-logearn_interaction_z: log earnings on z-scored "
                      "height, sex and their interaction")
_register_posteriordb("diamonds", "diamonds-diamonds: price on 24 correlated predictors and "
                      "their interactions (26 parameters)")
_register_posteriordb("eight_schools", "eight_schools-eight_schools_noncentered")
_register_posteriordb("arma", "arma-arma11 on its real data (not simulated from the model)")


# -- running and checking ------------------------------------------------------------

def _labels(value):
  value = np.asarray(value)
  if value.ndim == 0:
    return [((), "")]
  return [(i, "[" + ",".join(map(str, i)) + "]") for i in np.ndindex(*value.shape)]


def scalars(values):
  """``{label: [draws, chains]}``: every scalar of ``values`` ``{name: [draws,
  chains, ...]}``, labelled as the rows of ``agreement`` (``name[i,j]``)."""
  return {name + suffix: np.asarray(x, np.float64)[(slice(None), slice(None)) + index]
          for name, x in values.items() for index, suffix in _labels(np.asarray(x)[0, 0])}


def agreement(model, draws):
  """Each checked quantity of ``draws`` (``{latent: [draws, chains, ...]}``,
  any sampler's) against the reference: a row per scalar, the largest
  ``|z|`` of a mean and of a checked sd, and the range of the checked sd ratios."""
  ref = model.reference()
  rows, z_mean, z_sd, ratios = [], [], [], []
  for name, values in model.quantities(draws).items():
    # A reference from draws has MCSEs of its own: (mean, sd, mcse_mean, mcse_sd).
    mean_ref, sd_ref, mcse_ref, mcse_sd_ref = (
        np.asarray(r, np.float64) for r in tuple(ref[name]) + (0., 0.)[len(ref[name]) - 2:])
    values = np.asarray(values, np.float64)
    mcse = np.asarray(ed.diagnostics.mcse_mean(values))
    for index, suffix in _labels(mean_ref):
      at = lambda v: np.asarray(v)[index] if np.ndim(v) else v  # pylint: disable=cell-var-from-loop
      x = values[(slice(None), slice(None)) + index]
      label = name + suffix
      zm = (x.mean() - mean_ref[index]) / np.hypot(np.asarray(mcse)[index], at(mcse_ref))
      sd = x.std(ddof=1)
      row = dict(label=label, mean=x.mean(), ref_mean=mean_ref[index], z_mean=zm, sd=sd,
                 ref_sd=sd_ref[index], sd_ratio=sd / sd_ref[index])
      z_mean.append(abs(zm))
      if model.check_sd is None or name in model.check_sd:
        ref_mcse_sd = pdb.reference_mcse_sd(sd_ref[index], at(mcse_ref), at(mcse_sd_ref), x)
        row["z_sd"] = (sd - sd_ref[index]) / np.hypot(pdb.mcse_sd(x), ref_mcse_sd)
        z_sd.append(abs(row["z_sd"]))
        ratios.append(row["sd_ratio"])
      rows.append(row)
  return dict(max_z_mean=max(z_mean), max_z_sd=max(z_sd), sd_ratio=(min(ratios), max(ratios)),
              rows=rows)


def check(model, result):
  """The battery's verdict on one run: a dict of statistics and ``passed``."""
  stuck = result.stuck_chains()
  rhat = max(float(np.max(ed.diagnostics.rhat(result.draws[name])))
             for name in result.target.names)
  out = dict(stuck=stuck, max_rhat=rhat, divergences=int(np.sum(result.divergences)),
             **agreement(model, result.draws))
  out["passed"] = (not stuck and rhat < RHAT_MAX and out["max_z_mean"] < Z_MAX
                   and out["max_z_sd"] < Z_MAX)
  out["flagged"] = [] if out["passed"] else flags(result)
  return out


def flags(result):
  """The summary's warnings of a run (R-hat, divergences, stuck chains):
  what tells its user not to trust it."""
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    result.summary()
  return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def verdict(out):
  """``"pass"``; ``"flagged"`` for a failed run of a ``known_hard`` model
  that the summary warns about (what the battery asks of it); else ``"FAIL"``."""
  if out["passed"]:
    return "pass"
  return "flagged" if out.get("flagged") and MODELS[out["model"]].known_hard else "FAIL"


def run(model, chains, seed, warmup=1000, draws=1000, **kwargs):
  """Samples ``model`` with the defaults (its kernel) and checks it."""
  args, observed = model.data()
  start = time.perf_counter()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    result = ed.mcmc.sample(model.program, *args, observed=observed, kernel=model.kernel,
                            chains=chains, warmup=warmup, draws=draws, seed=seed,
                            progress=False, **{**model.options, **kwargs})
  seconds = time.perf_counter() - start
  out = check(model, result)
  out.update(model=model.name, chains=chains, seed=seed, seconds=seconds, result=result)
  return out
