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
  p = vae.add_flags(launch.parser(__doc__.splitlines()[0]), mode="model", epochs=10,
                    batch_size=128, hidden=256, n_images=8192, out=None)
  args = p.parse_args(argv)
  strategy = launch.make_strategy(args)
  placement = dict(strategy=strategy) if args.mode == "data" else dict(
      devices=list(strategy.extended.worker_devices))
  vae.train(args.mode, args.epochs, args.batch_size, args.latent_dim, args.hidden, args.dataset,
            args.n_images, out=args.out, seed=args.seed, **placement)


if __name__ == "__main__":
  main()
