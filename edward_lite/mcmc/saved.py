"""An ``MCMCResult`` as the arrays and header of a saved file, and back
(``runtime/persistence.py`` is the file format; ``posterior.save(path)`` and
``ed.load(path)``)."""

import inspect

import numpy as np

from edward_lite.mcmc.kernels import KERNELS
from edward_lite.mcmc.results import MCMCResult, named_statistics, sample_statistics
from edward_lite.model.target import make_target
from edward_lite.runtime import persistence

__all__ = ["FORMAT", "contents", "read"]

FORMAT = "edward_lite.MCMCResult/1"
_ARRAYS = ("step_size", "inverse_metric", "num_gradients", "chain_accept", "chain_divergent",
           "warmup_divergences", "trajectory_length", "chain_max_depth")
_DICTS = ("draws", "sample_stats", "mean", "variance")


def contents(result):
  """``(arrays, header)`` of an ``MCMCResult``."""
  target, kernel = result.target, result.kernel
  arrays = {}
  # Statistics the kernel gives one value always: made anew on reading.
  constant = named_statistics(getattr(kernel, "constant_statistics", {}))
  for group in _DICTS:
    for name, value in (getattr(result, group) or {}).items():
      if not (group == "sample_stats" and name in constant):
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
      chains=result.chains, warmup=result.warmup,
      num_draws=result.num_draws, thin=result.thin, keep_draws=result.keep_draws,
      draw_count=int(result.draw_count), timings=result.timings, seed=result.seed,
      superchains=int(result.superchains), draws_present=result.draws is not None,
      kernel={"name": kernel.name, "settings": {
          k: v for k, v in vars(kernel).items()
          if not k.startswith("_") and isinstance(v, (int, float, str, bool, type(None)))}},
      latents={n: i.shape.as_list() for n, i in target.latents.items()},
      deterministic=list(target.deterministic_names), transport=result.transport)
  return arrays, header


def read(path, header, arrays, model, args, kwargs):
  """The ``MCMCResult`` of a file's ``header`` and ``arrays`` (with
  ``model(*args, **kwargs)`` re-attached when given)."""
  observed = persistence.group(arrays, "observed/")
  group = lambda prefix: persistence.group(arrays, prefix)  # pylint: disable=unnecessary-lambda-assignment
  if model is None:
    target = persistence.SavedTarget(header["latents"], header["deterministic"], observed)
  else:
    target = _attach(path, header, observed, model, args, kwargs)
  streamed = {}
  for key, value in group("streamed/").items():
    stat, name = key.split("/", 1)
    streamed.setdefault(stat, {})[name] = value
  fields = {name: arrays.get(name) for name in _ARRAYS}
  kernel = _kernel(KERNELS, header["kernel"])
  return MCMCResult(
      target=target, kernel=kernel, chains=header["chains"],
      warmup=header["warmup"], num_draws=header["num_draws"], thin=header["thin"],
      keep_draws=header["keep_draws"],
      draws=group("draws/") if header["draws_present"] else None,
      sample_stats=sample_statistics(group("sample_stats/"), kernel),
      mean=group("mean/"), variance=group("variance/"),
      streamed=streamed, draw_count=header["draw_count"], timings=header["timings"],
      seed=header.get("seed", 0), superchains=header.get("superchains", 0),
      transport=header.get("transport"), **fields)


def _kernel(kernels, saved):
  """The kernel of a saved header: its class, made from the settings its
  constructor takes (ChEES' ``jitter`` is fixed, not an argument), or a
  ``SavedKernel`` holding the settings when the class is unknown or
  refuses them."""
  try:
    cls = kernels[saved["name"]]
    accepted = inspect.signature(cls.__init__).parameters
    return cls(**{k: v for k, v in saved["settings"].items() if k in accepted})
  except (KeyError, TypeError, ValueError):
    kernel = type("SavedKernel", (), {})()
    kernel.name = saved["name"]
    kernel.constant_statistics = getattr(kernels.get(saved["name"]), "constant_statistics", {})
    vars(kernel).update(saved["settings"])
    return kernel


def _attach(path, header, observed, model, args, kwargs):
  """The target of ``model`` on the saved data, its latents checked."""
  target = make_target(model, *args, observed=observed, **kwargs)
  found = {n: i.shape.as_list() for n, i in target.latents.items()}
  if found != header["latents"] or list(target.deterministic_names) != header["deterministic"]:
    raise ValueError(f"The model given to ed.load does not fit {path}: its latents are "
                     f"{found}, the saved run's {header['latents']}.")
  return target


persistence.register(persistence.Kind(FORMAT, MCMCResult, contents, read))
