"""Checks of an inference call's settings, before any work.

``check_model_kwargs`` tells a misspelt setting from a model keyword;
``check_integer``, ``check_positive`` and ``check_call_settings`` raise one
sentence naming the setting and what it must be.
"""

import collections
import difflib
import inspect
import warnings

import numpy as np

from edward_lite.runtime.fingerprints import model_name

__all__ = ["check_model_kwargs", "check_integer", "check_positive", "check_call_settings"]


def _edits(a, b):
  """Optimal-string-alignment distance (a transposition counts as one edit)."""
  d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
  for i in range(1, len(a) + 1):
    for j in range(1, len(b) + 1):
      d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
      if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
        d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
  return d[-1][-1]


def _keyword_parameters(fn):
  return [p.name for p in inspect.signature(fn).parameters.values()
          if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def check_model_kwargs(model, kwargs, settings, where):
  """Checks the keywords that an inference call passes on to ``model``.

  Args:
    model: the program.
    kwargs: the keywords that are not settings of the call.
    settings: the call's setting names, or the function whose keyword
      parameters they are.
    where: the call's name for messages (``"ed.mcmc.sample"``).

  Raises:
    TypeError: a keyword is not a parameter of ``model`` (which takes no
      ``**kwargs``), naming it and the closest setting.

  Warns:
    UserWarning: ``model`` takes ``**kwargs`` and a keyword is one edit (two
      for longer names) from a setting name.
  """
  if not kwargs:
    return
  if callable(settings):
    settings = _keyword_parameters(settings)
  settings = [s for s in settings if s != "model"]
  try:
    params = inspect.signature(model).parameters.values()
  except (TypeError, ValueError):
    return  # no signature to check against
  var_keyword = any(p.kind == p.VAR_KEYWORD for p in params)
  accepted = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
  name = model_name(model)
  for key in kwargs:
    if key in accepted:
      continue
    near = [s for s in settings if _edits(key, s) <= (1 if min(len(key), len(s)) <= 4 else 2)]
    if not var_keyword:
      close = near or difflib.get_close_matches(key, settings, n=1)
      hint = f"; did you mean {close[0]}=?" if close else ""
      raise TypeError(
          f"{where}() got an unexpected keyword argument '{key}': it is neither a setting of "
          f"{where} nor a parameter of the model '{name}' (its parameters: "
          f"{sorted(accepted) or 'none'}){hint}")
    if near:
      warnings.warn(
          f"Keyword '{key}' goes to the model '{name}' (it takes **kwargs), but it is close to "
          f"the setting {near[0]}= of {where}; did you mean {near[0]}=?", UserWarning,
          stacklevel=3)


def check_integer(name, value, low):
  """``int(value)`` if it is an integer >= ``low``; else a ValueError naming it."""
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
    raise ValueError(f"{name} must be an integer >= {low}; got {value!r}.")
  return int(value)


def check_positive(name, value, what="a positive number"):
  """``float(value)`` if it is a finite number > 0; else a ValueError naming it."""
  if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
      or not np.isfinite(value) or value <= 0:
    raise ValueError(f"{name} must be {what}; got {value!r}.")
  return float(value)


def check_call_settings(**settings):
  """TypeErrors naming the setting, before any work, for the settings of an
  inference call that are used only later (after a compiled chunk):
  ``observed`` (a dict or None), ``callback`` (callable or None) and boolean
  flags (``keep_draws``, ``stl``, ...: True or False)."""
  for name, value in settings.items():
    if name == "observed":
      if value is not None and not isinstance(value, collections.abc.Mapping):
        raise TypeError("observed= must be a dict from random-variable name to value; got "
                        f"{type(value).__name__}.")
    elif name == "callback":
      if value is not None and not callable(value):
        raise TypeError(f"callback must be a function callback(info) or None; got "
                        f"{type(value).__name__} {value!r}.")
    elif not isinstance(value, (bool, np.bool_)):
      raise TypeError(f"{name} must be True or False; got {value!r}.")
