"""A VAE on handwritten digits as a paper reports it: trained by the ELBO or
the IWAE bound with early stopping on a validation split, evaluated by the
importance-sampled test log-likelihood (K = 1000) with its Monte Carlo
error, and sampled from.

The programs (``p`` the model, ``q`` the guide; 8x8 binary images, ``P = 64``):

    p(z_i) = N(0, I_8),   p(x_i | z_i) = prod_p Bernoulli(x_ip | logits = f(z_i)_p),
    q(z_i | x_i) = N(mu(x_i), diag sigma(x_i)^2),

``f``, ``mu``, ``sigma`` one-hidden-layer networks (128 tanh units).  With
``--objective iwae --samples K`` each step maximizes the K-draw
importance-weighted bound (Burda et al. 2016) with the doubly
reparameterized gradient for the encoder (Tucker et al. 2019); the default
is the one-draw ELBO.  Data: scikit-learn's 1,797 digits (binarized at half
their 17 gray levels; a 1,297 / 250 / 250 train / validation / test split)
when scikit-learn is installed, else the generated shapes of
``image_data.py`` (a stand-in that needs no download).

    python examples/digits_vae.py                              # ELBO, ~1 min on 2 CPU cores
    python examples/digits_vae.py --objective iwae --samples 5
    python examples/digits_vae.py --out samples                # a PNG grid of samples
"""

import argparse
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

__all__ = ["splits", "make_programs", "fit"]

LATENT, HIDDEN, PIXELS = 8, 128, 64


def splits(seed=0):
  """``(train, valid, test)`` float32 ``[n, 64]`` binary images and the
  data's name: the digits if scikit-learn is installed, else shapes."""
  try:
    images, name = image_data.load("digits", n=1797, seed=seed), "digits"
  except ImportError:
    images, name = image_data.load("shapes", n=1797, seed=seed), "shapes (no scikit-learn)"
  flat = images.reshape(len(images), -1).astype(np.float32)
  return flat[:1297], flat[1297:1547], flat[1547:], name


def make_programs():
  """``(model, guide, decoder)``: the programs of a batch ``x [B, 64]``."""
  decoder = tf_keras.Sequential([tf_keras.layers.Dense(HIDDEN, "tanh"),
                                 tf_keras.layers.Dense(PIXELS)])
  encoder = tf_keras.Sequential([tf_keras.layers.Dense(HIDDEN, "tanh"),
                                 tf_keras.layers.Dense(2 * LATENT)])

  def model(x):
    z = ed.Normal(tf.zeros([tf.shape(x)[0], LATENT]), 1., name="z")
    return ed.Bernoulli(logits=decoder(z), dtype=tf.float32, name="x")

  def guide(x):
    loc, raw_scale = tf.split(encoder(x), 2, axis=-1)
    return ed.Normal(loc, tf.nn.softplus(raw_scale) + 1e-4, name="z")

  return model, guide, decoder


def batches(x, batch_size=None, seed=0):
  data = tf.data.Dataset.from_tensor_slices({"x": x})
  if batch_size is None:  # evaluation: one pass, in order
    return data.batch(250)
  return data.shuffle(len(x), seed=seed).batch(batch_size)


def fit(objective=None, epochs=300, patience=10, seed=0, test_samples=1000, verbose=True,
        **train_kwargs):
  """Trains with early stopping on the validation objective; returns a dict:
  ``result`` (the ``TrainResult``), ``test`` (``log_likelihood`` of the test
  split: log-likelihood, mcse, bits/dim), ``test_elbo``, ``model``,
  ``decoder``, ``data`` (its name)."""
  train, valid, test, name = splits()  # one split; seed= seeds the training
  model, guide, decoder = make_programs()
  steps_per_epoch = -(-len(train) // 64)
  result = ed.vi.train(model, guide, batches(train, 64, seed), epochs=epochs, seed=seed,
                       objective=objective, evaluate=batches(valid), eval_every=steps_per_epoch,
                       early_stopping=ed.vi.EarlyStopping(patience=patience),
                       progress=verbose, **train_kwargs)
  held_out = result.log_likelihood(batches(test), samples=test_samples, seed=seed)
  return dict(result=result, test=held_out, test_elbo=result.elbo(batches(test))["elbo"],
              model=model, decoder=decoder, data=name)


def sample(model, n, seed=0):
  """``n`` images drawn from the trained model: the program run forward
  (nothing conditioned), its ``x``'s Bernoulli means and draws."""
  tf.random.set_seed(seed)
  with ed.tape() as rvs:
    model(x=tf.zeros([n, PIXELS]))  # x gives the batch size; z and x are drawn
  x = rvs["x"]
  return x.distribution.mean().numpy(), x.value.numpy()


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--objective", choices=["elbo", "iwae"], default="elbo")
  parser.add_argument("--samples", type=int, default=None,
                      help="draws K per example (default 1 for the ELBO, 5 for IWAE)")
  parser.add_argument("--epochs", type=int, default=300, help="at most; early stopping ends it")
  parser.add_argument("--patience", type=int, default=10, help="epochs without improvement")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--out", default=None, help="directory for a PNG grid of samples")
  args = parser.parse_args(argv)
  objective = (ed.vi.IWAE(samples=args.samples or 5) if args.objective == "iwae"
               else ed.vi.ELBO(samples=args.samples or 1))
  out = fit(objective, args.epochs, args.patience, args.seed)
  result, test = out["result"], out["test"]
  steps_per_epoch = -(-1297 // 64)
  print(f"data: {out['data']}; objective: {objective}")
  print(f"trained {result.steps} steps ({result.steps // steps_per_epoch} epochs); "
        f"{(result.stopped or {}).get('reason', 'ran its length')}; best validation "
        f"{result.best}")
  print(f"test ELBO {out['test_elbo']:.3f} nats; test log-likelihood (K = {test['samples']}) "
        f"{test['log_likelihood']:.3f} +- {test['mcse']:.3f} nats "
        f"({test['bits_per_dim']:.4f} bits/dim)")
  if args.out:
    means, _ = sample(out["model"], 32, args.seed)
    os.makedirs(args.out, exist_ok=True)
    path = image_data.write_grid(os.path.join(args.out, "digits_vae_samples.png"),
                                 means.reshape(-1, 8, 8), title="samples (Bernoulli means)")
    print(f"samples: {path}")


if __name__ == "__main__":
  main()
