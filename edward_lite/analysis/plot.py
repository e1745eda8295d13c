"""Plots of inference results: ``ed.plot.trace``, ``pair``, ``elbo``, ``khat``, ``sbc``
(the last drawn by the result itself, in ``sbc/plot.py``).

Trace, rank, pair and LOO k-hat plots are ArviZ's (0.2x or 1.x, through
``arviz_compat``), drawn from ``result.to_arviz()`` with titles and axis
labels added; the ELBO curve and
the importance-sampling k-hat of a VI fit are drawn here.  Every function
returns the matplotlib ``Figure`` and, given ``path``, saves it there as a
PNG (100 dpi).

Needs matplotlib and ArviZ, the optional extra:
``pip install 'edward_lite[plot]'``.  ``import edward_lite`` does not load
this module; ``ed.plot`` does, on first use.
"""

import numpy as np

from edward_lite.analysis import arviz_compat
from edward_lite.analysis import psis
from edward_lite.analysis.figures import INSTALL, finish, pyplot

__all__ = ["trace", "pair", "elbo", "khat", "sbc"]

KHAT_LIMIT = 0.7  # Pareto k-hat above which importance-weighted estimates are unreliable

# -- helpers -------------------------------------------------------------------------


def _arviz():
  pyplot()  # the backend first
  return arviz_compat.load(f"this plot needs ArviZ: {INSTALL}.")


def _is_vi(result):
  return hasattr(result, "importance") and hasattr(result, "elbo")


def _inference_data(result, what, log_likelihood=False):
  """ArviZ's data of an ``MCMCResult`` (or a VI fit's resampled draws, or
  ArviZ's data as it is)."""
  _arviz()
  if isinstance(result, arviz_compat.data_type()):
    return result
  if hasattr(result, "to_arviz"):
    return result.to_arviz(log_likelihood=log_likelihood, posterior_predictive=False)
  raise TypeError(f"ed.plot.{what} takes an ed.mcmc.MCMCResult or ArviZ's data "
                  "(arviz.InferenceData, or xarray.DataTree under ArviZ 1.x); "
                  f"got {type(result).__name__}.")


def _figure(axes):
  return np.ravel(axes)[0].figure


def _diverging(idata):
  stats = getattr(idata, "sample_stats", None)
  if stats is None or "diverging" not in stats:
    return None
  return np.asarray(stats["diverging"])


# -- MCMC ------------------------------------------------------------------------------


def trace(result, var_names=None, kind="trace", path=None, **kwargs):
  """Trace or rank plots of MCMC draws.

  Args:
    result: an ``ed.mcmc.MCMCResult`` (sampled with ``keep_draws=True``) or
      ArviZ's data (``arviz.InferenceData`` or ``xarray.DataTree``).
    var_names: variables to show (ArviZ's ``var_names``: a name or a list,
      ``"~name"`` excludes); default all.
    kind: ``"trace"`` (``az.plot_trace``, ``az.plot_trace_dist`` in ArviZ
      1.x: per-chain densities on the left, draws against iteration on the
      right, divergent transitions as ticks at the bottom) or ``"rank"``
      (``az.plot_rank``: the ranks of each chain's draws among all chains,
      uniform when the chains mix; histograms in ArviZ 0.2x, the ECDF minus
      the uniform CDF in 1.x).
    path: save the figure there as a PNG.
    **kwargs: passed to the installed ArviZ's function.

  Returns:
    The matplotlib ``Figure``.
  """
  if _is_vi(result):
    raise TypeError("ed.plot.trace shows MCMC chains; for a VI fit use ed.plot.elbo(fit) "
                    "and ed.plot.khat(fit).")
  if kind not in ("trace", "rank"):
    raise ValueError(f"kind must be 'trace' or 'rank'; got {kind!r}.")
  idata = _inference_data(result, "trace")
  chains, draws = idata.posterior.sizes["chain"], idata.posterior.sizes["draw"]
  if kind == "trace":
    axes = arviz_compat.plot_trace(idata, var_names=var_names, **kwargs)
    for row in axes:
      row[0].set_xlabel("value")
      row[0].set_ylabel("density")
      row[1].set_xlabel("draw (after warmup)")
      row[1].set_ylabel("value")
    fig = _figure(axes)
    width, height = fig.get_size_inches()
    fig.set_size_inches(max(width, 10.), max(height, 2.6 * len(axes)))  # room for the labels
    fig.set_layout_engine("constrained")
    div = _diverging(idata)
    note = f", {int(div.sum())} divergent (ticks at the bottom)" if div is not None else ""
    title = f"Trace: {chains} chains x {draws} draws{note}"
  else:
    axes = arviz_compat.plot_rank(idata, var_names=var_names, **kwargs)  # axes labelled
    fig = _figure(axes)
    width, height = fig.get_size_inches()
    fig.set_size_inches(max(width, 10.), max(height, 4.))  # ArviZ 1.x's default is one short row
    title = f"Rank plots: {chains} chains x {draws} draws (uniform ranks in every chain: mixed)"
  fig = _figure(axes)
  return finish(fig, path, title)


