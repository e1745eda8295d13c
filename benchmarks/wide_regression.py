"""A regression with many correlated coefficients at many chains: the
default metric, its gradients and seconds, and the draws against the exact
posterior (RESULTS section 49).

``N = 300`` rows, ``P`` coefficients on correlated predictors and an
intercept, the noise sd known: the posterior is Gaussian, its mean and
covariance computed exactly.  One ``ed.mcmc.sample`` at the defaults
(seed 0), printing one JSON row: the metric's shape (``[1, D]``: diagonal),
warmup iterations, compile / warmup / sampling seconds, warmup gradients
per chain, sampling gradients per draw, the step size, divergences, the
range over coefficients of the draws' sd over the exact sd, the largest
|z| of a mean (with a loose ESS of a tenth of the draws) and the peak
resident memory.  Run another checkout with ``PYTHONPATH=/path/to/it``.

    python benchmarks/wide_regression.py [--chains 2000] [--draws 100] [--coefficients 99]
"""

import argparse
import json
import resource
import time

import numpy as np
import tensorflow as tf

import edward_lite as ed


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--chains", type=int, default=2000)
  parser.add_argument("--draws", type=int, default=100)
  parser.add_argument("--coefficients", type=int, default=99)
  args = parser.parse_args()
  n, p = 300, args.coefficients
  rng = np.random.default_rng(0)
  z = rng.normal(size=(n, p))
  x = (0.8 * z + 0.6 * np.cumsum(z, axis=1) / np.sqrt(np.arange(1, p + 1))).astype(np.float32)
  y = (x @ (0.5 * rng.normal(size=p)) + 1. + rng.normal(size=n)).astype(np.float32)

  def regression(x):
    a = ed.Normal(0., 5., name="a")
    b = ed.Normal(tf.zeros(p), 2., name="b")
    return ed.Normal(a + tf.linalg.matvec(x, b), 1., name="y")

  design = np.hstack([np.ones((n, 1)), x]).astype(np.float64)
  cov = np.linalg.inv(design.T @ design + np.diag([1 / 25.] + [1 / 4.] * p))
  mean = cov @ (design.T @ y)
  marks = []
  t0 = time.perf_counter()
  post = ed.mcmc.sample(regression, x, observed={"y": y}, chains=args.chains, draws=args.draws,
                        seed=0, progress=False,
                        callback=lambda info: marks.append((time.perf_counter() - t0,
                                                            info["warmup"])))
  wall = time.perf_counter() - t0
  warm_end = max(t for t, warm in marks if warm)
  draws = np.concatenate([post.draws["a"][..., None], post.draws["b"]], -1).reshape(-1, p + 1)
  z_mean = (draws.mean(0) - mean) / np.sqrt(np.diag(cov) / (draws.shape[0] / 10))
  sd_ratio = draws.std(0) / np.sqrt(np.diag(cov))
  sampling = post.sample_stats["num_gradients"]
  print(json.dumps(dict(
      chains=args.chains, coefficients=p, metric=list(post.inverse_metric.shape),
      warmup=post.warmup, compile_s=round(post.timings["compile_s"], 1),
      warmup_s=round(warm_end - post.timings["compile_s"], 1),
      sampling_s=round(wall - warm_end, 1), wall_s=round(wall, 1),
      warmup_grads_per_chain=round(float((post.num_gradients.sum() - sampling.sum())
                                         / args.chains), 1),
      grads_per_draw=round(float(sampling.mean()), 2),
      step=round(float(np.ravel(post.step_size)[0]), 3), divergences=int(post.divergences.sum()),
      sd_ratio=[round(float(sd_ratio.min()), 3), round(float(sd_ratio.max()), 3)],
      max_abs_z=round(float(np.abs(z_mean).max()), 2),
      peak_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2))))


if __name__ == "__main__":
  main()
