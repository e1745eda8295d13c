"""Posteriors whose curvature changes with position: edward_lite's default
adaptation against ``adapt_metric="flow"`` (issue 54, item 4).

Each run is NUTS, 4 chains x 1000 draws, and counts every gradient: warmup,
the flow's fit and sampling.  Per posterior, tool and seed it prints the
total gradients, the smallest bulk and tail ESS over the scalars, gradients
per min ESS, divergences after warmup, the largest R-hat, wall seconds
(compile and the fit included) and the agreement with an exact or
reference answer (the largest |z| of a mean, the range of sd ratios).

- ``funnel10``, ``funnel100``: Neal's funnel, centred, ``v ~ N(0, 3)``,
  ``x_i | v ~ N(0, e^{v/2})``; exact for ``v`` (and ``P(v < -5) = 0.0478``,
  its z given as ``tail_z``).
- ``eight_schools_centred``: the centred program against posteriordb's
  reference (of the same posterior).
- ``gp_poisson``: the battery's latent GP with a Poisson likelihood
  (float64), against its quadrature-and-importance reference.
- ``banana``: ``x1 ~ N(0, 10)``, ``x2 | x1 ~ N(0.03 (x1^2 - 100), 1)``;
  exact: ``x2`` has mean 0 and sd ``sqrt(19)``.
- ``irt2pl``: the hierarchical 2PL item-response model of
  ``examples/irt_2pl.py`` (800 students x 100 items, centred, 1,003
  parameters), against ``vi_irt.py``'s long NUTS reference (built and
  cached on first use, about 5 minutes).

    PYTHONPATH=. .venv/bin/python benchmarks/hard_geometry.py \\
        [--posteriors funnel10,banana] [--tools default,flow] [--seeds 0,1,2]
        [--target-accept 0.95] [--flow samples=64,steps=4000]

``--tools ""`` with ``--peer-draws DIR`` analyses only the peers' runs
(nutpie and NumPyro, saved by ``hard_geometry_peers.py`` in their own
environment) with the same estimators and references.  Results:
``benchmarks/RESULTS.md``, sections 55 and 57.
"""

import argparse
import functools
import os
import sys
import time
import warnings

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, HERE)

import edward_lite as ed  # pylint: disable=wrong-import-position
from machine import machine_line, version  # pylint: disable=wrong-import-position

CHAINS, WARMUP, DRAWS = 4, 1000, 1000
FUNNEL_TAIL = 0.04779  # P(v < -5) for v ~ N(0, 3)


def _funnel(dim):
  def funnel():
    v = ed.Normal(0., 3., name="v")
    return ed.Normal(tf.zeros(dim - 1), tf.exp(v / 2.), name="x")

  def agree(draws):
    v = np.asarray(draws["v"], np.float64)
    z = v.mean() / float(ed.diagnostics.mcse_mean(v))
    tail = float(np.mean(v < -5.))
    ess = float(ed.diagnostics.ess_tail(v))
    tail_z = (tail - FUNNEL_TAIL) / np.sqrt(FUNNEL_TAIL * (1 - FUNNEL_TAIL) / ess)
    return abs(z), (v.std() / 3.,) * 2, tail_z
  return funnel, (), {}, {}, agree


def _banana():
  def banana():
    x1 = ed.Normal(0., 10., name="x1")
    ed.Normal(0.03 * (tf.square(x1) - 100.), 1., name="x2")

  def agree(draws):
    zs, ratios = [], []
    for name, sd in (("x1", 10.), ("x2", np.sqrt(19.))):
      x = np.asarray(draws[name], np.float64)
      zs.append(abs(x.mean()) / float(ed.diagnostics.mcse_mean(x)))
      ratios.append(x.std() / sd)
    return max(zs), (min(ratios), max(ratios)), None
  return banana, (), {}, {}, agree