def pair(result, var_names=None, path=None, **kwargs):
  """Pair plot of the posterior draws, divergent transitions marked.

  Args:
    result: an ``ed.mcmc.MCMCResult`` (or ArviZ's data; a VI fit's
      importance-resampled draws, without divergences).
    var_names: variables to show (ArviZ's ``var_names``); default all.
    path: save the figure there as a PNG.
    **kwargs: passed to the installed ArviZ's ``az.plot_pair`` (e.g.
      ``kind="kde"`` in 0.2x, ``marginal=False`` in 1.x).

  Returns:
    The matplotlib ``Figure``.
  """
  idata = _inference_data(result, "pair")
  names = var_names or list(idata.posterior.data_vars)
  names = [names] if isinstance(names, str) else names
  if all(n in idata.posterior for n in names):  # (ArviZ reads "~name" and filters)
    sizes = {n: int(np.prod(idata.posterior[n].shape[2:])) for n in names}
    if sum(sizes.values()) < 2:
      raise ValueError(f"ed.plot.pair needs at least two scalar quantities to pair; "
                       f"{', '.join(names)} hold {sum(sizes.values())}: use ed.plot.trace "
                       "for one.")
  div = _diverging(idata)
  kwargs.setdefault("divergences", div is not None)
  axes = arviz_compat.plot_pair(idata, var_names=var_names, **kwargs)
  fig = _figure(axes)
  side = max(*fig.get_size_inches(), 7.)  # square cells (ArviZ 0.2x draws one pair small,
  fig.set_size_inches(side, side)          # 1.x a grid in a short, wide figure)
  n = idata.posterior.sizes["chain"] * idata.posterior.sizes["draw"]
  if div is not None and kwargs["divergences"]:
    title = f"Pair plot: {n} draws, {int(div.sum())} divergent transitions marked"
  else:
    title = f"Pair plot: {n} draws"
  return finish(fig, path, title)


# -- VI ----------------------------------------------------------------------------------


