"""``adapt_metric="flow"``: NUTS on a normalizing flow's base space.

A metric, diagonal or low-rank, is one linear map for the whole posterior;
a funnel or a latent Gaussian process needs another in every region.  Neural
transport (Hoffman et al. 2019) fits a flow ``q = T_# N(0, I)`` to the
posterior by VI, then samples ``p_v(v) = p(T(v)) |det dT/dv|``
(``model.transported.TransportedTarget``), which is close to ``N(0, I)``
where ``q`` is close to the posterior; the sampler's own warmup (step size,
a metric for what the flow left) runs on ``v`` and the draws are mapped
back, so the chains stay exact MCMC of the posterior whatever the flow's
quality -- a poor flow only costs speed.

The fit is ``ed.vi.fit`` with the flow's ``family`` (default an IAF: a
sample and its density in one network pass each way the sampler needs),
then (up to ``REFIT_MAX_DIM`` dimensions) a refit by the Fisher divergence
on the model's gradients at 2000 of the fitted flow's draws
(``vi.fisher``), seeded from the run's seed,
checkpointed beside the run's checkpoint, and its gradients counted in the
result (``MCMCResult.transport``).
"""

import dataclasses
import os
import warnings
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from edward_lite.checks import arguments
from edward_lite.model.init_values import PartialInit, complete, parse_init
from edward_lite.mcmc.nuts import NUTS
from edward_lite.vi.fit import fit as vi_fit
from edward_lite.vi.families import Family, get_family
from edward_lite.vi.results import VIResult

__all__ = ["FlowAdaptation", "resolve", "fit_transport", "check_fit", "describe", "flow_nuts",
           "starting_points", "FLOW_TARGET_ACCEPT"]

FLOW_CHECKPOINT = "flow_fit"  # the fit's checkpoint, a directory inside the run's
# The Fisher refit's draws by default, and the largest dimension it runs at
# by default (``FlowAdaptation.refit``).
REFIT_DRAWS = 2000
REFIT_MAX_DIM = 50
# NUTS's target acceptance through a flow when the kernel is given by name:
# where the fit is loosest (a funnel's neck) the curvature left is largest,
# and at Stan's 0.8 a few transitions there diverged (RESULTS section 55).
FLOW_TARGET_ACCEPT = 0.9


def flow_nuts():
  """The NUTS kernel ``kernel="nuts"`` means in a flow run."""
  return NUTS(target_accept=FLOW_TARGET_ACCEPT)


@dataclasses.dataclass(frozen=True)
class FlowAdaptation:
  """The flow ``adapt_metric="flow"`` fits (``ed.mcmc.FlowAdaptation(...)``
  to choose).

  Attributes:
    family: a flat VI family: ``"iaf"`` (default), ``"realnvp"``, or a family
      object (``ed.vi.IAF(layers=4, hidden=(64, 64))``); ``"meanfield"`` and
      ``"fullrank"`` give a linear transport (a fixed metric from VI).
    steps: the fit's optimization steps.  2000 by default: at 1000 a
      centred eight schools' flow left the neck of ``tau -> 0`` loose in
      one seed in three (157 divergences, R-hat 1.08); at 2000 it passed
      all three, with fewer divergences on the funnel, the banana and the
      latent GP, at 0.6-1.4x the gradients per effective draw (RESULTS
      section 61).
    samples: draws per step: fewer than a VI fit's default (128 for a
      flow), as the chains correct the fit, so total gradients per
      effective draw fall (RESULTS section 55).
    learning_rate: the fit's (None: the family's default).
    refit: draws of the fitted flow whose model gradients then refit it by
      the Fisher divergence (``VIResult.refit_by_fisher``); 0: the ELBO fit
      alone; None (default): ``REFIT_DRAWS`` up to ``REFIT_MAX_DIM``
      unconstrained dimensions, else 0.  The ELBO's reverse KL under-weights
      the posterior's tails and leaves a funnel's neck loose; the gradients
      at ``q``'s own draws carry the posterior's shape there (RESULTS section
      58: the 10-D funnel 82 -> 34 gradients per effective draw, a banana's
      sds 6-23% off -> right, a latent GP 536 -> 70).  Each refit step
      inverts the flow, one network pass per dimension for an
      autoregressive flow, so its time grows as the dimension squared (the
      100-D funnel: minutes, against seconds at 10-D).
  """
  family: Any = "iaf"
  steps: int = 2000
  samples: int = 32
  learning_rate: Optional[float] = None
  refit: Optional[int] = None

  def __post_init__(self):
    get_family(self.family)  # a clear error for an unknown family, here
    arguments.check_integer("FlowAdaptation steps", self.steps, 1)
    arguments.check_integer("FlowAdaptation samples", self.samples, 1)
    if self.refit is not None:
      arguments.check_integer("FlowAdaptation refit", self.refit, 0)
    if self.learning_rate is not None:
      arguments.check_positive("FlowAdaptation learning_rate", self.learning_rate)

  def settings(self):
    """JSON-able: the fit's part of a checkpoint's identity."""
    family = get_family(self.family)
    return dict(family=family.settings(), steps=self.steps, samples=self.samples,
                learning_rate=self.learning_rate, refit=self.refit)


