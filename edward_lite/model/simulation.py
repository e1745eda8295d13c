"""Running a program forward: one simulated draw, and a function of one draw
mapped over many.

``simulate`` runs a program with some random variables set to given values
and draws every other one from its distribution (prior and predictive
simulation).  ``map_draws`` evaluates such a one-draw function over ``S``
draws in one compiled, vectorized program, ``BATCH`` draws per call, so
memory stays bounded by ``BATCH`` times one draw's outputs.
"""

import zlib

import numpy as np
import tensorflow as tf

from edward_lite.runtime import console, seeds
from edward_lite.language.random_variable import DeferredValue
from edward_lite.language.tracing import trace
from edward_lite.language.transformations import require_name

__all__ = ["simulate", "map_draws", "map_batches", "seed_tensor"]

BATCH = 1024  # draws per compiled call


def seed_tensor(seed):
  """An int or a shape-[2] seed -> a stateless seed ``int32[2]``."""
  if isinstance(seed, (int, np.integer)):
    return tf.constant(seeds.seed_pair(int(seed)), tf.int32)
  return tf.convert_to_tensor(seed, tf.int32)


def simulate(call_program, values, seed):
  """Runs ``call_program()`` once, forward.

  Args:
    call_program: runs the program (with its data) when called.
    values: dict name -> value (unbatched) for random variables to set.
    seed: stateless seed ``int32[2]``; the random variable ``n`` is drawn
      with ``fold_in(seed, crc32(n))``, so a draw does not depend on which
      other variables are set.

  Returns:
    dict name -> value of every random variable that was drawn or set here
    (the ones whose value the program fixes itself are left out).
  """
  out = {}

  def tracer(fn, *args, **kwargs):
    name = require_name(fn, kwargs, "simulation needs a unique name on every random variable")
    fixed = kwargs.get("value") is not None
    if name in values:
      kwargs["value"] = values[name]
    elif not fixed:
      shape = kwargs.get("sample_shape", ())
      rv_seed = tf.random.experimental.stateless_fold_in(seed, zlib.crc32(name.encode()) >> 1)
      kwargs["value"] = DeferredValue(lambda dist: dist.sample(shape, seed=rv_seed))
    rv = fn(*args, **kwargs)
    if not fixed:
      out[name] = rv.value
    return rv

  with trace(tracer):
    call_program()
  return out


def map_draws(fn, values, seed=None, count=None, batch=BATCH):
  """Evaluates a one-draw function over ``S`` draws, vectorized and compiled.

  Args:
    fn: ``fn(values_one)`` or, with ``seed``, ``fn(values_one, seed_one)``
      -> dict name -> Tensor.
    values: dict name -> array ``[S, ...]`` (may be empty when ``count``
      gives ``S``).
    seed: optional stateless seed; draw ``s`` gets ``split(seed, S)[s]``.
    count: ``S`` when ``values`` is empty.
    batch: draws per compiled call (the last call is padded).

  Returns:
    dict name -> NumPy ``[S, ...]``.
  """
  values = {k: np.asarray(v) for k, v in values.items()}
  total = count if count is not None else len(next(iter(values.values())))
  draw_seeds = (tf.random.experimental.stateless_split(seed_tensor(seed), total).numpy()
                if seed is not None else np.zeros([total, 0], np.int32))
  size = min(batch, total)

  one = (lambda a: fn(a[0], a[1])) if seed is not None else (lambda a: fn(a[0]))  # pylint: disable=unnecessary-lambda-assignment

  @console.per_call_function
  def compiled(vals, seeds_):
    if seed is None:
      return tf.vectorized_map(one, (vals, seeds_))
    # Random draws with a seed per draw: pfor cannot batch TensorFlow's
    # stateless samplers over their seed and falls back to a while loop per
    # op; one loop over the draws is faster (RESULTS §10).
    probe = one(({k: v[0] for k, v in vals.items()}, seeds_[0]))
    spec = {k: tf.TensorSpec(v.shape, v.dtype) for k, v in probe.items()}
    return tf.map_fn(one, (vals, seeds_), fn_output_signature=spec, parallel_iterations=32)

  return _in_batches(lambda vals, take: compiled(vals, draw_seeds[take]), values, total, size)


def map_batches(fn, values, seed, batch=BATCH):
  """``fn(values_batch, seed_batch) -> dict name -> [B, ...]`` over ``S``
  draws ``values`` (dict name -> array ``[S, ...]``), ``batch`` draws per
  compiled call, the batch starting at draw ``s`` with stateless seed
  ``fold_in(seed, s)``: for a function that vectorizes its own random
  draws (one op for the batch, where ``map_draws`` loops over the draws'
  seeds).  ``fn`` is compiled here unless it is a ``tf.function`` already
  (a caller that keeps one traces it once for many calls).  Returns dict
  name -> NumPy ``[S, ...]``."""
  values = {k: np.asarray(v) for k, v in values.items()}
  total = len(next(iter(values.values())))
  base = seed_tensor(seed)
  compiled = fn if isinstance(fn, tf.types.experimental.PolymorphicFunction) else (
      console.per_call_function(fn))
  return _in_batches(
      lambda vals, take: compiled(vals, tf.random.experimental.stateless_fold_in(base, take[0])),
      values, total, min(batch, total))


def _in_batches(call, values, total, size):
  """``call(values_batch, take)`` over ``total`` draws, ``size`` per call,
  ``take`` the batch's draw indices (the last call padded by wrapping
  round), concatenated as NumPy."""
  parts = []
  for start in range(0, total, size):
    take = np.arange(start, start + size) % total  # the last chunk wraps round
    out = call({k: v[take] for k, v in values.items()}, take)
    parts.append({k: v.numpy()[:total - start] for k, v in out.items()})
  return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else {}
