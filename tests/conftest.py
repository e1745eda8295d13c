import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Four logical CPU devices, so the distributed tests can run MirroredStrategy
# with 1, 2 and 4 replicas.  This must happen before TensorFlow initializes
# its devices (before any test module builds a tensor).  Other tests are
# unaffected: ops still default to /cpu:0.
import edward_lite as ed  # pylint: disable=wrong-import-position

LOGICAL_CPUS = ed.distribute.logical_cpus(4)
