"""Prior and posterior predictive simulation, at the data or at new inputs.

``ed.posterior_predictive(model, posterior, *args, **kwargs)`` runs ``model(*args,
**kwargs)`` once per posterior draw with the latent variables set to the
draw and every other random variable (the observed ones, new ones) drawn
from its distribution given them: draws from the posterior predictive

    y_rep ~ p(y_rep | x_s, new inputs),    x_s ~ p(x | data).

``ed.prior_predictive(model, *args, draws=S)`` draws every random variable
from the prior.  Observed values are never needed: ``model(x_new)`` with a
new ``x_new`` of any length predicts at it, as long as the latents keep
their shapes.  Both run in one compiled, vectorized program per batch of
draws (``simulation.map_draws``).  Both default ``seed=0``: a call gives the
same draws each time.  (``ed.predictive``, the name in 0.1, is a
deprecated alias of ``ed.posterior_predictive``.)
"""

import numpy as np
import tensorflow as tf

from edward_lite.checks import arguments
from edward_lite.language import dtypes
from edward_lite.model import simulation
from edward_lite.language.reparameterize import Reparameterized
from edward_lite.model.data import ModelData, call_program, prepare_arguments
from edward_lite.model.structure import is_dtype_conflict
from edward_lite.runtime.deprecation import warn_renamed

__all__ = ["posterior_predictive", "prior_predictive"]


def posterior_predictive(model, posterior, *args, draws=None, seed=0, dtype=None, **kwargs):
  """Posterior predictive draws of ``model(*args, **kwargs)``.

  Args:
    model: the program (the one fitted, or another with the same latents,
      e.g. one that adds ``ed.Deterministic`` outputs).
    posterior: an ``MCMCResult`` (its kept draws), a ``VIResult`` (``draws``
      draws of the surrogate, default 1000) or a dict ``name -> [S, *shape]``
      of constrained latent draws.
    *args, **kwargs: the program's arguments, e.g. new inputs.  With none,
      the arguments the result was fitted on.
    draws: number of draws from a ``VIResult``; a dict or MCMC draws are
      all used.
    seed: int seed of the simulation.
    dtype: floating dtype of the run (default: the posterior draws').

  Returns:
    dict name -> NumPy array for every random variable that the program
    neither fixes nor has a posterior draw for (the observed ones, new
    ones) and every ``ed.Deterministic``: ``[draws, chains, ...]`` for an
    ``MCMCResult``, else ``[S, ...]``.
  """
  values, lead, target = _posterior_draws(posterior, draws, seed)
  if (isinstance(model, Reparameterized) and target is not None and
      (args or kwargs or model is not target.program)):
    model = model.leaving(target.observed)  # the fitted data's names: predicted, not non-centred
  float_dtype = dtypes.check_float_dtype(dtype) if dtype is not None else tf.as_dtype(
      next(iter(values.values())).dtype)
  if dtype is None and target is None and float_dtype == tf.float64:
    # NumPy's float64 draws of a float32 program (a dict built by hand): run
    # it in float32, as make_target does with float64 data.
    call = _bind(model, args, kwargs, float_dtype)
    try:
      simulation.simulate(call, {n: v[0] for n, v in values.items()}, simulation.seed_tensor(0))
    except (ValueError, TypeError, tf.errors.InvalidArgumentError) as e:
      if not is_dtype_conflict(e):
        raise ValueError(f"posterior_predictive: the posterior draws of {sorted(values)} do "
                         f"not fit the program at these arguments: {e}") from e
      float_dtype = tf.float32
      values = {n: v.astype(np.float32) if v.dtype == np.float64 else v
                for n, v in values.items()}
  if not args and not kwargs and target is not None and target.program is model:
    call = target.call_program
  else:
    call = _bind(model, args, kwargs, float_dtype)
  try:
    one = simulation.simulate(call, {n: v[0] for n, v in values.items()},
                              simulation.seed_tensor(0))
  except (ValueError, TypeError, tf.errors.InvalidArgumentError) as e:
    raise ValueError(f"posterior_predictive: the posterior draws of {sorted(values)} do not "
                     f"fit the program at these arguments: {e}") from e
  unknown = sorted(n for n in values if n not in one)
  if unknown:
    raise ValueError(f"posterior_predictive: the posterior has draws of {unknown}, but the "
                     f"program creates no such random variable (it creates {sorted(one)}).")
  sims = simulation.map_draws(lambda v, s: simulation.simulate(call, v, s), values,
                              seed=_fold(seed, 0x9e37))
  sims = {k: v for k, v in sims.items() if k not in values}
  return {k: v.reshape(lead + v.shape[1:]) for k, v in sims.items()}


def prior_predictive(model, *args, draws=1000, seed=0, dtype=None, **kwargs):
  """Prior predictive draws: every random variable of ``model(*args,
  **kwargs)`` that the program does not fix, drawn from the prior.

  Args:
    model: the program.
    *args, **kwargs: its arguments.  Floating NumPy data run in ``dtype``.
    draws: number of draws ``S``.
    seed: int seed.
    dtype: floating dtype (default float32).

  Returns:
    dict name -> NumPy ``[S, ...]``.

  Raises:
    NotImplementedError: the program has an improper prior (``ed.Flat``),
      which has no draws.
  """
  draws = arguments.check_integer("draws", draws, 1)
  float_dtype = dtypes.check_float_dtype(dtype) if dtype is not None else tf.float32
  call = _bind(model, args, kwargs, float_dtype)
  simulation.simulate(call, {}, simulation.seed_tensor(0))  # errors before compiled work
  return simulation.map_draws(lambda _, s: simulation.simulate(call, {}, s), {},
                              seed=_fold(seed, 0x7f4a), count=draws)


def _bind(model, args, kwargs, float_dtype):
  """``call()`` running ``model`` on checked data in ``float_dtype``."""
  if not callable(model):
    raise TypeError(f"predictive expects a callable program; got {type(model).__name__}.")
  data = ModelData(*prepare_arguments(model, args, kwargs, float_dtype))
  return lambda: call_program(model, data, float_dtype)


def _posterior_draws(posterior, draws, seed):
  """``(values name -> [S, ...], leading shape, target or None)``."""
  if hasattr(posterior, "flat_draws"):  # an MCMCResult or a VIResult
    values, lead = posterior.flat_draws(draws, seed)
    return values, lead, posterior.target
  if isinstance(posterior, dict) and posterior:
    values = {k: np.asarray(v) for k, v in posterior.items()}
    sizes = {k: (v.shape[0] if v.ndim else None) for k, v in values.items()}
    if len(set(sizes.values())) != 1 or None in sizes.values():
      raise ValueError(f"posterior_predictive: posterior draws must share a leading draw axis; "
                       f"their leading sizes are {sizes}.")
    return values, (next(iter(sizes.values())),), None
  raise TypeError("posterior_predictive expects an MCMCResult, a VIResult or a non-empty dict "
                  f"name -> draws; got {type(posterior).__name__}.")


def _fold(seed, salt):
  seed = arguments.check_integer("seed", seed, 0) if not tf.is_tensor(seed) else seed
  return tf.random.experimental.stateless_fold_in(simulation.seed_tensor(seed), salt)


def __getattr__(name):
  if name == "predictive":  # the name in 0.1
    warn_renamed("predictive", "posterior_predictive")
    return posterior_predictive
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
