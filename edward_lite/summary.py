"""A posterior summary table shared by the MCMC and VI results."""

import numpy as np

__all__ = ["Summary", "COLUMNS"]

COLUMNS = ("mean", "sd", "mcse_mean", "q5", "q50", "q95", "ess_bulk", "ess_tail", "r_hat")


class Summary:
  """A posterior summary table: one row per scalar (vectors expanded by index).

  ``rows`` is a list of ``(label, {column: value})``; ``summary["mu"]`` gives
  a row's dict; ``str(summary)`` is the printed table, followed by warnings.
  """

  def __init__(self, rows, notes, columns=COLUMNS):
    self.rows, self.notes, self.columns = rows, notes, tuple(columns)
    self._index = dict(rows)

  def __getitem__(self, label):
    return self._index[label]

  def __iter__(self):
    return iter(self.rows)

  def __len__(self):
    return len(self.rows)

  def column(self, name):
    """NumPy array of one column, in row order."""
    return np.array([row[name] for _, row in self.rows])

  def __str__(self):
    width = max([len(label) for label, _ in self.rows] + [8])
    lines = [" " * width + "".join(f"{c:>10s}" for c in self.columns)]
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
