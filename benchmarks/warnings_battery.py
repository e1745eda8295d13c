"""The summary's warnings at 10^3 to 10^5 chains (issue 52, item 3).

Unimodal targets, sampled at the defaults, must raise no warning that calls
the posterior multimodal, a chain stuck or apart, the chains not mixed or
drifting; planted problems must be named.  Each run prints its sampling
and summary seconds and the warnings' kinds.

Unimodal targets:

* ``gauss2d``: the issue's correlated 2-D Gaussian (mean [1, -1], sds
  [1, 2], correlation 0.8, ``MultivariateNormalTriL``);
* ``logistic``: a logistic regression, 3 coefficients with N(0, 2.5)
  priors, 250 simulated rows;
* ``eight_schools``: eight schools, non-centred.

Planted problems (``--planted``), each expecting its kind of warning:

* ``far_chain``: an equal mixture of N(0, 1) and N(20, 1), chain 7
  started at 20 (``init=``), the others in (-2, 2), so that only chain 7
  finds the far mode, and cannot leave it: "apart", or "multimodal" where
  warmup took more chains there (a far mode of little mass, warmup moves
  the chain out of: ``mcmc.restarts``);
* ``bimodal``: an equal mixture of N(-8, 1) and N(8, 1): "multimodal";
* ``short_warmup``: N(100, 1) after 5 warmup iterations (the chains start
  in (-2, 2)): "drift" (or a ``SamplingFailedError`` that says why).

    python benchmarks/warnings_battery.py [--chains 1000 10000 100000]
        [--seeds 0 1 2 3 4] [--kernels rwmh nuts chees]
        [--targets gauss2d logistic eight_schools] [--draws 500] [--planted]
        [--keep-draws 0]
"""

import argparse
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import edward_lite as ed  # noqa: E402  (first: a quiet TensorFlow start-up)
import tensorflow as tf  # noqa: E402  pylint: disable=g-bad-import-order
import tensorflow_probability as tfp  # noqa: E402  pylint: disable=g-bad-import-order

import machine  # noqa: E402

tfd = tfp.distributions

# The kinds of warning, by the words that name them.
KINDS = {"apart": "sampled apart", "stuck": " stuck", "multimodal": "multimodal",
         "not mixed": "have not mixed", "drift": "parameter(s) drift",
         "superchains": "superchains, each started", "cannot tell": "cannot tell",
         "diverging": "diverged where the others did not"}
# What a unimodal run must not say.  A chain that "diverged where the others
# did not" is a fact about the sampler's step size in a region of the
# posterior (a heavy tail), as the run's divergence count is, not a false alarm.
FALSE_ALARMS = ("apart", "stuck", "multimodal", "not mixed", "drift", "superchains")


def gauss2d():
  cov = np.array([[1., 1.6], [1.6, 4.]])
  return ed.MultivariateNormalTriL(np.float32([1., -1.]), np.linalg.cholesky(cov).astype(
      np.float32), name="x")


def _logistic_data(n=250, seed=4):
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((n, 2)).astype(np.float32)
  y = (rng.random(n) < 1. / (1. + np.exp(-(0.3 - 0.8 * x[:, 0] + 0.5 * x[:, 1])))).astype(
      np.int32)
  return x, y


def logistic(x):
  beta = ed.Normal(0., 2.5, sample_shape=3, name="beta")
  return ed.Bernoulli(logits=beta[0] + tf.linalg.matvec(x, beta[1:]), name="y")


SIGMA = np.float32([15., 10., 16., 11., 9., 11., 10., 18.])
EFFECTS = np.float32([28., 8., -3., 7., -1., 1., 18., 12.])


def eight_schools(sigma):
  mu = ed.Normal(0., 5., name="mu")
  tau = ed.HalfCauchy(0., 5., name="tau")
  theta_tilde = ed.Normal(tf.zeros(8), 1., name="theta_tilde")
  return ed.Normal(mu + tau * theta_tilde, sigma, name="y")


def far_mode():
  return ed.MixtureSameFamily(tfd.Categorical(probs=[0.5, 0.5]), tfd.Normal([0., 20.], 1.),
                              name="x")


def bimodal():
  return ed.MixtureSameFamily(tfd.Categorical(probs=[0.5, 0.5]), tfd.Normal([-8., 8.], 1.),
                              name="x")


