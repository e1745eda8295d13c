"""Tests of the VAE example (examples/vae.py, trained by ``ed.vi.train``)
and its launch script.

The ELBO terms ``ed.vi.train`` computes from the two programs must equal
ones written out with TFP log densities; training must raise the ELBO in
every mode, along one trajectory (the data-parallel update equals the
single-device one: tests/test_train.py checks it to 1e-5); model-parallel
mode must put the encoder and decoder on different devices without changing
the numbers.
"""

import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
import tf_keras  # noqa: E402

import edward_lite as ed  # noqa: E402

from conftest import LOGICAL_CPUS  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "examples"))

import image_data  # noqa: E402
import vae  # noqa: E402
from edward_lite.vi.amortized import BatchProgram  # noqa: E402

tfd = tfp.distributions

try:
  import matplotlib  # noqa: F401  pylint: disable=unused-import
  HAVE_MATPLOTLIB = True
except ImportError:
  HAVE_MATPLOTLIB = False

PIXELS, LATENT, HIDDEN, BATCH = 64, 4, 16, 8
SMALL = dict(epochs=4, batch_size=32, latent_dim=4, hidden=32, n_images=256, verbose=False)


@pytest.fixture(scope="module")
def mirrored():
  return ed.distribute.strategy("mirrored", devices=LOGICAL_CPUS[:2])


def batch(seed=0):
  """``(x [BATCH, PIXELS], noise [BATCH, LATENT])`` from the shapes set."""
  x = image_data.shapes(BATCH, seed=seed).reshape(BATCH, PIXELS).astype(np.float32)
  return tf.constant(x), tf.random.stateless_normal([BATCH, LATENT], seed=[seed, 1])


def networks(devices=None, like=None):
  """Encoder and decoder, with the weights of ``like`` when given."""
  tf_keras.utils.set_random_seed(0)
  encoder, decoder = vae.make_networks(PIXELS, LATENT, HIDDEN, devices)
  if like is not None:
    encoder.set_weights(like[0].get_weights())
    decoder.set_weights(like[1].get_weights())
  return encoder, decoder


def on(*names):
  """The set of ``(device type, index)`` of device names."""
  specs = [tf.DeviceSpec.from_string(name) for name in names]
  return {(spec.device_type, spec.device_index) for spec in specs}


def weights(nets):
  return [v.numpy() for net in nets for v in net.variables]


def program_elbo(encoder, decoder, x, noise):
  """Summed ELBO of a batch as ``ed.vi.train`` computes it from the programs."""
  model, guide = vae.make_programs(encoder, decoder, LATENT)
  program = BatchProgram(model, guide, {"x": tf.TensorSpec([None, PIXELS], tf.float32)})
  program.inspect({"x": x})
  terms = program.terms({"x": x}, {"z": noise})
  return tf.reduce_sum(terms["log_likelihood"] + terms["log_prior"] - terms["log_q"])


def test_program_elbo_equals_direct_log_probs():
  encoder, decoder = networks()
  x, noise = batch()
  variables = encoder.trainable_variables + decoder.trainable_variables
  with tf.GradientTape(persistent=True) as tape:
    program = program_elbo(encoder, decoder, x, noise)
    loc, scale = vae.encode(encoder, x)
    z = loc + scale * noise
    direct = (tf.reduce_sum(tfd.Normal(0., 1.).log_prob(z)) +
              tf.reduce_sum(tfd.Bernoulli(logits=decoder(z)).log_prob(x)) -
              tf.reduce_sum(tfd.Normal(loc, scale).log_prob(z)))
  assert program.shape == ()
  np.testing.assert_allclose(program.numpy(), direct.numpy(), rtol=1e-5)
  # The reparameterized value carries the gradient into the encoder.
  for g_program, g_direct in zip(tape.gradient(program, variables),
                                 tape.gradient(direct, variables)):
    assert np.any(g_program.numpy() != 0.)
    np.testing.assert_allclose(g_program.numpy(), g_direct.numpy(), rtol=1e-4, atol=1e-6)


@pytest.fixture(scope="module")
def trained(mirrored, tmp_path_factory):
  out = str(tmp_path_factory.mktemp("vae"))
  return {"single": vae.train("single", out=out, **SMALL),
          "data": vae.train("data", strategy=mirrored, **SMALL),
          "model": vae.train("model", devices=LOGICAL_CPUS[:2], **SMALL)}


@pytest.mark.slow
@pytest.mark.parametrize("mode", vae.MODES)
def test_training_raises_the_elbo(trained, mode):
  result = trained[mode]
  history = result["elbo_per_epoch"]
  assert len(history) == SMALL["epochs"]
  assert history[-1] > history[0] + 3.  # nats per 8x8 image
  assert -64 * np.log(2.) < result["test_elbo"] < 0.  # better than coin flips
  assert len(result["test_elbo_per_epoch"]) == SMALL["epochs"]  # the evaluation hook
  assert result["examples_per_s"] > 0.
  # Same batches, noise and initial weights: every mode follows one trajectory.
  np.testing.assert_allclose(history, trained["single"]["elbo_per_epoch"], rtol=1e-3)


