"""Would switching to ``adapt_metric="flow"`` automatically pay? (issue 54, item 2)

The summary names the flow adaptation (``mcmc.notes.geometry_hint``) when a
run with gradients shows signs of a curvature that changes with position:
divergences, trees at the maximum depth in over 1% of transitions, a low
E-BFMI, or chains whose step sizes differ over 4x.  An automatic switch
would then run again through a flow.  Per posterior and seed this script
runs the default (NUTS, 4 chains x (1000 + 1000)), records whether the hint
fires, and if it does runs the flow too; it prints

* ``default``: total gradients per min ESS (bulk and tail) and agreement;
* ``switch``: where the hint fired, the default run's gradients plus the
  flow run's, per the flow run's min ESS (a switch costs both runs), and
  the flow run's agreement; where it did not, the default's own figures.

Posteriors: the hard-geometry set (``hard_geometry.py``: ``funnel10``,
``eight_schools_centred``, ``gp_poisson``, ``banana``), where a switch
should pay, and ordinary ones (``adaptation.py``'s: posteriordb's and the
robustness battery's, ``battery:NAME``), where the hint firing is a cost.

    PYTHONPATH=. .venv/bin/python benchmarks/flow_switch.py \\
        [--posteriors funnel10,battery:logistic,kidiq] [--seeds 0,1,2]

Results: ``benchmarks/RESULTS.md``.
"""

import argparse
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import adaptation  # noqa: E402  pylint: disable=wrong-import-position
import hard_geometry as hg  # noqa: E402  pylint: disable=wrong-import-position

import edward_lite as ed  # noqa: E402  pylint: disable=wrong-import-position

HARD = ("funnel10", "eight_schools_centred", "gp_poisson", "banana")
ORDINARY = ("kidiq", "earnings", "eight_schools", "battery:logistic", "battery:poisson",
            "battery:garch11", "battery:gauss_mix", "battery:hier_noncentred")
HINT = "adapt_metric='flow'"


def parts(posterior):
  """``(program, args, observed, options, agree)``; ``agree(draws)`` gives
  the largest |z| of a mean and the range of sd ratios."""
  if posterior in hg.POSTERIORS:
    program, args, observed, options, agree = hg.posterior_parts(posterior)
    return program, args, observed, options, lambda d: agree(d)[:2]
  program, args, observed, options, _, agree = adaptation.load(posterior)
  return program, args, observed, options, agree


def run(posterior, seed, flow):
  """One run: ``(total gradients, min bulk/tail ESS, divergences, |z|, sd
  ratios, whether the summary's warnings name the flow)``."""
  program, args, observed, options, agree = parts(posterior)
  options = {**options, **({"adapt_metric": "flow"} if flow else {})}
  if flow and "kernel" in options and not isinstance(options["kernel"], str):
    options.pop("kernel")  # the flow run's own NUTS (its target acceptance)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    post = ed.mcmc.sample(program, *args, observed=observed, chains=hg.CHAINS,
                          warmup=hg.WARMUP, draws=hg.DRAWS, seed=seed, progress=False,
                          **options)
    post.summary()
  hint = any(HINT in str(w.message) for w in caught)
  scalars = np.concatenate([np.asarray(x, np.float64).reshape(x.shape[:2] + (-1,))
                            for x in post.draws.values()], axis=-1)
  ess = min(float(np.min(ed.diagnostics.ess_bulk(scalars))),
            float(np.min(ed.diagnostics.ess_tail(scalars))))
  z, ratios = agree(post.draws)
  return dict(total=int(post.total_gradients), ess=ess, div=int(post.divergences.sum()),
              z=float(z), ratios=ratios, hint=hint)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--posteriors", default=",".join(HARD + ORDINARY))
  parser.add_argument("--seeds", default="0,1,2")
  a = parser.parse_args()
  print(hg.machine_line())
  print("posterior | seed | default grads/ESS | div | |z| | sd ratios | hint | "
        "switch grads/ESS | div | |z| | sd ratios")
  summary = {}
  for posterior in a.posteriors.split(","):
    for seed in (int(s) for s in a.seeds.split(",")):
      d = run(posterior, seed, flow=False)
      line = (f"{posterior} | {seed} | {d['total'] / d['ess']:.1f} | {d['div']} | "
              f"{d['z']:.1f} | {d['ratios'][0]:.2f}-{d['ratios'][1]:.2f} | "
              f"{'yes' if d['hint'] else 'no'}")
      per = d["total"] / d["ess"]
      if d["hint"]:
        f = run(posterior, seed, flow=True)
        per = (d["total"] + f["total"]) / f["ess"]
        line += (f" | {per:.1f} | {f['div']} | {f['z']:.1f} | "
                 f"{f['ratios'][0]:.2f}-{f['ratios'][1]:.2f}")
      print(line, flush=True)
      summary.setdefault(posterior, []).append((d["total"] / d["ess"], per, d["hint"]))
  print("\nmedian grads per min ESS, default -> with the switch (hint fired in k of n seeds):")
  for posterior, rows in summary.items():
    default, switch, hints = zip(*rows)
    print(f"  {posterior}: {np.median(default):.1f} -> {np.median(switch):.1f} "
          f"({sum(hints)} of {len(hints)})")


if __name__ == "__main__":
  main()
