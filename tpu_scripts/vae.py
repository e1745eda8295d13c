"""Launch the VAE of ``examples/vae.py`` model- or data-parallel on a TPU/GPU host.

``--mode model`` (default) places the encoder's and decoder's layers on the
devices of the strategy's replicas (``strategy.extended.worker_devices``: TPU
cores, GPUs or logical CPUs; 2 to 4 of them) by ``tf.device``;
``--mode data`` runs the data-parallel ``MirroredStrategy``/``TPUStrategy``
step with ``--batch_size`` as the global batch.

    python tpu_scripts/vae.py --strategy tpu --tpu local --mode model
    python tpu_scripts/vae.py --strategy mirrored --mode data --batch_size 256
    python tpu_scripts/vae.py --strategy cpu --replicas 2 --epochs 2   # CPU fallback
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import launch  # noqa: E402  (puts the repository root on sys.path)
import vae  # noqa: E402


def main(argv=None):
  p = launch.parser(__doc__.splitlines()[0])
  p.add_argument("--mode", default="model", choices=["model", "data"])
  p.add_argument("--epochs", type=int, default=10)
  p.add_argument("--batch_size", type=int, default=128, help="global batch size")
  p.add_argument("--latent_dim", type=int, default=8)
  p.add_argument("--hidden", type=int, default=256)
  p.add_argument("--dataset", default="shapes", help="shapes, binarized_mnist or mnist (tfds)")
  p.add_argument("--n_images", type=int, default=8192)
  p.add_argument("--out", default=None, help="directory for the PNGs")
  p.add_argument("--seed", type=int, default=0)
  args = p.parse_args(argv)
  strategy = launch.make_strategy(args)
  placement = dict(strategy=strategy) if args.mode == "data" else dict(
      devices=list(strategy.extended.worker_devices))
  vae.train(args.mode, args.epochs, args.batch_size, args.latent_dim, args.hidden, args.dataset,
            args.n_images, out=args.out, seed=args.seed, **placement)


if __name__ == "__main__":
  main()
