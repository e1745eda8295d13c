"""XLA:CPU's YNNPACK reductions against its own, on the sampler's loop.

TensorFlow 2.21's XLA:CPU hands reductions to YNNPACK (``ynn_fusion``
custom fusions, run through their own thread pool); the flag
``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=-reduce`` keeps them in
XLA's own loop emitter (YNNPACK still takes the dots).  The mixture's log
density in ``mcmc_rwmh.py`` reduces ``[C, 4]`` to ``[C]`` twice per
transition (its logsumexp), and every model reduces its log density over
its event dimensions.  XLA reads the flag once per process, so each model
runs in a child process with and without it, alternated (A B A B), with the
persistent compile cache off (the cache's key does not hold the flag).

Each cell: the sampling seconds of a run after a first run that compiled
(the smaller of two runs), and the ratio without / with the flag (above 1:
the flag is faster).

    PYTHONPATH=. .venv/bin/python benchmarks/ynn_reduce.py [--rounds 2] [--models ...]
"""

import argparse
import json
import os
import subprocess
import sys
import time

FLAG = "--xla_cpu_experimental_ynn_fusion_type=-reduce"

MODELS = {
    # name: (description, builder of the sampling call's arguments)
    "mixture_1dev": "the 1-D mixture of mcmc_rwmh.py, RWMH fixed step, 10^5 chains x 1000, one device",
    "mixture_groups": "the same over two logical CPU devices (parallel='chain_groups')",
    "gauss2d": "issue 52's correlated 2-D Gaussian, RWMH, 10^5 chains x (300 + 500), streamed",
    "eight_schools": "eight schools (non-centred), ChEES, 10^4 chains x (500 + 500)",
    "logistic_many": "a logistic regression (200 x 10), NUTS, 1000 chains x (300 + 300)",
    "logistic_4": "a logistic regression (2000 x 10), NUTS, 4 chains x (500 + 1000)",
}


def child(name):
  """Runs one model twice after a compiling run; prints its sampling seconds."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_probability as tfp  # pylint: disable=import-outside-toplevel
  import edward_lite as ed  # pylint: disable=import-outside-toplevel
  tfd = tfp.distributions
  rng = np.random.default_rng(0)
  common = dict(progress=False)
  if name.startswith("mixture"):
    locs = np.array([-2., 0., 3.2, 2.5], np.float32)
    scales = np.array([1.2, 1., 5., 2.8], np.float32)
    probs = np.array([0.2, 0.3, 0.1, 0.4], np.float32)

    def model():
      ed.MixtureSameFamily(tfd.Categorical(probs=probs), tfd.Normal(locs, scales), name="x")
    common.update(kernel=ed.mcmc.RWMH(scale=0.1, adapt=False), chains=100_000, warmup=0,
                  draws=1000, chunk_size=1000, keep_draws=False, adapt_metric=False,
                  init="uniform", init_radius=2.)
    if name == "mixture_groups":
      common.update(strategy=ed.distribute.strategy(
          "mirrored", devices=ed.distribute.logical_cpus(2)), parallel="chain_groups")
    args, kwargs = (), {}
  elif name == "gauss2d":
    scale_tril = np.linalg.cholesky(np.array([[1., 1.6], [1.6, 4.]])).astype(np.float32)

    def model():
      ed.MultivariateNormalTriL(np.array([1., -1.], np.float32), scale_tril, name="x")
    common.update(kernel="rwmh", chains=100_000, warmup=300, draws=500, keep_draws=False)
    args, kwargs = (), {}
  elif name == "eight_schools":
    y = np.array([28., 8., -3., 7., -1., 1., 18., 12.], np.float32)
    sigma = np.array([15., 10., 16., 11., 9., 11., 10., 18.], np.float32)

    def model():
      mu = ed.Normal(0., 5., name="mu")
      tau = ed.HalfCauchy(0., 5., name="tau")
      eta = ed.Normal(tf.zeros(8), 1., name="eta")
      ed.Normal(mu + tau * eta, sigma, name="y")
    common.update(kernel="chees", chains=10_000, warmup=500, draws=500, observed={"y": y})
    args, kwargs = (), {}
  else:
    n = 200 if name == "logistic_many" else 2000
    x = rng.normal(size=(n, 10)).astype(np.float32)
    w = rng.normal(size=10).astype(np.float32)
    y = (rng.uniform(size=n) < 1. / (1. + np.exp(-x @ w))).astype(np.float32)

    def model(x):
      b = ed.Normal(tf.zeros(10), 1., name="b")
      ed.Bernoulli(logits=tf.linalg.matvec(x, b), name="y")
    common.update(kernel="nuts", observed={"y": y},
                  **(dict(chains=1000, warmup=300, draws=300) if name == "logistic_many"
                     else dict(chains=4, warmup=500, draws=1000)))
    args, kwargs = (x,), {}
  seconds = []
  for seed in range(3):  # the first compiles
    result = ed.mcmc.sample(model, *args, seed=seed, **common, **kwargs)
    seconds.append(result.timings["sampling_s"])
  print(json.dumps({"sampling_s": min(seconds[1:])}))


def run(name, with_flag):
  env = dict(os.environ, ED_COMPILE_CACHE="0", TF_CPP_MIN_LOG_LEVEL="2")
  flags = env.get("XLA_FLAGS", "")
  env["XLA_FLAGS"] = f"{flags} {FLAG}".strip() if with_flag else flags
  out = subprocess.run([sys.executable, __file__, "--child", name], env=env, check=True,
                       capture_output=True, text=True).stdout
  return json.loads(out.strip().splitlines()[-1])["sampling_s"]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--child")
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
  args = parser.parse_args()
  if args.child:
    child(args.child)
    return
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import machine  # pylint: disable=import-outside-toplevel
  print(machine.machine_line())
  print(f"# tensorflow {machine.version('tensorflow')}, tensorflow-probability "
        f"{machine.version('tensorflow-probability')}")
  print(f"{'model':16s} {'YNN reduce s':>14s} {'flag s':>10s} {'ratio':>7s}  what")
  for name in args.models:
    without, with_flag = [], []
    start = time.perf_counter()
    for _ in range(args.rounds):
      without.append(run(name, False))
      with_flag.append(run(name, True))
    a, b = min(without), min(with_flag)
    print(f"{name:16s} {a:14.3f} {b:10.3f} {a / b:7.2f}  {MODELS[name]} "
          f"({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
  main()
