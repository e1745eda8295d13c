"""``ed.vi.train`` under Keras's mixed-precision policies, against the same
run in float32: networks computing in float16 (with dynamic loss scaling)
or bfloat16 reach the float32 run's held-out log-likelihood.
"""

import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

import edward_lite as ed  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import digits_vae  # noqa: E402
import image_data  # noqa: E402

IMAGES = image_data.shapes(768, 8, seed=4).reshape(768, 64).astype("float32")
TRAIN = tf.data.Dataset.from_tensor_slices({"x": IMAGES[:512]}).shuffle(512, seed=0).batch(64)
TEST = tf.data.Dataset.from_tensor_slices({"x": IMAGES[512:]}).batch(256)


def fit(policy):
  """The digits VAE's programs built and trained under ``policy``."""
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(policy)
  try:
    model, guide, decoder = digits_vae.make_programs()
    result = ed.vi.train(model, guide, TRAIN, steps=600, seed=0, progress=False,
                         jit_compile=False)
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)
  return result, decoder, result.log_likelihood(TEST, samples=200, seed=1)


@pytest.fixture(scope="module")
def float32():
  return fit("float32")


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_reaches_the_float32_log_likelihood(float32, policy):
  _, _, want = float32
  result, decoder, got = fit(policy)
  assert decoder.layers[0].compute_dtype == policy.split("_")[1]
  scaled = isinstance(result.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
  assert scaled == (policy == "mixed_float16")  # wrapped as Model.compile does
  assert result.skipped == 0
  # The same seeds and data: the runs differ by rounding only (float32 run
  # of these seeds: ~-20 nats per image, MCSE ~0.02).
  assert abs(got["log_likelihood"] - want["log_likelihood"]) < 0.3, (got, want)
  assert want["log_likelihood"] > -64 * math.log(2.) + 10.  # it learned: uniform is -44.4
