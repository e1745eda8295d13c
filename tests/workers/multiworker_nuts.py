"""One worker of the two-process multi-worker test (tests/test_multiworker.py).

Reads ``TF_CONFIG`` (set by the test), builds
``ed.distribute.strategy("multi_worker")`` (one CPU replica per worker, two
replicas in all), runs data-parallel and chain-parallel NUTS on the test's
logistic regression and writes the draws to ``<out>/worker<index>.npz``.

    python tests/workers/multiworker_nuts.py OUT_DIR
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # pylint: disable=wrong-import-position
import tensorflow as tf  # pylint: disable=wrong-import-position

import edward_lite as ed  # pylint: disable=wrong-import-position

F64 = tf.float64
N, D = 151, 3
_rng = np.random.default_rng(11)
X = _rng.normal(size=(N, D))
Y = (_rng.uniform(size=N) < 1 / (1 + np.exp(-X @ np.array([1., -1., 0.5])))).astype(np.int32)
SETTINGS = dict(chains=4, warmup=40, draws=30, seed=9, progress=False)


def logistic(x):
  w = ed.Normal(tf.zeros(D, F64), tf.constant(1., F64), name="w")
  return ed.Bernoulli(logits=tf.linalg.matvec(x, w), name="y")


def main(out_dir):
  index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
  strategy = ed.distribute.strategy("multi_worker")
  draws = {}
  for parallel in ("data", "chains"):
    result = ed.mcmc.sample(logistic, X, observed={"y": Y}, strategy=strategy,
                            parallel=parallel, **SETTINGS)
    draws[parallel] = result.draws["w"]
  np.savez(os.path.join(out_dir, f"worker{index}.npz"),
           replicas=strategy.num_replicas_in_sync, **draws)
  print(f"worker {index} done", flush=True)


if __name__ == "__main__":
  main(sys.argv[1])
