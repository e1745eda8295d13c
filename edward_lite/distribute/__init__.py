"""Distributed inference on ``tf.distribute``: strategies and sharded targets."""

from edward_lite.distribute.sharding import PARALLEL_MODES, ShardedTarget
from edward_lite.distribute.strategies import logical_cpus, num_replicas, resolve, strategy

__all__ = ["strategy", "logical_cpus", "num_replicas", "resolve", "ShardedTarget", "PARALLEL_MODES"]


def __dir__():
  return list(__all__)
