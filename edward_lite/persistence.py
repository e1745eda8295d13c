"""Saving and loading MCMC results: one ``.npz`` file, arrays plus a JSON
header, nothing pickled.

``posterior.save("fit.npz")`` writes the draws (and ``ed.Deterministic``
values), sampler statistics, adapted step sizes and metric, per-chain
totals, running moments and streaming statistics, the observed data and the
run's settings.  ``ed.load("fit.npz")`` gives back an ``MCMCResult`` whose
``summary()``, ``stuck_chains()``, ``draws`` and ``to_arviz(log_likelihood=
False, posterior_predictive=False)`` work without the model;
``ed.load("fit.npz", model, *args, **kwargs)`` re-attaches the program (its
latents must match), so ``log_likelihood()``, ``posterior_predictive()`` and
the full ``to_arviz()`` work too.  For ArviZ's own format, use
``posterior.to_arviz().to_netcdf(path)``.
"""

import json
import os

import numpy as np
import tensorflow as tf

__all__ = ["save", "load"]

FORMAT = "edward_lite.MCMCResult/1"
_ARRAYS = ("step_size", "inverse_metric", "num_gradients", "chain_accept", "chain_divergent",
           "warmup_divergences", "trajectory_length")
_DICTS = ("draws", "sample_stats", "mean", "variance")


def save(result, path):
  """Writes ``result`` (an ``MCMCResult``) to ``path`` (``.npz`` appended if
  missing), atomically.  Returns the path written."""
  from edward_lite import __version__  # pylint: disable=g-import-not-at-top
  path = os.fspath(path)
  path = path if path.endswith(".npz") else path + ".npz"
  target, kernel = result.target, result.kernel
  arrays = {}
  for group in _DICTS:
    for name, value in (getattr(result, group) or {}).items():
      arrays[f"{group}/{name}"] = np.asarray(value)
  for stat, values in result.streamed.items():
    for name, value in values.items():
      arrays[f"streamed/{stat}/{name}"] = np.asarray(value)
  for name in _ARRAYS:
    if getattr(result, name, None) is not None:
      arrays[name] = np.asarray(getattr(result, name))
  for name, value in target.observed.items():
    arrays[f"observed/{name}"] = np.asarray(value)
  header = dict(
      format=FORMAT, version=__version__, chains=result.chains, warmup=result.warmup,
      num_draws=result.num_draws, thin=result.thin, keep_draws=result.keep_draws,
      draw_count=int(result.draw_count), timings=result.timings,
      draws_present=result.draws is not None,
      kernel={"name": kernel.name, "settings": {
          k: v for k, v in vars(kernel).items()
          if not k.startswith("_") and isinstance(v, (int, float, str, bool, type(None)))}},
      latents={n: i.shape.as_list() for n, i in target.latents.items()},
      deterministic=list(target.deterministic_names))
  arrays["__header__"] = np.array(json.dumps(header))
  temporary = path + ".tmp.npz"
  np.savez(temporary, **arrays)
  os.replace(temporary, path)
  return path


def load(path, model=None, *args, **kwargs):
  """Reads a result written by ``save``.

  Args:
    path: the ``.npz`` file.
    model, *args, **kwargs: optionally the program and its arguments; the
      saved observed values are used, and the latents must have the saved
      names and shapes.

  Returns:
    An ``MCMCResult``.

  Raises:
    ValueError: the file is not an edward_lite result, or ``model`` does not
      fit it; both messages name the file.
  """
  from edward_lite.mcmc.kernels import KERNELS  # pylint: disable=g-import-not-at-top
  from edward_lite.mcmc.results import MCMCResult  # pylint: disable=g-import-not-at-top
  path = os.fspath(path)
  try:
    with np.load(path, allow_pickle=False) as data:
      arrays = {k: data[k] for k in data.files}
    header = json.loads(str(arrays.pop("__header__")))
  except (OSError, ValueError, KeyError) as e:
    raise ValueError(f"{path} is not a result saved by edward_lite (posterior.save): "
                     f"{type(e).__name__}: {e}") from e
  if header.get("format") != FORMAT:
    raise ValueError(f"{path} holds format {header.get('format')!r}; this edward_lite reads "
                     f"{FORMAT!r}.")
  group = lambda prefix: {k[len(prefix):]: v for k, v in arrays.items()  # pylint: disable=unnecessary-lambda-assignment
                          if k.startswith(prefix)}
  observed = group("observed/")
  if model is None:
    target = SavedTarget(header["latents"], header["deterministic"], observed)
  else:
    target = _attach(path, header, observed, model, args, kwargs)
  streamed = {}
  for key, value in group("streamed/").items():
    stat, name = key.split("/", 1)
    streamed.setdefault(stat, {})[name] = value
  fields = {name: arrays.get(name) for name in _ARRAYS}
  return MCMCResult(
      target=target, kernel=_kernel(KERNELS, header["kernel"]), chains=header["chains"],
      warmup=header["warmup"], num_draws=header["num_draws"], thin=header["thin"],
      keep_draws=header["keep_draws"],
      draws=group("draws/") if header["draws_present"] else None,
      sample_stats=group("sample_stats/"), mean=group("mean/"), variance=group("variance/"),
      streamed=streamed, draw_count=header["draw_count"], timings=header["timings"],
      **fields)


class SavedTarget:
  """What a loaded result knows of its model without the program: names,
  shapes and observed data."""

  def __init__(self, latents, deterministic, observed):
    self.latents = {n: _Latent(tf.TensorShape(s)) for n, s in latents.items()}
    self.names = tuple(latents)
    self.deterministic_names = tuple(deterministic)
    self.observed = observed

  def _needs_model(self, *unused_args, **unused_kwargs):
    raise ValueError("This result was loaded without its model: pass it to ed.load(path, "
                     "model, *args) to compute log-likelihoods or predictions.")

  log_likelihood = deterministic = _simulate = _needs_model

  @property
  def _program(self):
    return self._needs_model()


class _Latent:

  def __init__(self, shape):
    self.shape = shape


def _attach(path, header, observed, model, args, kwargs):
  from edward_lite.target import make_target  # pylint: disable=g-import-not-at-top
  target = make_target(model, *args, observed=observed, **kwargs)
  found = {n: i.shape.as_list() for n, i in target.latents.items()}
  if found != header["latents"] or list(target.deterministic_names) != header["deterministic"]:
    raise ValueError(f"The model given to ed.load does not fit {path}: its latents are "
                     f"{found}, the saved run's {header['latents']}.")
  return target


def _kernel(kernels, saved):
  try:
    return kernels[saved["name"]](**saved["settings"])
  except (KeyError, TypeError, ValueError):
    kernel = type("SavedKernel", (), {})()
    kernel.name = saved["name"]
    vars(kernel).update(saved["settings"])
    return kernel
