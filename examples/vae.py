"""A variational autoencoder as two edward_lite programs, on 1, R or 2+ devices.

The generative program (``decoder_model``) draws a latent code per image and
a binary image from a Keras decoder; the variational program
(``encoder_program``) draws the code from a Keras encoder:

    p(z_i) = N(0, I_L),   p(x_i | z_i) = prod_p Bernoulli(x_ip | logits = f(z_i)_p),
    q(z_i | x_i) = N(mu(x_i), diag sigma(x_i)^2),   z_i = mu(x_i) + sigma(x_i) * eps_i,

with ``eps_i ~ N(0, I_L)`` (reparameterized), images flattened to ``P``
pixels.  The ELBO of a batch of ``B`` images comes from the programs
themselves: ``ed.tape()`` records ``z`` of the variational program, and
``ed.make_log_joint_fn(decoder_model)`` scores ``(z, x)`` under the model:

    ELBO = sum_i [log p(x_i, z_i) - log q(z_i | x_i)]   (one draw per image),

reported per image (in nats).  Adam maximizes it.  Three ways to run a step:

* ``single`` -- one device.
* ``data`` -- data-parallel ``tf.distribute.MirroredStrategy`` over ``R``
  replicas: variables (mirrored) and optimizer are created under
  ``strategy.scope()``; each replica takes ``B / R`` images of the global
  batch, differentiates ``-ELBO_r / B`` (its part of the batch mean), and
  ``apply_gradients`` sums the replicas' gradients by an all-reduce, so the
  update equals the single-device update on the global batch.
* ``model`` -- model-parallel by explicit ``tf.device`` placement: the four
  Dense layers (encoder: hidden, 2L; decoder: hidden, P) are split in order
  into ``len(devices)`` contiguous stages (2 to 4 devices).  With 2 devices
  the encoder's weights and computation live on device 0 and the decoder's on
  device 1, and ``z [B, L]`` crosses between them; with 4 each layer has its
  own device.  Adam's slots are colocated with their weights.

    python examples/vae.py                              # single device, ~10 s on 2 CPU cores
    python examples/vae.py --mode data --replicas 2     # 2 logical CPUs (or GPUs)
    python examples/vae.py --mode model --replicas 2

Without a GPU, ``--replicas`` logical CPU devices are made at start-up.
"""

import argparse
import contextlib
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# edward_lite before TensorFlow: its import keeps TensorFlow's start-up logs quiet.
import edward_lite as ed  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

import image_data  # noqa: E402

__all__ = ["decoder_model", "encoder_program", "encode", "elbo", "make_networks", "make_step",
           "batches", "train", "add_flags", "MODES"]

MODES = ("single", "data", "model")
MIN_SCALE = 1e-4  # floor of the posterior standard deviation sigma(x)


# -- the programs --------------------------------------------------------------
def decoder_model(decoder, n, latent_dim):
  """Generative program: ``z [n, L] ~ N(0, I)``, ``x [n, P] ~ Bernoulli(logits=decoder(z))``."""
  z = ed.Normal(loc=tf.zeros([n, latent_dim]), scale=1., name="z")
  return ed.Bernoulli(logits=decoder(z), dtype=tf.float32, name="x")


def encode(encoder, x):
  """``(mu [B, L], sigma [B, L])`` of q(z | x): the encoder's ``2L`` outputs
  split into a location and a softplus scale (floored at ``MIN_SCALE``)."""
  loc, raw_scale = tf.split(encoder(x), 2, axis=-1)
  return loc, tf.nn.softplus(raw_scale) + MIN_SCALE


def encoder_program(encoder, x, noise):
  """Variational program: ``z [B, L] ~ N(mu(x), sigma(x)^2)`` with the
  reparameterized value ``mu(x) + sigma(x) * noise`` (``noise [B, L]``
  standard normal), so gradients reach the encoder through ``z``."""
  loc, scale = encode(encoder, x)
  return ed.Normal(loc=loc, scale=scale, value=loc + scale * noise, name="z")


def elbo(encoder, decoder, x, noise):
  """Single-draw ELBO of a batch, summed over its images (scalar).

  Args:
    encoder, decoder: the networks (``make_networks``).
    x: ``[B, P]`` float32 binary images.
    noise: ``[B, L]`` standard normal draws (one per image and latent).

  Returns:
    ``sum_i log p(x_i, z_i) - log q(z_i | x_i)`` at ``z = mu + sigma * noise``.
  """
  with ed.tape() as q:
    encoder_program(encoder, x, noise)
  z = q["z"]
  log_p = ed.make_log_joint_fn(decoder_model)(decoder, x.shape[0], z.shape[-1], z=z.value, x=x)
  return log_p - tf.reduce_sum(z.distribution.log_prob(z.value))


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


