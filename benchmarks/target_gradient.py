"""Cost of edward_lite's model target against hand-written log densities.

Every sampler spends its time in ``value_and_gradient`` of the log density
over a batch of chains, so the target's overhead (tracing the program,
vectorizing it over chains with ``tf.vectorized_map``, support bijectors) is
measured here against two peers, all XLA-compiled in one process:

* ``hand``: a hand-written, broadcasting TensorFlow log density (the floor);
* ``tfp_jd``: TFP's ``JointDistributionSequentialAutoBatched`` with
  ``experimental_default_event_space_bijector`` (the idiomatic TFP route).

Models: non-centered eight schools and a Bayesian logistic regression
(N x 54 synthetic design).  Each is timed as a chain of dependent gradient evaluations inside one
XLA-compiled ``tf.while_loop``, as a sampler runs them; prints microseconds
per batched gradient, compile seconds and the ratio to ``hand``.

    python benchmarks/target_gradient.py [--n 100000] [--chains 4 1024]
"""

import argparse
import os
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import edward_lite as ed  # noqa: E402

tfd, tfb = tfp.distributions, tfp.bijectors

Y8 = np.array([28., 8., -3., 7., -1., 1., 18., 12.], np.float32)
S8 = np.array([15., 10., 16., 11., 9., 11., 10., 18.], np.float32)


def eight_schools_ed(sigma):
  mu = ed.Normal(0., 5., name="mu")
  tau = ed.HalfCauchy(0., 5., name="tau")
  theta_tilde = ed.Normal(tf.zeros(8), 1., name="theta_tilde")
  return ed.Normal(mu + tau * theta_tilde, sigma, name="y")


def eight_schools_hand(u):
  """u: [C, 10] unconstrained (mu, log tau, theta_tilde)."""
  mu, log_tau, tt = u[:, 0], u[:, 1], u[:, 2:]
  tau = tf.exp(log_tau)
  lp = tfd.Normal(0., 5.).log_prob(mu) + tfd.HalfCauchy(0., 5.).log_prob(tau)
  lp += log_tau  # log |d tau / d log_tau|
  lp += tf.reduce_sum(tfd.Normal(0., 1.).log_prob(tt), -1)
  theta = mu[:, None] + tau[:, None] * tt
  return lp + tf.reduce_sum(tfd.Normal(theta, S8).log_prob(Y8), -1)


def eight_schools_jd():
  return tfd.JointDistributionNamedAutoBatched(dict(
      mu=tfd.Normal(0., 5.), tau=tfd.HalfCauchy(0., 5.),
      theta_tilde=tfd.Normal(tf.zeros(8), 1.),
      y=lambda theta_tilde, tau, mu: tfd.Normal(
          mu[..., None] + tau[..., None] * theta_tilde, S8))).experimental_pin(y=Y8)


def jd_flat_log_prob(pinned, sizes):
  """Unconstrained flat [C, D] log density of a pinned TFP joint distribution."""
  bijector = pinned.experimental_default_event_space_bijector()
  shapes = bijector.inverse_event_shape(pinned.event_shape)

  def log_prob(u):
    parts = tf.split(u, list(sizes.values()), axis=-1)  # flat layout: `sizes` order
    state = {k: tf.reshape(p, [-1] + shapes[k].as_list()) for k, p in zip(sizes, parts)}
    return (pinned.unnormalized_log_prob(bijector.forward(state)) +
            bijector.forward_log_det_jacobian(state))

  return log_prob


def logistic_data(n, d=54, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, d)).astype(np.float32)
  w = rng.normal(size=d).astype(np.float32) / np.sqrt(d)
  y = (rng.uniform(size=n) < 1 / (1 + np.exp(-x @ w))).astype(np.int32)
  return tf.constant(x), tf.constant(y)


def logistic_ed(x):
  w = ed.Normal(tf.zeros(x.shape[1]), 1., name="w")
  return ed.Bernoulli(logits=tf.linalg.matvec(x, w), name="y")


def timed(log_prob, state, steps):
  """(compile s, s per batched gradient) for ``steps`` dependent gradient
  evaluations inside one XLA-compiled while loop (as a sampler runs them)."""

  @tf.function(jit_compile=True)
  def loop(u):
    def body(i, u):
      _, g = tfp.math.value_and_gradient(log_prob, u)
      return i + 1, u + 1e-4 * g
    return tf.while_loop(lambda i, _: i < steps, body, (0, u))[1]

  start = time.perf_counter()
  loop(state).numpy()
  compile_and_run = time.perf_counter() - start
  start = time.perf_counter()
  loop(state).numpy()
  per_grad = (time.perf_counter() - start) / steps
  return compile_and_run - per_grad * steps, per_grad


def run(model, chains, steps):
  if model == "eight_schools":
    target = ed.make_target(eight_schools_ed, S8, observed={"y": Y8})
    hand = eight_schools_hand
    jd = jd_flat_log_prob(eight_schools_jd(), {"mu": 1, "tau": 1, "theta_tilde": 8})
  else:
    x, y = DATA
    target = ed.make_target(logistic_ed, x, observed={"y": y})

    def hand(u):
      logits = tf.matmul(u, x, transpose_b=True)
      return (tf.reduce_sum(tfd.Normal(0., 1.).log_prob(u), -1) +
              tf.reduce_sum(tfd.Bernoulli(logits=logits).log_prob(y), -1))

    pinned = tfd.JointDistributionNamedAutoBatched(dict(
        w=tfd.Normal(tf.zeros(54), 1.),
        y=lambda w: tfd.Bernoulli(logits=tf.linalg.matvec(x, w[..., None, :])))
    ).experimental_pin(y=y)
    jd = jd_flat_log_prob(pinned, {"w": 54})

  state = tf.random.stateless_uniform([chains, target.dim], [1, 2], -2., 2.)
  lp_ed, lp_hand, lp_jd = (f(state).numpy() for f in (target.log_prob_flat, hand, jd))
  for name, lp in (("edward_lite", lp_ed), ("tfp_jd", lp_jd)):
    if not np.allclose(lp, lp_hand, rtol=1e-4):
      raise AssertionError(f"{model}: {name} log density differs from hand: {lp[:3]} vs {lp_hand[:3]}")
  rows = {name: timed(fn, state, steps)
          for name, fn in (("edward_lite", target.log_prob_flat), ("hand", hand), ("tfp_jd", jd))}
  base = rows["hand"][1]
  for name, (compile_s, per_call) in rows.items():
    print(f"  {model:14s} C={chains:5d} {name:12s} compile {compile_s:6.2f} s  "
          f"{per_call * 1e6:10.1f} us/gradient  {per_call / base:5.2f}x hand")


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--n", type=int, default=100_000)
  parser.add_argument("--chains", type=int, nargs="+", default=[4, 1024])
  parser.add_argument("--steps", type=int, default=200,
                      help="gradient evaluations per compiled loop")
  args = parser.parse_args()
  global DATA
  DATA = logistic_data(args.n)
  print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"TF {tf.__version__}, TFP {tfp.__version__}, Python {platform.python_version()}")
  for chains in args.chains:
    run("eight_schools", chains, args.steps)
  for chains in args.chains[:1] + [c for c in args.chains[1:] if c <= 16]:
    run("logistic", chains, max(2, args.steps // 10))


DATA = None

if __name__ == "__main__":
  main()
