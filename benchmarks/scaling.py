"""Scaling of distributed inference and training with the number of replicas.

Prints throughput at 1, 2 and 4 replicas and the scaling efficiency
``throughput(R) / (R * throughput(1))`` for:

* **NUTS logistic regression** (covertype's shape, N = 581,012, D = 54,
  synthetic data, 4 chains, data-parallel): per-chain gradient evaluations
  per second while sampling.  The single-device XLA sampler is the baseline
  the distributed one must beat on real devices.
* **VAE** (examples/vae.py, data-parallel and model-parallel): training
  images per second.
* **Image Transformer** (examples/image_transformer.py, data-parallel):
  training images per second.

On a machine without accelerators the replicas are logical CPU devices
that share the same cores: there the numbers measure overhead, not
speed-up.  On a multi-GPU host the replicas are the GPUs.

    python benchmarks/scaling.py                 # everything, ~10 min on 2 cores
    python benchmarks/scaling.py --only nuts --n 100000
    python benchmarks/scaling.py --replicas 1 2 4 8   # on a host with 8 GPUs
"""

import argparse
import os
import platform
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), os.path.join(HERE, "..", "examples"), HERE]

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import edward_lite as ed  # noqa: E402
import machine  # noqa: E402


def _strategies(replica_counts):
  """``(R, devices, MirroredStrategy)`` for each count this host has devices for."""
  devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
  for r in replica_counts:
    if r <= len(devices):
      names = [d.name for d in devices[:r]]
      yield r, names, ed.distribute.strategy("mirrored", devices=names)


def nuts(args):
  """Per-chain gradient evaluations per second of NUTS while sampling."""
  import distributed_logistic  # pylint: disable=import-outside-toplevel
  x, y = distributed_logistic.synthetic(args.n, args.d)
  # Fixed step size and tree depth: every iteration builds a full tree of
  # 2^depth - 1 leapfrog steps, so the runs do the same work.
  kernel = ed.mcmc.NUTS(max_tree_depth=args.depth)
  settings = dict(observed={"y": y}, kernel=kernel, chains=args.chains, warmup=0,
                  draws=args.iterations, step_size=1e-6, seed=0, progress=False)

  def throughput(**kwargs):
    ed.mcmc.sample(distributed_logistic.logistic_regression, x,
                   **{**settings, "draws": 2}, **kwargs)  # compile / trace
    start = time.perf_counter()
    result = ed.mcmc.sample(distributed_logistic.logistic_regression, x, **settings, **kwargs)
    return float(np.sum(result.num_gradients)) / (time.perf_counter() - start)

  rows = [("single device, XLA", 1, throughput())]
  for r, _, strategy in _strategies(args.replicas):
    rows.append((f"data-parallel, {r} replica(s)", r, throughput(strategy=strategy)))
  _table(f"NUTS logistic regression N={args.n} D={args.d}, {args.chains} chains: "
         "gradient evaluations / s", rows, baseline=1)


def vae(args):
  """VAE training images per second, data- and model-parallel."""
  import vae as vae_example  # pylint: disable=import-outside-toplevel
  settings = dict(epochs=args.epochs, batch_size=args.batch_size, n_images=args.images,
                  verbose=False)
  rows = [("single device", 1, vae_example.train("single", **settings)["examples_per_s"])]
  for r, devices, strategy in _strategies(args.replicas):
    rows.append((f"data-parallel, {r} replica(s)", r, vae_example.train(
        "data", strategy=strategy, **settings)["examples_per_s"]))
    if r >= 2:
      rows.append((f"model-parallel, {r} devices", r, vae_example.train(
          "model", devices=devices, **settings)["examples_per_s"]))
  _table(f"VAE (shapes 8x8, batch {args.batch_size}): training images / s", rows, baseline=1)


def image_transformer(args):
  """Image Transformer training images per second, data-parallel."""
  import image_transformer as it  # pylint: disable=import-outside-toplevel
  settings = dict(epochs=args.epochs, batch_size=args.batch_size, n_images=args.images,
                  samples=4, log=lambda *_: None, progress=False)
  rows = [("default strategy", 1, it.train("default", **settings)["examples_per_s"])]
  for r, _, strategy in _strategies(args.replicas):
    rows.append((f"data-parallel, {r} replica(s)", r,
                 it.train(strategy, **settings)["examples_per_s"]))
  _table(f"Image Transformer (shapes 8x8, batch {args.batch_size}): training images / s",
         rows, baseline=1)


def _table(title, rows, baseline):
  """Prints rows ``(label, replicas, throughput)`` with the efficiency
  against ``rows[baseline]`` scaled by the replica count."""
  print(f"\n## {title}")
  print(f"{'':34s}{'throughput':>12s}{'vs 1 replica':>14s}{'efficiency':>12s}")
  base = rows[baseline][2]
  for label, r, value in rows:
    print(f"{label:34s}{value:12.1f}{value / base:14.2f}{value / (r * base):12.2f}")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--only", choices=["nuts", "vae", "image_transformer"], default=None)
  parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4])
  parser.add_argument("--n", type=int, default=581_012)
  parser.add_argument("--d", type=int, default=54)
  parser.add_argument("--chains", type=int, default=4)
  parser.add_argument("--depth", type=int, default=4, help="NUTS tree depth (full trees)")
  parser.add_argument("--iterations", type=int, default=10, help="NUTS iterations timed")
  parser.add_argument("--epochs", type=int, default=3, help="VAE / Image Transformer epochs")
  parser.add_argument("--batch_size", type=int, default=256)
  parser.add_argument("--images", type=int, default=4096)
  args = parser.parse_args()
  if not tf.config.list_physical_devices("GPU"):
    ed.distribute.logical_cpus(max(args.replicas))
  print(machine.machine_line())
  print(f"# Python {platform.python_version()}; NumPy {np.__version__}; TF {tf.__version__}; "
        f"TFP {tfp.__version__}; devices: "
        f"{', '.join(d.name for d in tf.config.list_logical_devices())}")
  if not tf.config.list_physical_devices("GPU"):
    print("# No GPU: the replicas are logical CPU devices sharing the same cores, so these "
          "numbers measure the overhead of distribution, not speed-up.")
  for name, fn in (("nuts", nuts), ("vae", vae), ("image_transformer", image_transformer)):
    if args.only in (None, name):
      fn(args)


if __name__ == "__main__":
  main()
