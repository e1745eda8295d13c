"""The robustness battery (issue 17): standard models at 4, 8 and 64 chains
and three seeds with the sampler's defaults, against reference posteriors
computed another way.

The models, their data and their references are in
``tests/battery_models.py`` (shared with ``tests/test_battery.py``, the
bounded CI part).  Every run is ``ed.mcmc.sample`` with its defaults (NUTS,
1000 warmup + 1000 draws, the default adaptation), except where a model's
Stan reference needs ``adapt_delta > 0.8`` or double precision (printed as
its note).  A run passes when no chain is stuck (``stuck_chains()``
empty), the largest R-hat over every latent is below 1.01, and every checked
posterior mean and sd is within 4 Monte Carlo standard errors of the
reference.  Neal's centred funnel, which no NUTS sampler matches, is there
to check that a wrong run is flagged: its failed runs count as "flagged"
when their summary warns (R-hat, divergences, stuck chains), and the
battery passes when every other run passes and every such run is flagged.

Per run it prints: stuck chains, max R-hat, max |z| of the means and of the
sds against the reference, the range of sd / reference sd, divergences
after warmup and wall seconds (compile included in the first seed of each
chain count); then a pass/fail table per model and chain count, and the
checked quantities of every failed run.

    cd /work/main && .venv/bin/python benchmarks/robustness_battery.py      # ~1 h on 2 cores
    .venv/bin/python benchmarks/robustness_battery.py --models linreg gp --chains 8 --seeds 0
    .venv/bin/python benchmarks/robustness_battery.py --list
    /work/benchvenv/bin/python benchmarks/robustness_battery.py --numpyro-funnel --chains 4 8
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import numpy as np  # noqa: E402

import battery_models as bm  # noqa: E402

DEFAULT_MODELS = [name for name in bm.MODELS]


def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS, choices=list(bm.MODELS),
                      metavar="MODEL")
  parser.add_argument("--chains", nargs="+", type=int, default=[4, 8, 64])
  parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
  parser.add_argument("--warmup", type=int, default=1000)
  parser.add_argument("--draws", type=int, default=1000)
  parser.add_argument("--list", action="store_true", help="list the models and exit")
  parser.add_argument("--numpyro-funnel", action="store_true",
                      help="run NumPyro's NUTS on the centred funnel (needs numpyro) and exit")
  return parser.parse_args(argv)


def fmt_stuck(stuck):
  if not stuck:
    return "-"
  return "; ".join(f"{c}:{kind}" for c, kind, _ in stuck)


HEADER = (f"{'model':18s} {'chains':>6s} {'seed':>4s} {'stuck':>10s} {'max R-hat':>9s} "
          f"{'max|z| mean':>11s} {'max|z| sd':>9s} {'sd ratio':>11s} {'div':>5s} {'s':>6s}  result")


def fmt_row(out):
  lo, hi = out["sd_ratio"]
  return (f"{out['model']:18s} {out['chains']:6d} {out['seed']:4d} {fmt_stuck(out['stuck']):>10s} "
          f"{out['max_rhat']:9.3f} {out['max_z_mean']:11.2f} {out['max_z_sd']:9.2f} "
          f"{lo:5.2f}-{hi:4.2f} {out['divergences']:5d} {out['seconds']:6.1f}  "
          f"{bm.verdict(out)}")


def numpyro_funnel(args):
  """The centred funnel in NumPyro (vectorized chains, 1000 + 1000 by
  default): whether its failure is the model's parameterization."""
  import jax
  import jax.numpy as jnp
  import numpyro
  import numpyro.distributions as dist
  from numpyro.diagnostics import summary
  from numpyro.infer import MCMC, NUTS

  def funnel():
    v = numpyro.sample("v", dist.Normal(0., 3.))
    numpyro.sample("x", dist.Normal(0., jnp.exp(v / 2.)).expand([9]))
  print(f"NumPyro {numpyro.__version__}, centred funnel, reference v ~ N(0, 3)")
  for target_accept in (0.8, 0.99):
    for chains in args.chains:
      for seed in args.seeds:
        mcmc = MCMC(NUTS(funnel, target_accept_prob=target_accept), num_warmup=args.warmup,
                    num_samples=args.draws, num_chains=chains, chain_method="vectorized",
                    progress_bar=False)
        mcmc.run(jax.random.PRNGKey(seed), extra_fields=("diverging",))
        v = np.asarray(mcmc.get_samples(group_by_chain=True)["v"])
        s = summary({"v": v})["v"]
        print(f"target_accept {target_accept} chains {chains:3d} seed {seed}: v mean "
              f"{s['mean']:5.2f} sd {s['std']:4.2f} R-hat {s['r_hat']:.3f} ESS "
              f"{s['n_eff']:5.0f} divergences {int(np.sum(mcmc.get_extra_fields()['diverging']))}"
              f" min v {v.min():.2f}", flush=True)


