"""IRT 2PL (800 x 100, 1,003 parameters): wall time to an accurate posterior,
VI (flows + PSIS importance resampling, mean-field, full-rank) vs NUTS.

The issue's target: "the flow + resampling posterior with k-hat < 0.7 and
every posterior mean within 0.2 posterior standard deviations of a long NUTS
reference, in less wall time than NUTS needs for the same accuracy".

Reference: ``ed.mcmc.sample(kernel="nuts")``, 4 chains x (2000 warmup + 2000
draws), seed 20261122, on the data of ``examples/irt_2pl.py`` (seed 0).  It is
computed once and cached in ``--reference`` (default
``/tmp/edward_lite_refs/irt_2pl_nuts_ref.npz``, not committed): posterior
means, sds, MCSEs, bulk ESS and R-hat of every parameter.

Each method runs a ladder of budgets, every rung a fresh run timed from the
call to the posterior means (compile included, since a user pays it too):

* ``nuts``      -- ``ed.mcmc.sample``, 4 chains x (n warmup + n draws) for n
  in ``--nuts-ladder``, seed 1 (independent of the reference's);
* ``realnvp``   -- ``ed.vi.fit(family=ed.vi.RealNVP(layers=8, hidden=(128, 128)),
  samples=128, stl=True, warm_start=500)`` (500 mean-field steps, then the
  flow) + ``importance(--draws=32000)``: PSIS-weighted means; the settings
  tuned in ``examples/irt_2pl_flows.py``;
* ``meanfield``, ``fullrank`` -- the same with the Gaussian families (family
  defaults; full-rank warm-started by 500 mean-field steps and at learning
  rate 0.002, which does better here than its default 0.02: k-hat 1.50 vs
  1.80 after 1000 steps).

Per rung: wall seconds, k-hat, importance ESS, and ``|mean - reference mean|
/ reference sd`` over all 1,003 parameters (max, mean, fraction < 0.2) for
the PSIS-weighted means (VI), the unweighted surrogate means (VI, for
contrast; not the target's estimator) and the chain means (NUTS).  A VI rung
meets the target when k-hat < 0.7 and the PSIS max < 0.2; a NUTS rung when
its max < 0.2.  The table ends with the time to target of each method.

    cd /work/main && PYTHONPATH=. /work/venv/bin/python benchmarks/vi_irt.py
    # only (re)build the reference:
    ... benchmarks/vi_irt.py --reference-only
    # a shorter run:
    ... benchmarks/vi_irt.py --methods nuts realnvp --nuts-ladder 150 300 --realnvp-ladder 1000
"""

import argparse
import os
import platform
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import edward_lite as ed  # noqa: E402
from edward_lite.analysis import diagnostics  # noqa: E402
import irt_2pl  # noqa: E402

REF_PATH = "/tmp/edward_lite_refs/irt_2pl_nuts_ref.npz"
REF_SETTINGS = dict(chains=4, warmup=2000, draws=2000, seed=20261122, data_seed=0)
THRESHOLD, KHAT_MAX = 0.2, 0.7


# -- the reference -------------------------------------------------------------------------------


def make_reference(path=REF_PATH, **settings):
  """Runs the long NUTS reference and writes it to ``path`` (.npz)."""
  s = dict(REF_SETTINGS, **settings)
  y = irt_2pl.make_data(s["data_seed"])
  start = time.perf_counter()
  result = ed.mcmc.sample(irt_2pl.model, irt_2pl.STUDENTS, irt_2pl.ITEMS, observed={"y": y},
                          kernel="nuts", chains=s["chains"], warmup=s["warmup"],
                          draws=s["draws"], seed=s["seed"], progress=False)
  wall = time.perf_counter() - start
  flat = _chains_flat(result.draws, s["chains"])
  os.makedirs(os.path.dirname(path), exist_ok=True)
  np.savez(path, flat=flat.astype(np.float32), mean=flat.mean((0, 1)),
           sd=flat.reshape(-1, flat.shape[-1]).std(0, ddof=1),
           ess_bulk=np.asarray(diagnostics.ess_bulk(flat)),
           rhat=np.asarray(diagnostics.rhat(flat)),
           mcse=np.asarray(diagnostics.mcse_mean(flat)), wall_s=wall,
           divergences=float(np.sum(result.divergences)),
           step_size=np.asarray(result.step_size), **{f"setting_{k}": v for k, v in s.items()})
  return path


