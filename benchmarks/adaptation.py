"""Gradients per effective draw, side by side: edward_lite, nutpie and NumPyro.

Every tool samples the same posteriors at its own defaults, 4 chains x 1000
kept draws, each run in a fresh process so that compile time is counted
alike:

* four public reference posteriors (posteriordb, data and reference
  summaries in ``tests/posteriordb/``): ``kidiq``, ``earnings``,
  ``diamonds``, ``eight_schools``;
* nine models of the robustness battery (``tests/battery_models.py``, named
  ``battery:NAME``): ``linreg10`` (flat coefficients and scale),
  ``logistic``, ``poisson``, ``ar3``, ``arma11`` and ``garch11`` (loops:
  a scan in every tool), ``gauss_mix`` (ordered means), ``gp`` (marginal
  likelihood) and ``gp_poisson`` (latent, float64).  edward_lite takes the
  model's kernel and ``sample`` options; the peers its data, from a file
  this script writes, its target acceptance where it sets one, and float64
  where it asks for it (NumPyro's default is float32).

One function computes every diagnostic from every tool's draws
(``ed.diagnostics``, which matches ArviZ): the smallest and median bulk ESS
over the scalar quantities, the smallest tail ESS, the largest R-hat, and
agreement with the reference (largest ``|z|`` of a mean, its MCSE from the
bulk ESS; range of the sd ratios; the battery's own ``agreement``).
The counts that do not depend on the machine:

* total gradients (warmup + sampling, all chains) per unit of min ESS;
* min ESS per 1000 sampling gradients;

and the wall clock: min ESS per second, compile included.

    python benchmarks/adaptation.py --peers-python /path/peers/bin/python \\
        [--posteriors kidiq,...,battery:arma11,...] [--seeds 0,1,2] \\
        [--tools edward_lite,nutpie,nutpie_low_rank,numpyro]

The peers run from their own virtual environment (``adaptation_peers.py``
says how to make it); without ``--peers-python`` only edward_lite runs.
Results: ``benchmarks/RESULTS.md``.
"""

import argparse
import inspect
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, HERE)

CHAINS, DRAWS = 4, 1000


BATTERY = ("linreg10", "logistic", "poisson", "ar3", "arma11", "garch11", "gauss_mix", "gp",
           "gp_poisson")
POSTERIORS = ",".join(["kidiq", "earnings", "diamonds", "eight_schools"]
                      + ["battery:" + name for name in BATTERY])


def load(posterior):
  """``(program, args, observed, options, values, agree)`` of a posteriordb
  posterior or ``battery:NAME``: ``options`` the ``sample`` keywords it
  asks for, ``values(draws)`` its scalar quantities ``{label: [draws,
  chains]}``, ``agree(draws)`` the largest ``|z|`` of a mean and the range
  of the sd ratios against its reference."""
  if posterior.startswith("battery:"):
    import battery_models as bm  # pylint: disable=import-outside-toplevel
    m = bm.MODELS[posterior[len("battery:"):]]
    args, observed = m.data()

    def agree(draws):
      out = bm.agreement(m, draws)
      return out["max_z_mean"], out["sd_ratio"]
    return (m.program, args, observed, {"kernel": m.kernel, **m.options},
            lambda draws: bm.scalars(m.quantities(draws)), agree)
  import posteriordb_models as pdb  # pylint: disable=import-outside-toplevel
  p = pdb.load(posterior)

  def agree(draws):
    rows = pdb.compare(p, draws).values()
    return max(abs(z) for z, _ in rows), (min(r for _, r in rows), max(r for _, r in rows))
  return p.program, p.args, p.observed, {}, p.values, agree


