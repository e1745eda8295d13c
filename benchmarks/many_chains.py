"""NUTS warmup with hundreds to thousands of chains (issue 29; RESULTS §36).

For each posterior and chain count, one ``ed.mcmc.sample`` at the defaults
(seed 0, ``--draws`` kept draws), in a fresh process per run, printing:

* warmup iterations, the compile seconds and the warmup's seconds after it
  (from the chunk callback), and the sampling seconds;
* gradients per chain and warmup iteration, and per kept draw;
* the final step size and divergences after warmup;
* the range of the eigenvalues of the posterior covariance of the
  unconstrained draws whitened by the final metric (1 everywhere: the metric
  is the posterior's covariance);
* agreement with the reference (largest |z| of a mean) and the max R-hat.

``--code DIR`` runs another checkout (e.g. a ``git worktree`` of an older
commit) for a before/after table.  Seconds need an idle machine; the counts
do not.

    .venv/bin/python benchmarks/many_chains.py [--chains 64 256 1000] \\
        [--posteriors kidiq eight_schools] [--code /tmp/base]
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(posterior, chains, draws):
  """One run in this process; returns its row as a dict."""
  import time  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  sys.path.insert(0, os.path.join(HERE, "..", "tests"))
  import edward_lite as ed  # pylint: disable=import-outside-toplevel
  import posteriordb_models as pdb  # pylint: disable=import-outside-toplevel
  p = pdb.load(posterior)
  marks = []
  t0 = time.perf_counter()
  post = ed.mcmc.sample(p.program, *p.args, observed=p.observed, chains=chains, draws=draws,
                        seed=0, progress=False,
                        callback=lambda info: marks.append((time.perf_counter() - t0,
                                                            info["warmup"])))
  wall = time.perf_counter() - t0
  warmup_end = max(t for t, warm in marks if warm)
  sampling = post.sample_stats["num_gradients"]
  u = _unconstrained(post)
  m = post.inverse_metric if post.inverse_metric.ndim == 2 else np.diag(post.inverse_metric[0])
  root_inv = np.linalg.inv(np.linalg.cholesky(m))
  eig = np.linalg.eigvalsh(root_inv @ np.cov(u.T) @ root_inv.T)
  rows = pdb.compare(p, post.draws)
  return dict(
      posterior=posterior, chains=chains, warmup=post.warmup,
      compile_s=post.timings["compile_s"], warmup_s=warmup_end - post.timings["compile_s"],
      sampling_s=wall - warmup_end,
      warmup_grads=(post.num_gradients.sum() - sampling.sum()) / chains / post.warmup,
      grads_per_draw=float(sampling.mean()), step=float(np.ravel(post.step_size)[0]),
      divergences=int(post.divergences.sum()), eig=(float(eig.min()), float(eig.max())),
      z=max(abs(z) for z, _ in rows.values()),
      rhat=float(np.max(post.summary()["r_hat"])))


def _unconstrained(post):
  """The kept draws on the unconstrained space ``[draws * chains, D]``."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  target = post.target
  values = {name: np.reshape(post.draws[name], (-1,) + post.draws[name].shape[2:])
            for name in target.names}
  return np.asarray(target.flatten(target.unconstrain(values)))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--posteriors", nargs="+", default=["kidiq", "eight_schools"])
  parser.add_argument("--chains", nargs="+", type=int, default=[64, 256, 1000])
  parser.add_argument("--draws", type=int, default=200)
  parser.add_argument("--code", default=os.path.join(HERE, ".."))
  parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # posterior chains: a child run
  args = parser.parse_args()
  if args.one:
    print(json.dumps(run(args.one[0], int(args.one[1]), args.draws)))
    return
  env = dict(os.environ, PYTHONPATH=os.path.abspath(args.code), TF_CPP_MIN_LOG_LEVEL="2")
  print(f"# code: {os.path.abspath(args.code)}; {args.draws} kept draws, seed 0")
  print("| posterior | chains | warmup | compile s | warmup s | sampling s | warmup grads / "
        "chain / it | grads / draw | step | div | whitened eig | max z | max R-hat |")
  print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
  for posterior in args.posteriors:
    for chains in args.chains:
      out = subprocess.run([sys.executable, os.path.abspath(__file__), "--draws", str(args.draws),
                            "--one", posterior, str(chains)], env=env, capture_output=True,
                           text=True, check=True, cwd="/")
      r = json.loads(out.stdout.strip().splitlines()[-1])
      print(f"| {posterior} | {chains} | {r['warmup']} | {r['compile_s']:.1f} | "
            f"{r['warmup_s']:.1f} | {r['sampling_s']:.1f} | {r['warmup_grads']:.2f} | "
            f"{r['grads_per_draw']:.2f} | {r['step']:.3f} | {r['divergences']} | "
            f"{r['eig'][0]:.2f}-{r['eig'][1]:.2f} | {r['z']:.1f} | {r['rhat']:.3f} |", flush=True)


if __name__ == "__main__":
  main()
