"""The coal-mining disasters change point, the switch year summed out.

British coal-mining disasters per year, 1851-1962 (112 years: the yearly
counts of Jarrett's 1979 disasters as analysed by Carlin, Gelfand and
Smith 1992): a rate ``early`` before an unknown year ``switch`` and
``late`` after it.  ``switch`` is a
``Categorical`` over the 112 years; edward_lite sums it out of the log
density (112 configurations, evaluated for every chain and year in one
vectorized batch), samples the two rates, and draws ``switch`` from
``p(switch | early, late, y)`` at every draw.  The exact posterior means
follow by conjugacy (given the switch, each rate is Gamma): printed beside.

    python examples/change_point.py            # 4 NUTS chains, ~10 s
    python examples/change_point.py 1000 rwmh  # 1000 random-walk chains, ~45 s
"""

import math
import sys

import numpy as np
import tensorflow as tf

import edward_lite as ed

DISASTERS = np.array([
    4, 5, 4, 1, 0, 4, 3, 4, 0, 6, 3, 3, 4, 0, 2, 6, 3, 3, 5, 4, 5, 3, 1, 4, 4, 1, 5, 5, 3, 4, 2,
    5, 2, 2, 3, 4, 2, 1, 3, 2, 2, 1, 1, 1, 1, 3, 0, 0, 1, 0, 1, 1, 0, 0, 3, 1, 0, 3, 2, 2, 0, 1,
    1, 1, 0, 1, 0, 1, 0, 0, 0, 2, 1, 0, 0, 0, 1, 1, 0, 2, 3, 3, 1, 1, 2, 1, 1, 1, 1, 2, 4, 2, 0,
    0, 0, 1, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1], np.float32)
FIRST_YEAR = 1851


def disasters(years):
  early = ed.Exponential(1., name="early")
  late = ed.Exponential(1., name="late")
  switch = ed.Categorical(logits=tf.zeros(years), name="switch")
  rate = tf.where(tf.range(years) < switch, early, late)
  return ed.Poisson(rate, name="disasters")


def exact_means(y):
  """E[early], E[late], E[switch] by summation over the switch: given it,
  each rate is Gamma(1 + count, 1 + years) (Exponential(1) prior)."""
  n, cum = len(y), np.concatenate([[0.], np.cumsum(y)])
  s = np.arange(n)
  a1, b1, a2, b2 = 1 + cum[s], 1 + s, 1 + cum[-1] - cum[s], 1 + n - s
  gammaln = np.vectorize(math.lgamma)
  log_w = gammaln(a1) - a1 * np.log(b1) + gammaln(a2) - a2 * np.log(b2)
  w = np.exp(log_w - log_w.max())
  w /= w.sum()
  return w @ (a1 / b1), w @ (a2 / b2), w @ s


def main(chains=4, kernel="nuts"):
  posterior = ed.mcmc.sample(disasters, len(DISASTERS), observed={"disasters": DISASTERS},
                             chains=chains, kernel=kernel, draws=500, seed=0)
  summary = posterior.summary()
  print(summary)
  exact = dict(zip(["early", "late", "switch"], exact_means(DISASTERS)))
  for name, value in exact.items():
    print(f"{name:7s} posterior mean {summary.loc[name, 'mean']:7.3f}   exact {value:7.3f}")
  years = np.bincount(posterior.draws["switch"].ravel(), minlength=len(DISASTERS))
  top = np.argsort(years)[::-1][:3]
  print("most probable switch years:",
        ", ".join(f"{FIRST_YEAR + t} ({years[t] / years.sum():.2f})" for t in top))


if __name__ == "__main__":
  main(int(sys.argv[1]) if len(sys.argv) > 1 else 4, sys.argv[2] if len(sys.argv) > 2 else "nuts")