def resolve(adapt_metric):
  """``(flow, metric)`` from ``adapt_metric``: ``flow`` a ``FlowAdaptation``,
  a ``VIResult`` (a fit to sample through) or None, and the metric the run
  adapts on top of it (True: the default).  Other values pass through as
  ``(None, adapt_metric)``."""
  if isinstance(adapt_metric, str) and adapt_metric == "flow":
    return FlowAdaptation(), True
  if isinstance(adapt_metric, (FlowAdaptation, VIResult)):
    return adapt_metric, True
  if isinstance(adapt_metric, Family):
    return FlowAdaptation(family=adapt_metric), True
  return None, adapt_metric


def fit_transport(flow, model, args, kwargs, observed, seed, dtype, progress, checkpoint_dir):
  """``(fit, info)``: the ``VIResult`` whose ``transport()`` the run samples
  through -- ``flow`` itself when it is one, else ``ed.vi.fit`` by
  ``flow``'s settings (its checkpoint in ``checkpoint_dir/flow_fit``), then
  refit by the Fisher divergence on ``flow.refit`` of its draws (run again
  on resume: seeded, it gives the same flow) -- and, for ``describe``, the
  fit's own verdicts on itself (``notes``) and the refit's record
  (``refit``, or None)."""
  if isinstance(flow, VIResult):
    return flow, dict(notes=[], refit=None)
  # The fit's own verdicts (k-hat, a rising ELBO) judge it as the posterior;
  # here the chains correct it, so they go into the result's transport
  # record (``describe``), not to the user as warnings.
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fit = vi_fit(model, *args, observed=observed, family=flow.family, steps=flow.steps,
                 samples=flow.samples, learning_rate=flow.learning_rate, seed=seed,
                 dtype=dtype, progress=progress,
                 checkpoint_dir=(os.path.join(checkpoint_dir, FLOW_CHECKPOINT)
                                 if checkpoint_dir else None), **kwargs)
  notes = []
  for warning in caught:
    text = str(warning.message)
    if text.startswith(_FIT_VERDICTS):
      notes.append(text)
    else:
      warnings.warn_explicit(warning.message, warning.category, warning.filename,
                             warning.lineno)
  draws = flow.refit
  if draws is None:
    draws = REFIT_DRAWS if fit.target.dim <= REFIT_MAX_DIM else 0
  refit = fit.refit_by_fisher(draws, seed) if draws else None
  return fit, dict(notes=notes, refit=refit)


_FIT_VERDICTS = ("The fitted ", "The ELBO was still rising")


def starting_points(target, init, chains, seed, radius):
  """``init=`` for a ``TransportedTarget``: a mode (a string) as it is,
  drawn in ``v``; values (a dict of constrained values, some or all, or an
  array of unconstrained ``u [C, D]``) as ``v = T^{-1}(u)`` ``[C, D]``, the
  latents a dict leaves out drawn uniform in ``(-radius, radius)`` on ``u``
  (as ``init="uniform"`` does)."""
  if isinstance(init, str):
    return init
  base = target.base
  u = parse_init(base, init, chains)
  if isinstance(u, PartialInit):
    dtype = base.dtype.as_numpy_dtype
    drawn = np.random.default_rng(seed).uniform(-radius, radius, (chains, base.dim))
    u = complete(base, u, drawn.astype(dtype))
  return np.asarray(target.transport.inverse(tf.constant(u, base.dtype)))


def check_fit(fit, target):
  """ValueError unless ``fit`` was fitted to a model with ``target``'s
  latents (names and unconstrained shapes)."""
  ours = {n: i.unconstrained_shape.as_list() for n, i in target.latents.items()}
  theirs = {n: i.unconstrained_shape.as_list() for n, i in fit.target.latents.items()}
  if ours != theirs:
    raise ValueError(f"adapt_metric's fit was made for latents {theirs}; this model's are "
                     f"{ours}: fit the same model (ed.vi.fit) to sample through it.")


def describe(fit, flow, info):
  """The result's ``transport`` record: what was fitted, what it cost, the
  fit's verdicts and the Fisher refit's record (``info``, ``fit_transport``'s)."""
  elbo = np.asarray(fit.elbo, np.float64)
  tail = elbo[-max(1, len(elbo) // 10):]
  return dict(family=getattr(fit.family, "name", str(fit.family)), steps=int(fit.steps),
              num_gradients=fit.num_gradients, fitted_here=not isinstance(flow, VIResult),
              elbo=float(np.nanmean(tail)) if np.isfinite(tail).any() else float("nan"),
              notes=list(info["notes"]), refit=info["refit"])
