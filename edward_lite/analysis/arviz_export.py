"""Export to ArviZ: posterior, sample statistics, pointwise
log-likelihood, posterior predictive, observed data and, when asked, prior
and prior predictive, so ``az.summary``, ``az.loo``, ``az.compare`` and
ArviZ's plots work on a result.  The container is the installed ArviZ's
own: an ``arviz.InferenceData`` (ArviZ 0.2x) or an ``xarray.DataTree``
(ArviZ 1.x), with the same groups (``arviz_compat``).

ArviZ is an optional extra: ``pip install 'edward_lite[arviz]'``.
"""

import numpy as np

from edward_lite.analysis import arviz_compat
from edward_lite.model import simulation

__all__ = ["to_inference_data"]


def to_inference_data(target, posterior, sample_stats=None, log_likelihood=True,
                      posterior_predictive=True, prior_draws=None, seed=0):
  """Builds the installed ArviZ's data: an ``arviz.InferenceData`` (0.2x)
  or an ``xarray.DataTree`` (1.x).

  Args:
    target: the fitted ``ed.Target``.
    posterior: dict name -> ``[chains, draws, *shape]`` (latents, and any
      ``ed.Deterministic``).
    sample_stats: optional dict name -> ``[chains, draws]``.
    log_likelihood: add the ``log_likelihood`` group: ``log p(y_i | x_s)``
      for every observed variable (True: ``target.log_likelihood``; or the
      dict name -> ``[chains, draws, *obs_shape]`` already computed).
    posterior_predictive: add ``posterior_predictive`` (observed variables
      redrawn at every draw) and ``observed_data``.
    prior_draws: an int ``S`` adds ``prior`` and ``prior_predictive`` groups of
      ``S`` prior draws (one chain).
    seed: seed of the simulations.
  """
  arviz_compat.load("to_arviz() needs ArviZ: pip install 'edward_lite[arviz]'.")
  lead = next(iter(posterior.values())).shape[:2]
  flat = {n: posterior[n].reshape((-1,) + posterior[n].shape[2:]) for n in target.names}
  unflat = lambda d: {k: v.reshape(lead + v.shape[1:]) for k, v in d.items()}  # pylint: disable=unnecessary-lambda-assignment
  groups = dict(posterior=posterior)
  if sample_stats:
    groups["sample_stats"] = sample_stats
  observed = {k: np.asarray(v) for k, v in target.observed.items()}
  if isinstance(log_likelihood, dict):
    groups["log_likelihood"] = log_likelihood
  elif log_likelihood and observed:
    groups["log_likelihood"] = unflat(target.log_likelihood(flat))
  if posterior_predictive and observed:
    sims = simulation.map_draws(target.simulate, flat, seed=seed)
    groups["posterior_predictive"] = unflat({k: sims[k] for k in observed})
    groups["observed_data"] = observed
  if prior_draws is not None:
    draws = simulation.map_draws(lambda _, s: target.simulate({}, s), {}, seed=seed + 1,
                                 count=prior_draws)
    groups["prior"] = {k: v[None] for k, v in draws.items() if k not in observed}
    groups["prior_predictive"] = {k: v[None] for k, v in draws.items() if k in observed}
  return arviz_compat.from_groups(groups)