def _eight_schools_centred():
  import posteriordb_models as pdb  # pylint: disable=import-outside-toplevel
  p = pdb.load("eight_schools")

  def centred(sigma):
    mu = ed.Normal(0., 5., name="mu")
    tau = ed.HalfCauchy(0., 5., name="tau")
    theta = ed.Normal(mu * tf.ones_like(sigma), tau, name="theta")
    return ed.Normal(theta, sigma, name="y")

  def agree(draws):
    zs, ratios = [], []
    for name, x in {"mu": draws["mu"], "tau": draws["tau"],
                    **pdb._scalars("theta", draws["theta"])}.items():  # pylint: disable=protected-access
      ref = p.reference[name]
      x = np.asarray(x, np.float64)
      zs.append(abs(x.mean() - ref["mean"]) / np.hypot(float(ed.diagnostics.mcse_mean(x)),
                                                       ref["mcse_mean"]))
      ratios.append(x.std() / ref["sd"])
    return max(zs), (min(ratios), max(ratios)), None
  return centred, p.args, p.observed, {}, agree


def _gp_poisson():
  import battery_models as bm  # pylint: disable=import-outside-toplevel
  m = bm.MODELS["gp_poisson"]
  args, observed = m.data()

  def agree(draws):
    out = bm.agreement(m, draws)
    return out["max_z_mean"], out["sd_ratio"], None
  return m.program, args, observed, {"dtype": tf.float64, **m.options}, agree


def _irt2pl():
  import vi_irt  # pylint: disable=import-outside-toplevel
  irt_2pl = vi_irt.irt_2pl
  ref = vi_irt.load_reference(vi_irt.REF_PATH, build=True)

  def agree(draws):
    flat = vi_irt._chains_flat(draws, CHAINS)  # pylint: disable=protected-access
    mcse = np.asarray(ed.diagnostics.mcse_mean(flat))
    z = np.abs(flat.mean((0, 1)) - ref["mean"]) / np.hypot(mcse, ref["mcse"])
    ratios = flat.reshape(-1, flat.shape[-1]).std(0, ddof=1) / ref["sd"]
    return float(z.max()), (float(ratios.min()), float(ratios.max())), None
  return (irt_2pl.model, (irt_2pl.STUDENTS, irt_2pl.ITEMS),
          {"y": irt_2pl.make_data(int(ref["setting_data_seed"]))}, {}, agree)


POSTERIORS = {"funnel10": lambda: _funnel(10), "funnel100": lambda: _funnel(100),
              "eight_schools_centred": _eight_schools_centred, "gp_poisson": _gp_poisson,
              "banana": _banana, "irt2pl": _irt2pl}
TOOLS = {"default": {}, "flow": {"adapt_metric": "flow"}}


@functools.lru_cache(maxsize=None)
def posterior_parts(posterior):
  """``POSTERIORS[posterior]()``, built once (the IRT's reads its reference file)."""
  return POSTERIORS[posterior]()


def analyse(posterior, tool, seed, draws, total, fit, divergences, wall, warmup=WARMUP):
  """The row of one run from its draws (``{name: [draws, chains, ...]}``),
  whichever sampler made them: ESS, R-hat and the agreement by the same
  estimators (``ed.diagnostics``) and references."""
  *_, agree = posterior_parts(posterior)
  scalars = [np.asarray(x, np.float64).reshape(x.shape[:2] + (-1,)) for x in draws.values()]
  scalars = np.concatenate(scalars, axis=-1)
  bulk = float(np.min(ed.diagnostics.ess_bulk(scalars)))
  tail = float(np.min(ed.diagnostics.ess_tail(scalars)))
  rhat = float(np.max(ed.diagnostics.rhat(scalars)))
  z, ratios, tail_z = agree(draws)
  ess = min(bulk, tail)
  return dict(posterior=posterior, tool=tool, seed=seed, total=int(total), fit=int(fit),
              min_ess=ess, per_ess=total / max(ess, 1e-9), bulk=bulk, tail=tail,
              divergences=int(divergences), rhat=rhat, wall=float(wall), z=z, ratios=ratios,
              tail_z=tail_z, warmup=warmup)


def peer_runs(directory, posteriors):
  """The rows of the peers' runs saved by ``hard_geometry_peers.py``."""
  rows = []
  for name in sorted(os.listdir(directory)):
    posterior, tool, seed = name[:-len(".npz")].split("__")
    if posterior not in posteriors:
      continue
    with np.load(os.path.join(directory, name)) as f:
      draws = {k[len("draw_"):]: f[k] for k in f.files if k.startswith("draw_")}
      rows.append(analyse(posterior, tool, int(seed), draws, f["total"], f["fit"],
                          f["divergences"], f["wall"]))
  return rows