def test_pngs_are_written(trained):
  paths = trained["single"]["pngs"]
  assert [os.path.basename(p) for p in paths] == ["reconstructions.png", "samples.png"]
  for path in paths:
    with open(path, "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    pixels = tf.io.decode_png(tf.io.read_file(path)).numpy()[..., :3] / 255.
    height, width = pixels.shape[:2]
    if HAVE_MATPLOTLIB:  # a titled figure with labelled rows, 800 pixels wide
      assert width >= 600 and height >= 200, pixels.shape
    assert pixels.var() > 0.02, pixels.var()  # images, not a blank page
    assert np.mean(pixels.mean(-1) < 0.9) > 0.2  # a fifth of the page is images


@pytest.mark.slow
def test_data_parallel_training_equals_single_device_training(trained):
  single = weights(trained["single"]["networks"])
  for got, want in zip(weights(trained["data"]["networks"]), single):
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)  # 4 epochs of Adam


@pytest.mark.slow
def test_model_parallel_places_encoder_and_decoder_apart(trained):
  single = networks()
  encoder, decoder = placed = networks(devices=LOGICAL_CPUS[:2], like=single)
  assert on(*[v.device for v in encoder.variables]) == on(LOGICAL_CPUS[0])
  assert on(*[v.device for v in decoder.variables]) == on(LOGICAL_CPUS[1])
  x, noise = batch()
  assert on(encoder(x).device) == on(LOGICAL_CPUS[0])
  assert on(decoder(noise).device) == on(LOGICAL_CPUS[1])
  np.testing.assert_allclose(program_elbo(*placed, x, noise).numpy(),
                             program_elbo(*single, x, noise).numpy(), rtol=1e-6)
  # Trained by ed.vi.train, built there: weights and Adam's moments stay placed.
  encoder, decoder = trained["model"]["networks"]
  assert on(*[v.device for v in encoder.variables]) == on(LOGICAL_CPUS[0])
  assert on(*[v.device for v in decoder.variables]) == on(LOGICAL_CPUS[1])
  slots = {v.name: v.device for v in trained["model"]["result"].optimizer.variables}
  assert len([n for n in slots if "coder/" in n]) == 2 * 8  # m and v of 8 weights
  assert on(*[d for n, d in slots.items() if "encoder/" in n]) == on(LOGICAL_CPUS[0])
  assert on(*[d for n, d in slots.items() if "decoder/" in n]) == on(LOGICAL_CPUS[1])
  for got, want in zip(weights(trained["model"]["networks"]),
                       weights(trained["single"]["networks"])):
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_model_parallel_splits_layers_over_up_to_four_devices():
  encoder, decoder = networks(devices=LOGICAL_CPUS)
  kernels = [on(layer.kernel.device) for layer in encoder.dense + decoder.dense]
  assert kernels == [on(name) for name in LOGICAL_CPUS]
  with pytest.raises(ValueError, match="2 to 4 devices"):
    vae.make_networks(PIXELS, LATENT, HIDDEN, LOGICAL_CPUS[:1])


@pytest.mark.slow
def test_launch_script_runs_on_cpu_fallback(tmp_path):
  cmd = [sys.executable, os.path.join(ROOT, "tpu_scripts", "vae.py"), "--strategy", "cpu",
         "--replicas", "2", "--mode", "model", "--epochs", "2", "--batch_size", "32",
         "--n_images", "128", "--hidden", "16", "--out", str(tmp_path)]
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "held-out ELBO" in proc.stdout
  assert "training: 100%" in proc.stderr  # ed.vi.train's progress lines
  assert f"saved reconstructions and samples to {tmp_path}" in proc.stdout, proc.stdout
  assert sorted(os.listdir(tmp_path)) == ["reconstructions.png", "samples.png"]


def test_grid_without_matplotlib_is_plain_and_says_so(tmp_path, monkeypatch, capsys):
  monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # as if not installed
  path = image_data.write_grid(str(tmp_path / "grid.png"), image_data.shapes(16),
                               labels="samples", title="t")
  assert "pip install 'edward_lite[plot]'" in capsys.readouterr().err
  pixels = tf.io.decode_png(tf.io.read_file(path)).numpy()
  assert pixels.shape == (4 * (2 * 9 + 1), 4 * (8 * 9 + 1), 1)  # the plain grid


def test_batch_size_not_divisible_by_replicas_is_rejected(mirrored):
  with pytest.raises(ValueError, match="--batch_size 33 .* divisible by the 2 replicas"):
    vae.train("data", batch_size=33, strategy=mirrored, verbose=False)
