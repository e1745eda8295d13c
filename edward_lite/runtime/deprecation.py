"""Old spellings kept for one release, each with one ``DeprecationWarning``.

``renamed_keywords(n="draws")`` makes a function accept its old keyword
``n=`` as ``draws=``; ``warn_renamed`` is the warning itself (for an old
module attribute or dict key); ``RenamedKeys`` is a dict that still answers
its old keys.  Every warning is one sentence naming the old and the new
spelling, and points at the user's line.
"""

import functools
import inspect
import warnings

__all__ = ["warn_renamed", "renamed_keywords", "RenamedKeys", "REASONS"]

# Why a new name was chosen, said after it in the warning.
REASONS = {
    "draws": "the count of draws is `draws=` everywhere",
    "proposals": "the surrogate draws behind the importance weights; `draws=` is the count "
                 "of draws returned",
    "num_gradients": "the gradient count is `num_gradients` everywhere",
    "posterior_predictive": "beside `ed.prior_predictive`",
    "prior_draws": "a count of prior draws; `prior` names the group they fill",
}


def warn_renamed(old, new, stacklevel=2, reason=None):
  """Warns that ``old`` is deprecated for ``new`` (``stacklevel`` as
  ``warnings.warn``'s, counted from the caller of this function)."""
  key = new.strip("`=.").rsplit(".", 1)[-1]
  reason = REASONS.get(key) if reason is None else reason
  warnings.warn(f"`{old}` is deprecated; use `{new}`" + (f" ({reason})." if reason else "."),
                DeprecationWarning, stacklevel=stacklevel + 1)


def renamed_keywords(**renames):
  """Decorator: the keywords ``old=new`` of ``renames`` are accepted under
  their old names, with a ``DeprecationWarning`` at the caller's line.

  A call that uses an old name and its new name raises TypeError.  When a
  new name was itself an old name of another argument (``resample(n=,
  draws=)`` became ``resample(draws=, proposals=)``), a call using any
  purely old name (``n=``), or that name with its new argument given by
  position (``resample(500, draws=4000)``), is read wholly in the old
  spelling; any other call, in the new.
  """
  new_names = set(renames.values())
  purely_old = [old for old in renames if old not in new_names]

  def decorate(fn):
    params = list(inspect.signature(fn).parameters)
    # An old name that is now another argument's, with its new argument
    # given by position (``resample(500, draws=4000)``), is an old call too.
    taken_by_position = {old: params.index(old) for old in renames
                         if old in new_names and old in params}

    @functools.wraps(fn)
    def call(*args, **kwargs):
      if not (any(old in kwargs for old in purely_old) or
              any(old in kwargs and len(args) > i for old, i in taken_by_position.items())):
        return fn(*args, **kwargs)
      present = [old for old in renames if old in kwargs]
      for old in present:
        new = renames[old]
        if new in kwargs and new not in present:
          raise TypeError(f"{fn.__qualname__}() got both `{old}=` (deprecated) and `{new}=`; "
                          f"pass `{new}=` only.")
      moved = {renames[old]: kwargs.pop(old) for old in present}
      for old in present:
        warn_renamed(f"{old}=", f"{renames[old]}=", stacklevel=2)
      kwargs.update(moved)
      return fn(*args, **kwargs)
    return call
  return decorate


class RenamedKeys(dict):
  """A dict whose renamed keys (``renamed``: old -> new) are still read, with
  a ``DeprecationWarning``; it holds and lists only the new keys."""

  def __init__(self, *args, renamed=None, **kwargs):
    super().__init__(*args, **kwargs)
    self._renamed = dict(renamed or {})

  def _key(self, key):
    if key in self._renamed and not dict.__contains__(self, key) and \
        dict.__contains__(self, self._renamed[key]):
      warn_renamed(f"[{key!r}]", f"[{self._renamed[key]!r}]", stacklevel=3,
                   reason=REASONS.get(self._renamed[key]))
      return self._renamed[key]
    return key

  def __getitem__(self, key):
    return super().__getitem__(self._key(key))

  def __contains__(self, key):
    return super().__contains__(self._key(key))

  def get(self, key, default=None):
    return super().get(self._key(key), default)

  def __reduce__(self):  # copies and pickles as a plain dict
    return (dict, (dict(self),))
