"""A posterior summary table shared by the MCMC and VI results, and the
selection arguments of ``summary()`` (after ArviZ's ``az.summary``).

``summary()`` returns a ``pandas.DataFrame`` (one row per scalar, indexed by
label, as ArviZ's ``az.summary``) when pandas is installed, else a
``Summary`` whose ``repr`` is the table, and issues its warnings;
``print_summary()`` prints the table and its warnings and returns None (as
NumPyro's ``MCMC.print_summary``).  Both tables answer ``table.loc["mu", "mean"]``,
``table.loc["mu"]["mean"]``, ``table.index`` and ``len(table)``.
"""

import re
import warnings

import numpy as np

__all__ = ["Summary", "COLUMNS", "select_names", "hdi", "present", "show"]

COLUMNS = ("mean", "sd", "mcse_mean", "q5", "q50", "q95", "ess_bulk", "ess_tail", "r_hat")


class Summary:
  """A posterior summary table: one row per scalar (vectors expanded by index).

  ``rows`` is a list of ``(label, {column: value})``; ``summary["mu"]`` gives
  a row's dict; ``str(summary)`` is the printed table (after ``header``,
  lines that say how columns were estimated), followed by warnings.
  """

  def __init__(self, rows, notes, columns=COLUMNS, round_to=None, header=()):
    if round_to is not None:
      rows = [(label, {c: round(v, round_to) for c, v in row.items()}) for label, row in rows]
    self.rows, self.notes, self.columns = rows, notes, tuple(columns)
    self.header = tuple(header)
    self._index = dict(rows)

  def to_dataframe(self):
    """The table as a ``pandas.DataFrame`` indexed by row label (the notes
    are in ``df.attrs["notes"]``, the header's lines on how columns were
    estimated in ``df.attrs["methods"]``)."""
    try:
      import pandas as pd  # pylint: disable=g-import-not-at-top
    except ImportError as e:
      raise ImportError("to_dataframe() needs pandas: pip install pandas.") from e
    frame = pd.DataFrame([row for _, row in self.rows], index=[l for l, _ in self.rows],
                         columns=list(self.columns))
    frame.attrs["notes"] = list(self.notes)
    frame.attrs["methods"] = list(self.header)
    return frame

  def __getitem__(self, label):
    return self._index[label]

  @property
  def index(self):
    """The row labels, in order (as a DataFrame's index)."""
    return [label for label, _ in self.rows]

  @property
  def loc(self):
    """``loc[label]`` (a row's dict) and ``loc[label, column]``, as a DataFrame's."""
    return _Loc(self._index)

  def __iter__(self):
    return iter(self.rows)

  def __len__(self):
    return len(self.rows)

  def column(self, name):
    """NumPy array of one column, in row order."""
    return np.array([row[name] for _, row in self.rows])

  def __str__(self):
    width = max([len(label) for label, _ in self.rows] + [8])
    lines = list(self.header) + [" " * width + "".join(f"{c:>10s}" for c in self.columns)]
    for label, row in self.rows:
      cells = []
      for c in self.columns:
        v = row[c]
        if np.isnan(v):
          cells.append(f"{'-':>10s}")
        elif c.startswith("ess"):
          cells.append(f"{v:10.0f}")
        elif c == "r_hat":
          cells.append(f"{v:10.3f}")
        else:
          cells.append(f"{v:10.3g}" if abs(v) >= 1e4 or abs(v) < 1e-2 else f"{v:10.3f}")
      lines.append(f"{label:<{width}s}" + "".join(cells))
    return "\n".join(lines + [f"WARNING: {n}" for n in self.notes])

  __repr__ = __str__


class _Loc:

  def __init__(self, index):
    self._index = index

  def __getitem__(self, key):
    if isinstance(key, tuple):
      label, column = key
      return self._index[label][column]
    return self._index[key]


def present(table, print_table=None, header=None):
  """What ``summary()`` returns: the table as a ``pandas.DataFrame`` (notes
  in ``attrs["notes"]``) when pandas is installed, else the ``Summary``; its
  notes issued once as ``RuntimeWarning``, so ``print(result.summary())``
  shows the table once and each warning once.

  ``print_table`` is the old spelling of ``print_summary()`` (deprecated):
  True prints ``header``, the table and its notes instead of warning.
  """
  if print_table is not None:
    warnings.warn("summary(print_table=...) is deprecated: summary() returns the table "
                  "and print_summary() prints it with its warnings.", DeprecationWarning,
                  stacklevel=3)
  if print_table:
    show(table, header)
  else:
    for note in table.notes:
      warnings.warn(note, RuntimeWarning, stacklevel=3)
  try:
    import pandas  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    return table
  return table.to_dataframe()


def show(table, header=None):
  """What ``print_summary()`` prints: ``header``, the table and its notes
  (each as a ``WARNING:`` line) on standard output."""
  if header:
    print(header)
  print(table)


def select_names(names, var_names=None, filter_vars=None):
  """The variable names a ``summary(var_names=..., filter_vars=...)`` keeps.

  Args:
    names: all variable names, in order.
    var_names: None (all), a name or a list; a leading ``~`` excludes.
    filter_vars: None (exact names), ``"like"`` (substring) or ``"regex"``.
  """
  if var_names is None:
    return tuple(names)
  if isinstance(var_names, str):
    var_names = [var_names]
  if filter_vars not in (None, "like", "regex"):
    raise ValueError(f"filter_vars must be None, 'like' or 'regex'; got {filter_vars!r}.")
  match = {None: lambda p, n: p == n, "like": lambda p, n: p in n,
           "regex": lambda p, n: re.search(p, n) is not None}[filter_vars]
  include = [v for v in var_names if not v.startswith("~")]
  exclude = [v[1:] for v in var_names if v.startswith("~")]
  for pattern in include + exclude:
    if not any(match(pattern, n) for n in names):
      raise ValueError(f"var_names: {pattern!r} matches no variable; the variables are "
                       f"{list(names)}.")
  kept = [n for n in names if not include or any(match(p, n) for p in include)]
  return tuple(n for n in kept if not any(match(p, n) for p in exclude))


def hdi(x, prob):
  """Highest-density interval of draws ``x[S, ...]`` along axis 0: the
  shortest interval holding ``ceil(prob S)`` of the sorted draws.  Returns
  ``(low, high)``, each ``[...]``."""
  if not 0. < prob < 1.:
    raise ValueError(f"hdi_prob must be in (0, 1); got {prob!r}.")
  x = np.sort(x, axis=0)
  n = x.shape[0]
  width = min(int(np.ceil(prob * n)), n - 1)
  gaps = x[width:] - x[:n - width]
  start = np.argmin(gaps, axis=0)
  low = np.take_along_axis(x, start[None], axis=0)[0]
  high = np.take_along_axis(x, (start + width)[None], axis=0)[0]
  return low, high
