"""``ed.plot.sbc``: the ECDF-difference plot of simulation-based calibration.

For each scalar parameter element, the ECDF of its ``S`` ranks at the
points ``z_k = k / (L + 1)`` minus ``z_k`` (0 for perfectly uniform ranks),
with the simultaneous ``1 - alpha`` band of ``sbc.ranks.ecdf_bands``
(Säilynoja, Bürkner & Vehtari 2022): a curve that leaves the band fails the
uniformity test at level ``alpha``.  A curve above the band's middle early
and below it late means the truths fall low in the posteriors (posteriors
too high); a U-shaped rank histogram (posteriors too narrow) shows as an
early rise and a late dip, a hump (too wide) as the reverse.
"""

import numpy as np

from edward_lite.analysis.figures import finish, pyplot
from edward_lite.sbc.ranks import ecdf_bands, element_names

__all__ = ["sbc"]

MAX_PANELS = 24  # parameter elements drawn at most (the first ones)


def sbc(result, path=None, alpha=0.05, max_panels=MAX_PANELS):
  """The figure of ``ed.plot.sbc`` (``analysis/plot.py``, which documents the
  arguments), drawn by ``SBCResult.plot``."""
  if not hasattr(result, "ranks") or not hasattr(result, "max_rank"):
    raise TypeError(f"ed.plot.sbc takes the result of ed.sbc; got {type(result).__name__}.")
  plt = pyplot()
  panels = []
  for name, r in result.ranks.items():
    flat = r.reshape(len(r), -1)
    p = np.asarray(result.p_values[name]).reshape(-1)
    for j, label in enumerate(element_names(name, r.shape[1:])):
      panels.append((label, flat[:, j], p[j]))
  shown = panels[:max_panels]
  size, max_rank = result.simulations, result.max_rank
  z, lower, upper = ecdf_bands(size, max_rank, alpha, seed=result.seed)
  cols = min(4, len(shown))
  rows = -(-len(shown) // cols)
  fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False,
                           sharex=True, layout="constrained")
  k = np.arange(1, max_rank + 1)
  for ax, (label, ranks, p) in zip(axes.ravel(), shown):
    ecdf = np.mean(ranks[:, None] < k, axis=0)
    ax.fill_between(z, lower, upper, step="post", color="0.85",
                    label=f"{100 * (1 - alpha):.0f}% simultaneous band")
    outside = (ecdf - z < lower - 1e-12) | (ecdf - z > upper + 1e-12)
    ax.step(z, ecdf - z, where="post", color="C3" if outside.any() else "C0", lw=1.3)
    ax.axhline(0., color="0.4", lw=0.7)
    ax.set_title(f"{label}  (p = {p:.2g})", fontsize=10)
    ax.grid(alpha=0.3)
  for ax in axes.ravel()[len(shown):]:
    ax.axis("off")
  for ax in axes[-1]:
    ax.set_xlabel("normalized rank z")
  for ax in axes[:, 0]:
    ax.set_ylabel("ECDF(z) - z")
  axes[0, 0].legend(loc="lower left", fontsize=8)
  more = f", first {len(shown)} of {len(panels)} elements" if len(panels) > len(shown) else ""
  method = result.method.get("name", "")
  return finish(fig, path, f"SBC of {method}: {size} simulations, ranks 0..{max_rank}{more}")
