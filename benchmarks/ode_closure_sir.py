"""The issue-53 SIR epidemic, written four ways, NUTS 4 x (500 + 500) each.

The program of ``tests/test_ode_closures.py`` (30 days of Poisson new cases,
``f`` reading beta and gamma by name, new cases ``S[:-1] - S[1:]`` in
float32) and its variants, one after another in this process:

- ``closure``: as written, ``ed.ode.solve`` at its defaults;
- ``args``: the rates passed through ``args=``;
- ``increments``: new cases from ``increments=True``;
- ``stan_atol``: the closure form at Stan's ``atol=1e-6`` (the old default).

Prints wall seconds (compile included), the gradients each chain took, the
largest R-hat and the posterior means, and each form's time against
``closure``'s.

    PYTHONPATH=. .venv/bin/python benchmarks/ode_closure_sir.py [--forms closure args]
"""

import argparse
import pathlib
import sys
import time

import numpy as np
import tensorflow as tf

import edward_lite as ed

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
import test_ode_closures as sir  # pylint: disable=wrong-import-position

N = sir.N


def _rates():
  return (ed.LogNormal(np.log(0.4), 0.5, name="beta"),
          ed.LogNormal(np.log(0.2), 0.5, name="gamma"))


def _program(form):
  def program(days):
    beta, gamma = _rates()

    def f(t, y, *args):
      del t
      b, g = args if args else (beta, gamma)
      new = b * y[0] * y[1] / N
      return tf.stack([-new, new - g * y[1], g * y[1]])

    y0 = tf.constant([N - 5., 5., 0.])
    if form == "increments":
      new_cases = -ed.ode.solve(f, y0, days, increments=True)[1:, 0]
    else:
      kwargs = {"args": (beta, gamma)} if form == "args" else {}
      if form == "stan_atol":
        kwargs["atol"] = 1e-6
      s = ed.ode.solve(f, y0, days, **kwargs)[:, 0]
      new_cases = s[:-1] - s[1:]
    return ed.Poisson(tf.maximum(new_cases, 1e-6), name="cases")
  program.__name__ = f"sir_{form}"
  return program


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--forms", nargs="+", default=["closure", "args", "increments",
                                                      "stan_atol"])
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()
  cases = np.random.default_rng(0).poisson(sir._sir_new_cases(0.5, 0.2)).astype(np.float32)  # pylint: disable=protected-access
  walls = {}
  for form in args.forms:
    start = time.time()
    fit = ed.mcmc.sample(_program(form), sir.DAYS, observed={"cases": cases}, chains=4,
                         warmup=500, draws=500, seed=args.seed, progress=False)
    walls[form] = time.time() - start
    summary = fit.summary()
    print(f"{form:11s} {walls[form]:6.1f} s wall (compile {fit.timings['compile_s']:.1f} s); "
          f"gradients per chain {fit.num_gradients.astype(int).tolist()}; "
          f"max R-hat {summary['r_hat'].max():.3f}; beta {summary.loc['beta', 'mean']:.4f}, "
          f"gamma {summary.loc['gamma', 'mean']:.4f}", flush=True)
  if "closure" in walls:
    print("time / closure's:", {k: round(v / walls["closure"], 2) for k, v in walls.items()})


if __name__ == "__main__":
  main()
