"""The installed ArviZ, 0.2x or 1.x, behind one small interface.

ArviZ 0.2x keeps a result in an ``arviz.InferenceData``; ArviZ 1.x (what
``pip`` installs on Python 3.12+) in an ``xarray.DataTree`` with the same
groups, read the same way (``data.posterior["mu"]``, ``data.sample_stats``).
``az.summary``, ``az.loo`` and ``az.compare`` take either.  The two differ
where this module steps in, and every version switch of the library is
here:

* building: ``from_dict(posterior=..., ...)`` against
  ``from_dict({"posterior": ...})`` (``from_groups``);
* the result type (``data_type``);
* PSIS-LOO's result: ``elpd_loo``, ``p_loo``, ``loo_i`` against ``elpd``,
  ``p``, ``elpd_i`` (``elpd`` reads either), and ``az.compare``'s columns,
  rounding and sign of ``elpd_diff`` (``compare``);
* plots: 0.2x returns matplotlib axes, 1.x a ``PlotCollection`` (trace and
  density together is ``plot_trace_dist``, divergences a visual).
  ``plot_trace``, ``plot_rank``, ``plot_pair`` and ``plot_khat`` here draw
  with the installed ArviZ and return its matplotlib axes; extra keyword
  arguments are that version's own.
"""

import collections
import importlib

import numpy as np

__all__ = ["load", "is_datatree", "data_type", "from_groups", "Elpd", "elpd", "compare",
           "plot_trace", "plot_rank", "plot_pair", "plot_khat"]

Elpd = collections.namedtuple("Elpd", ["elpd", "se", "p", "pointwise", "pareto_k"])
Elpd.__doc__ = """PSIS-LOO estimates: the expected log pointwise predictive density, its
standard error, the effective number of parameters and, when computed with
``pointwise=True``, the per-observation ELPD and Pareto k-hat (else None)."""


def load(message="ArviZ is not installed: pip install 'edward_lite[arviz]'."):
  """The ``arviz`` module; ``ImportError(message)`` when it is missing."""
  try:
    return importlib.import_module("arviz")
  except ImportError as e:
    raise ImportError(message) from e


def is_datatree():
  """True when the installed ArviZ (1.x) works on ``xarray.DataTree``."""
  return int(load().__version__.split(".", 1)[0]) >= 1


def data_type():
  """The class of the installed ArviZ's results: ``xarray.DataTree`` or
  ``arviz.InferenceData``."""
  if is_datatree():
    return importlib.import_module("xarray").DataTree
  return load().InferenceData


def from_groups(groups):
  """ArviZ's data from ``groups``: group name -> dict variable name ->
  array ``[chain, draw, ...]`` (``observed_data``: the data's own shape)."""
  arviz = load()
  if is_datatree():
    return arviz.from_dict(groups)
  return arviz.from_dict(**groups)


def elpd(loo):
  """The ``Elpd`` of ``az.loo``'s result under either version."""
  if is_datatree():
    return Elpd(loo.elpd, loo.se, loo.p, loo.elpd_i, loo.pareto_k)
  return Elpd(loo.elpd_loo, loo.se, loo.p_loo, getattr(loo, "loo_i", None),
              getattr(loo, "pareto_k", None))


def compare(data):
  """``az.compare`` of ``data`` (dict model name -> ArviZ's data) by
  PSIS-LOO: a DataFrame, best model first, of numbers (not rounded) with
  the columns ``rank``, ``elpd``, ``p``, ``elpd_diff``, ``dse``, ``se`` and
  ``weight`` under either version; ``elpd_diff`` is the model's ELPD minus
  the best one's (1.x's sign: 0 or negative)."""
  arviz = load()
  if is_datatree():
    return arviz.compare(data, round_to="none")
  table = arviz.compare(data).rename(columns={"elpd_loo": "elpd", "p_loo": "p"})
  table["elpd_diff"] = -table["elpd_diff"]
  return table


# -- plots: matplotlib axes from either version ----------------------------------------


def _collection_axes(collection):
  """The axes of a 1.x ``PlotCollection`` as an array."""
  plots = collection.viz["plot"]
  if hasattr(plots, "data_vars"):
    return np.concatenate([np.ravel(plots[n].values) for n in plots.data_vars])
  return np.asarray(plots.values, dtype=object)


def plot_trace(data, var_names=None, **kwargs):
  """Per-variable densities and traces: axes ``[rows, 2]`` (density on the
  left, draws against iteration on the right), each titled by its variable."""
  arviz = load()
  if not is_datatree():
    return np.atleast_2d(arviz.plot_trace(data, var_names=var_names, **kwargs))
  collection = arviz.plot_trace_dist(data, var_names=var_names, backend="matplotlib",
                                     **kwargs)
  rows = []
  for name in collection.viz["plot"].data_vars:
    column_last = collection.viz["plot"][name].transpose(..., "column")
    for row in np.asarray(column_last.values, dtype=object).reshape(-1, 2):
      label = row[0].get_xlabel()  # 1.x labels the density's x-axis with the variable
      for ax in row:
        ax.set_title(label)
      rows.append(row)
  return np.array(rows, dtype=object)


def plot_rank(data, var_names=None, **kwargs):
  """Rank plots, axes labelled: per-chain histograms of the ranks among all
  chains (0.2x) or the ECDF of each chain's fractional ranks minus the
  uniform CDF (1.x).  An array of axes, one per variable (per element when
  ArviZ splits a vector)."""
  arviz = load()
  if not is_datatree():
    axes = np.atleast_1d(arviz.plot_rank(data, var_names=var_names, **kwargs))
    labels = ("rank of the draw among all chains", "chain")
  else:
    axes = _collection_axes(arviz.plot_rank(data, var_names=var_names, backend="matplotlib",
                                            **kwargs))
    labels = ("fractional rank among all chains", "ECDF - uniform CDF")
  for ax in np.ravel(axes):
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
  return axes


def plot_pair(data, var_names=None, divergences=False, **kwargs):
  """Pair plot, divergent transitions marked when ``divergences``: an
  array of axes."""
  arviz = load()
  if not is_datatree():
    return np.atleast_1d(arviz.plot_pair(data, var_names=var_names, divergences=divergences,
                                         **kwargs))
  visuals = {"divergence": divergences, **kwargs.pop("visuals", {})}
  return _collection_axes(arviz.plot_pair(data, var_names=var_names, visuals=visuals,
                                          backend="matplotlib", **kwargs))


def plot_khat(loo, show_hlines=True, figsize=None, **kwargs):
  """Pointwise Pareto k-hat of ``az.loo(..., pointwise=True)``'s result,
  with lines at 0, the sample-size threshold and 1 when ``show_hlines``:
  an array of axes."""
  arviz = load()
  if not is_datatree():
    return np.atleast_1d(arviz.plot_khat(loo, show_hlines=show_hlines, figsize=figsize,
                                         **kwargs))
  visuals = {"hlines": show_hlines, **kwargs.pop("visuals", {})}
  kwargs.setdefault("hline_values", [0., float(loo.good_k), 1.])
  if figsize is not None:
    kwargs["figure_kwargs"] = {"figsize": figsize, **kwargs.get("figure_kwargs", {})}
  return _collection_axes(arviz.plot_khat(loo, visuals=visuals, backend="matplotlib",
                                          **kwargs))