def run(posterior, tool, seed, target_accept=None, flow=None):
  program, args, observed, options, _ = posterior_parts(posterior)
  options = {**options, **TOOLS[tool]}
  if flow and tool == "flow":
    flow = dict(flow)
    shape = {k: flow.pop(k) for k in ("layers", "hidden", "max_log_scale") if k in flow}
    if shape:
      flow["family"] = ed.vi.IAF(**shape)
    options["adapt_metric"] = ed.mcmc.FlowAdaptation(**flow)
  if target_accept is not None:
    options["kernel"] = ed.mcmc.NUTS(target_accept=target_accept)
  t0 = time.perf_counter()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    post = ed.mcmc.sample(program, *args, observed=observed, chains=CHAINS, warmup=WARMUP,
                          draws=DRAWS, seed=seed, progress=False, **options)
    post.summary()
  fit = (post.transport or {}).get("num_gradients") or 0
  return analyse(posterior, tool, seed, post.draws, post.total_gradients, fit,
                 post.divergences.sum(), time.perf_counter() - t0, post.warmup)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--posteriors", default=",".join(POSTERIORS))
  parser.add_argument("--tools", default=",".join(TOOLS))
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--target-accept", type=float, default=None,
                      help="NUTS's target acceptance (default: the tool's own)")
  parser.add_argument("--flow", default="",
                      help="the flow's settings, e.g. 'samples=64,steps=4000,max_log_scale=6.' "
                           "(ed.mcmc.FlowAdaptation's and ed.vi.IAF's; default: theirs)")
  parser.add_argument("--peer-draws", default=None,
                      help="a directory of hard_geometry_peers.py's runs, analysed here too")
  a = parser.parse_args()
  print(machine_line())
  print(f"# tensorflow {version('tensorflow')}, tensorflow-probability "
        f"{version('tensorflow-probability')}, NUTS {CHAINS} chains x ({WARMUP} + {DRAWS})")
  print("posterior | tool | seed | total grads (fit) | min bulk/tail ESS | grads/min ESS | "
        "div | max R-hat | wall s | max|z| mean | sd ratios | tail z")
  posteriors = a.posteriors.split(",")
  tools = [t for t in a.tools.split(",") if t]
  for given, known, what in ((posteriors, POSTERIORS, "--posteriors"), (tools, TOOLS, "--tools")):
    unknown = [g for g in given if g not in known]
    if unknown:
      raise SystemExit(f"{what}: unknown {unknown}; choose from {sorted(known)}.")
  flow = {k: float(v) if "." in v or "e" in v else int(v)
          for k, v in (kv.split("=") for kv in a.flow.split(",") if kv)}
  rows = []

  def show(r):
    tail = "" if r["tail_z"] is None else f"{r['tail_z']:+.1f}"
    print(f"{r['posterior']} | {r['tool']} | {r['seed']} | {r['total']} ({r['fit']}) | "
          f"{r['bulk']:.0f}/{r['tail']:.0f} | {r['per_ess']:.1f} | {r['divergences']} | "
          f"{r['rhat']:.3f} | {r['wall']:.0f} | {r['z']:.1f} | "
          f"{r['ratios'][0]:.2f}-{r['ratios'][1]:.2f} | {tail}", flush=True)

  for posterior in posteriors:
    for tool in tools:
      for seed in (int(s) for s in a.seeds.split(",")):
        rows.append(run(posterior, tool, seed, a.target_accept, flow))
        show(rows[-1])
  if a.peer_draws:
    for r in peer_runs(a.peer_draws, posteriors):
      rows.append(r)
      show(r)
  print("\nmedian gradients per min ESS (default / flow; the best peer / flow):")
  for posterior in posteriors:
    names = sorted({r["tool"] for r in rows if r["posterior"] == posterior})
    med = {t: np.median([r["per_ess"] for r in rows if r["posterior"] == posterior
                         and r["tool"] == t]) for t in names}
    peers = [v for t, v in med.items() if t not in TOOLS]
    flow = med.get("flow", np.nan)
    print(f"  {posterior}: " + ", ".join(f"{t} {v:.1f}" for t, v in med.items())
          + f"; default / flow {med.get('default', np.nan) / flow:.1f}x"
          + (f"; best peer / flow {min(peers) / flow:.1f}x" if peers else ""))


if __name__ == "__main__":
  main()
