"""``ed.sbc``: 1000 simulations in one vectorized run vs one by one.

Model: ``mu ~ N(0, 1)``, ``sigma ~ HalfNormal(1)``, ``y ~ N(mu, sigma)`` (10
observations), NUTS, 2 chains per simulation, 200 warmup + 100 draws each,
ranks among 49 draws.

* **vectorized**: ``ed.sbc(..., simulations=1000)`` -- 2000 chains of one
  compiled sampler (its time includes the prior simulation, the compile and
  the ranks);
* **one by one**: what a user writes without ``ed.sbc``: for each simulated
  data set ``ed.mcmc.sample(model, observed={"y": y_s}, chains=2, ...)``
  with the same settings.  Each data set is a new program (the compiled-
  program cache is keyed by the data's content), so every call compiles.
  ``LOOP`` calls are timed and extrapolated linearly to 1000; the compile
  share is reported from the results' ``timings``.
* the same vectorized run of ``ed.sbc`` at 100 simulations, for its scaling.

    PYTHONPATH=. python benchmarks/sbc.py
"""

import time

import numpy as np

import edward_lite as ed
import machine  # the header every benchmark prints (run from the repository root)

SIMS, LOOP = 1000, 10
SETTINGS = dict(chains=2, warmup=200, draws=100)


def model(n):
  mu = ed.Normal(0., 1., name="mu")
  sigma = ed.HalfNormal(1., name="sigma")
  return ed.Normal(mu, sigma, sample_shape=n, name="y")


def vectorized(sims):
  start = time.perf_counter()
  result = ed.sbc(model, 10, observed=["y"], simulations=sims, kernel="nuts", max_rank=49,
                  seed=0, **SETTINGS)
  return time.perf_counter() - start, result


def one_by_one(truth_draws):
  times, compile_s = [], []
  for s in range(LOOP):
    y = truth_draws[s]
    start = time.perf_counter()
    result = ed.mcmc.sample(model, 10, observed={"y": y}, kernel="nuts", seed=s,
                            pooled=False, adaptive_warmup=False, progress=False, **SETTINGS)
    times.append(time.perf_counter() - start)
    compile_s.append(result.timings["compile_s"])
  return np.asarray(times), np.asarray(compile_s)


def main():
  print(machine.machine_line())
  print(f"# tensorflow {machine.version('tensorflow')}, tensorflow-probability "
        f"{machine.version('tensorflow-probability')}, edward_lite {ed.__version__}")
  wall, result = vectorized(SIMS)
  print(f"vectorized {SIMS} simulations: {wall:.1f} s wall ({result.timings['inference_s']:.1f} s "
        f"inference, of it {result.method['timings']['compile_s']:.1f} s compile; "
        f"{result.timings['simulate_s']:.2f} s simulation, {result.timings['ranks_s']:.2f} s "
        f"ranks); min p {result.min_p_value:.3f}, passes {result.passes()}, "
        f"divergences {int(result.diagnostics['divergences'].sum())}")
  wall100, result100 = vectorized(100)
  print(f"vectorized 100 simulations: {wall100:.1f} s wall "
        f"({result100.method['timings']['compile_s']:.1f} s compile)")
  rng = np.random.default_rng(0)
  mu, sigma = rng.normal(size=LOOP), np.abs(rng.normal(size=LOOP))
  ys = (mu[:, None] + sigma[:, None] * rng.normal(size=(LOOP, 10))).astype(np.float32)
  times, compiles = one_by_one(ys)
  print(f"one by one, {LOOP} runs: {times.sum():.1f} s ({times.mean():.2f} s each, "
        f"{compiles.mean():.2f} s of it compile); extrapolated to {SIMS}: "
        f"{times.mean() * SIMS:.0f} s, {(times.mean() - compiles.mean()) * SIMS:.0f} s "
        "without compiles")
  print(f"speed-up: {times.mean() * SIMS / wall:.0f}x "
        f"({(times.mean() - compiles.mean()) * SIMS / wall:.0f}x against the loop's run time "
        "alone)")


if __name__ == "__main__":
  main()
