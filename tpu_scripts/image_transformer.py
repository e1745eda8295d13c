"""Data-parallel Image Transformer on a Cloud TPU, a multi-GPU host, or CPUs.

Trains ``examples/image_transformer.py``'s autoregressive image model, whose
likelihood is an edward_lite program, under the strategy the shared flags ask
for: the global batch ``--batch_size`` is split over the replicas (TPU cores,
GPUs, or ``--replicas`` logical CPU devices with ``--strategy cpu``) and the
gradients are all-reduced.  Prints training bits/dim per epoch, held-out
bits/dim and throughput, and writes a PNG grid of samples to ``--out``.

    python tpu_scripts/image_transformer.py --strategy tpu --tpu local \\
        --batch_size 1024 --epochs 20 --layers 4 --dim 256 --heads 8
    python tpu_scripts/image_transformer.py --strategy mirrored    # every GPU
    python tpu_scripts/image_transformer.py --strategy cpu --replicas 2 --epochs 1
"""

import os
import sys

# First on the path, so that ``image_transformer`` is the example, not this script.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import launch  # noqa: E402  (puts the repository root on the path)
import image_transformer  # noqa: E402


def main(argv=None):
  args = image_transformer.add_flags(launch.parser(__doc__.splitlines()[0])).parse_args(argv)
  result = image_transformer.train_from_flags(launch.make_strategy(args), args)
  print(f"final: train {result['bits_per_dim'][-1]:.4f} bits/dim, held-out "
        f"{result['test_bits_per_dim']:.4f} bits/dim, {result['examples_per_s']:.0f} examples/s")


if __name__ == "__main__":
  main()
