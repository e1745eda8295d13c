"""Predictive simulation: one loop over the draws vs ``tf.vectorized_map``.

``ed.posterior_predictive`` runs the program once per posterior draw with a seed per
draw.  ``tf.vectorized_map`` cannot batch TensorFlow's stateless samplers
over a per-draw seed and falls back to a while loop per random op; this
script times both batchings of the same one-draw simulation
(``edward_lite.model.simulation.simulate``), and the library's own
``simulation.map_draws`` (what ``ed.posterior_predictive`` uses), on 4096 draws of

* ``binomial``: theta ~ Beta, y ~ Binomial(10, theta) (one observation);
* ``regression``: y ~ Normal(a x, 1) at 1000 inputs.

Prints seconds per call (second call: compile excluded; ``map_draws``
(``*``) builds its compiled function per call, so its figure includes the
trace) and the ratio vectorized_map / map_fn.

    PYTHONPATH=. python benchmarks/predictive.py
"""

import time

import numpy as np
import tensorflow as tf

import edward_lite as ed
from edward_lite.model import simulation

DRAWS = 4096
X = tf.constant(np.linspace(-1., 1., 1000), tf.float32)


def binomial():
  theta = ed.Beta(2., 2., name="theta")
  return ed.Binomial(total_count=10., probs=theta, name="y")


def regression():
  a = ed.Normal(0., 3., name="theta")
  return ed.Normal(a * X, 1., name="y")


def _timed(fn, *args):
  fn(*args)  # compile
  start = time.perf_counter()
  fn(*args)
  return time.perf_counter() - start


def main():
  values = {"theta": np.random.default_rng(0).beta(16., 8., DRAWS).astype(np.float32)}
  seeds = tf.random.experimental.stateless_split([1, 2], DRAWS)
  print(f"{'model':<12}{'vectorized_map s':>18}{'map_fn s':>10}{'map_draws s*':>13}{'ratio':>8}")
  for model in (binomial, regression):
    vmap, loop = _batchings(model)
    t_vmap, t_loop = _timed(vmap, values, seeds), _timed(loop, values, seeds)
    t_lib = _timed(lambda m=model: simulation.map_draws(
        lambda v, s: simulation.simulate(m, v, s), values, seed=1))
    print(f"{model.__name__:<12}{t_vmap:>18.3f}{t_loop:>10.3f}{t_lib:>13.3f}"
          f"{t_vmap / t_loop:>8.1f}")


def _batchings(model):
  """(vectorized_map, map_fn) versions of one draw of ``model``."""
  def one(a):
    return simulation.simulate(model, a[0], a[1])
  spec = {"theta": tf.TensorSpec([], tf.float32),
          "y": tf.TensorSpec(model().value.shape, tf.float32)}

  @tf.function(autograph=False)
  def vmap(values, seeds):
    return tf.vectorized_map(one, (values, seeds))

  @tf.function(autograph=False)
  def loop(values, seeds):
    return tf.map_fn(one, (values, seeds), fn_output_signature=spec, parallel_iterations=32)

  return vmap, loop


if __name__ == "__main__":
  main()
