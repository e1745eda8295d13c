"""``ed.vi.train``'s evaluation and controls against known answers: the
importance-sampled held-out log-likelihood against probabilistic PCA's exact
marginal likelihood, early stopping against a run of the best step's length,
``StopTraining``, and a failing evaluation that keeps its steps.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import math  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import edward_lite as ed  # noqa: E402

from test_train import D, batches, linear_vae, ppca_data, values  # noqa: E402


def exact_ppca_log_likelihood(result, x):
  """``log N(x_i; b, W W^T + sigma^2 I)`` per example, from the trained
  decoder ``W, b`` and ``sigma``."""
  kernels = {}  # the model's variables come first: the decoder's bias before the encoder's
  for v in result.variables:
    kernels.setdefault(tuple(v.shape), v.numpy())
  w, b = kernels[(2, D)].T, kernels[(D,)]
  sigma2 = float(np.exp(kernels[(1, 1)][0, 0]) ** 2)
  cov = w @ w.T + sigma2 * np.eye(D)
  r = x.astype(np.float64) - b
  _, logdet = np.linalg.slogdet(cov)
  return -0.5 * (D * np.log(2 * np.pi) + logdet + np.einsum("nd,de,ne->n", r,
                                                            np.linalg.inv(cov), r))


@pytest.fixture(scope="module")
def trained():
  x = ppca_data(2)
  return ed.vi.train(*linear_vae(), batches(x), steps=300, learning_rate=0.02, progress=False)


def test_held_out_log_likelihood_matches_the_exact_marginal(trained):
  """K = 2000 importance draws from the guide: the mean ``log p(x)`` over 256
  held-out rows within 4 MCSE of pPCA's exact one (the guide is not the exact
  posterior after 300 steps: the weights vary); the bound at K = 1 is the
  ELBO, below it; bits per dimension are ``-log p(x) / (D log 2)``."""
  test = ppca_data(3)
  data = tf.data.Dataset.from_tensor_slices({"x": test}).batch(100)  # 100, 100, 56
  exact = exact_ppca_log_likelihood(trained, test)
  got = trained.log_likelihood(data, samples=2000, seed=1, rows_per_call=30_000)
  assert got["examples"] == 256 and got["samples"] == 2000 and got["dimensions"] == D
  assert 0 < got["mcse"] < 0.01, got["mcse"]
  assert abs(got["log_likelihood"] - exact.mean()) < 4 * got["mcse"], (got, exact.mean())
  assert np.median(np.abs(got["per_example"] - exact)) < 0.02  # far rows' weights vary most
  np.testing.assert_allclose(got["bits_per_dim"], -got["log_likelihood"] / (D * math.log(2)))
  one = trained.log_likelihood(data, samples=1, seed=1)  # a one-draw ELBO: no error estimate
  assert one["log_likelihood"] < exact.mean() - 0.1 and np.isnan(one["mcse"])
  # Split into calls of few draws: the same estimate up to the draws.
  small = trained.log_likelihood(data, samples=2000, seed=1, rows_per_call=1000)
  assert abs(small["log_likelihood"] - got["log_likelihood"]) < 6 * got["mcse"]


def test_log_likelihood_of_a_model_without_latents_is_exact():
  x = ppca_data(5)[:, 0]
  loc, log_scale = tf.Variable(0.), tf.Variable(0.)

  def model(x):
    return ed.Normal(loc + tf.zeros_like(x), tf.exp(log_scale), name="x")

  data = tf.data.Dataset.from_tensor_slices({"x": x}).batch(64)
  result = ed.vi.train(model, None, data, steps=300, learning_rate=0.05, progress=False)
  got = result.log_likelihood(data, samples=50)
  scale = np.exp(log_scale.numpy())
  exact = -0.5 * np.log(2 * np.pi * scale ** 2) - 0.5 * ((x - loc.numpy()) / scale) ** 2
  assert got["mcse"] == 0. and got["samples"] == 1
  np.testing.assert_allclose(got["log_likelihood"], exact.mean(), rtol=1e-6)
  with pytest.raises(ValueError, match="elements .* do not have the keys"):
    result.log_likelihood(tf.data.Dataset.from_tensor_slices({"y": x}).batch(8))


def scripted(scores, calls=None):
  """``evaluate(step)`` giving ``elbo = scores[step]`` (and recording its steps)."""
  def evaluate(step):
    if calls is not None:
      calls.append(step)
    return {"elbo": scores[step]}
  return evaluate


SCORES = {2: 1., 4: 3., 6: 2., 8: 2.5, 10: 2.9, 12: 5., 14: 6., 16: 7.}


def test_early_stopping_restores_the_best_step_and_resumes_stopped(tmp_path):
  """Best at step 4, then three evaluations without improvement: patience 3
  stops at step 10 with step 4's weights, bit for bit those of a 4-step run;
  called again with its checkpoint, the run returns at once, stopped."""
  x = ppca_data(4)[:128]
  kwargs = dict(seed=2, progress=False, eval_every=2, learning_rate=0.01, jit_compile=False)
  stopped = ed.vi.train(*linear_vae(), batches(x, 32), steps=16,
                        evaluate=scripted(SCORES), checkpoint_dir=str(tmp_path),
                        early_stopping=ed.vi.EarlyStopping(patience=3), **kwargs)
  assert stopped.steps == 10 and stopped.stopped["step"] == 10
  assert "did not improve for 3 evaluations after step 4" in stopped.stopped["reason"]
  assert stopped.best == {"step": 4, "elbo": 3.}
  assert len(stopped.history["elbo"]) == 10
  four = ed.vi.train(*linear_vae(), batches(x, 32), steps=4, evaluate=scripted(SCORES),
                     **kwargs)
  for a, b in zip(values(stopped), values(four)):
    np.testing.assert_array_equal(a, b)
  again = ed.vi.train(*linear_vae(), batches(x, 32), steps=16, evaluate=scripted({}),
                      checkpoint_dir=str(tmp_path),
                      early_stopping=ed.vi.EarlyStopping(patience=3), **kwargs)
  assert again.steps == 10 and again.stopped == stopped.stopped
  for a, b in zip(values(again), values(four)):
    np.testing.assert_array_equal(a, b)
  last = ed.vi.train(*linear_vae(), batches(x, 32), steps=16, evaluate=scripted(SCORES),
                     early_stopping=ed.vi.EarlyStopping(patience=3, restore_best=False),
                     **kwargs)
  ten = ed.vi.train(*linear_vae(), batches(x, 32), steps=10, evaluate=scripted(SCORES),
                    **kwargs)
  for a, b in zip(values(last), values(ten)):
    np.testing.assert_array_equal(a, b)
  patient = ed.vi.train(*linear_vae(), batches(x, 32), steps=16, evaluate=scripted(SCORES),
                        early_stopping=ed.vi.EarlyStopping(patience=4), **kwargs)
  assert patient.stopped is None and patient.best == {"step": 16, "elbo": 7.}


def test_early_stopping_on_a_held_out_dataset():
  """Held-out ELBO of a model that overfits nothing: early stopping watches
  ``elbo`` of the evaluation dataset; ``min_delta`` larger than any change
  stops it after ``patience`` evaluations past the first."""
  x = ppca_data(4)[:128]
  held = tf.data.Dataset.from_tensor_slices({"x": ppca_data(5)[:64]}).batch(64)
  result = ed.vi.train(*linear_vae(), batches(x, 32), steps=40, progress=False, eval_every=4,
                       evaluate=held, early_stopping=ed.vi.EarlyStopping(
                           patience=2, min_delta=1e6))
  assert result.stopped["step"] == 12 and result.best["step"] == 4
  assert [e["step"] for e in result.evaluations] == [4, 8, 12]


def test_stop_training_from_evaluate_returns_a_result():
  x = ppca_data(4)[:128]

  def evaluate(step):
    if step == 6:
      raise ed.vi.StopTraining("enough")
    return {"custom": float(step)}

  result = ed.vi.train(*linear_vae(), batches(x, 32), steps=20, progress=False, eval_every=2,
                       evaluate=evaluate)
  assert result.steps == 6 and result.stopped == {"step": 6, "reason": "enough"}
  assert [e["step"] for e in result.evaluations] == [2, 4]


def test_a_failing_evaluation_keeps_its_steps_in_the_checkpoint(tmp_path):
  """``evaluate`` raises at step 6, checkpoints every 4: the checkpoint holds
  step 6 (not 4); the resumed run evaluates from step 8 and equals an
  uninterrupted run bit for bit."""
  x = ppca_data(4)[:128]
  kwargs = dict(seed=3, progress=False, eval_every=2, checkpoint_every=4, jit_compile=False)

  def failing(step):
    if step == 6:
      raise RuntimeError("the evaluation server is down")
    return {"custom": float(step)}

  with pytest.raises(RuntimeError, match="server is down"):
    ed.vi.train(*linear_vae(), batches(x, 32), steps=12, evaluate=failing,
                checkpoint_dir=str(tmp_path), **kwargs)
  calls = []
  resumed = ed.vi.train(*linear_vae(), batches(x, 32), steps=12,
                        evaluate=scripted({s: 0. for s in range(13)}, calls),
                        checkpoint_dir=str(tmp_path), **kwargs)
  assert calls == [8, 10, 12]
  whole = ed.vi.train(*linear_vae(), batches(x, 32), steps=12, seed=3, progress=False,
                      jit_compile=False)
  for a, b in zip(values(resumed), values(whole)):
    np.testing.assert_array_equal(a, b)
  np.testing.assert_array_equal(resumed.history["elbo"], whole.history["elbo"])