def write_data(posterior, path):
  """A battery model's data for the peers (who cannot import it): its
  arguments by the program's parameter names and its observed values, as
  ``data:NAME``; its NUTS target acceptance (NaN: the default) and whether
  it runs in float64."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  program, args, observed, options, _, _ = load(posterior)
  names = inspect.signature(program).parameters
  # garch11's r is both: the same array.
  data = {**dict(zip(names, args)), **observed}
  np.savez(path, **{"data:" + k: np.asarray(v) for k, v in data.items()},
           target_accept=getattr(options["kernel"], "target_accept", np.nan),
           float64=options.get("dtype") == tf.float64)


def run_edward_lite(posterior, seed, out, options):
  """One edward_lite run at its defaults (``options``: extra ``sample``
  keywords, over the posterior's own), written like a peer's."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import edward_lite as ed  # pylint: disable=import-outside-toplevel
  program, args, observed, own, _, _ = load(posterior)
  t0 = time.perf_counter()
  post = ed.mcmc.sample(program, *args, observed=observed, chains=CHAINS, draws=DRAWS,
                        seed=seed, progress=False, **{**own, **options})
  wall = time.perf_counter() - t0
  sampling = int(post.sample_stats["num_gradients"].sum())
  np.savez(out, **{"draw:" + k: v for k, v in post.draws.items()},
           warmup_grads=int(post.num_gradients.sum()) - sampling, sampling_grads=sampling,
           divergences=int(post.divergences.sum()), warmup=post.warmup,
           compile_s=post.timings["compile_s"], sampling_s=wall - post.timings["compile_s"])


def evaluate(posterior, path):
  """The diagnostics of one run's saved draws."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import edward_lite as ed  # pylint: disable=import-outside-toplevel
  _, _, _, _, values_of, agree = load(posterior)
  saved = np.load(path)
  draws = {k[5:]: saved[k] for k in saved.files if k.startswith("draw:")}
  values = {k: np.asarray(v, np.float64) for k, v in values_of(draws).items()}
  bulk = np.array([float(ed.diagnostics.ess_bulk(v)) for v in values.values()])
  tail = np.array([float(ed.diagnostics.ess_tail(v)) for v in values.values()])
  rhat = max(float(ed.diagnostics.rhat(v)) for v in values.values())
  max_z, sd_ratio = agree(draws)
  warm, samp = int(saved["warmup_grads"]), int(saved["sampling_grads"])
  seconds = float(saved["compile_s"]) + float(saved["sampling_s"])
  return dict(
      min_ess=bulk.min(), median_ess=float(np.median(bulk)), min_tail=tail.min(), rhat=rhat,
      warmup_grads=warm, sampling_grads=samp, divergences=int(saved["divergences"]),
      warmup=int(saved["warmup"]), compile_s=float(saved["compile_s"]),
      sampling_s=float(saved["sampling_s"]),
      grads_per_ess=(warm + samp) / bulk.min(), ess_per_1k=1000 * bulk.min() / samp,
      ess_per_s=bulk.min() / seconds, max_z=max_z, sd_ratio=sd_ratio)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--posteriors", default=POSTERIORS)
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--tools", default="edward_lite,nutpie,nutpie_low_rank,numpyro")
  parser.add_argument("--peers-python", default=None)
  parser.add_argument("--options", default="{}",
                      help="extra ed.mcmc.sample keywords for edward_lite, a Python dict")
  parser.add_argument("--run", nargs=3, metavar=("POSTERIOR", "SEED", "OUT"),
                      help=argparse.SUPPRESS)  # one edward_lite run (a subprocess)
  args = parser.parse_args()
  import ast  # pylint: disable=import-outside-toplevel
  options = ast.literal_eval(args.options)
  if args.run:
    run_edward_lite(args.run[0], int(args.run[1]), args.run[2], options)
    return

  import machine  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  print(machine.machine_line())
  print(f"# edward_lite {machine.version('edward_lite')}, tensorflow "
        f"{machine.version('tensorflow')}, tensorflow-probability "
        f"{machine.version('tensorflow-probability')}")
  if args.peers_python:
    peers = subprocess.run(
        [args.peers_python, "-c", "from importlib import metadata as m; print(', '.join("
         "f'{p} {m.version(p)}' for p in ('nutpie', 'pymc', 'numpyro', 'jax')))"],
        capture_output=True, text=True, check=False).stdout.strip()
    print(f"# peers: {peers}")
  tools = args.tools.split(",")
  if not args.peers_python:
    tools = [t for t in tools if t == "edward_lite"]
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    for posterior in args.posteriors.split(","):
      data = os.path.join(tmp, f"{posterior}-data.npz")
      if posterior.startswith("battery:") and tools != ["edward_lite"]:
        write_data(posterior, data)
      for seed in [int(s) for s in args.seeds.split(",")]:
        for tool in tools:
          out = os.path.join(tmp, f"{tool}-{posterior}-{seed}.npz")
          if tool == "edward_lite":
            cmd = [sys.executable, __file__, "--options", args.options,
                   "--run", posterior, str(seed), out]
            # A cold compile cache: every run traces and compiles, as a new
            # model does.  This process's TF_XLA_FLAGS (set when it imported
            # edward_lite to evaluate a run) would name the shared cache.
            env = {k: v for k, v in os.environ.items() if k != "TF_XLA_FLAGS"}
            env["ED_COMPILE_CACHE"] = os.path.join(tmp, f"xla-{posterior}-{seed}")
          else:
            cmd = [args.peers_python, os.path.join(HERE, "adaptation_peers.py"), tool,
                   posterior, str(seed), out, data]
            # One BLAS thread per chain thread (nutpie runs a thread per chain;
            # a multi-threaded BLAS in each oversubscribes the cores).
            env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                       MKL_NUM_THREADS="1")
          done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
          if done.returncode:
            print(f"{tool} {posterior} seed {seed} failed:\n{done.stderr[-2000:]}")
            continue
          r = evaluate(posterior, out)
          rows.append((posterior, seed, tool, r))
          print(f"{posterior:20s} {seed} {tool:16s} warmup {r['warmup']:5d} "
                f"grads {r['warmup_grads']:8d} + {r['sampling_grads']:8d}  "
                f"minESS {r['min_ess']:7.0f} (med {r['median_ess']:7.0f}, tail "
                f"{r['min_tail']:6.0f})  grads/ESS {r['grads_per_ess']:8.1f}  "
                f"ESS/1k {r['ess_per_1k']:7.1f}  ESS/s {r['ess_per_s']:8.1f}  "
                f"compile {r['compile_s']:5.1f}s run {r['sampling_s']:5.2f}s  "
                f"div {r['divergences']:4d}  rhat {r['rhat']:.3f}  |z| {r['max_z']:.1f}  "
                f"sd [{r['sd_ratio'][0]:.2f}, {r['sd_ratio'][1]:.2f}]", flush=True)

  print("\nmedians over posteriors (each posterior: median over seeds), and ratios "
        "edward_lite / peer:")
  table = {}
  for posterior, _, tool, r in rows:
    table.setdefault((posterior, tool), []).append(r)
  for key in ("grads_per_ess", "ess_per_1k", "ess_per_s"):
    per_tool = {}
    for tool in tools:
      vals = [np.median([r[key] for r in table[(p, tool)]]) for p in args.posteriors.split(",")
              if (p, tool) in table]
      if vals:
        per_tool[tool] = vals
    line = "  ".join(f"{t} {np.median(v):.2f}" for t, v in per_tool.items())
    ratios = "  ".join(
        f"/{t} {np.median(np.array(per_tool['edward_lite']) / np.array(v)):.2f}"
        for t, v in per_tool.items() if t != "edward_lite" and "edward_lite" in per_tool
        and len(v) == len(per_tool["edward_lite"]))
    print(f"  {key:14s} {line}   ratios: {ratios}")


if __name__ == "__main__":
  main()
