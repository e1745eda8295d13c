"""Neal's funnel, centred, sampled through a normalizing flow.

    v ~ N(0, 3),   x_i | v ~ N(0, exp(v / 2)),   i = 1..9

The scale of ``x`` changes by e^9 between the funnel's neck (v = -9) and its
mouth (v = 9): no metric, one linear map for the whole posterior, fits both,
so NUTS with the default adaptation never enters the neck (its summary says
so, and suggests the flow).  ``adapt_metric="flow"`` fits an inverse
autoregressive flow to the posterior by VI, refits it by the Fisher
divergence on the model's gradients at 2000 of its draws, then runs NUTS on
the flow's base space, where the posterior is close to a standard normal,
and maps the draws back.

    python examples/funnel_flow.py            # both runs, 4 chains each (~2 min)
    python examples/funnel_flow.py --dim 20

Prints, per run, v's mean, sd and lower tail P(v < -5) against the exact
values (0, 3 and 0.0478), the smallest ESS, the divergences and every
gradient the run took (the flow's fit included).
"""

import argparse
import math
import time
import warnings

import numpy as np
import tensorflow as tf
import edward_lite as ed


def funnel(dim):
  v = ed.Normal(0., 3., name="v")
  return ed.Normal(tf.zeros(dim - 1), tf.exp(v / 2.), name="x")


def report(label, posterior, seconds):
  with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    table = posterior.summary()
  v = posterior.draws["v"]
  ess = min(table["ess_bulk"].min(), table["ess_tail"].min())
  print(f"\n== {label}: {seconds:.0f} s ==")
  print(f"v: mean {v.mean():+.3f} (exact 0), sd {v.std():.3f} (exact 3), "
        f"P(v < -5) {np.mean(v < -5):.4f} (exact {0.5 * math.erfc(5 / 3 / math.sqrt(2)):.4f})")
  print(f"min ESS {ess:.0f}; divergences {int(posterior.divergences.sum())}; max R-hat "
        f"{table['r_hat'].max():.3f}; gradients {posterior.total_gradients:,} "
        f"({posterior.total_gradients / ess:.1f} per effective draw)")
  for warning in said:
    print("summary says:", warning.message)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--dim", type=int, default=10)
  parser.add_argument("--seed", type=int, default=0)
  a = parser.parse_args()
  for label, adapt_metric in (("default adaptation", True), ("flow", "flow")):
    start = time.perf_counter()
    posterior = ed.mcmc.sample(funnel, a.dim, chains=4, warmup=1000, draws=1000, seed=a.seed,
                               adapt_metric=adapt_metric, progress=False)
    report(label, posterior, time.perf_counter() - start)
  fit = posterior.transport
  print(f"\nthe flow: {fit['family']}, {fit['steps']} steps, "
        f"{fit['num_gradients']:,} gradients, final ELBO {fit['elbo']:.3f} "
        "(the funnel is normalized: 0 is a perfect fit)")


if __name__ == "__main__":
  main()
