"""Simulation-based calibration: ``ed.sbc(model, ..., kernel=...)`` checks an
MCMC kernel or VI family on data sets simulated from the model's prior.

``run`` is the driver (``ed.sbc``), ``simulated`` the target over many data
sets at once, ``batched`` the Gaussian fits (one per data set), ``ranks``
the rank statistics and their uniformity tests, ``result`` the outcome
(``SBCResult``) and ``plot`` its figure (``ed.plot.sbc``, needs matplotlib).

It runs ``mcmc/`` and ``vi/``; no other folder imports it (``ed.plot.sbc``
calls ``SBCResult.plot``).  ``ed.sbc`` is the function ``run.sbc``, not this
package.
"""

from edward_lite.sbc.result import SBCResult
from edward_lite.sbc.run import sbc

__all__ = ["sbc", "SBCResult"]