def main(argv=None):
  args = parse_args(argv)
  if args.numpyro_funnel:
    numpyro_funnel(args)
    return 0
  if args.list:
    for m in bm.MODELS.values():
      print(f"{m.name:18s} {m.stan}\n{'':18s} reference: {m.reference_kind}"
            + (f"; {m.note}" if m.note else ""))
    return 0
  import tensorflow as tf  # noqa: F401  (after the environment is set)
  import edward_lite as ed
  print(f"edward_lite robustness battery: models {' '.join(args.models)}; chains "
        f"{args.chains}; seeds {args.seeds}; warmup {args.warmup}, draws {args.draws}; "
        f"TF {tf.__version__}, NumPy {np.__version__}", flush=True)
  results, failed = [], []
  start = time.perf_counter()
  for name in args.models:
    model = bm.MODELS[name]
    t0 = time.perf_counter()
    model.reference()
    print(f"\n{name}: {model.stan}\n  reference: {model.reference_kind} "
          f"({time.perf_counter() - t0:.1f} s)"
          + (f"\n  settings: {model.note}" if model.note else ""), flush=True)
    print(HEADER, flush=True)
    for chains in args.chains:
      for seed in args.seeds:
        try:
          out = bm.run(model, chains, seed, warmup=args.warmup, draws=args.draws)
          del out["result"]
          print(fmt_row(out), flush=True)
        except Exception as e:  # pylint: disable=broad-except
          # One model's error (e.g. a library file edited under a running
          # battery: autograph reads the source again) must not end the rest.
          out = dict(model=name, chains=chains, seed=seed, passed=False, divergences=0,
                     flagged=[],
                     error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
          print(f"{name:18s} {chains:6d} {seed:4d}  ERROR {out['error']}", flush=True)
        results.append(out)
        if not out["passed"]:
          failed.append(out)
  print(f"\nSummary (passed seeds / seeds; total {time.perf_counter() - start:.0f} s)")
  print("| model | reference | " + " | ".join(f"{c} chains" for c in args.chains)
        + " | divergences |")
  print("|---|---|" + "---|" * len(args.chains) + "---|")
  for name in args.models:
    cells, divs = [], []
    for chains in args.chains:
      runs = [r for r in results if r["model"] == name and r["chains"] == chains]
      cells.append(f"{sum(r['passed'] for r in runs)}/{len(runs)}")
      divs.append(str(sum(r["divergences"] for r in runs)))
    print(f"| {name} | {bm.MODELS[name].reference_kind} | " + " | ".join(cells)
          + f" | {' / '.join(divs)} |")
  total_pass = sum(r["passed"] for r in results)
  flagged = [r for r in results if not r["passed"] and bm.verdict(r) == "flagged"]
  unflagged = len(results) - total_pass - len(flagged)
  print(f"\n{total_pass}/{len(results)} runs passed; {len(flagged)} failed runs of models "
        f"no NUTS samples ({', '.join(sorted({r['model'] for r in flagged})) or 'none'}) were "
        f"flagged by their summary, as the battery asks; {unflagged} failed otherwise.")
  for out in failed:
    if "error" in out:
      print(f"\nERROR {out['model']} chains={out['chains']} seed={out['seed']}: {out['error']}")
      continue
    print(f"\n{bm.verdict(out).upper()} {out['model']} chains={out['chains']} "
          f"seed={out['seed']}: stuck {out['stuck']}, max R-hat {out['max_rhat']:.3f}; "
          f"the summary warns: {' | '.join(w[:80] for w in out['flagged']) or 'nothing'}")
    for row in out["rows"]:
      flag = " <" if abs(row["z_mean"]) >= bm.Z_MAX or abs(row.get("z_sd", 0.)) >= bm.Z_MAX \
          else ""
      print(f"  {row['label']:10s} mean {row['mean']:9.4f} ref {row['ref_mean']:9.4f} "
            f"z {row['z_mean']:6.2f} | sd {row['sd']:8.4f} ref {row['ref_sd']:8.4f} "
            f"z {row.get('z_sd', float('nan')):6.2f}{flag}")
  return 0 if unflagged == 0 else 1


if __name__ == "__main__":
  sys.exit(main())
