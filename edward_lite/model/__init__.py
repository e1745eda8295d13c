"""The target: a program and its data turned into a log density over
unconstrained, chain-batched state (``make_target``) on top of the model's
description (``description``), with the model's data, traced structure,
layout, interpreter, per-chain gradient, ``init=`` values, forward
simulation and which term is not finite (``nonfinite``)."""

from edward_lite.model.target import Density, Target, make_target

__all__ = ["Density", "Target", "make_target"]
