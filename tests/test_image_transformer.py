"""The data-parallel Image Transformer example and its launch script.

Small networks on images of 2 to 64 pixels, so the file runs in well under
a minute on two CPU cores; the distributed cases use MirroredStrategy over
the logical CPU devices that conftest sets up.
"""

import importlib.util
import itertools
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
import tf_keras

import edward_lite as ed

from conftest import LOGICAL_CPUS

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import image_data  # noqa: E402  pylint: disable=wrong-import-position
import image_transformer as it  # noqa: E402  pylint: disable=wrong-import-position


def _mirrored(replicas):
  """MirroredStrategy over ``replicas`` logical CPUs (one per device set per
  process: see ``ed.distribute.strategy``)."""
  return ed.distribute.strategy("mirrored", devices=LOGICAL_CPUS[:replicas])


def _network(num_pixels=9, levels=3, seed=0):
  tf_keras.utils.set_random_seed(seed)
  network = it.ImageTransformer(num_pixels, levels, dim=16, layers=2, heads=2)
  network(tf.zeros([1, num_pixels], tf.int32))
  return network


def _pixels(n, num_pixels=9, levels=3, seed=0):
  return np.random.default_rng(seed).integers(0, levels, [n, num_pixels]).astype(np.int32)


def test_logits_of_pixel_i_depend_only_on_pixels_before_i():
  network, x = _network(), _pixels(4)
  logits = it.pixel_logits(network, x).numpy()
  for j in range(9):
    changed = x.copy()
    changed[:, j] = (changed[:, j] + 1) % 3
    new = it.pixel_logits(network, changed).numpy()
    np.testing.assert_array_equal(new[:, :j + 1], logits[:, :j + 1])  # exactly
    if j < 8:  # ... while the next pixel does see the change
      assert np.abs(new[:, j + 1] - logits[:, j + 1]).max(-1).min() > 1e-4


def test_program_log_likelihood_is_the_categorical_log_prob_and_gives_bits_per_dim():
  network, x = _network(), _pixels(5)
  log_lik = float(it.log_likelihood(network, x))
  logits = it.pixel_logits(network, x)
  direct = float(tf.reduce_sum(tfp.distributions.Categorical(logits=logits).log_prob(x)))
  np.testing.assert_allclose(log_lik, direct, rtol=1e-6)
  log_softmax = logits.numpy() - np.log(np.exp(logits.numpy()).sum(-1, keepdims=True))
  by_hand = np.take_along_axis(log_softmax, x[..., None], -1).sum()
  np.testing.assert_allclose(log_lik, by_hand, rtol=1e-5)
  bits = -log_lik / (5 * 9 * math.log(2.))
  np.testing.assert_allclose(float(it.bits_per_dim(log_lik, 5, 9)), bits, rtol=1e-12)
  np.testing.assert_allclose(it.evaluate(network, x, batch_size=2), bits, rtol=1e-5)  # batched


def _one_step(strategy, batch, rate=1.):
  """Bits/dim and weights after one SGD step of ``ed.vi.train`` under
  ``strategy`` on ``batch`` (a fresh network, its weights seeded by it)."""
  network = it.ImageTransformer(9, 3, dim=16, layers=2, heads=2)

  def model(image):
    return it.image_transformer(network, image)

  with strategy.scope():
    optimizer = tf_keras.optimizers.SGD(rate)  # rate 1: update = -gradient, its scale shows
  data = tf.data.Dataset.from_tensor_slices({"image": batch}).batch(len(batch))
  result = ed.vi.train(model, None, data, steps=1, seed=1, optimizer=optimizer,
                       strategy=strategy, progress=False, jit_compile=False)  # no XLA compile
  bits = -result.history["elbo"][0] / (9 * math.log(2.))
  return bits, network.get_weights(), network


@pytest.mark.slow
def test_two_replica_step_equals_one_replica_step_on_the_global_batch():
  batch = _pixels(8, seed=1)
  bits1, after1, _ = _one_step(tf.distribute.get_strategy(), batch)
  bits2, after2, _ = _one_step(_mirrored(2), batch)
  np.testing.assert_allclose(bits2, bits1, rtol=1e-6)
  _, before, network = _one_step(tf.distribute.get_strategy(), batch, rate=0.)  # the start
  np.testing.assert_allclose(bits1, it.evaluate(network, batch, 8), rtol=1e-6)
  assert max(np.abs(a - w).max() for a, w in zip(after1, before)) > 1e-2  # a real update
  for a1, a2 in zip(after1, after2):
    np.testing.assert_allclose(a2, a1, rtol=1e-5, atol=1e-6)