def _chains_flat(draws, chains):
  """dict name -> [draws, chains, ...] -> NumPy [draws, chains, 1003] (float64)."""
  return np.stack([irt_2pl.flatten({k: np.asarray(v)[:, c] for k, v in draws.items()})
                   for c in range(chains)], axis=1)


def load_reference(path, build):
  if not os.path.exists(path):
    if not build:
      sys.exit(f"No reference at {path}; run with --reference-only first (or drop "
               "--no-build-reference).")
    print(f"building the NUTS reference ({REF_SETTINGS}) -> {path} ...", file=sys.stderr,
          flush=True)
    make_reference(path)
  ref = np.load(path)
  return {k: ref[k] for k in ref.files}


# -- one rung ------------------------------------------------------------------------------------


def _errors(mean, ref):
  z = np.abs(mean - ref["mean"]) / ref["sd"]
  return dict(max=float(z.max()), mean=float(z.mean()), frac=float(np.mean(z < THRESHOLD)),
              worst=irt_2pl.labels()[int(z.argmax())])


def run_nuts(y, ref, n, args):
  start = time.perf_counter()
  result = ed.mcmc.sample(irt_2pl.model, observed={"y": y}, kernel="nuts", chains=4,
                          warmup=n, draws=n, seed=args.seed + 1, progress=False)
  flat = _chains_flat(result.draws, 4)
  mean = flat.mean((0, 1))
  wall = time.perf_counter() - start
  return dict(method="nuts", budget=f"4 x ({n} + {n})", wall=wall,
              compile=result.timings["compile_s"], est=_errors(mean, ref),
              note=f"min ESS {float(np.min(diagnostics.ess_bulk(flat))):.0f}, max R-hat "
                   f"{float(np.max(diagnostics.rhat(flat))):.3f}")


def _family(name, args):
  if name == "realnvp":
    return ed.vi.RealNVP(layers=args.layers, hidden=tuple(args.hidden))
  return name


def run_vi(y, ref, name, steps, args):
  warm = args.warm_start if name != "meanfield" else 0
  kwargs = {}
  if name == "realnvp":
    kwargs = dict(samples=args.samples, stl=not args.no_stl)
  elif name == "fullrank":
    kwargs = dict(learning_rate=args.fullrank_learning_rate)
  start = time.perf_counter()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # skipped steps and k-hat: reported in the table
    fit = ed.vi.fit(irt_2pl.model, observed={"y": y}, family=_family(name, args), steps=steps,
                    warm_start=warm, seed=args.seed, progress=False, **kwargs)
    fit_s = time.perf_counter() - start
    try:
      imp = fit.importance(args.draws, seed=args.seed)
      psis_mean = irt_2pl.flatten(fit.expectation())
      q_mean = irt_2pl.flatten({k: v.mean(0) for k, v in imp.draws.items()})
      k_hat, ess = float(imp.k_hat), float(imp.ess)
    except ValueError as e:  # every weight zero: the fit diverged
      psis_mean = q_mean = np.full(ref["mean"].shape, np.nan)
      k_hat, ess = np.inf, 0.
      print(f"  {name} {steps}: {e}", file=sys.stderr)
  wall = time.perf_counter() - start
  skipped = fit.nonfinite["skipped"] if fit.nonfinite else 0
  return dict(method=name, budget=f"{warm} + {steps} steps" if warm else f"{steps} steps",
              wall=wall, fit=fit_s, compile=fit.timings["compile_s"], k_hat=k_hat, ess=ess,
              est=_errors(psis_mean, ref), raw=_errors(q_mean, ref),
              note=(f"{fit.samples} draws/step, {steps / fit_s:.1f} steps/s incl. warm start" +
                    (f"; {skipped} steps skipped (non-finite)" if skipped else "")))


def meets(row):
  ok = row["est"]["max"] < THRESHOLD
  return ok and (row["method"] == "nuts" or row["k_hat"] < KHAT_MAX)


# -- report --------------------------------------------------------------------------------------


