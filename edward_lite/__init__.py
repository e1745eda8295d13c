"""edward_lite: random-variable probabilistic programming on TensorFlow.

Write a model as a Python function of random variables::

    import edward_lite as ed

    def model(x):
      w = ed.Normal(0., 1., sample_shape=x.shape[-1], name="w")
      return ed.Normal(tf.linalg.matvec(x, w), 1., name="y")

and turn it into a log density (``ed.make_log_joint_fn``), an inference
target over unconstrained, chain-batched state (``ed.make_target``), or
posterior draws (``ed.mcmc.sample``).
"""

from edward_lite.console import quiet_startup

quiet_startup()  # before TensorFlow is imported: keeps its start-up logs quiet

# pylint: disable=wrong-import-position
from edward_lite import diagnostics, distribute, distributions, mcmc, psis, vi, zoo
from edward_lite.distributions import *  # pylint: disable=wildcard-import
from edward_lite.distributions import as_random_variable, make_random_variable
from edward_lite.persistence import load
from edward_lite.predictions import predictive, prior_predictive
from edward_lite.programs import condition, do, make_log_joint_fn, make_value_setter
from edward_lite.random_variable import RandomVariable
from edward_lite.target import Target, make_target
from edward_lite.terms import Factor, Flat
from edward_lite.version import __version__
from edward_lite.tracing import (get_next_interceptor, get_next_tracer, interceptable,
                                 interception, tape, trace, traceable)


def __getattr__(name):
  # ``ed.plot`` is imported on first use: it needs matplotlib (an optional extra).
  if name == "plot":
    import importlib  # pylint: disable=import-outside-toplevel
    return importlib.import_module("edward_lite.plot")
  raise AttributeError(f"module 'edward_lite' has no attribute {name!r}")
