"""Fitting the transport flow from the chains' draws and gradients (issue 54,
item 1: "from the warmup's draws and gradients, or by the ELBO, or both:
measure which").  An exploration beside ``hard_geometry.py``, not a feature.

The flow ``u = T(v)`` is fitted by the Fisher divergence in its base space:
for posterior draws ``u_i`` with gradients ``g_i = grad log p(u_i)``, at
``v_i = T^{-1}(u_i)`` the pulled-back score is

    s(v_i) = J(v_i)^T g_i + grad_v log|det J(v_i)|,     J = dT/dv,

and a flow that carries ``N(0, I)`` to the posterior makes ``s(v) = -v``;
the loss is ``mean_i ||s(v_i) + v_i||^2``, minimized by Adam over
minibatches of the stored pairs (each pair costs one model gradient, reused
at every step; the ELBO needs fresh draws and gradients every step).

Modes (``--mode``):

* ``draws``: the default adaptation's draws (4 chains x (300 + 250)) fit
  an IAF (4 layers of 64 x 64), then ``--rounds - 1`` more rounds of
  draws through the flow so far (200 + 250), each refitting on all pairs;
* ``both``: the flow adaptation's ELBO fit (IAF, 1000 steps x 32 draws),
  then draws through it (200 + 250) refit it by the Fisher loss;
* ``qpairs``: the ELBO fit, then ``Q_PAIRS`` of its own draws (``q``'s,
  which reach where ``q`` puts mass) refit it, as ``adapt_metric="flow"``
  now does.

The final run is NUTS through the flow, 4 x (1000 + 1000), as
``hard_geometry.py``'s; every gradient (chains, fits, the stored pairs') is
counted.  Results: ``benchmarks/RESULTS.md``, section 58.

    PYTHONPATH=. .venv/bin/python benchmarks/flow_fit_from_draws.py \\
        --posteriors funnel10,eight_schools_centred --modes draws,both --seeds 0,1,2
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hard_geometry as hg  # pylint: disable=wrong-import-position
import edward_lite as ed  # pylint: disable=wrong-import-position
from edward_lite.vi import fisher  # pylint: disable=wrong-import-position
from machine import machine_line  # pylint: disable=wrong-import-position

FISHER_STEPS = 2000
Q_PAIRS = 2000  # draws of the ELBO's flow made into pairs (qpairs)


def fisher_fit(fit, u, g, steps, seed):
  """Trains ``fit``'s flow in place on pairs ``u, g [N, D]`` by the Fisher
  divergence (``vi.fisher.fisher_refit``, what ``adapt_metric="flow"``
  runs); returns the mean loss of the last tenth of steps."""
  return fisher.fisher_refit(fit._surrogate, u, g, seed, steps)  # pylint: disable=protected-access


def pairs(target, post):
  """The run's draws as unconstrained ``u [S C, D]`` and their gradients."""
  values = {n: np.reshape(post.draws[n], (-1,) + post.draws[n].shape[2:]) for n in target.names}
  u = target.flatten(target.unconstrain(values))
  _, g = target.value_and_gradient_flat(u)
  return np.asarray(u), np.asarray(g)


def chain_gradients(post):
  """The chains' gradients of a run (``total_gradients`` also counts the
  fit a run through a flow was given, which is counted here once, apart)."""
  return int(np.sum(post.num_gradients, dtype=np.int64))


def flow_pairs(target, fit, n, seed):
  """``n`` draws of the fitted flow and the model's gradients there
  (``vi.fisher.draws_and_gradients``): pairs where ``q`` puts its mass."""
  return fisher.draws_and_gradients(target, fit.transport(), n, seed)


def run(posterior, mode, seed, rounds):
  """One run of ``mode`` (above); ``rounds`` of pairs from chains (draws, both)."""
  program, args, observed, options, _ = hg.posterior_parts(posterior)
  data = dict(observed=observed, progress=False)
  typed = {"dtype": options["dtype"]} if "dtype" in options else {}
  target = ed.make_target(program, *args, observed=observed, **typed)
  start, us, gs = time.perf_counter(), [], []

  def sample(seed, fit=None, warmup=300):
    return ed.mcmc.sample(program, *args, adapt_metric=True if fit is None else fit, chains=4,
                          warmup=warmup,
                          draws=250, seed=seed, **data, **options)

  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if mode == "draws":  # the flow's initial parameters only (its start's gradients counted)
      fit = ed.vi.fit(program, *args, family="iaf", steps=1, samples=1, seed=seed, **data,
                      **typed)
    else:
      fit = ed.vi.fit(program, *args, family="iaf", steps=1000, samples=32, seed=seed,
                      **data, **typed)
    total = fit.num_gradients
    if mode == "qpairs":
      u, g = flow_pairs(target, fit, Q_PAIRS, seed)
      total += len(u)
      loss, rounds = fisher_fit(fit, u, g, FISHER_STEPS, seed), 0
    else:
      post = sample(seed) if mode == "draws" else sample(seed + 50, fit, warmup=200)
      total += chain_gradients(post)
    for r in range(rounds):
      u, g = pairs(target, post)
      us.append(u)
      gs.append(g)
      total += len(u)
      loss = fisher_fit(fit, np.concatenate(us), np.concatenate(gs), FISHER_STEPS, seed + r)
      if r < rounds - 1:
        post = sample(seed + 100 + r, fit, warmup=200)
        total += chain_gradients(post)
    fitted = total
    post = ed.mcmc.sample(program, *args, adapt_metric=fit, chains=hg.CHAINS, warmup=hg.WARMUP,
                          draws=hg.DRAWS, seed=seed, **data, **options)
  row = hg.analyse(posterior, mode, seed, post.draws, fitted + chain_gradients(post), fitted,
                   post.divergences.sum(), time.perf_counter() - start)
  row["loss"] = loss
  return row


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--posteriors", default="funnel10,eight_schools_centred,gp_poisson")
  parser.add_argument("--modes", default="draws,both,qpairs")
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--rounds", type=int, default=None,
                      help="Fisher rounds (default: 2 for draws, 1 for both)")
  a = parser.parse_args()
  print(machine_line())
  print(f"{'posterior':>22s} {'mode':>5s} {'seed':>4s} {'total':>8s} {'fit+pairs':>9s} "
        f"{'min ESS':>7s} {'grads/ESS':>9s} {'div':>4s} {'R-hat':>6s} {'max|z|':>6s} "
        f"{'sd ratio':>10s} {'loss':>6s} {'s':>4s}", flush=True)
  for posterior in a.posteriors.split(","):
    for mode in a.modes.split(","):
      for seed in [int(s) for s in a.seeds.split(",")]:
        r = run(posterior, mode, seed, a.rounds or (2 if mode == "draws" else 1))
        print(f"{posterior:>22s} {mode:>5s} {seed:>4d} {r['total']:>8d} {r['fit']:>9d} "
              f"{r['min_ess']:7.0f} {r['per_ess']:9.0f} {r['divergences']:>4d} {r['rhat']:6.3f} "
              f"{r['z']:6.2f} {r['ratios'][0]:.2f}-{r['ratios'][1]:.2f} {r['loss']:6.3f} "
              f"{r['wall']:4.0f}", flush=True)


if __name__ == "__main__":
  main()
