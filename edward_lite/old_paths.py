"""Module paths from before the package was grouped into folders.

``import edward_lite.diagnostics`` (or ``from edward_lite.programs import
condition``) keeps working for one release: the old name is an alias of the
module at its new path, with a ``DeprecationWarning`` naming that path.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__all__ = ["MOVED", "install"]

MOVED = {
    "tracing": "language.tracing",
    "random_variable": "language.random_variable",
    "distributions": "language.distributions",
    "programs": "language.transformations",
    "terms": "language.terms",
    "bijectors": "language.bijectors",
    "dtypes": "language.dtypes",
    "target": "model",
    "model_data": "model.data",
    "model_structure": "model.structure",
    "interpreter": "model.interpreter",
    "layout": "model.layout",
    "per_chain_gradient": "model.per_chain_gradient",
    "initialization": "model.init_values",
    "simulation": "model.simulation",
    "call_checks": "checks.arguments",
    "program_errors": "checks.program_errors",
    "support": "checks.support",
    "nonfinite": "model.nonfinite",
    "control_flow": "checks.control_flow",
    "diagnostics": "analysis.diagnostics",
    "psis": "analysis.psis",
    "summary": "analysis.summary",
    "predictions": "analysis.predictive",
    "inference_data": "analysis.arviz_export",
    "plot": "analysis.plot",
    "engine": "runtime.chunked_run",
    "checkpoint": "runtime.checkpoint",
    "checkpoint_files": "runtime.checkpoint_files",
    "fingerprints": "runtime.fingerprints",
    "seed_streams": "runtime.seeds",
    "progress_report": "runtime.progress",
    "console": "runtime.console",
    "persistence": "runtime.persistence",
    "mcmc.program": "mcmc.compiled",
    "mcmc.initial": "mcmc.initial_states",
    "vi.diagnosis": "vi.elbo_diagnosis",
    "checks.nonfinite": "model.nonfinite",
    "analysis.sbc": "sbc.result",
    "analysis.sbc_run": "sbc.run",
    "analysis.sbc_ranks": "sbc.ranks",
    "analysis.plot_sbc": "sbc.plot",
    "model.simulated": "sbc.simulated",
    "vi.batched": "sbc.batched",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Finds ``edward_lite.<old>`` and loads it as the module at its new path."""

  def __init__(self):
    self._specs = {}

  def find_spec(self, fullname, path=None, target=None):  # pylint: disable=unused-argument
    old = fullname.partition("edward_lite.")[2] if fullname.startswith("edward_lite.") else ""
    if old not in MOVED:
      return None
    return importlib.util.spec_from_loader(fullname, self)

  def create_module(self, spec):
    new = "edward_lite." + MOVED[spec.name.partition("edward_lite.")[2]]
    warnings.warn(f"{spec.name} moved to {new}; the old path goes in the next release.",
                  DeprecationWarning, stacklevel=2)
    module = importlib.import_module(new)
    self._specs[new] = module.__spec__  # the import system overwrites it with the alias's
    return module

  def exec_module(self, module):
    # The module at the new path is already executed; it keeps its own spec.
    module.__spec__ = self._specs[module.__name__]


def install():
  """Adds the alias finder once (idempotent)."""
  if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.append(_Alias())
