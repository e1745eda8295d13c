"""Distributed inference on ``tf.distribute``: what a user passes to
``ed.mcmc.sample`` and ``ed.vi.fit`` as ``strategy=`` (``strategy``, with
``logical_cpus`` to make CPU devices) and ``parallel=`` (``PARALLEL_MODES``).

The plumbing (``strategies.resolve``, ``strategies.num_replicas``,
``sharding.ShardedTarget``) is the library's, imported from its module.
"""

from edward_lite.distribute import sharding as _sharding
from edward_lite.distribute import strategies as _strategies
from edward_lite.distribute.sharding import PARALLEL_MODES
from edward_lite.distribute.strategies import logical_cpus, strategy

__all__ = ["strategy", "logical_cpus", "PARALLEL_MODES"]

# Exported in 0.1; kept one release, with a DeprecationWarning.
_INTERNAL = {"resolve": _strategies, "num_replicas": _strategies, "ShardedTarget": _sharding}


def __getattr__(name):
  if name in _INTERNAL:
    from edward_lite.runtime.deprecation import warn_renamed  # pylint: disable=import-outside-toplevel
    module = _INTERNAL[name].__name__
    warn_renamed(f"ed.distribute.{name}", f"{module}.{name}",
                 reason="it is the library's plumbing, no longer exported")
    return getattr(_INTERNAL[name], name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
  return list(__all__)