def test_sampler_draws_from_the_model():
  """Shape, range, seeding, and on 2 pixels x 3 levels the frequencies of
  all 9 images match exp(log p(x)) of the program."""
  network = _network(num_pixels=2)
  embeddings = network.embed.embeddings
  embeddings.assign(embeddings * 50.)  # makes pixel 2 depend strongly on pixel 1
  n = 4000
  draws = it.sample(network, n, seed=3)
  assert draws.shape == (n, 2) and draws.dtype == np.int32
  assert draws.min() >= 0 and draws.max() <= 2
  np.testing.assert_array_equal(it.sample(network, n, seed=3), draws)
  assert (it.sample(network, n, seed=4) != draws).any()
  images = np.array(list(itertools.product(range(3), repeat=2)), np.int32)
  probs = np.array([np.exp(float(it.log_likelihood(network, x[None]))) for x in images])
  np.testing.assert_allclose(probs.sum(), 1., rtol=1e-5)
  marginals = np.outer(probs.reshape(3, 3).sum(1), probs.reshape(3, 3).sum(0)).ravel()
  assert np.abs(probs - marginals).max() > 0.05  # pixel 2 depends on pixel 1
  freqs = np.array([np.mean((draws == x).all(1)) for x in images])
  assert np.all(np.abs(freqs - probs) < 5 * np.sqrt(probs * (1 - probs) / n) + 1e-3)


@pytest.mark.long  # an example's quick run; the default run keeps the other checks here
def test_two_replica_training_beats_the_uniform_and_per_pixel_baselines(tmp_path):
  result = it.train(_mirrored(2), epochs=4, batch_size=32,
                    layers=1, heads=2, dim=32, n_images=512, n_test=256, samples=8,
                    out=str(tmp_path / "samples.png"), seed=0, log=None, progress=False)
  bits = result["bits_per_dim"]
  # Best model that ignores the context: one Bernoulli per pixel position.
  train_pixels = image_data.shapes(512, 8, 0).reshape(-1, 64)
  p = train_pixels.mean(0).clip(1e-3, 1 - 1e-3)
  test_pixels = image_data.shapes(256, 8, 1).reshape(-1, 64)
  per_pixel = -np.mean(test_pixels * np.log2(p) + (1 - test_pixels) * np.log2(1 - p))
  assert len(bits) == 4 and bits[-1] < 0.8 * bits[0] and bits[-1] < 0.6 * math.log2(2)
  assert result["test_bits_per_dim"] < per_pixel - 0.05, (result, per_pixel)
  assert result["examples_per_s"] > 0
  assert len(result["test_bits_per_epoch"]) == 4  # the evaluation hook, every epoch
  assert result["samples"].shape == (8, 8, 8) and set(np.unique(result["samples"])) <= {0, 1}
  pixels = tf.io.decode_png(tf.io.read_file(result["png"])).numpy()[..., :3] / 255.
  if importlib.util.find_spec("matplotlib"):  # a titled figure, rows labelled "samples"
    assert pixels.shape[1] >= 600 and pixels.shape[0] >= 150, pixels.shape
  assert pixels.var() > 0.02, pixels.var()  # not a blank page


def test_batch_size_not_divisible_by_replicas_names_the_flag():
  with pytest.raises(ValueError, match=r"--batch_size 33 .* replicas \(2\)"):
    it.train(_mirrored(2), batch_size=33, log=None, progress=False)


@pytest.mark.slow
def test_launch_script_runs_on_logical_cpus(tmp_path):
  png = tmp_path / "samples.png"
  result = subprocess.run(
      [sys.executable, str(ROOT / "tpu_scripts" / "image_transformer.py"), "--strategy", "cpu",
       "--replicas", "2", "--epochs", "1", "--batch_size", "16", "--n_images", "64",
       "--n_test", "32", "--layers", "1", "--dim", "16", "--heads", "2", "--out", str(png)],
      capture_output=True, text=True, timeout=240, cwd=tmp_path,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "2 replica(s)" in result.stdout and "held-out" in result.stdout, result.stdout
  assert f"saved 32 samples to {png}" in result.stdout, result.stdout
  assert png.stat().st_size > 0
