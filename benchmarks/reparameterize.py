"""Centred models before and after ``ed.reparameterize`` (RESULTS §29).

Neal's funnel, eight schools (on its data and on well-measured schools,
where the centred form is the right one) and a varying-intercepts
regression, each written centred (``tests/reparam_models.py``, exact
references), sampled by ``ed.mcmc.sample`` at its defaults (NUTS, 4 chains,
adaptive warmup up to 1000, 1000 draws) three ways: as written, fully non-centred
(``ed.reparameterize(model)``) and with the centredness learned by
``ed.vi.learn_centeredness`` (VIP).  Per run it prints divergences after
warmup, the smallest bulk ESS and largest R-hat over the model's own
quantities (the original names), and the largest |z| of their means against
the exact posterior (z = (mean - exact) / (exact sd / sqrt(ESS))).  Counts,
not timings.

    PYTHONPATH=. .venv/bin/python benchmarks/reparameterize.py --seeds 0 1 2    # ~15 min, 2 cores
    PYTHONPATH=. .venv/bin/python benchmarks/reparameterize.py --models funnel --seeds 0
"""

import argparse
import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import numpy as np  # noqa: E402

import edward_lite as ed  # noqa: E402
from edward_lite.analysis import diagnostics  # noqa: E402
import reparam_models as rm  # noqa: E402  pylint: disable=g-bad-import-order

from machine import machine_line, version  # noqa: E402  pylint: disable=g-bad-import-order

MODELS = {
    "funnel": (rm.funnel, lambda: ((), {}), lambda: rm.FUNNEL_REFERENCE, ("v", "x")),
    "eight_schools": (rm.schools_centred, rm.schools_data, rm.schools_reference,
                      ("mu", "tau", "theta")),
    "schools_measured": (rm.schools_centred, rm.informative_data, rm.informative_reference,
                         ("mu", "tau", "theta")),
    "hier_regression": (rm.varying_intercepts, rm.regression_data, rm.regression_reference,
                        ("mu", "beta", "tau", "a")),
}


def measure(result, reference, names):
  """(divergences, min ESS, max R-hat, max |z|) over ``names``."""
  ess, rhat, z = [], [], []
  for name in names:
    draws = np.asarray(result.draws[name], np.float64)
    mean, sd = (np.asarray(v, np.float64) for v in reference[name])
    e = np.asarray(diagnostics.ess_bulk(draws)).reshape(-1)
    ess.append(e.min())
    rhat.append(np.asarray(diagnostics.rhat(draws)).max())
    z.append(np.max(np.abs(draws.mean(axis=(0, 1)).reshape(-1) - np.reshape(mean, -1))
                    / (np.reshape(sd, -1) / np.sqrt(e))))
  return int(result.divergences.sum()), min(ess), max(rhat), max(z)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--models", nargs="+", default=list(MODELS))
  parser.add_argument("--seeds", nargs="+", type=int, default=[0])
  options = parser.parse_args()
  print(machine_line())
  print(f"# tensorflow {version('tensorflow')}, tensorflow-probability "
        f"{version('tensorflow-probability')}")
  print(f"{'model':16s} {'form':12s} seed  div  min_ESS  max_Rhat  max|z|  c")
  for model_name in options.models:
    program, data, reference, names = MODELS[model_name]
    args, observed = data()
    ref = reference()
    learned = ed.vi.learn_centeredness(program, *args, observed=observed)
    c_text = "; ".join(f"{n} {np.min(c):.2f}-{np.max(c):.2f}" for n, c in learned.items())
    forms = {"centred": (program, ""), "noncentred": (ed.reparameterize(program), "0"),
             "learned": (ed.reparameterize(program, centeredness=learned), c_text)}
    for form, (prog, c) in forms.items():
      for seed in options.seeds:
        with warnings.catch_warnings():
          warnings.simplefilter("ignore")
          result = ed.mcmc.sample(prog, *args, observed=observed, seed=seed, progress=False)
        div, ess, rhat, z = measure(result, ref, names)
        print(f"{model_name:16s} {form:12s} {seed:4d} {div:4d} {ess:8.0f} {rhat:9.3f} "
              f"{z:7.1f}  {c}", flush=True)


if __name__ == "__main__":
  main()
