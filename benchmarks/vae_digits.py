"""The digits VAE: ``ed.vi.train`` against the best hand-written TensorFlow
loop, and its objectives against each other (issue 55, item 7).

Model and data are ``examples/digits_vae.py``'s (scikit-learn's 1,797
binarized 8x8 digits, 1,297 / 250 / 250 split; latent 8, 128 tanh units,
Adam 1e-3, batch 64; needs scikit-learn, else it runs on the generated
shapes and says so).

1. **Step time** (``--part time``): ``ed.vi.train`` (one-draw ELBO, 50 steps
   per call, no evaluation, with and without XLA) against a hand-written
   loop: the same networks and ELBO written with TFP directly, ``n`` steps
   per ``tf.function`` call reading a repeated ``tf.data`` iterator inside
   it (``--hand-steps``, default 22), Adam from ``tf_keras``.  Alternated
   rounds in this process (ed, hand, ed, hand, ...), each ``--steps`` long;
   the first call of each (its compile) is left out of its rate.  Printed:
   ms per step per round and the ratio ed / hand per round (lower is better).
2. **Quality** (``--part quality``): each objective trained with early
   stopping on the validation objective (patience 10 epochs, at most 300),
   for ``--seeds`` seeds; the test split's importance-sampled log-likelihood
   at K = 1000 (``TrainResult.log_likelihood``, with its MCSE), test ELBO,
   epochs, seconds.  Objectives: the ELBO, IWAE K = 5 (doubly
   reparameterized and reparameterized), IWAE K = 50 (both), and the
   hand-written loop's ELBO (its own training, evaluated by the library's
   estimator on the same networks).
3. **Autoregressive** (``--part autoregressive``): ``examples/
   image_transformer.py``'s Image Transformer (2 layers, dim 64, 4 heads) on
   the same binarized digits, trained by ``ed.vi.train`` (``guide=None``: its
   objective is log p(x)) with and without XLA, and by a hand-written loop
   of the same network and log-likelihood (``--hand-steps`` steps per
   ``tf.function`` call, XLA as ed's).  ``--ar-epochs`` epochs, Adam 3e-3,
   batch 64; alternated rounds.  Printed: the first call's seconds (trace and
   compile, ``--ar-steps-per-call`` steps), ms per step after it, and the
   test split's bits/dim (``TrainResult.log_likelihood``: exact, the model
   has no latents; the hand loop's by the example's ``evaluate``).

    python benchmarks/vae_digits.py                    # every part, ~30 min on 2 cores
    python benchmarks/vae_digits.py --part time --rounds 3
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import edward_lite as ed  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
import tf_keras  # noqa: E402

import digits_vae  # noqa: E402
import image_transformer as it  # noqa: E402
import machine  # noqa: E402

tfd = tfp.distributions


def hand_written(train, steps, steps_per_call, seed):
  """Trains the VAE by a hand-written loop; returns ``(decoder, encoder,
  ms per step after the first call)``."""
  tf_keras.utils.set_random_seed(seed)
  decoder = tf_keras.Sequential([tf_keras.layers.Dense(128, "tanh"), tf_keras.layers.Dense(64)])
  encoder = tf_keras.Sequential([tf_keras.layers.Dense(128, "tanh"), tf_keras.layers.Dense(16)])
  decoder(tf.zeros([1, 8]))
  encoder(tf.zeros([1, 64]))
  optimizer = tf_keras.optimizers.Adam(1e-3)
  variables = decoder.trainable_variables + encoder.trainable_variables
  optimizer.build(variables)
  data = tf.data.Dataset.from_tensor_slices(train).shuffle(len(train), seed=seed).batch(64)
  iterator = iter(data.repeat())

  @tf.function
  def run(n):
    total = tf.constant(0.)
    for _ in tf.range(n):
      x = next(iterator)
      with tf.GradientTape() as tape:
        loc, raw = tf.split(encoder(x), 2, axis=-1)
        q = tfd.Normal(loc, tf.nn.softplus(raw) + 1e-4)
        z = q.sample()
        elbo = (tf.reduce_sum(tfd.Bernoulli(logits=decoder(z)).log_prob(x), -1)
                + tf.reduce_sum(tfd.Normal(0., 1.).log_prob(z), -1)
                - tf.reduce_sum(q.log_prob(z), -1))
        loss = -tf.reduce_mean(elbo)
      optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
      total += loss
    return total

  return decoder, encoder, _timed(run, steps, steps_per_call)[1]


def ed_step_ms(train, steps, jit, seed):
  model, guide, _ = digits_vae.make_programs()
  result = ed.vi.train(model, guide, digits_vae.batches(train, 64, seed), steps=steps,
                       seed=seed, progress=False, jit_compile=jit, steps_per_call=50)
  return 1e3 / result.timings["steps_per_s"]


def part_time(args, train):
  print("## step time (ms per step after the first call; alternated rounds)")
  print("round  ed (no XLA)  ed (XLA)  hand-written  ratio no-XLA/hand  ratio XLA/hand")
  for r in range(args.rounds):
    plain = ed_step_ms(train, args.steps, False, r)
    hand = hand_written(train, args.steps, args.hand_steps, r)[2]
    xla = ed_step_ms(train, args.steps, True, r)
    print(f"{r:5d}  {plain:11.3f}  {xla:8.3f}  {hand:12.3f}  {plain / hand:17.2f}  "
          f"{xla / hand:14.2f}", flush=True)


OBJECTIVES = {
    "elbo": lambda: ed.vi.ELBO(),
    "iwae5": lambda: ed.vi.IWAE(samples=5),
    "iwae5-reparam": lambda: ed.vi.IWAE(samples=5, gradient="reparameterized"),
    "iwae50": lambda: ed.vi.IWAE(samples=50),
    "iwae50-reparam": lambda: ed.vi.IWAE(samples=50, gradient="reparameterized"),
}


def part_quality(args, splits):
  train, _, test, _ = splits
  print("## quality: early stopping on the validation objective (patience 10 epochs); "
        "test log-likelihood at K = 1000")
  print("objective        seed  epochs  seconds  test ELBO  test log p(x)   mcse  bits/dim")
  for name in args.objectives:
    for seed in range(args.seeds):
      began = time.perf_counter()
      if name == "hand":
        decoder, encoder, _ = hand_written(train, args.hand_train_steps, args.hand_steps, seed)
        model, guide = _programs(decoder, encoder)
        result = ed.vi.train(model, guide, digits_vae.batches(train, 64, seed), steps=1,
                             optimizer=tf_keras.optimizers.SGD(0.), progress=False,
                             jit_compile=False)
        seconds, epochs = time.perf_counter() - began, args.hand_train_steps // 21
        test_elbo = result.elbo(digits_vae.batches(test))["elbo"]
        held = result.log_likelihood(digits_vae.batches(test), samples=1000, seed=seed)
      else:
        out = digits_vae.fit(OBJECTIVES[name](), seed=seed, verbose=False, jit_compile=False)
        seconds, epochs = time.perf_counter() - began, out["result"].steps // 21
        test_elbo, held = out["test_elbo"], out["test"]
      print(f"{name:15s}  {seed:4d}  {epochs:6d}  {seconds:7.1f}  {test_elbo:9.3f}  "
            f"{held['log_likelihood']:13.3f}  {held['mcse']:5.3f}  {held['bits_per_dim']:8.4f}",
            flush=True)


def _ar_network():
  """The Image Transformer of 64 binary pixels (unbuilt: ed.vi.train builds it seeded)."""
  return it.ImageTransformer(64, 2, dim=64, layers=2, heads=4)


def _timed(run, steps, per_call):
  """``(first call s, ms per step after it)`` of ``steps`` steps by ``run(n)``."""
  began = time.perf_counter()
  run(tf.constant(per_call)).numpy()
  first = time.perf_counter() - began
  began, done = time.perf_counter(), per_call
  while done < steps:
    run(tf.constant(min(per_call, steps - done))).numpy()
    done += per_call
  timed = steps - per_call  # (none: NaN)
  return first, 1e3 * (time.perf_counter() - began) / timed if timed > 0 else float("nan")


def _pixels(x):
  return np.rint(x).astype(np.int32)


def ed_autoregressive(train, test, epochs, per_call, jit, seed):
  """``(first call s, ms per step after it, test bits/dim)`` of ``ed.vi.train``."""
  network = _ar_network()
  data = tf.data.Dataset.from_tensor_slices({"image": _pixels(train)}).shuffle(
      len(train), seed=seed).batch(64, drop_remainder=True)
  result = ed.vi.train(lambda image: it.image_transformer(network, image), None, data,
                       epochs=epochs, learning_rate=3e-3, seed=seed, progress=False,
                       jit_compile=jit, steps_per_call=per_call)
  held = result.log_likelihood(
      tf.data.Dataset.from_tensor_slices({"image": _pixels(test)}).batch(250), samples=1)
  return (result.timings["compile_s"], 1e3 / result.timings["steps_per_s"],
          held["bits_per_dim"])


def hand_autoregressive(train, test, epochs, per_call, jit, seed):
  """The same, by a hand-written loop of ``per_call`` steps per call."""
  tf_keras.utils.set_random_seed(seed)
  network = _ar_network()
  network(tf.zeros([1, 64], tf.int32))
  optimizer = tf_keras.optimizers.Adam(3e-3)
  variables = network.trainable_variables
  optimizer.build(variables)
  data = tf.data.Dataset.from_tensor_slices(_pixels(train)).shuffle(
      len(train), seed=seed).batch(64, drop_remainder=True)
  steps = epochs * (len(train) // 64)
  iterator = iter(data.repeat())

  @tf.function(jit_compile=jit)
  def step(x):
    with tf.GradientTape() as tape:
      loss = -tf.reduce_mean(tf.reduce_sum(
          tfd.Categorical(logits=it.pixel_logits(network, x)).log_prob(x), -1))
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  @tf.function
  def run(n):
    total = tf.constant(0.)
    for _ in tf.range(n):
      total += step(next(iterator))
    return total

  first, ms = _timed(run, steps, per_call)
  return first, ms, it.evaluate(network, _pixels(test), 250)


def part_autoregressive(args, splits):
  train, _, test, _ = splits
  print(f"## autoregressive: Image Transformer, {args.ar_epochs} epochs, batch 64, "
        f"{args.ar_steps_per_call} steps per call; test bits/dim (uniform 1.0)")
  print("round  trainer           first call s  ms/step  test bits/dim")
  for r in range(args.rounds):
    for name, fn, jit in (("ed (XLA)", ed_autoregressive, True),
                          ("hand (XLA)", hand_autoregressive, True),
                          ("ed (no XLA)", ed_autoregressive, False),
                          ("hand (no XLA)", hand_autoregressive, False)):
      first, ms, bits = fn(train, test, args.ar_epochs, args.ar_steps_per_call, jit, r)
      print(f"{r:5d}  {name:16s}  {first:12.2f}  {ms:7.3f}  {bits:13.4f}", flush=True)


def _programs(decoder, encoder):
  def model(x):
    z = ed.Normal(tf.zeros([tf.shape(x)[0], 8]), 1., name="z")
    return ed.Bernoulli(logits=decoder(z), dtype=tf.float32, name="x")

  def guide(x):
    loc, raw = tf.split(encoder(x), 2, axis=-1)
    return ed.Normal(loc, tf.nn.softplus(raw) + 1e-4, name="z")

  return model, guide


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--part", choices=["time", "quality", "autoregressive", "all"], default="all")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--steps", type=int, default=3000)
  parser.add_argument("--hand-steps", type=int, default=22)
  parser.add_argument("--hand-train-steps", type=int, default=4200)
  parser.add_argument("--seeds", type=int, default=3)
  parser.add_argument("--ar-epochs", type=int, default=40)
  parser.add_argument("--ar-steps-per-call", type=int, default=20)
  parser.add_argument("--objectives", nargs="+", default=list(OBJECTIVES) + ["hand"])
  args = parser.parse_args()
  print(machine.machine_line())
  print(f"# tensorflow {tf.__version__}; tensorflow-probability {tfp.__version__}; "
        f"tf-keras {machine.version('tf-keras')}; scikit-learn {machine.version('scikit-learn')}")
  splits = digits_vae.splits(0)
  print(f"# data: {splits[3]}, {len(splits[0])} / {len(splits[1])} / {len(splits[2])}")
  if args.part in ("time", "all"):
    part_time(args, splits[0])
  if args.part in ("quality", "all"):
    part_quality(args, splits)
  if args.part in ("autoregressive", "all"):
    part_autoregressive(args, splits)


if __name__ == "__main__":
  main()
