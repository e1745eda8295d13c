"""The held-out log-likelihood of a trained model, by importance sampling
with its guide as the proposal (``TrainResult.log_likelihood``).

For example ``x_i`` and ``K`` draws ``z_ik ~ q(z | x_i)``, with weights
``w_ik = p(x_i, z_ik) / q(z_ik | x_i)`` (``ed.Factor`` terms in ``p``),

    log p^(x_i) = log (1/K) sum_k w_ik,

consistent as ``K`` grows and in expectation below ``log p(x_i)`` (it is the
IWAE bound at ``K``).  Its Monte Carlo variance, by the delta method, is

    var_i = [ (1/K) sum_k w_ik^2 / ((1/K) sum_k w_ik)^2 - 1 ] / K,

and the reported mean over ``N`` examples has the Monte Carlo error
``mcse = sqrt(sum_i var_i) / N`` (its bias, about ``-var_i / 2`` per example,
is smaller than ``mcse`` once ``var_i`` is small; with ``K`` = 1 it cannot be
estimated and is NaN).  Bits per dimension are
``-mean_i log p^(x_i) / (D log 2)``, ``D`` the observed scalars per example.

The draws run in calls of ``k = rows_per_call // b`` draws of a batch of
``b`` rows; each call's log weights come back and are folded, in float64,
into a running ``(max, sum w, sum w^2)`` per example, so ``K`` = 10^4 costs
no more memory than one call.  A model without latents (``guide=None``) has
its exact ``log p(x_i)``, with ``mcse`` 0.
"""

import math

import numpy as np
import tensorflow as tf

from edward_lite.checks import arguments
from edward_lite.runtime import console, seeds
from edward_lite.vi import amortized, objectives

__all__ = ["log_likelihood", "check_keys"]


def check_keys(dataset, program, what):
  """Raises unless ``dataset`` yields dicts with the training data's keys."""
  if not isinstance(dataset, tf.data.Dataset):
    raise TypeError(f"{what} must be a tf.data.Dataset; got {type(dataset).__name__}.")
  spec = dataset.element_spec
  if not isinstance(spec, dict) or set(spec) != set(program.spec):
    raise ValueError(f"{what}'s elements {spec} do not have the keys of the training "
                     f"dataset's, {sorted(program.spec)}.")


def _log_weights(program, jit_compile):
  """``fn(batch, noise, k) -> log w [k, b]``, one trace per ``k``, kept on
  the program for later calls."""
  cache = program.__dict__.setdefault("_held_out_fns", {})
  if jit_compile not in cache:
    def fn(batch, noise, k):
      return objectives.log_weights(program.sample_terms(batch, noise, k))
    cache[jit_compile] = console.first_call_quiet(  # one trace per k
        console.per_call_function(fn, jit_compile=bool(jit_compile)))
  return cache[jit_compile]


def log_likelihood(program, dataset, samples, seed, rows_per_call, jit_compile):
  """The importance-sampled ``log p(x)`` per example of ``dataset``.

  Args:
    program: the trained ``amortized.BatchProgram``.
    dataset: a ``tf.data.Dataset`` of batches with the training data's keys.
    samples: draws ``K`` per example.
    seed: integer; the draws are stateless in it and the batch's place.
    rows_per_call: the rows (draws x examples) one compiled call holds.

  Returns:
    dict: ``log_likelihood`` (mean over examples, nats), ``mcse``,
    ``bits_per_dim``, ``per_example`` (``[N]`` NumPy float64), ``ess``
    (the median over examples of the importance sample's effective size
    ``(sum w)^2 / sum w^2``), ``samples``, ``examples``, ``dimensions``.
  """
  check_keys(dataset, program, "dataset=")
  samples = arguments.check_integer("samples", samples, 1)
  rows_per_call = arguments.check_integer("rows_per_call", rows_per_call, 1)
  seed = arguments.check_integer("seed", seed, 0)
  fn = _log_weights(program, jit_compile)
  stream = seeds.stream(tf.constant(seeds.seed_pair(seed), tf.int32), "vi_log_likelihood")
  latent = bool(program.noise_spec)
  per_example, variances, ess, dims = [], [], [], None
  for index, batch in enumerate(dataset):
    rows = int(tf.shape(next(iter(batch.values())))[0])
    if dims is None:
      dims = sum(int(np.prod(batch[k].shape[1:])) for k in program.observed)
    total = samples if latent else 1
    k = max(1, min(total, rows_per_call // max(rows, 1)))
    top, s1, s2 = np.full(rows, -np.inf), np.zeros(rows), np.zeros(rows)
    base = tf.random.experimental.stateless_fold_in(stream, index)
    for call, done in enumerate(range(0, total, k)):
      noise = amortized.noise_for(program.noise_spec, base, tf.constant(call, tf.int64), k)(rows)
      log_w = fn(batch, noise, k).numpy().astype(np.float64)[:total - done]
      new_top = np.maximum(top, log_w.max(0))
      shift = np.where(np.isfinite(new_top), new_top, 0.)
      old = np.exp(np.where(np.isfinite(top), top - shift, -np.inf))
      w = np.exp(log_w - shift)
      s1, s2, top = s1 * old + w.sum(0), s2 * old ** 2 + (w ** 2).sum(0), new_top
    shift = np.where(np.isfinite(top), top, 0.)
    with np.errstate(divide="ignore", invalid="ignore"):
      per_example.append(np.log(s1 / total) + shift)
      variances.append(np.maximum((s2 / total) / (s1 / total) ** 2 - 1., 0.) / total
                       if latent else np.zeros(rows))
      ess.append(s1 ** 2 / s2)
  if not per_example:
    raise ValueError("dataset= is empty.")
  per_example = np.concatenate(per_example)
  n = len(per_example)
  mean = float(per_example.mean())
  mcse = np.sqrt(np.concatenate(variances).sum()) / n if total > 1 or not latent else np.nan
  return {"log_likelihood": mean, "mcse": float(mcse),
          "bits_per_dim": -mean / (dims * math.log(2.)), "per_example": per_example,
          "ess": float(np.median(np.concatenate(ess))), "samples": total, "examples": n,
          "dimensions": dims}
