"""Reference posterior of the Lotka-Volterra model on the lynx and hare data,
computed without edward_lite: importance sampling in NumPy.

The model (after Carpenter's Stan case study, log-normal priors on the
positive rates): ``alpha, gamma ~ LogNormal(0, 0.5)``, ``beta, delta ~
LogNormal(log 0.05, 0.5)``, ``sigma[2] ~ LogNormal(-1, 1)``, ``z_init[2] ~
LogNormal(log 10, 1)``; ``du/dt = (alpha - beta v) u``, ``dv/dt = (-gamma +
delta u) v``; the counts of 1900 ``~ LogNormal(log z_init, sigma)`` and of
1901-1920 ``~ LogNormal(log z(t), sigma)`` (``tests/lotka_volterra.py``).

The ODE is solved by classical RK4 at step 0.01 (vectorized over draws); the
proposal is a multivariate t (4-10 degrees of freedom) at the Laplace
approximation of the log-parameters (Nelder-Mead mode, finite-difference
Hessian).  Three proposals of 200,000 draws each are pooled; the script
prints each one's effective sample size, largest normalized weight and
estimates, and writes means, sds and Monte Carlo errors (the spread of the
three estimates and the weights' effective sample size, whichever is larger)
to ``tests/refs/lotka_volterra.json``.  About 3 minutes on 2 cores.

    .venv/bin/python benchmarks/lotka_volterra_reference.py
"""

import json
import os
import sys
import time

import numpy as np
import scipy.optimize
import scipy.stats

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from lotka_volterra import COUNTS, PRIORS, NAMES  # noqa: E402  pylint: disable=wrong-import-position


def rk4(theta, z0, h=0.01):
  """``z(t)`` at t = 1..20 for each row of ``theta [S, 4]``, ``z0 [S, 2]``: ``[S, 20, 2]``."""
  a, b, g, d = theta.T
  f = lambda u, v: ((a - b * v) * u, (-g + d * u) * v)  # pylint: disable=unnecessary-lambda-assignment
  u, v = z0[:, 0].copy(), z0[:, 1].copy()
  per, out = int(round(1 / h)), []
  with np.errstate(all="ignore"):  # far tails overflow: their weight is 0
    for step in range(20 * per):
      k1 = f(u, v)
      k2 = f(u + h / 2 * k1[0], v + h / 2 * k1[1])
      k3 = f(u + h / 2 * k2[0], v + h / 2 * k2[1])
      k4 = f(u + h * k3[0], v + h * k3[1])
      u = u + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
      v = v + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
      if (step + 1) % per == 0:
        out.append(np.stack([u, v], 1))
  return np.stack(out, 1)


def log_normal(x, mu, s):
  return -np.log(x) - np.log(s) - 0.5 * np.log(2 * np.pi) - 0.5 * ((np.log(x) - mu) / s) ** 2


def log_density(w):
  """Log posterior density of the log-parameters ``w [S, 8]`` (``NAMES``
  order: the four rates, sigma[2], z_init[2]), Jacobian included."""
  x = np.exp(w)
  theta, sigma, z0 = x[:, :4], x[:, 4:6], x[:, 6:]
  lp = sum(log_normal(x[:, i], *PRIORS[n]) for i, n in enumerate(NAMES[:4]))
  lp = lp + log_normal(sigma, *PRIORS["sigma"]).sum(1) + log_normal(z0, *PRIORS["z_init"]).sum(1)
  with np.errstate(all="ignore"):
    z = rk4(theta, z0)
    lp = lp + log_normal(COUNTS[0][None], np.log(z0), sigma).sum(1)
    lp = lp + log_normal(COUNTS[1:][None], np.log(z), sigma[:, None]).sum((1, 2))
  lp = lp + w.sum(1)
  return np.where(np.isfinite(lp), lp, -np.inf)


def laplace():
  start = np.log([0.55, 0.028, 0.8, 0.024, 0.2, 0.2, 33., 6.])
  mode = scipy.optimize.minimize(lambda w: -log_density(w[None])[0], start, method="Nelder-Mead",
                                 options=dict(maxiter=20000, xatol=1e-8, fatol=1e-10)).x
  eps, eye = 1e-3, np.eye(8) * 1e-3
  hess = np.zeros((8, 8))
  for i in range(8):
    for j in range(8):
      f = log_density(np.stack([mode + eye[i] + eye[j], mode + eye[i] - eye[j],
                                mode - eye[i] + eye[j], mode - eye[i] - eye[j]]))
      hess[i, j] = (f[0] - f[1] - f[2] + f[3]) / (4 * eps ** 2)
  return mode, np.linalg.inv(-hess)


def main():
  t0 = time.perf_counter()
  mode, cov = laplace()
  print(f"Laplace approximation in {time.perf_counter() - t0:.0f} s; mode {np.exp(mode).round(4)}")
  estimates, ess_total = [], 0.
  for seed, scale, df in ((1, 1.2, 5), (2, 1.5, 4), (3, 1.0, 10)):
    proposal = scipy.stats.multivariate_t(loc=mode, shape=scale * cov, df=df)
    w = proposal.rvs(200_000, random_state=np.random.default_rng(seed))
    log_w = np.concatenate([log_density(w[i:i + 20_000]) for i in range(0, len(w), 20_000)])
    log_w = log_w - proposal.logpdf(w)
    weights = np.exp(log_w - log_w.max())
    weights /= weights.sum()
    ess = 1. / np.sum(weights ** 2)
    x = np.exp(w)
    mean = weights @ x
    sd = np.sqrt(weights @ (x - mean) ** 2)
    estimates.append((mean, sd))
    ess_total += ess
    print(f"proposal t{df}, scale {scale}: ESS {ess:.0f}, largest weight {weights.max():.1e}; "
          f"means {mean.round(5)}")
  means = np.array([m for m, _ in estimates])
  sds = np.array([s for _, s in estimates])
  mean, sd = means.mean(0), sds.mean(0)
  mcse = np.maximum(means.std(0, ddof=1) / np.sqrt(3), sd / np.sqrt(ess_total))
  labels = ["alpha", "beta", "gamma", "delta", "sigma[0]", "sigma[1]", "z_init[0]", "z_init[1]"]
  out = {"model": "lotka_volterra",
         "method": "importance sampling, NumPy RK4 at h = 0.01, 3 x 200,000 multivariate-t "
                   "proposals at the Laplace approximation (benchmarks/lotka_volterra_reference.py)",
         "ess": round(ess_total),
         "posterior": {l: {"mean": float(m), "sd": float(s), "mcse_mean": float(e)}
                       for l, m, s, e in zip(labels, mean, sd, mcse)}}
  path = os.path.join(HERE, "..", "tests", "refs", "lotka_volterra.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1)
  print(f"wrote {os.path.relpath(path)} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
  main()
