"""A Gaussian mixture whose component means are learned, without label switching.

Three components, 300 points, weights ~ Dirichlet(1, 1, 1), a shared scale
~ HalfNormal(2), one assignment per point summed out of the density
(``ed.Categorical``, enumerated), and the means given an *ordered* prior:

    mu = ed.Ordered(tfd.Normal(0., 5.), 3, name="mu")   # mu_0 < mu_1 < mu_2

Stan's ``ordered[3] mu; mu ~ normal(0, 5);`` in one call.  With an
exchangeable prior (``ed.Normal(tf.zeros(3), 5.)``) the posterior has 3! = 6
copies, one per labelling; each chain settles in one, and the chains
disagree: R-hat of the means far above 1, averages that mix the
components.  Ordering keeps one copy.

    python examples/mixture_ordered_means.py          # both priors, 4 chains each

Prints the summary with the ordered prior, the means' R-hat with the
exchangeable one, and an EM fit of the same mixture (NumPy) to compare.
"""

import argparse
import time
import warnings

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import edward_lite as ed

tfd = tfp.distributions
TRUTH = dict(mu=np.array([-2., 1.5, 5.]), w=np.array([0.3, 0.5, 0.2]), sigma=0.7)


def simulate(n=300, seed=0):
  rng = np.random.default_rng(seed)
  z = rng.choice(3, size=n, p=TRUTH["w"])
  return (TRUTH["mu"][z] + TRUTH["sigma"] * rng.normal(size=n)).astype(np.float32)


def mixture(n, ordered=True):
  w = ed.Dirichlet(tf.ones(3), name="w")
  if ordered:
    mu = ed.Ordered(tfd.Normal(0., 5.), 3, name="mu")
  else:
    mu = ed.Normal(tf.zeros(3), 5., name="mu")
  sigma = ed.HalfNormal(2., name="sigma")
  z = ed.Categorical(probs=w, sample_shape=n, name="z")  # summed out
  return ed.Normal(tf.gather(mu, z), sigma, name="y")


def em(y, iterations=500):
  """Maximum likelihood by expectation-maximization (sorted means), from the
  data's terciles."""
  y = y.astype(np.float64)
  mu, w, sigma = np.quantile(y, [1 / 6, 1 / 2, 5 / 6]), np.full(3, 1 / 3), y.std()
  for _ in range(iterations):
    log_r = np.log(w) - 0.5 * ((y[:, None] - mu) / sigma) ** 2
    r = np.exp(log_r - log_r.max(1, keepdims=True))
    r /= r.sum(1, keepdims=True)
    w = r.mean(0)
    mu = (r * y[:, None]).sum(0) / r.sum(0)
    sigma = np.sqrt((r * (y[:, None] - mu) ** 2).sum() / len(y))
  order = np.argsort(mu)
  return dict(mu=mu[order], w=w[order], sigma=sigma)


def fit(y, ordered=True, warmup=1000, draws=1000, seed=0):
  return ed.mcmc.sample(mixture, len(y), ordered=ordered, observed={"y": y}, chains=4,
                        warmup=warmup, draws=draws, seed=seed, progress=False)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--points", type=int, default=300)
  args = parser.parse_args()
  y = simulate(args.points)
  start = time.time()
  ordered = fit(y)
  print(f"Ordered means ({time.time() - start:.1f} s, compile included):")
  ordered.print_summary(var_names=["mu", "w", "sigma"])
  mle = em(y)
  print("\nEM (maximum likelihood):  mu", np.round(mle["mu"], 3), " w", np.round(mle["w"], 3),
        f" sigma {mle['sigma']:.3f}")
  print("Truth:                    mu", TRUTH["mu"], " w", TRUTH["w"], f" sigma {TRUTH['sigma']}")
  start = time.time()
  with warnings.catch_warnings():  # R-hat, stuck chains: the point, printed below
    warnings.simplefilter("ignore")
    exchangeable = fit(y, ordered=False)
  r_hat = exchangeable.summary(var_names=["mu"])["r_hat"].to_numpy()
  per_chain = exchangeable.draws["mu"].mean(axis=0)  # [chains, 3]
  print(f"\nExchangeable means ({time.time() - start:.1f} s): R-hat of mu {np.round(r_hat, 2)}; "
        "each chain's means:")
  print(np.round(per_chain, 2))


if __name__ == "__main__":
  main()