def print_table(rows):
  print("\n| method | budget | wall s | k-hat | IS ESS | max z | mean z | within 0.2 sd "
        "| unweighted VI: max z / within 0.2 sd | target | notes |")
  print("|---|---|---|---|---|---|---|---|---|---|---|")
  for r in rows:
    e = r["est"]
    vi = r["method"] != "nuts"
    raw = (f"{r['raw']['max']:.2f} / {100 * r['raw']['frac']:.1f}%" if vi else "—")
    print(f"| {r['method']} | {r['budget']} | {r['wall']:.0f} | "
          f"{r['k_hat']:.2f} | {r['ess']:.1f} | " if vi else
          f"| {r['method']} | {r['budget']} | {r['wall']:.0f} | — | — | ", end="")
    print(f"{e['max']:.2f} | {e['mean']:.3f} | {100 * e['frac']:.1f}% | {raw} | "
          f"{'yes' if meets(r) else 'no'} | {r['note']} |")
  print("\nz = |estimate - reference mean| / reference posterior sd over all 1,003 "
        "parameters; the estimate is the PSIS-weighted mean for VI, the chain mean for NUTS.")
  print("\nTime to target (first rung that meets it):")
  for method in dict.fromkeys(r["method"] for r in rows):
    hit = next((r for r in rows if r["method"] == method and meets(r)), None)
    print(f"  {method:10s} " + (f"{hit['wall']:.0f} s ({hit['budget']})" if hit else
                                "not reached on this ladder"))


def print_header(ref, path):
  s = {k[len("setting_"):]: ref[k].item() for k in ref if k.startswith("setting_")}
  print("# IRT 2PL 800 x 100 (1,003 parameters): VI + PSIS vs NUTS")
  print(f"python {platform.python_version()}, TensorFlow {tf.__version__}, TFP {tfp.__version__},"
        f" NumPy {np.__version__}; {os.cpu_count()} CPU cores; {platform.platform()}")
  print(f"reference {path}: NUTS 4 chains x ({s.get('warmup')} + {s.get('draws')}), seed "
        f"{s.get('seed')}, {float(ref['wall_s']):.0f} s; min bulk ESS "
        f"{ref['ess_bulk'].min():.0f}, max R-hat {ref['rhat'].max():.3f}, max MCSE/sd "
        f"{np.max(ref['mcse'] / ref['sd']):.3f}, {int(ref['divergences'])} divergences")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--methods", nargs="+", default=["nuts", "meanfield", "fullrank", "realnvp"],
                      choices=["nuts", "meanfield", "fullrank", "realnvp"])
  parser.add_argument("--nuts-ladder", type=int, nargs="+", default=[100, 200, 400, 1000],
                      help="n of each NUTS rung: 4 chains x (n warmup + n draws)")
  parser.add_argument("--meanfield-ladder", type=int, nargs="+", default=[1000, 3000])
  parser.add_argument("--fullrank-ladder", type=int, nargs="+", default=[1000])
  parser.add_argument("--realnvp-ladder", type=int, nargs="+", default=[1500, 3000])
  parser.add_argument("--stop-when-met", action="store_true",
                      help="skip a method's larger rungs once one meets the target")
  parser.add_argument("--warm-start", type=int, default=500,
                      help="mean-field warm-start steps of realnvp and fullrank")
  parser.add_argument("--samples", type=int, default=128, help="draws per step (realnvp)")
  parser.add_argument("--layers", type=int, default=8, help="RealNVP coupling layers")
  parser.add_argument("--hidden", type=int, nargs="+", default=[128, 128],
                      help="RealNVP hidden widths")
  parser.add_argument("--no-stl", action="store_true",
                      help="RealNVP without the sticking-the-landing estimator")
  parser.add_argument("--fullrank-learning-rate", type=float, default=0.002,
                      help="full-rank learning rate (family default 0.02)")
  parser.add_argument("--draws", type=int, default=32000, help="importance draws")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--reference", default=REF_PATH)
  parser.add_argument("--reference-only", action="store_true",
                      help="build the reference (if missing) and stop")
  parser.add_argument("--no-build-reference", action="store_true")
  args = parser.parse_args()

  ref = load_reference(args.reference, build=not args.no_build_reference)
  print_header(ref, args.reference)
  if args.reference_only:
    return
  y = irt_2pl.make_data(0)
  rows = []
  for method in args.methods:
    for budget in getattr(args, f"{method}_ladder"):
      print(f"  running {method} {budget} ...", file=sys.stderr, flush=True)
      row = run_nuts(y, ref, budget, args) if method == "nuts" else run_vi(
          y, ref, method, budget, args)
      rows.append(row)
      print(f"  -> {row['wall']:.0f} s, max z {row['est']['max']:.2f}"
            + (f", k-hat {row['k_hat']:.2f}" if method != "nuts" else ""), file=sys.stderr,
            flush=True)
      if args.stop_when_met and meets(row):
        break
  print_table(rows)


if __name__ == "__main__":
  main()
