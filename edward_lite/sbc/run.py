"""``ed.sbc``: simulation-based calibration of an inference in one call.

1. **Simulate.**  ``S`` draws ``(theta_s, y_s)`` of every random variable of
   the program from its prior (``simulation.map_draws``, one compiled pass);
   ``y`` are the ``observed`` names, ``theta`` the latents.
2. **Infer, vectorized.**  One ``SimulationTarget`` holds the ``S`` data
   sets on a leading axis and reads data set ``c // K`` in chain ``c``, so
   the ``S`` posteriors run as ``S K`` chains of *one* compiled sampler
   (``ed.mcmc.sample``) or ``S`` batched Gaussian fits (``sbc.batched``),
   not a Python loop.
3. **Rank.**  ``L = max_rank`` draws per data set (``K`` chains' draws
   thinned evenly over the iterations of each chain) give each scalar
   element's rank of ``theta_s``; ``sbc.ranks`` tests their uniformity.

Adaptation, the honest default.  The ``S`` posteriors differ, so warmup
must not pool them: MCMC runs with ``pooled=False`` (every chain adapts its
own step size and diagonal metric, Stan's and NumPyro's scheme) and a fixed
warmup (``adaptive_warmup=False``: its stopping rule compares chains, which
here target different posteriors).  ChEES adapts its trajectory length from
all chains together and needs one metric (``pooled="metric"``): its
per-chain step sizes adapt per chain, but ``T`` and the metric are shared
over all ``S K`` chains, estimated from a mixture of the ``S`` posteriors.
The transition kernel of every chain is still a valid MCMC kernel for its
own posterior (``T`` is fixed after warmup), so calibration is unaffected;
efficiency is lower than ``S`` separate ChEES runs.  Warmup may also move a
chain stuck at its start to another chain's state (``mcmc.restarts``),
which may belong to another data set: a warmup start only.

Variational families ``"meanfield"`` and ``"fullrank"`` fit all ``S`` at
once (``sbc.batched``); the flows fall back to ``ed.vi.fit`` per data set, a
Python loop that compiles one program per data set (slow; for a few
hundred small simulations at most).
"""

import time
import warnings

import numpy as np
import tensorflow as tf

from edward_lite.analysis import diagnostics
from edward_lite.checks import arguments
from edward_lite.language import dtypes
from edward_lite.mcmc.kernels import get_kernel
from edward_lite.model import simulation
from edward_lite.model.data import ModelData, call_program, prepare_arguments
from edward_lite.model.target import make_target
from edward_lite.runtime import seeds
from edward_lite.sbc import batched
from edward_lite.sbc.result import SBCResult
from edward_lite.sbc.simulated import SimulationTarget
from edward_lite.vi import fit_check
from edward_lite.vi.families import get_family

__all__ = ["sbc"]


