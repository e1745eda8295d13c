"""Vectorized MCMC: ``ed.mcmc.sample(model, ..., kernel="nuts", chains=...)``."""

from edward_lite.runtime.checkpoint import (CheckpointCorruptError, CheckpointLockedError,
                                            CheckpointMismatchError)
from edward_lite.mcmc.flow_adaptation import FlowAdaptation
from edward_lite.mcmc.kernels import HMC, NUTS, RWMH, ChEES, Kernel
from edward_lite.mcmc.results import MCMCResult, Summary
from edward_lite.mcmc.run_check import SamplingFailedError
from edward_lite.mcmc.sample import sample
from edward_lite.mcmc import saved as _saved  # registers MCMCResult with save / ed.load

__all__ = ["sample", "FlowAdaptation", "HMC", "NUTS", "RWMH", "ChEES", "Kernel", "MCMCResult",
           "Summary", "CheckpointMismatchError", "CheckpointCorruptError", "CheckpointLockedError",
           "SamplingFailedError"]


def __dir__():
  return list(__all__)
