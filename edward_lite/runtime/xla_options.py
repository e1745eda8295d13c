"""XLA:CPU's reductions kept in XLA's own loops, not YNNPACK's.

TensorFlow 2.21's XLA:CPU hands reductions to YNNPACK (its ``ynn_fusion``
custom fusions, run through their own thread pool).  A sampler's loop
reduces small axes at every transition for every chain (a mixture's
logsumexp over its components, a log density's sum over its event
dimensions), where XLA's own loop emitter is faster: 10^5 random-walk
chains of a four-component mixture sample 1.46x as fast on one device and
1.11x with chain groups, issue 52's 2-D Gaussian at 10^5 chains 1.09x,
eight schools at 10^4 ChEES chains 1.03x; a logistic regression's sum over
200 data points at 1,000 NUTS chains runs 0.95x, at 4 chains 1.01x
(``benchmarks/ynn_reduce.py``, RESULTS section 61).

``configure``, run when edward_lite is imported and before TensorFlow reads
its XLA flags, adds ``--xla_cpu_experimental_ynn_fusion_type=-reduce`` to
``XLA_FLAGS`` (YNNPACK keeps the dots).  A YNNPACK setting the user put in
``XLA_FLAGS`` is kept, and ``ED_YNN_REDUCE=1`` leaves XLA's default.  XLA
reads the flags once per process, at its first compile: a process that
compiled with XLA before importing edward_lite keeps its own.  The flag
reaches JAX in the same process too, which reads the same variable.
"""

import os

__all__ = ["configure", "FLAG"]

FLAG = "--xla_cpu_experimental_ynn_fusion_type=-reduce"


def configure():
  """Adds ``FLAG`` to ``XLA_FLAGS`` (see the module docstring)."""
  flags = os.environ.get("XLA_FLAGS", "")
  if os.environ.get("ED_YNN_REDUCE", "") not in ("", "0"):
    return
  if "--xla_cpu_experimental_ynn_fusion_type" in flags:
    return
  os.environ["XLA_FLAGS"] = f"{flags} {FLAG}".strip()