def sbc(model, *args, observed=None, simulations=200, kernel=None, family=None, chains=2,
        warmup=500, draws=250, max_rank=99, steps=1000, samples=None, learning_rate=None,
        seed=0, progress=False, jit_compile=True, dtype=None, **kwargs):
  """Simulation-based calibration of an MCMC kernel or VI family on ``model``.

  Args:
    model: an edward_lite program.
    *args, **kwargs: its arguments.
    observed: names of the random variables that are data (a list, or a
      dict whose keys are used); every other random variable the program
      does not fix is a latent whose ranks are computed.
    simulations: ``S``, data sets drawn from the prior (at least 2).
    kernel: an MCMC kernel name (``"nuts"``, ``"hmc"``, ``"chees"``,
      ``"rwmh"``) or object; the default when ``family`` is None is NUTS.
    family: a VI family name (``"meanfield"``, ``"fullrank"``: batched;
      ``"realnvp"``, ``"maf"``, ``"iaf"`` or a family object: one
      ``ed.vi.fit`` per data set) or an ``sbc.batched`` family object.
    chains: ``K``, MCMC chains per data set.
    warmup, draws: MCMC warmup and kept iterations per chain.
    max_rank: ``L``, posterior draws per data set used for a rank (ranks in
      ``0 .. L``); MCMC needs ``chains * draws >= L`` and is thinned to
      ``L`` -- keep ``chains * draws / L`` above the autocorrelation time
      (a ``RuntimeWarning`` says when the median data set's bulk ESS is
      below ``L``).
    steps, samples, learning_rate: VI steps, draws per step and the initial
      Adam rate (default by family).
    seed: integer seed of everything (simulation, inference, tests).
    progress: show the sampler's progress.
    jit_compile: compile with XLA.
    dtype: the model's floating dtype (``ed.make_target``).

  Returns:
    An ``SBCResult``: ``ranks``, ``p_values`` (ECDF test), ``chi_square``,
    ``summary()``, ``passes()``, ``plot()``.
  """
  arguments.check_model_kwargs(model, kwargs, sbc, "ed.sbc")
  integer = arguments.check_integer
  simulations = integer("simulations", simulations, 2)
  max_rank, seed = integer("max_rank", max_rank, 1), integer("seed", seed, 0)
  names = _observed_names(observed)
  if kernel is not None and family is not None:
    raise ValueError("Give kernel= (MCMC) or family= (VI), not both.")
  if family is None:
    kernel = get_kernel("nuts" if kernel is None else kernel)
    chains, warmup = integer("chains", chains, 1), integer("warmup", warmup, 0)
    draws = integer("draws", draws, 1)
    if chains * draws < max_rank:
      raise ValueError(f"chains * draws = {chains * draws} posterior draws per data set are "
                       f"fewer than max_rank={max_rank}; raise draws or lower max_rank.")
  else:
    family = _family(family)
    steps = integer("steps", steps, 1)
  start = time.perf_counter()
  seed_t = tf.constant(seeds.seed_pair(seed), tf.int32)
  float_dtype = None if dtype is None else dtypes.check_float_dtype(dtype)
  data = ModelData(*prepare_arguments(model, args, kwargs, float_dtype))
  run_program = lambda: call_program(model, data, float_dtype)  # pylint: disable=unnecessary-lambda-assignment
  first = simulation.simulate(run_program, {}, seed_t)  # eager: names checked before compiling
  unknown = [n for n in names if n not in first]
  if unknown:
    raise ValueError(f"observed names {unknown} are not random variables the program draws; "
                     f"it draws {sorted(first)}.")
  if not set(first) - set(names):
    raise ValueError("Every random variable of the program is observed: there is no latent "
                     "to calibrate.")
  base = make_target(model, *args, observed={n: first[n] for n in names}, dtype=dtype,
                     **kwargs)
  if not base.names:
    raise ValueError("The program has no continuous latent variable to calibrate (only "
                     "summed-out discrete ones).")
  sims = simulation.map_draws(lambda _, s: simulation.simulate(run_program, {}, s), {},
                              seed=seeds.stream(seed_t, "sbc_simulations"),
                              count=simulations)
  bad = [n for n in names if not np.all(np.isfinite(sims[n]))] if any(
      np.asarray(sims[n]).dtype.kind == "f" for n in names) else []
  if bad:
    raise ValueError(f"Simulated data {bad} hold non-finite values: the prior predictive "
                     "overflows; give the model tighter priors.")
  truth = {n: sims[n] for n in base.names}
  simulated = time.perf_counter()
  if family is None:
    posterior, method, diagnostics = _mcmc(base, sims, names, kernel, simulations, chains,
                                           warmup, draws, max_rank, seed, progress, jit_compile)
  else:
    posterior, method, diagnostics = _vi(model, args, kwargs, base, sims, names, family,
                                         simulations, steps, samples, learning_rate,
                                         max_rank, seed_t, seed, jit_compile, dtype)
  inferred = time.perf_counter()
  result = SBCResult.build(truth, posterior, max_rank, seed=seed, method=method,
                           timings={}, diagnostics=diagnostics)
  end = time.perf_counter()
  result.timings.update(simulate_s=simulated - start, inference_s=inferred - simulated,
                        ranks_s=end - inferred, total_s=end - start)
  return result


def _observed_names(observed):
  if isinstance(observed, str):
    observed = [observed]
  if not observed or not all(isinstance(n, str) for n in observed):
    raise ValueError("observed= must name the data variables (a list of names, or a dict "
                     f"whose keys are used); got {observed!r}.")
  return list(observed)


def _family(family):
  """An ``sbc.batched`` family object, or a ``vi.families`` one for the loop."""
  if isinstance(family, str) and family.lower() in batched.BATCHED_FAMILIES:
    return batched.BATCHED_FAMILIES[family.lower()]()
  if hasattr(family, "transform") and hasattr(family, "draw"):
    return family
  return get_family(family)  # raises one sentence for an unknown name


def thin_evenly(draws, count):
  """``[S, N, ...] -> [S, count, ...]`` at evenly spaced positions of ``N``."""
  total = draws.shape[1]
  index = ((np.arange(count) + 0.5) * total / count).astype(np.int64)
  return draws[:, index]


