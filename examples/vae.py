"""A variational autoencoder as two edward_lite programs, trained by
``ed.vi.train`` on 1, R or 2+ devices.

The generative program (``make_programs``' ``model``) draws a latent code
per image and a binary image from a Keras decoder; the variational program
(``guide``) draws the code from a Keras encoder:

    p(z_i) = N(0, I_L),   p(x_i | z_i) = prod_p Bernoulli(x_ip | logits = f(z_i)_p),
    q(z_i | x_i) = N(mu(x_i), diag sigma(x_i)^2),

images flattened to ``P`` pixels.  ``ed.vi.train`` maximizes the ELBO per
image,

    ELBO = (1/B) sum_i [log p(x_i | z_i) + log p(z_i) - log q(z_i | x_i)],

with one reparameterized draw ``z_i = mu(x_i) + sigma(x_i) * eps_i`` per
image, the noise ``eps_i`` stateless in the seed, the step and the image's
place in the batch; Adam updates encoder and decoder together.  Three ways
to run it:

* ``single`` -- one device.
* ``data`` -- data-parallel ``tf.distribute.MirroredStrategy`` over ``R``
  replicas: ``ed.vi.train`` builds the networks and the optimizer under
  ``strategy.scope()``, each replica takes ``B / R`` images of the global
  batch (with their noise) and the gradients are summed by an all-reduce, so
  the update equals the single-device update on the global batch.
* ``model`` -- model-parallel by explicit ``tf.device`` placement: the four
  Dense layers (encoder: hidden, 2L; decoder: hidden, P) are split in order
  into ``len(devices)`` contiguous stages (2 to 4 devices).  With 2 devices
  the encoder's weights and computation live on device 0 and the decoder's on
  device 1, and ``z [B, L]`` crosses between them; with 4 each layer has its
  own device.  Adam's slots are colocated with their weights.

No mode is XLA-compiled (``jit_compile=False``): on CPU these small Dense
layers ran faster through TensorFlow's own kernels than through XLA, and in
model-parallel mode XLA would put the whole step on one device.

    python examples/vae.py                              # single device, ~15 s on 2 CPU cores
    python examples/vae.py --mode data --replicas 2     # 2 logical CPUs (or GPUs)
    python examples/vae.py --mode model --replicas 2
    python examples/vae.py --checkpoint_dir ckpt --tensorboard_dir tb   # resumable, logged

Without a GPU, ``--replicas`` logical CPU devices are made at start-up.
"""

import argparse
import contextlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# edward_lite before TensorFlow: its import keeps TensorFlow's start-up logs quiet.
import edward_lite as ed  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

import image_data  # noqa: E402

__all__ = ["make_programs", "encode", "make_networks", "train", "add_flags", "MODES"]

MODES = ("single", "data", "model")
MIN_SCALE = 1e-4  # floor of the posterior standard deviation sigma(x)


# -- the programs --------------------------------------------------------------
def encode(encoder, x):
  """``(mu [B, L], sigma [B, L])`` of q(z | x): the encoder's ``2L`` outputs
  split into a location and a softplus scale (floored at ``MIN_SCALE``)."""
  loc, raw_scale = tf.split(encoder(x), 2, axis=-1)
  return loc, tf.nn.softplus(raw_scale) + MIN_SCALE


def make_programs(encoder, decoder, latent_dim):
  """``(model, guide)``, each a program of a batch ``x [B, P]``:

  * ``model(x)``: ``z [B, L] ~ N(0, I)``, ``x [B, P] ~ Bernoulli(logits=decoder(z))``
    (``x`` gives the batch size; the dataset's ``x`` is also the observed value);
  * ``guide(x)``: ``z [B, L] ~ N(mu(x), sigma(x)^2)``.
  """

  def model(x):
    z = ed.Normal(loc=tf.zeros([tf.shape(x)[0], latent_dim]), scale=1., name="z")
    return ed.Bernoulli(logits=decoder(z), dtype=tf.float32, name="x")

  def guide(x):
    loc, scale = encode(encoder, x)
    return ed.Normal(loc=loc, scale=scale, name="z")

  return model, guide


# -- the networks --------------------------------------------------------------
class PlacedMLP(tf_keras.Model):
  """Dense layers (ReLU between them); layer ``k`` keeps its weights and runs
  on ``devices[k]`` (``None``: wherever the caller's scope places it)."""

  def __init__(self, units, devices, name):
    super().__init__(name=name)
    self.dense = [tf_keras.layers.Dense(u, activation="relu" if k + 1 < len(units) else None)
                  for k, u in enumerate(units)]
    self.placement = list(devices)

  def call(self, h):
    for layer, device in zip(self.dense, self.placement):
      with tf.device(device) if device else contextlib.nullcontext():
        h = layer(h)
    return h