def make_networks(pixels, latent_dim, hidden, devices=None):
  """Built ``(encoder: [B, P] -> [B, 2L], decoder: [B, L] -> [B, P])``.

  ``devices`` (model-parallel): 2 to 4 device names; the four layers, in
  order encoder then decoder, are split into contiguous stages, stage ``s``
  on ``devices[s]``.  Call under ``strategy.scope()`` for mirrored weights.
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
  encoder(tf.zeros([1, pixels]))
  decoder(tf.zeros([1, latent_dim]))
  return encoder, decoder


# -- training --------------------------------------------------------------------
def make_step(encoder, decoder, optimizer, global_batch, strategy=None, jit_compile=False):
  """One optimizer step on a global batch; ``step(x, noise)`` returns its mean ELBO.

  Each replica (or the one device) differentiates ``-ELBO(its images) /
  global_batch``; under ``strategy`` the inputs are per-replica values
  (``strategy.experimental_distribute_dataset``), ``apply_gradients`` sums
  the replicas' gradients (all-reduce), and the replicas' ELBO parts are
  summed.  Gradients are taken inside the replica function (a GradientTape
  is thread-local).
  """
  variables = encoder.trainable_variables + decoder.trainable_variables

  def replica_step(x, noise):
    with tf.GradientTape() as tape:
      value = elbo(encoder, decoder, x, noise) / global_batch
      loss = -value
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return value

  if strategy is None:
    return tf.function(replica_step, jit_compile=jit_compile)

  @tf.function  # not jit-compiled: XLA around strategy.run fails on mirrored variables
  def step(x, noise):
    return strategy.reduce(tf.distribute.ReduceOp.SUM,
                           strategy.run(replica_step, args=(x, noise)), axis=None)

  return step


def batches(images, batch_size, latent_dim, seed):
  """Endless ``tf.data`` stream of ``(x [B, P], noise [B, L])``: reshuffled
  every epoch, last partial batch dropped, noise stateless in ``(seed, step)``."""

  def with_noise(step, x):
    pair = tf.stack([tf.constant(seed, tf.int64), step])
    return x, tf.random.stateless_normal([batch_size, latent_dim], seed=pair)

  return (tf.data.Dataset.from_tensor_slices(images)
          .shuffle(len(images), seed=seed, reshuffle_each_iteration=True)
          .batch(batch_size, drop_remainder=True)
          .repeat()
          .enumerate()
          .map(with_noise))


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
          learning_rate=3e-3, verbose=True):
  """Trains the VAE; returns a dict of what happened.

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
    verbose: print the ELBO per epoch.

  Returns:
    ``dict(elbo_per_epoch=[train mean ELBO per epoch], test_elbo=held-out
    ELBO per image, examples_per_s=training throughput after the first
    (tracing) epoch, pngs=[paths])``.
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

  tf_keras.utils.set_random_seed(seed)
  with strategy.scope() if mode == "data" else contextlib.nullcontext():
    encoder, decoder = make_networks(images.shape[1], latent_dim, hidden,
                                     devices if mode == "model" else None)
    optimizer = tf_keras.optimizers.Adam(learning_rate)
  step = make_step(encoder, decoder, optimizer, batch_size, strategy if mode == "data" else None,
                   jit_compile=mode == "single")
  data = batches(images, batch_size, latent_dim, seed)
  stream = iter(strategy.experimental_distribute_dataset(data) if mode == "data" else data)

  history, times = [], []
  for epoch in range(epochs):
    start = time.perf_counter()
    total = sum(step(*next(stream)) for _ in range(steps))
    history.append(float(total) / steps)
    times.append(time.perf_counter() - start)
    if verbose:
      print(f"epoch {epoch + 1:3d}  train ELBO {history[-1]:9.3f} nats/image  "
            f"({times[-1]:.2f} s)")
  timed = times[1:] or times
  noise = tf.random.stateless_normal([len(test_images), latent_dim], seed=[seed, -1])
  test_elbo = float(elbo(encoder, decoder, tf.constant(test_images), noise)) / len(test_images)
  result = dict(elbo_per_epoch=history, test_elbo=test_elbo,
                examples_per_s=len(timed) * steps * batch_size / sum(timed), pngs=[])
  if out:
    result["pngs"] = write_pngs(out, encoder, decoder, test_images, image_shape, latent_dim, seed)
  if verbose:
    print(f"held-out ELBO {test_elbo:.3f} nats/image; {result['examples_per_s']:.0f} "
          f"images/s ({mode})")
    if result["pngs"]:
      print("saved reconstructions and samples to " + " and ".join(result["pngs"]))
  return result


def write_pngs(out, encoder, decoder, test_images, image_shape, latent_dim, seed, n=16):
  """Writes ``reconstructions.png`` (rows of 8 held-out images, labelled
  "data", each followed by a row of their decoded means E[x | z], z from q,
  labelled "reconstruction") and ``samples.png`` (decoded means of
  ``z ~ p(z)``), titled figures 800 pixels wide; returns the paths."""
  os.makedirs(out, exist_ok=True)
  originals = test_images[:n]
  z = encoder_program(encoder, originals,
                      tf.random.stateless_normal([n, latent_dim], seed=[seed, -2]))
  with ed.condition(z=z.value):
    recon = decoder_model(decoder, n, latent_dim).distribution.probs_parameter().numpy()
  with ed.condition(z=tf.random.stateless_normal([n, latent_dim], seed=[seed, -3])):
    samples = decoder_model(decoder, n, latent_dim).distribution.probs_parameter().numpy()
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
  return p


def main():
  p = add_flags(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
  p.add_argument("--replicas", type=int, default=2, help="devices for --mode data/model")
  args = p.parse_args()
  if not tf.config.list_physical_devices("GPU"):
    ed.distribute.logical_cpus(max(args.replicas, 1))
  train(args.mode, args.epochs, args.batch_size, args.latent_dim, args.hidden, args.dataset,
        args.n_images, args.replicas, out=args.out, seed=args.seed)


if __name__ == "__main__":
  main()