def _mcmc(base, sims, names, kernel, simulations, chains, warmup, draws, max_rank, seed,
          progress, jit_compile):
  """Posterior draws ``name -> [S, L, *shape]`` from one vectorized run."""
  from edward_lite.mcmc.sample import sample  # pylint: disable=import-outside-toplevel
  target = SimulationTarget(base, {n: sims[n] for n in names}, chains)
  pooled = "metric" if kernel.shared_metric else False
  result = sample(target, kernel=kernel, chains=simulations * chains, warmup=warmup,
                  draws=draws, seed=seed, pooled=pooled, adaptive_warmup=False,
                  progress=progress, jit_compile=jit_compile)
  posterior, ess = {}, {}
  for n in base.names:
    x = result.draws[n]  # [draws, S K, *shape]
    x = x.reshape((draws, simulations, chains) + x.shape[2:])
    if draws >= 4:  # each data set's bulk ESS from its K chains: [S, *shape]
      ess[n] = np.asarray(diagnostics.ess_bulk(np.moveaxis(x, 1, 2)))
    x = np.moveaxis(x, 0, 2).reshape((simulations, chains * draws) + x.shape[3:])
    posterior[n] = thin_evenly(x, max_rank)
  _warn_if_autocorrelated(ess, max_rank)
  divergent = np.asarray(result.sample_stats["diverging"]).reshape(draws, simulations, chains)
  method = dict(name=kernel.name, kernel=kernel.settings(), chains=chains, warmup=warmup,
                draws=draws, pooled=pooled, timings=dict(result.timings))
  return posterior, method, {"divergences": divergent.sum(axis=(0, 2)), "ess_bulk": ess}


def _warn_if_autocorrelated(ess, max_rank):
  """Warns when the median data set's smallest bulk ESS is below ``L``: the
  ``L`` thinned draws are then autocorrelated, and autocorrelated draws make
  even a correct sampler's ranks look too narrow (U-shaped)."""
  if not ess:
    return
  per_simulation = np.min(np.stack([e.reshape(len(e), -1).min(axis=1) for e in ess.values()]),
                          axis=0)
  median = float(np.median(per_simulation))
  if median < max_rank:
    warnings.warn(f"The median data set's smallest bulk ESS is {median:.0f}, below "
                  f"max_rank={max_rank}: the ranked draws are autocorrelated, which makes a "
                  "correct sampler look miscalibrated; raise draws or lower max_rank.",
                  RuntimeWarning, stacklevel=3)


def _vi(model, args, kwargs, base, sims, names, family, simulations, steps, samples,
        learning_rate, max_rank, seed_t, seed, jit_compile, dtype):
  """Surrogate draws ``name -> [S, L, *shape]``: batched, or a loop of fits."""
  if hasattr(family, "transform"):
    samples = samples or family.samples
    target = SimulationTarget(base, {n: sims[n] for n in names}, samples)
    fitted = batched.fit_batched(target, family, steps, samples,
                                 learning_rate or family.learning_rate,
                                 seeds.stream(seed_t, "sbc_vi_steps"), jit_compile)
    posterior = batched.draw_constrained(target, family, fitted.params, max_rank,
                                         seeds.stream(seed_t, "sbc_vi_draws"))
    _warn_if_unconverged(
        fitted.converged, family.name, steps,
        f"one Newton step from the mean ELBO gradient of their last {fitted.window} steps "
        f"would still move a location by more than {batched.TOLERANCE:g} posterior sd or a "
        f"scale by more than {batched.TOLERANCE:.0%} (largest: "
        f"{np.nanmax(fitted.distance[~fitted.converged], initial=0.):.3g})")
    return posterior, dict(name=family.name, vectorized=True, steps=steps,
                           samples=samples), {"elbo": fitted.elbo,
                                              "vi_converged": fitted.converged,
                                              "vi_distance": fitted.distance}
  from edward_lite.vi.fit import fit  # pylint: disable=import-outside-toplevel
  posterior, elbo, converged = {n: [] for n in base.names}, [], []
  for s in range(simulations):  # documented fallback: one compiled fit per data set
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      result = fit(model, *args, observed={n: sims[n][s] for n in names}, family=family,
                   steps=steps, samples=samples, learning_rate=learning_rate, seed=seed + s,
                   progress=False, jit_compile=jit_compile, dtype=dtype, **kwargs)
    draws = result.sample(max_rank, seed=seed + s)
    for n in base.names:
      posterior[n].append(draws[n])
    elbo.append(float(np.mean(result.elbo[-10:])))
    converged.append(not fit_check.rising_note(result.elbo))
  converged = np.asarray(converged)
  _warn_if_unconverged(converged, family.name, steps,
                       "ed.vi.fit's ELBO was still rising over their last tenth of the steps")
  return ({n: np.stack(v) for n, v in posterior.items()},
          dict(name=family.name, vectorized=False, steps=steps, samples=samples),
          {"elbo": np.asarray(elbo), "vi_converged": converged})


def _warn_if_unconverged(converged, name, steps, why):
  """Warns, once, when some of the ``S`` VI fits had not converged: their
  draws are an unfinished fit's, and SBC would blame the family for them."""
  count = int(np.sum(~converged))
  if count:
    warnings.warn(f"{count} of {len(converged)} {name} fits had not converged after "
                  f"{steps} steps: {why}. Their draws are not the family's best "
                  "approximation, so SBC would blame the family for an unfinished fit; run "
                  f"more steps (steps=, e.g. {2 * steps}). Each data set's flag is in "
                  "result.diagnostics['vi_converged'].", RuntimeWarning, stacklevel=3)
