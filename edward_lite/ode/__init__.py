"""Ordinary differential equations inside programs: ``ed.ode.solve``."""

from edward_lite.ode.solve import METHODS, solve

__all__ = ["solve", "METHODS"]
