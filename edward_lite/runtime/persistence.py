"""Saving and loading MCMC results and VI fits: one ``.npz`` file, arrays plus
a JSON header, nothing pickled.

This module is the file format: ``save`` and ``load``, the header, and what
a result loaded without its model knows of it (``SavedTarget``).  Each kind
of result says how it maps to arrays and back (``mcmc/saved.py``,
``vi/saved.py``) and registers itself here (``register``), so the format
sits below the samplers and knows none of them.

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

``fit.save("vi.npz")`` writes a VI fit (``ed.vi.fit``'s ``VIResult``): the
ELBO trace, steps, settings, the family and the surrogate's trainable
variables (every flat family, or a variational program's variables), and
the observed data.  ``ed.load("vi.npz")`` answers what the saved arrays can
(``elbo``, ``params``, ``raw_params``); ``ed.load("vi.npz", model, *args)``
rebuilds the surrogate, so ``sample``, ``summary``, ``to_arviz`` and the
rest work and ``sample(draws, seed=s)`` repeats the original fit's draws.  A
variational program is not saved (it is code): pass it as
``ed.load(path, model, *args, family=program)`` (with ``program_args`` /
``program_kwargs`` as for the fit); its variables are assigned the saved
values.  A fit that streamed a ``tf.data`` dataset needs it again:
``dataset=``.
"""

import collections
import json
import os

import numpy as np
import tensorflow as tf

from edward_lite.version import __version__

__all__ = ["save", "load", "register", "Kind", "SavedTarget", "group"]

Kind = collections.namedtuple("Kind", ["format", "cls", "contents", "read"])
Kind.__doc__ = """A kind of result: its header ``format`` string, its class,
``contents(result) -> (arrays, header)`` and ``read(path, header, arrays,
model, args, kwargs) -> result``."""

_KINDS_BY_FORMAT = {}
_KINDS_BY_CLASS = {}


def register(kind):
  """Makes ``save`` and ``load`` handle the results of ``kind`` (a ``Kind``)."""
  _KINDS_BY_FORMAT[kind.format] = _KINDS_BY_CLASS[kind.cls] = kind


def save(result, path):
  """Writes ``result`` (an ``MCMCResult`` or a ``VIResult``) to ``path``
  (``.npz`` appended if missing), atomically.  Returns the path written."""
  kind = _KINDS_BY_CLASS.get(type(result))
  if kind is None:
    raise TypeError(f"save: {type(result).__name__} is not a result edward_lite can save.")
  arrays, header = kind.contents(result)
  return _write(path, arrays, dict(header, format=kind.format))


def _write(path, arrays, header):
  path = os.fspath(path)
  path = path if path.endswith(".npz") else path + ".npz"
  header = dict(header, version=__version__)
  arrays["__header__"] = np.array(json.dumps(header, default=_jsonable))
  temporary = path + ".tmp.npz"
  np.savez(temporary, **arrays)
  os.replace(temporary, path)
  return path


def _jsonable(value):
  """Settings JSON does not know: NumPy scalars as numbers, the rest by repr."""
  if isinstance(value, np.generic):
    return value.item()
  if isinstance(value, (tuple, set)):
    return list(value)
  return repr(value)


def load(path, model=None, *args, **kwargs):
  """Reads a result written by ``save``.

  Args:
    path: the ``.npz`` file (``save``'s path: the ``.npz`` suffix that
      ``save`` adds may be left out, as NumPy's ``savez`` and ``load``).
    model, *args, **kwargs: optionally the program and its arguments; the
      saved observed values are used, and the latents must have the saved
      names and shapes.

    family, program_args, program_kwargs, dataset: keywords read for a VI
      fit only (as ``ed.vi.fit``'s): the variational program of a program
      fit, or a family object that is not built in; the ``tf.data`` dataset
      of a fit that streamed one.

  Returns:
    An ``MCMCResult`` or a ``VIResult``.

  Raises:
    ValueError: the file is not an edward_lite result, or ``model`` does not
      fit it; both messages name the file.
  """
  path = os.fspath(path)
  if not os.path.exists(path) and not path.endswith(".npz") and os.path.exists(path + ".npz"):
    path += ".npz"
  if not os.path.exists(path):
    raise FileNotFoundError(f"ed.load: no file {path!r}"
                            + ("" if path.endswith(".npz") else " (nor with .npz added)") + ".")
  try:
    with np.load(path, allow_pickle=False) as data:
      arrays = {k: data[k] for k in data.files}
    header = json.loads(str(arrays.pop("__header__")))
    if not isinstance(header, dict):
      raise ValueError("the header is not a JSON object")
  except (OSError, ValueError, KeyError) as e:
    raise ValueError(f"{path} is not a result saved by edward_lite (posterior.save or "
                     f"fit.save): {type(e).__name__}: {e}") from e
  kind = _KINDS_BY_FORMAT.get(header.get("format"))
  if kind is None:
    raise ValueError(f"{path} holds format {header.get('format')!r}; this edward_lite reads "
                     f"{', '.join(repr(f) for f in _KINDS_BY_FORMAT)}.")
  return kind.read(path, header, arrays, model, args, kwargs)


def group(arrays, prefix):
  """The arrays under ``prefix/``, by the rest of their key."""
  return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}


class SavedTarget:
  """What a loaded result knows of its model without the program: names,
  shapes and observed data."""

  def __init__(self, latents, deterministic, observed, unconstrained=None, dtype=None):
    unconstrained = unconstrained or {}
    self.latents = {n: _Latent(tf.TensorShape(s), unconstrained.get(n), dtype)
                    for n, s in latents.items()}
    self.dtype = None if dtype is None else tf.as_dtype(dtype)
    self.names = tuple(latents)
    self.deterministic_names = tuple(deterministic)
    self.observed = observed

  def _needs_model(self, *unused_args, **unused_kwargs):
    raise ValueError("This result was loaded without its model: pass it to ed.load(path, "
                     "model, *args) to compute log-likelihoods or predictions.")

  log_likelihood = deterministic = simulate = _needs_model

  @property
  def program(self):
    return self._needs_model()


class _Latent:

  def __init__(self, shape, unconstrained_shape=None, dtype=None):
    self.shape = shape
    self.unconstrained_shape = tf.TensorShape(
        shape if unconstrained_shape is None else unconstrained_shape)
    self.dtype = None if dtype is None else tf.as_dtype(dtype)
