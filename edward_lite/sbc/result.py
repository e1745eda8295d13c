"""The outcome of simulation-based calibration: ``SBCResult``.

``ed.sbc`` (``sbc.run``) runs the simulations and the inference; the rank
statistics and their uniformity tests are in ``sbc.ranks``; ``ed.plot.sbc``
(``sbc.plot``) draws them.
"""

import dataclasses
from typing import Any, Dict

import numpy as np

from edward_lite.sbc.ranks import chi_square_test, ecdf_test, element_names, ranks

__all__ = ["SBCResult"]


@dataclasses.dataclass
class SBCResult:
  """The outcome of ``ed.sbc``.

  Attributes:
    ranks: dict name -> int ``[S, *shape]``, the rank of the prior draw among
      ``max_rank`` posterior draws, per simulation.
    max_rank: ``L``.
    p_values: dict name -> ``[*shape]`` ECDF-test p-values.
    chi_square: dict name -> ``[*shape]`` chi-square p-values.
    truth: dict name -> ``[S, *shape]`` prior draws of the latents.
    method: what ran (kernel or family and its settings).
    timings: seconds (``simulate_s``, ``inference_s``, ``ranks_s``, ``total_s``).
    diagnostics: per-simulation numbers of the inference: MCMC's
      ``divergences [S]`` and ``ess_bulk`` (name -> ``[S, *shape]``, each
      data set's bulk ESS from its chains), VI's ``elbo [S]`` and
      ``vi_converged`` (bool ``[S]``: whether each data set's fit had
      converged; the batched families add ``vi_distance [S]``, each fit's
      remaining Newton step, ``sbc.batched``).
  """
  ranks: Dict[str, np.ndarray]
  max_rank: int
  p_values: Dict[str, np.ndarray]
  chi_square: Dict[str, np.ndarray]
  truth: Dict[str, np.ndarray]
  method: Dict[str, Any]
  timings: Dict[str, float]
  diagnostics: Dict[str, Any] = dataclasses.field(default_factory=dict)
  seed: int = 0

  @classmethod
  def build(cls, truth, draws, max_rank, seed=0, **fields):
    """From prior draws ``name -> [S, *shape]`` and posterior draws
    ``name -> [S, L, *shape]``."""
    r = {n: ranks(truth[n], draws[n], seed) for n in truth}
    return cls(ranks=r, max_rank=int(max_rank),
               p_values={n: ecdf_test(v, max_rank, seed=seed) for n, v in r.items()},
               chi_square={n: chi_square_test(v, max_rank) for n, v in r.items()},
               truth=truth, seed=seed, **fields)

  @property
  def simulations(self):
    """``S``."""
    return len(next(iter(self.ranks.values())))

  @property
  def min_p_value(self):
    """The smallest ECDF-test p-value over every parameter element."""
    return float(min(np.min(p) for p in self.p_values.values()))

  def passes(self, alpha=0.01):
    """Whether no parameter element fails the ECDF test at level ``alpha``,
    Bonferroni-corrected over the ``P`` elements (``p > alpha / P``)."""
    count = sum(int(np.size(p)) for p in self.p_values.values())
    return self.min_p_value > alpha / count

  def summary(self):
    """A pandas DataFrame, one row per scalar parameter element: the ECDF
    and chi-square p-values, and the mean and sd of the normalized ranks
    ``r / L`` (0.5 and about 0.289 when uniform; a low sd means too wide
    posteriors' humped ranks, a high one too narrow posteriors' U).  When
    some VI fits had not converged, a column ``unconverged_fits`` counts
    them (of ``S``; the same for every row), as ``ed.sbc`` warned."""
    try:
      import pandas as pd  # pylint: disable=import-outside-toplevel
    except ImportError as e:
      raise ImportError("SBCResult.summary() needs pandas: pip install pandas.") from e
    rows = []
    for name, r in self.ranks.items():
      flat = r.reshape(len(r), -1) / self.max_rank
      for j, label in enumerate(element_names(name, r.shape[1:])):
        rows.append(dict(parameter=label, p_ecdf=float(self.p_values[name].reshape(-1)[j]),
                         p_chi2=float(self.chi_square[name].reshape(-1)[j]),
                         rank_mean=float(flat[:, j].mean()), rank_sd=float(flat[:, j].std())))
    table = pd.DataFrame(rows).set_index("parameter")
    converged = self.diagnostics.get("vi_converged")
    if converged is not None and not np.all(converged):
      table["unconverged_fits"] = int(np.sum(~np.asarray(converged, bool)))
    return table

  def plot(self, path=None, alpha=0.05, **kwargs):
    """``ed.plot.sbc(self)``: ECDF differences with simultaneous bands."""
    from edward_lite.sbc import plot  # pylint: disable=import-outside-toplevel
    return plot.sbc(self, path=path, alpha=alpha, **kwargs)

  def __repr__(self):
    return (f"<ed.SBCResult simulations={self.simulations} max_rank={self.max_rank} "
            f"method={self.method.get('name')} min_p={self.min_p_value:.3g}>")
