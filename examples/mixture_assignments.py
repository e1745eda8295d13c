"""A Gaussian mixture with one latent assignment per point, summed out.

The model is written the way a NumPyro user writes it with enumeration: a
Bernoulli assignment ``z_i`` per observation. edward_lite sums ``z`` out of
the log density (NUTS samples the weight, the component means and the
scale), then draws ``z`` from ``p(z | w, mu, sigma, y)`` at every draw, so
the posterior probability that a point belongs to the second component is
``posterior.draws["z"].mean(axis=(0, 1))``.

    python examples/mixture_assignments.py
"""

import numpy as np
import tensorflow as tf

import edward_lite as ed


def mixture(n):
  w = ed.Beta(2., 2., name="w")
  # Ordered means: mu_0 = m, mu_1 = m + gap, gap > 0 (no label switching).
  m = ed.Normal(0., 5., name="m")
  gap = ed.LogNormal(1., 0.5, name="gap")
  sigma = ed.HalfNormal(2., name="sigma")
  z = ed.Bernoulli(probs=w, sample_shape=n, name="z")
  mu = tf.stack([m, m + gap])
  return ed.Normal(tf.gather(mu, z), sigma, name="y")


def main():
  rng = np.random.default_rng(0)
  truth = rng.random(80) < 0.35
  y = np.where(truth, 3.0, -1.0) + rng.normal(size=80) * 0.8
  posterior = ed.mcmc.sample(mixture, len(y), observed={"y": y.astype(np.float32)},
                             chains=4, seed=0)
  print(posterior.summary(var_names=["w", "m", "gap", "sigma"]))
  p = posterior.draws["z"].mean(axis=(0, 1))
  print("P(second component) for the first 8 points:", np.round(p[:8], 3))
  print("truth:                                       ", truth[:8].astype(int))
  print(f"assignments right at P > 0.5: {np.mean((p > 0.5) == truth):.2f}")


if __name__ == "__main__":
  main()
