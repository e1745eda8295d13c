"""edward_lite: random-variable probabilistic programming on TensorFlow.

Write a model as a Python function of random variables::

    import edward_lite as ed

    def model(x):
      w = ed.Normal(0., 1., sample_shape=x.shape[-1], name="w")
      return ed.Normal(tf.linalg.matvec(x, w), 1., name="y")

and turn it into a log density (``ed.make_log_joint_fn``), an inference
target over unconstrained, chain-batched state (``ed.make_target``), or
posterior draws (``ed.mcmc.sample``).

The package's folders are its map: ``language/`` (random variables,
tracing, program transformations), ``model/`` (a program and its data as a
log density), ``checks/`` (bad input caught at the boundary), ``mcmc/`` and
``vi/`` (inference), ``ode/`` (ODE solves inside programs), ``distribute/``
(``tf.distribute``), ``analysis/`` (diagnostics, summaries, predictive,
ArviZ, plots), ``sbc/`` (simulation-based calibration) and ``runtime/`` (the
chunked host loop, checkpoints, seeds, save and load).
"""

from edward_lite.runtime import compile_cache, xla_options
from edward_lite.runtime.console import quiet_startup

xla_options.configure()  # before TensorFlow reads its XLA flags
compile_cache.configure()  # (after xla_options: its folder depends on the flags)
quiet_startup()  # before TensorFlow is imported: keeps its start-up logs quiet

# pylint: disable=wrong-import-position
from edward_lite import distribute, mcmc, ode, vi
from edward_lite.analysis import diagnostics, psis
from edward_lite.analysis.graph import graph, model_graph
from edward_lite.analysis.predictive import posterior_predictive, prior_predictive
from edward_lite.language.distributions import *  # pylint: disable=wildcard-import
from edward_lite.language.distributions import (CONSTRUCTORS, as_random_variable,
                                                make_random_variable)
from edward_lite.language.random_variable import RandomVariable
from edward_lite.language.reparameterize import reparameterize
from edward_lite.language.terms import Factor, Flat
from edward_lite.language.tracing import (get_next_interceptor, get_next_tracer, interceptable,
                                          interception, tape, trace, traceable)
from edward_lite.language.transformations import condition, do, make_log_joint_fn, make_value_setter
from edward_lite.model import Target, make_target
from edward_lite.old_paths import MOVED as _MOVED
from edward_lite.old_paths import install as _install_old_paths
from edward_lite.runtime.persistence import load
# ed.sbc is the function: this binding replaces the package, which stays importable by path.
from edward_lite.sbc import SBCResult, sbc
from edward_lite.version import __version__

_install_old_paths()

__all__ = sorted(CONSTRUCTORS) + [
    # the language (Edward2's names)
    "RandomVariable", "as_random_variable", "make_random_variable", "Factor", "Flat", "Ordered",
    "trace", "traceable", "get_next_tracer", "tape", "interception", "interceptable",
    "get_next_interceptor", "make_log_joint_fn", "make_value_setter", "condition", "do",
    "reparameterize",
    # the target, inference and analysis
    "make_target", "Target", "mcmc", "vi", "ode", "distribute", "diagnostics", "psis",
    "posterior_predictive", "prior_predictive", "sbc", "SBCResult", "graph", "model_graph",
    "plot", "load", "__version__",
]


def __getattr__(name):
  import importlib  # pylint: disable=import-outside-toplevel
  # ``ed.plot`` is imported on first use: it needs matplotlib (an optional extra).
  if name == "plot":
    return importlib.import_module("edward_lite.analysis.plot")
  if name == "predictive":  # the name in 0.1
    from edward_lite.runtime.deprecation import warn_renamed  # pylint: disable=import-outside-toplevel
    warn_renamed("ed.predictive", "ed.posterior_predictive")
    return posterior_predictive
  if name in _MOVED:  # a module at its path before the move (``ed.nonfinite``), with a warning
    return importlib.import_module(f"edward_lite.{name}")
  raise AttributeError(f"module 'edward_lite' has no attribute {name!r}")


def __dir__():
  return list(__all__)