def far_normal():
  return ed.Normal(100., 1., name="x")


def target(name):
  """``(program, args, observed, sample keywords, the kinds that name its
  problem (None: unimodal))``."""
  if name == "gauss2d":
    return gauss2d, (), None, {}, None
  if name == "logistic":
    x, y = _logistic_data()
    return logistic, (x,), {"y": y}, {}, None
  if name == "eight_schools":
    return eight_schools, (SIGMA,), {"y": EFFECTS}, {}, None
  if name == "far_chain":
    return far_mode, (), None, {"init": "far"}, ("apart", "multimodal")
  if name == "bimodal":
    return bimodal, (), None, {}, ("multimodal",)
  if name == "short_warmup":
    return far_normal, (), None, {"warmup": 5, "adaptive_warmup": False}, ("drift",)
  raise ValueError(name)


def kinds(notes):
  return sorted({kind for kind, words in KINDS.items() for note in notes if words in note})


def run(name, kernel, chains, seed, draws, keep_draws):
  program, args, observed, extra, expected = target(name)
  extra = dict(extra)
  if extra.get("init") == "far":
    init = np.random.default_rng(seed).uniform(-2., 2., (chains, 1)).astype(np.float32)
    init[7] = 20.
    extra["init"] = init
  if kernel == "rwmh":
    extra.pop("adaptive_warmup", None)
  start = time.perf_counter()
  try:
    result = ed.mcmc.sample(program, *args, observed=observed, kernel=kernel, chains=chains,
                            draws=draws, seed=seed, progress=False, keep_draws=keep_draws,
                            **extra)
  except ed.mcmc.SamplingFailedError as e:  # a planted problem can end the run, said so
    return dict(target=name, kernel=kernel, chains=chains, seed=seed,
                sampling_s=time.perf_counter() - start, summary_s=float("nan"),
                said=["sampling failed"], ok=expected is not None, notes=[str(e)],
                max_r_hat=float("nan"))
  sampling = time.perf_counter() - start
  start = time.perf_counter()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    table = result.summary()
  summary = time.perf_counter() - start
  said = kinds(table.attrs["notes"])
  if expected is None:
    ok = not set(said) & set(FALSE_ALARMS)
  else:
    ok = bool(set(expected) & set(said))
  return dict(target=name, kernel=kernel, chains=chains, seed=seed, sampling_s=sampling,
              summary_s=summary, said=said, ok=ok, notes=table.attrs["notes"],
              max_r_hat=float(np.nanmax(table["r_hat"])))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--chains", type=int, nargs="+", default=[1000, 10_000, 100_000])
  parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
  parser.add_argument("--kernels", nargs="+", default=["rwmh", "nuts", "chees"])
  parser.add_argument("--targets", nargs="+", default=["gauss2d", "logistic", "eight_schools"])
  parser.add_argument("--draws", type=int, default=500)
  parser.add_argument("--planted", action="store_true",
                      help="the planted problems instead of --targets")
  parser.add_argument("--keep-draws", type=int, default=1)
  args = parser.parse_args()
  print(machine.machine_line())
  targets = ["far_chain", "bimodal", "short_warmup"] if args.planted else args.targets
  print(f"{'target':>13s} {'kernel':>6s} {'chains':>7s} {'seed':>4s} {'sampling s':>10s} "
        f"{'summary s':>9s} {'r_hat':>7s} {'ok':>3s}  said", flush=True)
  failures = 0
  for chains in args.chains:
    for name in targets:
      for kernel in args.kernels:
        for seed in args.seeds:
          row = run(name, kernel, chains, seed, args.draws, bool(args.keep_draws))
          failures += not row["ok"]
          print(f"{name:>13s} {kernel:>6s} {chains:>7d} {seed:>4d} {row['sampling_s']:10.1f} "
                f"{row['summary_s']:9.2f} {row['max_r_hat']:7.3f} {'yes' if row['ok'] else 'NO':>3s}"
                f"  {', '.join(row['said']) or '-'}", flush=True)
          if not row["ok"]:
            for note in row["notes"]:
              print("      " + note[:300], flush=True)
  print(f"{failures} run(s) failed")


if __name__ == "__main__":
  main()