def elbo(fit, path=None, skip=0.05):
  """The ELBO of every optimization step of a VI fit.

  The per-step estimates are drawn faintly with their running mean; the
  y-axis fits the steps after the first ``skip`` fraction, so the converged
  part stays readable (earlier steps run off the bottom).  Skipped
  (non-finite) steps are marked.

  Args:
    fit: an ``ed.vi.fit`` result (``VIResult``), or an array of ELBO values.
    path: save the figure there as a PNG.
    skip: fraction of the first steps left out of the y-range.

  Returns:
    The matplotlib ``Figure``.
  """
  plt = pyplot()
  values = np.asarray(getattr(fit, "elbo", fit), np.float64).reshape(-1)
  n = len(values)
  if n == 0:
    raise ValueError("the fit has no ELBO values (no steps were run).")
  steps = np.arange(1, n + 1)
  finite = np.isfinite(values)
  fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
  ax.plot(steps, values, color="C0", lw=0.8, alpha=0.35, label="ELBO estimate per step")
  window = max(1, n // 50)
  if window > 1:
    ax.plot(steps, _running_mean(values, window), color="C0", lw=2.,
            label=f"running mean ({window} steps)")
  tail = values[int(skip * n):]
  tail = tail[np.isfinite(tail)] if np.isfinite(tail).any() else values[finite]
  final = np.nanmean(values[-max(n // 10, 1):]) if finite.any() else np.nan
  if tail.size:
    low, high = np.percentile(tail, 1.), tail.max()
    pad = 0.08 * (high - low) if high > low else max(abs(high) * 0.01, 1.)
    ax.set_ylim(low - pad, high + pad)
    ax.axhline(final, color="0.3", lw=1., ls="--",
               label=f"final {final:.5g} (mean of the last {max(n // 10, 1)} steps)")
    below = int(np.sum(values[finite] < low - pad))
    if below:
      ax.text(0.99, 0.02, f"{below} early steps below the axis", transform=ax.transAxes,
              ha="right", va="bottom", fontsize=9, color="0.35")
  if not finite.all():
    ax.plot(steps[~finite], np.full((~finite).sum(), ax.get_ylim()[0]), "|", color="C3",
            ms=12, label=f"{int((~finite).sum())} skipped steps (non-finite)")
  ax.set_xlabel("optimization step")
  ax.set_ylabel("ELBO (nats)")
  ax.set_xlim(1, max(n, 2))
  ax.grid(alpha=0.3)
  ax.legend(loc="lower right" if not tail.size else "center right", fontsize=9)
  name = getattr(getattr(fit, "family", None), "name", None)
  title = f"ELBO of ed.vi.fit ({name})" if name else "ELBO"
  return finish(fig, path, f"{title}: {n} steps")


def _running_mean(values, window):
  """Mean of the finite values of each trailing ``window``."""
  finite = np.isfinite(values)
  sums = np.cumsum(np.where(finite, values, 0.))
  counts = np.cumsum(finite)
  lag = lambda x: np.concatenate([np.zeros(window), x[:-window]])  # pylint: disable=unnecessary-lambda-assignment
  total, count = sums - lag(sums), counts - lag(counts)
  with np.errstate(invalid="ignore", divide="ignore"):
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def khat(fit_or_loo, path=None, **kwargs):
  """Pareto k-hat diagnostics.

  * A VI fit (``VIResult``): the k-hat of its importance weights
    ``p(x, y) / q(x)`` (``fit.k_hat``, from ``fit.importance()``'s draws)
    against the 0.7 threshold (and the sample-size threshold
    ``min(1 - 1/log10 S, 0.7)``), beside the distribution of the log weights,
    whose long right tail is what a large k-hat measures.
  * Pointwise PSIS-LOO: an ``ed.mcmc.MCMCResult``, ArviZ's data with a
    ``log_likelihood`` group, or ``az.loo(..., pointwise=True)``'s result:
    ``az.plot_khat``, one k-hat per observation, with its thresholds.

  Args:
    fit_or_loo: one of the above.
    path: save the figure there as a PNG.
    **kwargs: passed to the installed ArviZ's ``az.plot_khat`` (LOO);
      ``show_hlines=False`` leaves out the threshold lines.

  Returns:
    The matplotlib ``Figure``.
  """
  if _is_vi(fit_or_loo):
    return _khat_vi(fit_or_loo, path)
  arviz = _arviz()
  loo = fit_or_loo
  if not hasattr(loo, "pareto_k"):
    loo = arviz.loo(_inference_data(fit_or_loo, "khat", log_likelihood=True), pointwise=True)
  if getattr(loo, "pareto_k", None) is None:
    raise ValueError("khat needs pointwise LOO: az.loo(idata, pointwise=True).")
  show_hlines = kwargs.pop("show_hlines", True)
  kwargs.setdefault("figsize", (8, 4.5))
  ax = arviz_compat.plot_khat(loo, show_hlines=show_hlines, **kwargs)
  fig = _figure(ax)
  k = np.asarray(loo.pareto_k).reshape(-1)
  good = float(getattr(loo, "good_k", KHAT_LIMIT) or KHAT_LIMIT)
  draws = getattr(loo, "n_samples", None)
  for axis in np.ravel(ax):
    axis.set_xlabel("observation")
    axis.set_ylabel("Pareto k-hat")
    if show_hlines:
      for level, text in ((good, f"{good:.2f}"), (1., "1")):
        axis.annotate(text, (1., level), xycoords=("axes fraction", "data"), xytext=(3, 0),
                      textcoords="offset points", va="center", fontsize=9, color="C1")
  lowered = f" (0.7 lowered for {draws} draws)" if good < KHAT_LIMIT and draws else ""
  return finish(fig, path, f"PSIS-LOO Pareto k-hat: {int(np.sum(k > good))} of {k.size} "
                            f"observations above {good:.2f}{lowered}")


def _khat_vi(fit, path):
  plt = pyplot()
  sample = fit._ensure_importance()  # pylint: disable=protected-access
  k, s = float(sample.k_hat), len(sample.log_weights)
  limit = psis.khat_threshold(s)
  fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4.5), layout="constrained",
                                    gridspec_kw={"width_ratios": [1, 3]})
  top = max(1.2, k + 0.15) if np.isfinite(k) else 1.2
  bottom = min(-0.2, k - 0.15) if np.isfinite(k) else -0.2
  for low, high, color, label in ((bottom, limit, "#d9f0d3", "reliable"),
                                  (limit, 1., "#fee8c8", "biased"),
                                  (1., top, "#f4cccc", "unusable")):
    left.axhspan(low, high, color=color, zorder=0)
    left.text(-0.9, (low + high) / 2, label, ha="left", va="center",
              fontsize=9, color="0.35")
  left.axhline(KHAT_LIMIT, color="C3", lw=1.5, ls="--")
  left.text(0.95, KHAT_LIMIT, "0.7", ha="right", va="bottom", fontsize=9, color="C3")
  if limit < KHAT_LIMIT:
    left.axhline(limit, color="C1", lw=1., ls=":")
    left.text(0.95, limit, f"{limit:.2f} (S={s})", ha="right", va="top", fontsize=8,
              color="C1")
  left.plot([0.4], [min(k, top - 0.05) if np.isfinite(k) else top - 0.05], "o", color="k",
            ms=10)
  left.set_xlim(-1., 1.)
  left.set_ylim(bottom, top)
  left.set_xticks([])
  left.set_ylabel("Pareto k-hat")
  left.set_title(f"k-hat {k:.2f}")
  log_w = sample.log_weights[np.isfinite(sample.log_weights)]
  if log_w.size:
    right.hist(log_w - log_w.max(), bins=60, color="C0", alpha=0.8)
  right.set_xlabel("log importance weight - max  (log p(x, y) - log q(x))")
  right.set_ylabel("surrogate draws")
  right.set_title(f"importance ESS {sample.ess:.0f} of {s} draws")
  right.grid(alpha=0.3)
  verdict = ("reliable" if k < limit else "biased" if k < 1. else "unusable")
  return finish(fig, path, f"Importance sampling of the VI fit: Pareto k-hat {k:.2f} "
                            f"({verdict} importance-weighted estimates)")


# -- SBC ---------------------------------------------------------------------------------


def sbc(result, path=None, alpha=0.05, max_panels=24):
  """ECDF differences of an ``SBCResult``'s ranks with simultaneous bands.

  The figure is ``result.plot`` (drawn in ``sbc/plot.py``: ``sbc/`` runs
  ``mcmc/`` and ``vi/``, so ``analysis/`` does not import it).

  Args:
    result: an ``ed.sbc`` result (``SBCResult``).
    path: save the figure there as a PNG.
    alpha: the bands' level (``1 - alpha`` simultaneous coverage).
    max_panels: draw at most this many parameter elements.

  Returns:
    The matplotlib ``Figure``.
  """
  if not hasattr(result, "ranks") or not hasattr(result, "max_rank"):
    raise TypeError(f"ed.plot.sbc takes the result of ed.sbc; got {type(result).__name__}.")
  return result.plot(path=path, alpha=alpha, max_panels=max_panels)
