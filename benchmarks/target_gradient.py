"""Cost of edward_lite's model target against hand-written log densities.

Every sampler spends its time in ``value_and_gradient`` of the log density
over a batch of chains, so the target's overhead (tracing the program,
vectorizing it over chains with ``tf.vectorized_map``, support bijectors) is
measured here against two peers, all XLA-compiled in one process:

* ``hand``: a hand-written, broadcasting TensorFlow log density (the floor);
* ``tfp_jd``: TFP's ``JointDistributionSequentialAutoBatched`` with
  ``experimental_default_event_space_bijector`` (the idiomatic TFP route).

Models: non-centered eight schools, a Bayesian logistic regression
(N x 54 synthetic design), and two programs with a loop: stochastic
volatility written with ``tf.scan`` and a 3-state hidden Markov model
(``ed.HiddenMarkovModel``, whose ``log_prob`` loops over time), both
``--steps-t`` long, from ``examples/time_series.py``.  edward_lite evaluates
a looping program's chains one after another (``tf.map_fn``: TensorFlow's
vectorizer cannot batch the gradient of a loop), so their ``hand`` peer, one
loop over time on ``[C]``-batched values, shows what that costs.  Each is timed as a chain of dependent gradient evaluations inside one
XLA-compiled ``tf.while_loop``, as a sampler runs them; prints microseconds
per batched gradient, compile seconds and the ratio to ``hand``.

    python benchmarks/target_gradient.py [--n 100000] [--chains 4 1024] [--models ...]
"""

import argparse
import os
import platform
import sys
import time

import edward_lite as ed  # first: keeps TensorFlow's start-up lines quiet

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import zoo  # noqa: E402  (eight schools, shared with the tests)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import time_series  # noqa: E402  (the loop models)

tfd, tfb = tfp.distributions, tfp.bijectors

Y8, S8, eight_schools_ed = zoo.EIGHT_SCHOOLS_Y, zoo.EIGHT_SCHOOLS_SIGMA, zoo.eight_schools


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


def sv_hand(target, y):
  """Stochastic volatility, batched by hand: u [C, 3 + T] (mu, phi, sigma
  unconstrained, h_std); one ``tf.scan`` over time on [C] values."""
  bij = {n: i.bijector for n, i in target.latents.items()}

  def log_prob(u):
    mu, h_std = u[:, 0], u[:, 3:]
    phi, sigma = bij["phi"].forward(u[:, 1]), bij["sigma"].forward(u[:, 2])
    lp = (tfd.Cauchy(0., 10.).log_prob(mu) + tfd.Uniform(-1., 1.).log_prob(phi) +
          tfd.HalfCauchy(0., 5.).log_prob(sigma) +
          bij["phi"].forward_log_det_jacobian(u[:, 1], 0) +
          bij["sigma"].forward_log_det_jacobian(u[:, 2], 0) +
          tf.reduce_sum(tfd.Normal(0., 1.).log_prob(h_std), -1))
    x1 = sigma * h_std[:, 0] / tf.sqrt(1. - phi**2)
    x = tf.scan(lambda x_prev, e: phi * x_prev + e,
                tf.transpose(sigma[:, None] * h_std[:, 1:]), initializer=x1)
    h = mu[:, None] + tf.concat([x1[:, None], tf.transpose(x)], axis=1)
    return lp + tf.reduce_sum(tfd.Normal(0., tf.exp(h / 2.)).log_prob(y), -1)

  return log_prob


def hmm_hand(target, y):
  """The 3-state HMM, batched by hand: one ``tfd.HiddenMarkovModel`` with
  batch shape [C] (its forward algorithm loops over time on [C, 3] values)."""
  bij = {n: i.bijector for n, i in target.latents.items()}

  def log_prob(u):
    chains = tf.shape(u)[0]
    u_trans, loc0, u_gaps, u_scale = u[:, :6], u[:, 6], u[:, 7:9], u[:, 9]
    u_trans = tf.reshape(u_trans, [-1, 3, 2])
    trans = bij["trans"].forward(u_trans)
    gaps, scale = bij["gaps"].forward(u_gaps), bij["scale"].forward(u_scale)
    lp = (tf.reduce_sum(tfd.Dirichlet(tf.ones([3, 3]) + 4. * tf.eye(3)).log_prob(trans), -1) +
          tf.reduce_sum(bij["trans"].forward_log_det_jacobian(u_trans, 1), -1) +
          tfd.Normal(0., 5.).log_prob(loc0) +
          tf.reduce_sum(tfd.HalfNormal(5.).log_prob(gaps) +
                        bij["gaps"].forward_log_det_jacobian(u_gaps, 0), -1) +
          tfd.HalfNormal(2.).log_prob(scale) + bij["scale"].forward_log_det_jacobian(u_scale, 0))
    locs = loc0[:, None] + tf.concat([tf.zeros([chains, 1]), tf.cumsum(gaps, -1)], -1)
    hmm = tfd.HiddenMarkovModel(tfd.Categorical(logits=tf.zeros(3)), tfd.Categorical(probs=trans),
                                tfd.Normal(locs, scale[:, None]), num_steps=y.shape[0])
    return lp + hmm.log_prob(y)

  return log_prob


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
  elif model in ("sv_scan", "hmm"):
    if model == "sv_scan":
      y = time_series.simulate_sv(STEPS_T, **time_series.SV_TRUE)[0].astype(np.float32)
      target = ed.make_target(time_series.stochastic_volatility, STEPS_T, observed={"y": y})
      hand = sv_hand(target, y)
    else:
      y = time_series.simulate_hmm(STEPS_T, **time_series.HMM_TRUE)[0]
      target = ed.make_target(time_series.hmm, STEPS_T, observed={"y": y})
      hand = hmm_hand(target, y)
    jd = None
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
  peers = {"edward_lite": target.log_prob_flat, "hand": hand, "tfp_jd": jd}
  peers = {name: fn for name, fn in peers.items() if fn is not None}
  lp_hand = hand(state).numpy()
  for name, fn in peers.items():
    lp = fn(state).numpy()
    if not np.allclose(lp, lp_hand, rtol=1e-4):
      raise AssertionError(f"{model}: {name} log density differs from hand: {lp[:3]} vs {lp_hand[:3]}")
  rows = {name: timed(fn, state, steps) for name, fn in peers.items()}
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
  parser.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
  parser.add_argument("--steps-t", type=int, default=100,
                      help="time steps of the loop models")
  args = parser.parse_args()
  global DATA, STEPS_T
  tf.get_logger().setLevel("ERROR")  # one compiled loop per model and peer, on purpose
  DATA, STEPS_T = logistic_data(args.n), args.steps_t
  print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"TF {tf.__version__}, TFP {tfp.__version__}, Python {platform.python_version()}")
  few_chains = args.chains[:1] + [c for c in args.chains[1:] if c <= 64]
  for model in args.models:
    if model == "eight_schools":
      for chains in args.chains:
        run(model, chains, args.steps)
    elif model == "logistic":
      for chains in [c for c in few_chains if c <= 16]:
        run(model, chains, max(2, args.steps // 10))
    else:
      for chains in few_chains:
        run(model, chains, max(2, args.steps // 10))


MODELS = ["eight_schools", "logistic", "sv_scan", "hmm"]
DATA = STEPS_T = None

if __name__ == "__main__":
  main()
