"""An SIR epidemic fitted with an ODE solve inside the program (issue 33).

Susceptible, infected and recovered fractions of a population of 1000 follow

    dS/dt = -beta S I,   dI/dt = beta S I - gamma I,   dR/dt = gamma I,

from ``(S, I, R) = (0.99, 0.01, 0)``; the number infected on day ``d``,
``1000 I(d)``, is observed with negative-binomial noise of concentration
``phi`` (the form of the Stan case study of Grinsztajn et al. 2021; new
cases per day would be ``-ed.ode.solve(..., increments=True)[:, 0]``:
``1000 (S(d-1) - S(d))`` of float32 states loses digits wherever S barely
changes).  Forty days are simulated with beta = 0.6, gamma = 0.2, phi = 10
(seed 1), and the program solves the ODE with ``ed.ode.solve`` at its
defaults (Dormand-Prince 5(4), rtol = 1e-6, atol = 1e-20, forward
sensitivities, which reach the rates the right-hand side reads by name)
for NUTS, 4 chains x 1000 draws after 1000 warmup, compiled with XLA.

The reference is computed another way: quadrature on a log-spaced grid of
(beta, gamma, phi), each point's solution by a NumPy fixed-step RK4 (10
steps a day), the grid refined once around the first grid's posterior.

    python examples/ode_sir.py

Prints the summary, the reference and the wall times (see RESULTS section 31).
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# edward_lite before TensorFlow: its import keeps TensorFlow's start-up logs quiet.
import edward_lite as ed  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from scipy.special import gammaln  # noqa: E402

POPULATION, DAYS = 1000., 40
Y0 = np.array([0.99, 0.01, 0.], np.float32)


def sir_model(days):
  """beta ~ LogNormal(log 0.5, 0.5), gamma ~ LogNormal(log 0.2, 0.5),
  phi ~ Exponential(0.1); cases_d ~ NegBinomial(mean 1000 I(d),
  concentration phi)."""
  beta = ed.LogNormal(np.log(0.5), 0.5, name="beta")
  gamma = ed.LogNormal(np.log(0.2), 0.5, name="gamma")
  phi = ed.Exponential(0.1, name="phi")

  def sir(t, y):
    """dy/dt of the SIR model; y = (S, I, R) fractions; the rates read by name."""
    del t
    infection = beta * y[0] * y[1]
    return tf.stack([-infection, infection - gamma * y[1], gamma * y[1]])

  # The default atol (1e-20) controls I's error relative to I however small
  # it gets: log(1000 I) is the likelihood, and in the tails, where the
  # epidemic dies out, an I solved to an absolute 1e-6 (Stan's default)
  # makes it noise of several nats (RESULTS sections 31 and 54).
  path = ed.ode.solve(sir, Y0, days)  # [40, 3]
  mean = tf.maximum(POPULATION * path[:, 1], 1e-6)
  return ed.NegativeBinomial(total_count=phi, logits=tf.math.log(mean) - tf.math.log(phi),
                             name="cases")


def rk4_infected(beta, gamma, steps_per_day=10):
  """I at days 1..DAYS for arrays of (beta, gamma), by NumPy RK4."""
  y = np.broadcast_to(Y0.astype(np.float64), beta.shape + (3,)).copy()
  beta, gamma, h = beta[..., None], gamma[..., None], 1. / steps_per_day

  def f(y):
    infection = beta[..., 0] * y[..., 0] * y[..., 1]
    return np.stack([-infection, infection - gamma[..., 0] * y[..., 1],
                     gamma[..., 0] * y[..., 1]], -1)

  out = []
  for _ in range(DAYS):
    for _ in range(steps_per_day):
      k1 = f(y)
      k2 = f(y + h / 2 * k1)
      k3 = f(y + h / 2 * k2)
      k4 = f(y + h * k3)
      y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    out.append(y[..., 1])
  return np.stack(out, -1)


def simulate(seed=1, beta=0.6, gamma=0.2, phi=10.):
  mean = POPULATION * rk4_infected(np.array(beta), np.array(gamma))
  rng = np.random.default_rng(seed)
  return rng.negative_binomial(phi, phi / (phi + mean)).astype(np.float32)


def _log_posterior(lb, lg, lp, cases):
  """Log density of (log beta, log gamma, log phi) on a grid (priors with
  their log Jacobians, the likelihood by RK4)."""
  beta, gamma, phi = np.exp(lb), np.exp(lg), np.exp(lp)
  mean = np.maximum(POPULATION * rk4_infected(beta, gamma), 1e-6)
  phi_ = phi[..., None]
  loglik = (gammaln(cases + phi_) - gammaln(phi_) - gammaln(cases + 1.)
            + phi_ * np.log(phi_ / (phi_ + mean)) + cases * np.log(mean / (phi_ + mean)))
  prior = (-0.5 * ((lb - np.log(0.5)) / 0.5) ** 2 - 0.5 * ((lg - np.log(0.2)) / 0.5) ** 2
           + (np.log(0.1) - 0.1 * phi + lp))
  return loglik.sum(-1) + prior


def reference(cases, points=48):
  """Posterior means and sds of beta, gamma, phi by grid quadrature."""
  lo, hi = np.log([0.2, 0.05, 1.]), np.log([2., 1., 200.])
  for _ in range(2):
    axes = [np.linspace(a, b, points) for a, b in zip(lo, hi)]
    grid = np.meshgrid(*axes, indexing="ij")
    logp = _log_posterior(*grid, cases)
    w = np.exp(logp - logp.max())
    w /= w.sum()
    mean = [np.sum(w * g) for g in grid]
    sd = [np.sqrt(np.sum(w * (g - m) ** 2)) for g, m in zip(grid, mean)]
    lo, hi = np.array(mean) - 6 * np.array(sd), np.array(mean) + 6 * np.array(sd)
  out = {}
  for name, g in zip(["beta", "gamma", "phi"], grid):
    m = np.sum(w * np.exp(g))
    out[name] = (m, np.sqrt(np.sum(w * (np.exp(g) - m) ** 2)))
  return out


def main():
  cases = simulate()
  days = np.arange(1., DAYS + 1., dtype=np.float32)
  print("cases:", cases.astype(int).tolist())
  start = time.time()
  fit = ed.mcmc.sample(sir_model, days, observed={"cases": cases}, kernel="nuts", chains=4,
                       warmup=1000, draws=1000, seed=0)
  wall = time.time() - start
  fit.print_summary()
  print(f"\nNUTS, 4 chains x (1000 warmup + 1000 draws): {wall:.1f} s wall (compile included); "
        f"{int(fit.divergences.sum())} divergent transitions after warmup, "
        f"{int(np.sum(fit.warmup_divergences))} during warmup; "
        f"{fit.sample_stats['num_gradients'].mean():.1f} gradients per draw.")
  start = time.time()
  ref = reference(cases)
  print(f"\nReference by grid quadrature with NumPy RK4 ({time.time() - start:.1f} s):")
  for name, (m, sd) in ref.items():
    draws = fit.draws[name]
    print(f"  {name:6s} reference {m:8.4f} (sd {sd:.4f})   NUTS {draws.mean():8.4f} "
          f"(sd {draws.std():.4f})   difference / sd {(draws.mean() - m) / sd:+.3f}")


if __name__ == "__main__":
  main()
