"""Identity by content: a program by its code, its data by their bytes.

``fingerprint`` keys the caches of compiled functions and the checkpoints
that must refuse another model or other data: an edited model or DataFrame
never gets old results.
"""

import collections
import inspect

from edward_lite.runtime.content_hash import MAX_DEPTH, digest


__all__ = ["fingerprint", "Fingerprint", "code_digest", "model_name"]


class Fingerprint(collections.namedtuple("Fingerprint", ["name", "code", "data", "unknown"])):
  """What a call computes: ``code`` (hex digest of the model's code, the
  functions it calls that a user wrote, and the values they read from
  closures and globals), ``data`` (hex digest of the arguments and observed
  values), ``name`` (the model's qualified name, for messages only).

  A digest is None when something could not be identified by content;
  ``unknown`` then says what, naming it.  ``key`` is the cache key, None
  when either digest is unknown: such a call must not be served from a cache
  or resumed from a checkpoint.
  """

  @property
  def key(self):
    return None if self.code is None or self.data is None else (self.code, self.data)


def model_name(model):
  """The qualified name of a program (or of the function a partial wraps)."""
  name = getattr(model, "__qualname__", None) or getattr(
      getattr(model, "func", None), "__qualname__", None)
  return name or type(model).__qualname__


def code_digest(model):
  """The digest of what a trace of ``model`` bakes in: its code and the
  module-level values it reads (as in ``fingerprint``), a ``tf.Variable`` by
  identity (a compiled function reads its value when it runs); None when
  something there cannot be identified."""
  return digest([(f"model '{model_name(model)}'", model)], variables_by_value=False)[0]


def fingerprint(model, args, kwargs, observed, tracers=()):
  """Identifies ``model(*args, **kwargs)`` given ``observed`` by content.

  The model by its code: bytecode, constants, names, default arguments,
  closure values and the module-level values it reads (arrays, numbers,
  strings; a user's helper functions by their own code, followed through
  globals and closures up to ``MAX_DEPTH`` calls deep (``content_hash``); functions of installed
  libraries by their qualified name).  The data by content: the bytes of
  arrays and tensors, pandas objects (values, index, columns), anything
  with ``__array__``, lists, tuples and dicts element by element.

  ``tracers``: the tracers active around the call
  (``language.tracing.active_tracers()``: a ``with ed.do(...)`` changes the
  program), identified as code.

  Returns:
    A ``Fingerprint``; a digest is None (and ``unknown`` names the value)
    when something is neither data nor code, e.g. an arbitrary object.
  """
  name = model_name(model)
  code, code_unknown = digest([(f"model '{name}'", model)] +
                               ([("an active tracer", tuple(tracers))] if tracers else []))
  try:
    bound = inspect.signature(model).bind_partial(*args, **kwargs).arguments
    named = [(f"argument '{k}'", v) for k, v in bound.items()]
  except (TypeError, ValueError):
    named = [(f"argument #{i}", v) for i, v in enumerate(args)]
    named += [(f"keyword argument '{k}'", v) for k, v in sorted(kwargs.items())]
  named += [(f"observed value '{k}'", v) for k, v in sorted(dict(observed or {}).items(),
                                                            key=lambda kv: str(kv[0]))]
  data, data_unknown = digest(named)
  unknown = code_unknown or data_unknown
  if unknown:
    unknown = f"{unknown} cannot be identified by content"
  return Fingerprint(name, code, data, unknown)
