"""Matplotlib for ``ed.plot``: loading it headless-safe, and saving a figure.

Needs matplotlib, the optional extra ``pip install 'edward_lite[plot]'``.
"""

import os
import sys

__all__ = ["pyplot", "finish", "DPI", "INSTALL"]

DPI = 100
INSTALL = "pip install 'edward_lite[plot]'"


def pyplot():
  """``matplotlib.pyplot``, on the non-interactive Agg backend when there is
  no display (and no backend was asked for)."""
  try:
    import matplotlib  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ImportError(f"ed.plot needs matplotlib: {INSTALL}.") from e
  headless = sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or
                                                       os.environ.get("WAYLAND_DISPLAY"))
  if headless and "MPLBACKEND" not in os.environ and "matplotlib.pyplot" not in sys.modules:
    matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  return plt


def finish(fig, path, title=None):
  """``fig`` with its title, saved at ``path`` (a PNG) when given."""
  if title:
    fig.suptitle(title)
  if path is not None:
    path = os.fspath(path)
    if os.path.dirname(path):
      os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight", facecolor="white")
  return fig
