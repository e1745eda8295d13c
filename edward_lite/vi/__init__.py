"""Variational inference: ``ed.vi.fit(model, ..., family="meanfield")``; amortized
training of deep generative models: ``ed.vi.train(model, guide, dataset, ...)``."""

from edward_lite.vi.families import FullRank, IAF, MAF, MeanField, RealNVP, Family
from edward_lite.vi.centeredness import learn_centeredness
from edward_lite.vi.fit import NonFiniteELBOError, fit
from edward_lite.vi.results import ImportanceSample, VIResult
from edward_lite.vi.early_stopping import EarlyStopping, StopTraining
from edward_lite.vi.objectives import ELBO, IWAE
from edward_lite.vi.train import train
from edward_lite.vi.train_result import TrainResult
from edward_lite.vi import saved as _saved  # registers VIResult with save / ed.load

__all__ = ["fit", "Family", "MeanField", "FullRank", "RealNVP", "MAF", "IAF", "VIResult",
           "ImportanceSample", "NonFiniteELBOError", "learn_centeredness", "train", "TrainResult", "ELBO", "IWAE", "EarlyStopping",
           "StopTraining"]


def __dir__():
  return list(__all__)