def make_networks(pixels, latent_dim, hidden, devices=None, build=True):
  """``(encoder: [B, P] -> [B, 2L], decoder: [B, L] -> [B, P])``.

  ``devices`` (model-parallel): 2 to 4 device names; the four layers, in
  order encoder then decoder, are split into contiguous stages, stage ``s``
  on ``devices[s]``.  ``build=False`` leaves the weights to be created at
  the first call (by ``ed.vi.train``: seeded, and under its strategy's scope).
  """
  if devices is None:
    stages = [None] * 4
  elif 2 <= len(devices) <= 4:
    stages = [devices[k * len(devices) // 4] for k in range(4)]
  else:
    raise ValueError(f"Model-parallel mode splits 4 layers over 2 to 4 devices "
                     f"(--replicas); got {len(devices)}: {list(devices)}.")
  encoder = PlacedMLP([hidden, 2 * latent_dim], stages[:2], name="encoder")
  decoder = PlacedMLP([hidden, pixels], stages[2:], name="decoder")
  if build:
    encoder(tf.zeros([1, pixels]))
    decoder(tf.zeros([1, latent_dim]))
  return encoder, decoder


# -- training --------------------------------------------------------------------
def _devices(replicas):
  """The first ``replicas`` GPUs of this host, or else its logical CPUs."""
  found = [d.name for d in (tf.config.list_logical_devices("GPU") or
                            tf.config.list_logical_devices("CPU"))]
  if len(found) < replicas:
    raise ValueError(f"--replicas {replicas} needs {replicas} devices; this process has "
                     f"{len(found)} ({found}); call ed.distribute.logical_cpus({replicas}) "
                     "before TensorFlow initializes.")
  return found[:replicas]


def _flat_images(name, n, seed, split):
  images = image_data.load(name, n=n, seed=seed, split=split)
  return images.reshape(len(images), -1).astype(np.float32), images.shape[1:]


def train(mode="single", epochs=60, batch_size=64, latent_dim=8, hidden=128, dataset="shapes",
          n_images=4096, replicas=2, strategy=None, devices=None, out=None, seed=0,
          learning_rate=3e-3, verbose=True, checkpoint_dir=None, tensorboard_dir=None):
  """Trains the VAE with ``ed.vi.train``; returns a dict of what happened.

  Args:
    mode: ``"single"``, ``"data"`` (MirroredStrategy) or ``"model"``
      (layers placed on devices); see the module docstring.
    epochs, batch_size: passes over the ``n_images`` training images, global
      batch size (data-parallel: divisible by the number of replicas).
    latent_dim, hidden: ``L`` and the hidden width of both networks.
    dataset: ``image_data.load`` name (``"shapes"``, or a tfds name).
    replicas: devices for ``data``/``model`` when ``strategy``/``devices`` are
      not given (GPUs, else logical CPUs).
    strategy: data-parallel ``tf.distribute.Strategy``.
    devices: model-parallel device names.
    out: directory for the PNGs (none written when None).
    seed: seeds initial weights, shuffling and every noise draw.
    learning_rate: Adam's.
    verbose: progress lines and a summary.
    checkpoint_dir, tensorboard_dir: as ``ed.vi.train``'s (resumable run,
      TensorBoard scalars).

  Returns:
    ``dict(elbo_per_epoch=[train mean ELBO per epoch], test_elbo=held-out
    ELBO per image, test_elbo_per_epoch=[...], examples_per_s=training
    throughput after the first (compiling) call, result=the TrainResult,
    networks=(encoder, decoder), pngs=[paths])``.
  """
  if mode not in MODES:
    raise ValueError(f"--mode must be one of {list(MODES)}; got {mode!r}.")
  if mode == "data":
    strategy = strategy or ed.distribute.strategy("mirrored", devices=_devices(replicas))
    if batch_size % strategy.num_replicas_in_sync:
      raise ValueError(f"--batch_size {batch_size} (the global batch) must be divisible by the "
                       f"{strategy.num_replicas_in_sync} replicas.")
  if mode == "model":
    devices = devices or _devices(replicas)
  images, image_shape = _flat_images(dataset, n_images, seed, "train")
  test_images, _ = _flat_images(dataset, max(n_images // 4, 16), seed + 1, "test")
  steps = len(images) // batch_size
  if steps == 0:
    raise ValueError(f"--batch_size {batch_size} is larger than the {len(images)} images.")

  encoder, decoder = make_networks(images.shape[1], latent_dim, hidden,
                                   devices if mode == "model" else None, build=False)
  model, guide = make_programs(encoder, decoder, latent_dim)
  train_data = (tf.data.Dataset.from_tensor_slices({"x": images})
                .shuffle(len(images), seed=seed).batch(batch_size, drop_remainder=True))
  test_data = tf.data.Dataset.from_tensor_slices({"x": test_images}).batch(256)
  result = ed.vi.train(model, guide, train_data, epochs=epochs, learning_rate=learning_rate,
                       strategy=strategy if mode == "data" else None, seed=seed,
                       evaluate=test_data, eval_every=steps, progress=verbose,
                       steps_per_call=steps, jit_compile=False,
                       checkpoint_dir=checkpoint_dir, tensorboard_dir=tensorboard_dir)
  history = result.history["elbo"].reshape(-1, steps).mean(axis=1).tolist()
  test_history = [e["elbo"] for e in result.evaluations]
  output = dict(elbo_per_epoch=history, test_elbo=test_history[-1],
                test_elbo_per_epoch=test_history, result=result, networks=(encoder, decoder),
                examples_per_s=result.timings.get("steps_per_s", 0.) * batch_size, pngs=[])
  if out:
    output["pngs"] = write_pngs(out, encoder, decoder, test_images, image_shape, latent_dim,
                                seed)
  if verbose:
    for epoch, (train_elbo, test_elbo) in enumerate(zip(history, test_history)):
      print(f"epoch {epoch + 1:3d}  train ELBO {train_elbo:9.3f}  held-out {test_elbo:9.3f} "
            "nats/image")
    print(f"held-out ELBO {output['test_elbo']:.3f} nats/image; "
          f"{output['examples_per_s']:.0f} images/s ({mode}); compile and first epoch "
          f"{result.timings.get('compile_s', 0.):.1f} s")
    if output["pngs"]:
      print("saved reconstructions and samples to " + " and ".join(output["pngs"]))
  return output


def write_pngs(out, encoder, decoder, test_images, image_shape, latent_dim, seed, n=16):
  """Writes ``reconstructions.png`` (rows of 8 held-out images, labelled
  "data", each followed by a row of their decoded means E[x | z], z from q,
  labelled "reconstruction") and ``samples.png`` (decoded means of
  ``z ~ p(z)``), titled figures 800 pixels wide; returns the paths."""
  os.makedirs(out, exist_ok=True)
  originals = test_images[:n]
  model, _ = make_programs(encoder, decoder, latent_dim)
  loc, scale = encode(encoder, originals)
  z = loc + scale * tf.random.stateless_normal([n, latent_dim], seed=[seed, -2])
  with ed.condition(z=z):
    recon = model(originals).distribution.probs_parameter().numpy()
  with ed.condition(z=tf.random.stateless_normal([n, latent_dim], seed=[seed, -3])):
    samples = model(originals).distribution.probs_parameter().numpy()
  rows = [block[k:k + 8] for k in range(0, n, 8) for block in (originals, recon)]
  shape = [-1] + list(image_shape)
  return [image_data.write_grid(os.path.join(out, "reconstructions.png"),
                                np.concatenate(rows).reshape(shape),
                                labels=["data", "reconstruction"],
                                title="VAE: held-out images and their reconstructions "
                                      "E[x | z], z ~ q(z | x)"),
          image_data.write_grid(os.path.join(out, "samples.png"), samples.reshape(shape),
                                labels="samples",
                                title="VAE: samples, E[x | z] of z ~ p(z)")]


def add_flags(p, mode="single", epochs=60, batch_size=64, hidden=128, n_images=4096,
              out="out/vae"):
  """Adds the flags of ``train`` to parser ``p`` (defaults differ between the
  example and the launch script)."""
  p.add_argument("--mode", default=mode, choices=MODES)
  p.add_argument("--epochs", type=int, default=epochs)
  p.add_argument("--batch_size", type=int, default=batch_size, help="global batch size")
  p.add_argument("--latent_dim", type=int, default=8)
  p.add_argument("--hidden", type=int, default=hidden)
  p.add_argument("--dataset", default="shapes", help="shapes, binarized_mnist or mnist (tfds)")
  p.add_argument("--n_images", type=int, default=n_images)
  p.add_argument("--out", default=out, help="directory for the PNGs")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--checkpoint_dir", default=None, help="resume from / save to this directory")
  p.add_argument("--tensorboard_dir", default=None, help="write TensorBoard scalars here")
  return p


def main():
  p = add_flags(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
  p.add_argument("--replicas", type=int, default=2, help="devices for --mode data/model")
  args = p.parse_args()
  if not tf.config.list_physical_devices("GPU"):
    ed.distribute.logical_cpus(max(args.replicas, 1))
  train(args.mode, args.epochs, args.batch_size, args.latent_dim, args.hidden, args.dataset,
        args.n_images, args.replicas, out=args.out, seed=args.seed,
        checkpoint_dir=args.checkpoint_dir, tensorboard_dir=args.tensorboard_dir)


if __name__ == "__main__":
  main()
