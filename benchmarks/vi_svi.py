"""Variational inference side by side: edward_lite's ``ed.vi.fit`` and NumPyro's SVI.

Both libraries fit the same model to the same synthetic data (fixed seeds),
in float32 on the CPU, one after the other in this process, with

* the same number of reparameterized draws per step: ``samples=S`` against
  ``Trace_ELBO(num_particles=S, vectorize_particles=True)``;
* the same optimizer: Adam at a constant learning rate (edward_lite gets
  ``optimizer=tf_keras.optimizers.Adam(lr, epsilon=1e-8)`` instead of its
  default cosine decay; NumPyro ``numpyro.optim.Adam(lr)``, whose epsilon is
  1e-8 too.  tf_keras folds the bias correction into the step size, so its
  epsilon acts on the uncorrected second moment: negligible here);
* the same number of steps, run as compiled chunks of 100 steps with the
  ELBO trace brought to the host between chunks (``ed.vi.fit`` does this
  itself; for NumPyro a ``jax.jit``-compiled ``lax.scan`` of 100
  ``svi.update`` calls, the data passed as arguments -- what ``svi.run``
  does in one scan over all steps);
* the same initialization where the families allow it: location uniform in
  (-2, 2) on the unconstrained space and scale 0.1 (mean-field and
  full-rank on both sides).  ``warm_start=0``: edward_lite's flows otherwise
  run 500 mean-field steps first, which NumPyro's guides do not;
* the same unconstrained space: edward_lite maps each latent through TFP's
  default event-space bijector, NumPyro through ``biject_to(support)``.
  They agree except for TFP's HalfNormal (softplus; NumPyro: exp), so the
  NumPyro IRT program declares ``sigma_beta`` and ``sigma_gamma`` with
  ``constraints.softplus_positive`` support -- otherwise the two Gaussian
  families would be different distributions of those scales.  (HalfCauchy
  is exp in both.)  Before fitting, the script checks that both libraries'
  unconstrained log densities (Jacobians included) agree at random points.

Families (``--families``) and their NumPyro guides:

* ``meanfield`` <-> ``AutoNormal``;
* ``fullrank``  <-> ``AutoMultivariateNormal``;
* ``iaf``       <-> ``AutoIAFNormal``: ``ed.vi.IAF(layers=L, hidden=(H, H))``
  against ``AutoIAFNormal(num_flows=L, hidden_dims=[H, H],
  nonlinearity=stax.Tanh)`` (edward_lite's MADE uses tanh).  NumPyro needs
  ``H >= D``, so ``H = max(--iaf-hidden, D)`` for both: on the IRT model
  (D = 1,003) that is three 1003-1003-1003-2006 MADEs, ~4-7 steps/s here, so
  IRT x IAF runs only with ``--irt-iaf``.  Remaining
  differences: edward_lite starts the flow at the identity (zero output
  layer) under a learned mean-field affine map, NumPyro starts from
  randomly initialized networks on a standard normal; permutations between
  layers are random (edward_lite) or reversals (NumPyro); log-scales are
  softly bounded by 3 (edward_lite) or clipped to [-5, 3] (NumPyro);
* ``realnvp``: edward_lite only.  NumPyro has no RealNVP guide; its other
  flow guide, ``AutoBNAFNormal`` (block neural autoregressive flow), is a
  different architecture with different costs per draw, so a steps/s ratio
  against it would compare architectures, not implementations.

Models (``--models``):

1. ``logistic``: Bayesian logistic regression with intercept, N = 10,000 x
   D = 20 dense synthetic design (X_ij ~ N(0, 1/D), w_true ~ N(0, I), b_true
   = 0.5; w ~ N(0, I), b ~ N(0, 1));
2. ``eight_schools``: non-centered, data and program of
   ``examples/eight_schools.py``;
3. ``irt``: hierarchical 2PL IRT, I = 800 students x K = 100 items, 1,003
   latents: theta_i ~ N(0, 1); mu_beta ~ N(0, 1); sigma_beta, sigma_gamma ~
   HalfNormal(1); beta_k ~ N(mu_beta, sigma_beta); log_gamma_k ~ N(0,
   sigma_gamma) (a Normal latent on log gamma in both libraries); y_ik ~
   Bernoulli(logit^-1(gamma_k (theta_i - beta_k))); data from fixed true values
   (mu_beta 0, sigma_beta 1, sigma_gamma 0.5) and NumPy seed ``--data-seed``
   (the generator of ``benchmarks/mcmc_nuts.py``).

Printed per (model, family): S, steps/s, compile seconds, final ELBO (mean of
the per-step ELBO estimates over the last 10% of steps; NumPyro's is minus
its loss), ours/NumPyro steps/s, and the largest standardized difference of
the two fits' posterior means (``|m_ed - m_np| / sd_np`` over all scalar
latents, 2000 draws from each surrogate) as a check that both fitted the same
posterior.

Timing.  ``steps/s`` excludes compilation: it is the steps after the first
chunk / the wall time of every chunk after the first (for edward_lite its own
``timings["steps_per_s"]``).
``compile s`` is the wall time of the whole call (edward_lite: ``ed.vi.fit``
including ``make_target``; NumPyro: ``svi.init`` + all chunks) minus the
time of all its steps at the steady rate: tracing, setup and XLA compilation.

    cd /work/main && PYTHONPATH=. /work/benchvenv/bin/python benchmarks/vi_svi.py
    # smoke run (about a minute): 200 steps, small data, mean-field only
    ... benchmarks/vi_svi.py --quick
    # where edward_lite's time goes (log density + gradient alone vs a step):
    ... benchmarks/vi_svi.py --profile --models logistic irt --families meanfield
"""

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_enable_x64", False)

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
import tf_keras  # noqa: E402

import edward_lite as ed  # noqa: E402

tf.get_logger().setLevel("ERROR")  # ed.vi.fit builds a tf.function per fit: retracing notes

import numpyro  # noqa: E402
import numpyro.distributions as npd  # noqa: E402
from jax.example_libraries import stax  # noqa: E402
from numpyro.infer import SVI, Trace_ELBO  # noqa: E402
from numpyro.infer.autoguide import (AutoIAFNormal, AutoMultivariateNormal,  # noqa: E402
                                     AutoNormal)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import eight_schools as eight_schools_example  # noqa: E402
import irt_2pl  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402

CHUNK = 100  # steps per compiled call, as ed.vi.fit's default chunk_size
DRAWS_CHECK = 2000

# -- models ---------------------------------------------------------------------------------


def logistic_data(n, d, seed):
  """X_ij ~ N(0, 1/d), w_true ~ N(0, I), b_true = 0.5, y ~ Bernoulli(logits = X w + b)."""
  rng = np.random.default_rng(seed)
  x = (rng.normal(size=(n, d)) / np.sqrt(d)).astype(np.float32)
  w = rng.normal(size=d)
  y = (rng.uniform(size=n) < 1. / (1. + np.exp(-(x @ w + 0.5)))).astype(np.int32)
  return x, y


def logistic_ed(x):
  w = ed.Normal(0., 1., sample_shape=x.shape[-1], name="w")
  b = ed.Normal(0., 1., name="b")
  return ed.Bernoulli(logits=tf.linalg.matvec(x, w) + b, name="y")


def logistic_np(x, y=None):
  w = numpyro.sample("w", npd.Normal(0., 1.).expand([x.shape[-1]]).to_event(1))
  b = numpyro.sample("b", npd.Normal(0., 1.))
  numpyro.sample("y", npd.Bernoulli(logits=x @ w + b).to_event(1), obs=y)


class HalfNormalSoftplus(npd.HalfNormal):
  """NumPyro's HalfNormal whose unconstrained space is softplus^-1, as TFP's
  default event-space bijector (edward_lite's): the same variational family."""
  support = npd.constraints.softplus_positive


def eight_schools_np(sigma, y=None):
  mu = numpyro.sample("mu", npd.Normal(0., 5.))
  tau = numpyro.sample("tau", npd.HalfCauchy(5.))
  theta_tilde = numpyro.sample("theta_tilde",
                               npd.Normal(0., 1.).expand([sigma.shape[0]]).to_event(1))
  numpyro.sample("y", npd.Normal(mu + tau * theta_tilde, sigma).to_event(1), obs=y)


def irt_np(students, items, y=None):
  theta = numpyro.sample("theta", npd.Normal(0., 1.).expand([students]).to_event(1))
  mu_beta = numpyro.sample("mu_beta", npd.Normal(0., 1.))
  sigma_beta = numpyro.sample("sigma_beta", HalfNormalSoftplus(1.))
  sigma_gamma = numpyro.sample("sigma_gamma", HalfNormalSoftplus(1.))
  beta = numpyro.sample("beta", npd.Normal(mu_beta, sigma_beta).expand([items]).to_event(1))
  log_gamma = numpyro.sample("log_gamma",
                             npd.Normal(0., sigma_gamma).expand([items]).to_event(1))
  logits = jnp.exp(log_gamma) * (theta[:, None] - beta)
  numpyro.sample("y", npd.Bernoulli(logits=logits).to_event(2), obs=y)


class Model:
  """One model in both libraries: ``ed_fn(*ed_args)`` observed ``ed_observed``,
  ``np_fn(*np_args)`` (the data among its arguments, so it is traced, not baked in)."""

  def __init__(self, name, label, ed_fn, ed_args, ed_observed, np_fn, np_args, np_static,
               latents):
    self.name, self.label = name, label
    self.ed_fn, self.ed_args, self.ed_observed = ed_fn, ed_args, ed_observed
    self.np_fn, self.np_args = np_fn, np_args
    self.np_static = np_static        # positions of np_args that are Python ints
    self.latents = latents            # names, program order
    self.dim = None                   # unconstrained dimension (set from the target)


def make_model(name, args):
  if name == "logistic":
    x, y = logistic_data(args.logistic_n, args.logistic_d, args.data_seed)
    return Model("logistic", f"logistic {args.logistic_n // 1000}k x {args.logistic_d}",
                 logistic_ed, (tf.constant(x),), {"y": y}, logistic_np,
                 (jnp.asarray(x), jnp.asarray(y)), (), ("w", "b"))
  if name == "eight_schools":
    sigma, y = eight_schools_example.SIGMA, eight_schools_example.Y
    return Model("eight_schools", "eight schools (nc)", eight_schools_example.eight_schools,
                 (sigma,), {"y": y}, eight_schools_np, (jnp.asarray(sigma), jnp.asarray(y)),
                 (), ("mu", "tau", "theta_tilde"))
  if name == "irt":
    i, k = args.irt_students, args.irt_items
    y = irt_2pl.make_data(args.data_seed, i, k)
    return Model("irt", f"IRT 2PL {i} x {k}", irt_2pl.model, (i, k), {"y": y}, irt_np,
                 (i, k, jnp.asarray(y)), (0, 1), irt_2pl.NAMES)
  raise ValueError(name)


def check_same_density(model, target):
  """Max relative difference of the two libraries' unconstrained log densities
  (Jacobians included) at 8 points uniform in (-2, 2)^D."""
  from numpyro.infer.util import initialize_model  # pylint: disable=g-import-not-at-top
  info = initialize_model(jax.random.PRNGKey(0), model.np_fn, model_args=model.np_args)
  u = np.random.default_rng(7).uniform(-2., 2., (8, target.dim)).astype(np.float32)
  ours = target.log_prob_flat(u).numpy().astype(np.float64)
  parts = {k: np.asarray(v) for k, v in target.unflatten(u).items()}
  theirs = np.asarray(jax.vmap(lambda p: -info.potential_fn(p))(
      {k: jnp.asarray(v) for k, v in parts.items()}), np.float64)
  return float(np.max(np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1.)))


# -- families -------------------------------------------------------------------------------


def iaf_hidden(model, args):
  return max(args.iaf_hidden, model.dim)


def ed_family(family, model, args):
  if family == "iaf":
    h = iaf_hidden(model, args)
    return ed.vi.IAF(layers=args.iaf_layers, hidden=(h, h)), f"IAF {args.iaf_layers}x({h},{h})"
  if family == "realnvp":
    h = args.realnvp_hidden
    return (ed.vi.RealNVP(layers=args.realnvp_layers, hidden=(h, h)),
            f"RealNVP {args.realnvp_layers}x({h},{h})")
  return family, family


def np_guide(family, model, args):
  if family == "meanfield":
    return AutoNormal(model.np_fn), "AutoNormal"
  if family == "fullrank":
    return AutoMultivariateNormal(model.np_fn), "AutoMultivariateNormal"
  if family == "iaf":
    h = iaf_hidden(model, args)
    return (AutoIAFNormal(model.np_fn, num_flows=args.iaf_layers, hidden_dims=[h, h],
                          nonlinearity=stax.Tanh),
            f"AutoIAFNormal {args.iaf_layers}x({h},{h})")
  return None, "-"


DEFAULT_SAMPLES = {"meanfield": 32, "fullrank": 32, "iaf": 32, "realnvp": 32}
# Constant Adam rates, the same for both libraries: edward_lite's per-family defaults.
DEFAULT_LR = {"meanfield": 0.05, "fullrank": 0.02, "iaf": 0.005, "realnvp": 0.005}


# -- runs -----------------------------------------------------------------------------------


def tail_mean(elbo):
  """(mean, standard error) of the last 10% of the per-step ELBO estimates."""
  elbo = np.asarray(elbo, np.float64)
  tail = elbo[-max(1, len(elbo) // 10):]
  tail = tail[np.isfinite(tail)]
  if not tail.size:
    return float("nan"), float("nan")
  return float(tail.mean()), float(tail.std() / np.sqrt(tail.size))


def fmt_elbo(run):
  mean, se = tail_mean(run["elbo"])
  bad = int(np.sum(~np.isfinite(run["elbo"])))
  text = f"{mean:.2f} ± {se:.2f}" if abs(mean) < 1e7 else (
      f"{mean:.1e} (diverged)" if np.isfinite(mean) else "non-finite")
  if bad:
    first = int(np.argmax(~np.isfinite(run["elbo"])))
    text += f" ({bad} non-finite steps from step {first})"
  return text


def run_ed(model, family, samples, lr, args):
  fam, desc = ed_family(family, model, args)
  optimizer = tf_keras.optimizers.Adam(lr, epsilon=1e-8)
  start = time.perf_counter()
  result = ed.vi.fit(model.ed_fn, *model.ed_args, observed=model.ed_observed, family=fam,
                     steps=args.steps, samples=samples, seed=args.seed, optimizer=optimizer,
                     warm_start=0, progress=False)
  wall = time.perf_counter() - start
  rate = result.timings["steps_per_s"]  # steps after the first chunk / their wall time
  draws = result.sample(DRAWS_CHECK, seed=args.seed + 1)
  return dict(desc=desc, elbo=np.asarray(result.elbo), rate=rate,
              compile_s=wall - result.steps / rate, wall=wall, draws=draws,
              result=result)


def run_np(model, family, samples, lr, args):
  guide, desc = np_guide(family, model, args)
  if guide is None:
    return None
  svi = SVI(model.np_fn, guide, numpyro.optim.Adam(lr),
            Trace_ELBO(num_particles=samples, vectorize_particles=True))
  static = model.np_static  # Python ints (shapes): closed over, not traced
  data = tuple(a for i, a in enumerate(model.np_args) if i not in static)

  def merge(data_args):
    it = iter(data_args)
    return tuple(model.np_args[i] if i in static else next(it)
                 for i in range(len(model.np_args)))

  @jax.jit
  def chunk(state, data_args):
    full = merge(data_args)

    def body(s, _):
      return svi.update(s, *full)

    return jax.lax.scan(body, state, None, length=CHUNK)

  key = jax.random.PRNGKey(args.seed)
  start = time.perf_counter()
  state = svi.init(key, *model.np_args)
  init_s = time.perf_counter() - start
  losses, times = [], []
  for _ in range(args.steps // CHUNK):
    t0 = time.perf_counter()
    state, loss = chunk(state, data)
    losses.append(np.asarray(loss))  # blocks: the trace comes to the host each chunk
    times.append(time.perf_counter() - t0)
  wall = time.perf_counter() - start
  rate = (args.steps - CHUNK) / sum(times[1:])
  params = svi.get_params(state)
  draws = guide.sample_posterior(jax.random.PRNGKey(args.seed + 1), params, *model.np_args,
                                 sample_shape=(DRAWS_CHECK,))
  elbo = -np.concatenate(losses)
  return dict(desc=desc, elbo=elbo, rate=rate, compile_s=wall - args.steps / rate, wall=wall,
              init_s=init_s,
              draws={k: np.asarray(v) for k, v in draws.items() if k in model.latents})


def mean_gap(ours, theirs, names):
  """max over scalar latents of |mean_ours - mean_theirs| / sd_theirs."""
  worst, where = 0., ""
  for name in names:
    a = np.asarray(ours[name], np.float64).reshape(DRAWS_CHECK, -1)
    b = np.asarray(theirs[name], np.float64).reshape(DRAWS_CHECK, -1)
    z = np.abs(a.mean(0) - b.mean(0)) / np.maximum(b.std(0), 1e-12)
    if not np.all(np.isfinite(z)):
      return float("nan"), "non-finite draws"
    i = int(np.argmax(z))
    if z[i] > worst:
      worst, where = float(z[i]), name + (f"[{i}]" if a.shape[1] > 1 else "")
  return worst, where


# -- profile: where edward_lite's step time goes ----------------------------------------------


def profile(model, samples, args):
  """Times, per call of S draws, inside one compiled loop of ``reps`` dependent calls:
  edward_lite's ``target.log_prob_flat`` value+gradient (custom per-draw gradient in
  ``vectorized_map``), a hand-written broadcasting TF density of the same model,
  NumPyro's potential (``jax.vmap(value_and_grad)``) and a full mean-field step of
  each library."""
  target = ed.make_target(model.ed_fn, *model.ed_args, observed=model.ed_observed)
  d = target.dim
  reps = args.profile_reps
  u0 = tf.random.stateless_uniform([samples, d], [3, 4], -0.5, 0.5)

  def tf_loop(fn):
    @tf.function(jit_compile=True)
    def loop(u):
      def body(i, u, acc):
        lp, g = fn(u)
        return i + 1, u + 1e-6 * g, acc + tf.reduce_sum(lp)
      return tf.while_loop(lambda i, *_: i < reps, body, (0, u, 0.))[2]
    return loop

  def ed_vg(u):
    with tf.GradientTape() as tape:
      tape.watch(u)
      lp = target.log_prob_flat(u)
    return lp, tape.gradient(lp, u)

  rows = {"ed log_prob_flat + grad": tf_loop(ed_vg)}
  hand = HAND_TF.get(model.name)
  if hand is not None:
    lp_fn = hand(model)
    lp_ed, lp_hand = target.log_prob_flat(u0).numpy(), lp_fn(u0).numpy()
    if not np.allclose(lp_ed, lp_hand, rtol=1e-4):
      print(f"  hand-written TF density differs: {lp_ed[:3]} vs {lp_hand[:3]}")

    def hand_vg(u):
      with tf.GradientTape() as tape:
        tape.watch(u)
        lp = lp_fn(u)
      return lp, tape.gradient(lp, u)

    rows["TF hand-written + grad"] = tf_loop(hand_vg)

  # NumPyro's potential energy over S draws: jax.vmap(value_and_grad).
  from numpyro.infer.util import initialize_model  # pylint: disable=g-import-not-at-top
  info = initialize_model(jax.random.PRNGKey(0), model.np_fn, model_args=model.np_args)
  from jax.flatten_util import ravel_pytree  # pylint: disable=g-import-not-at-top
  _, unravel = ravel_pytree(info.param_info.z)
  np_vg = jax.vmap(jax.value_and_grad(lambda u: -info.potential_fn(unravel(u))))

  @jax.jit
  def np_loop(u):
    def body(i, carry):
      u, acc = carry
      lp, g = np_vg(u)
      return u + 1e-6 * g, acc + jnp.sum(lp)
    return jax.lax.fori_loop(0, reps, body, (u, 0.))[1]

  print(f"\n## profile: {model.label}, S = {samples} draws per call, D = {d}; "
        f"ms per call (median of 5 loops of {reps} dependent calls)")
  u_np = jnp.asarray(u0.numpy())

  def med(fn):
    fn()
    times = []
    for _ in range(5):
      t0 = time.perf_counter()
      fn()
      times.append(time.perf_counter() - t0)
    return float(np.median(times)) / reps * 1e3

  for name, loop in rows.items():
    print(f"  {name:34s} {med(lambda: loop(u0).numpy()):8.3f} ms")
  print(f"  {'NumPyro potential + grad (vmap)':34s} "
        f"{med(lambda: np.asarray(np_loop(u_np))):8.3f} ms")
  # Full steps (mean-field, S draws), steady state, from the fits' own timers.
  args_steps = args.steps
  args.steps = max(3 * CHUNK, 300)
  e = run_ed(model, "meanfield", samples, 0.01, args)
  n = run_np(model, "meanfield", samples, 0.01, args)
  args.steps = args_steps
  print(f"  {'ed.vi.fit meanfield step':34s} {1e3 / e['rate']:8.3f} ms")
  print(f"  {'NumPyro SVI AutoNormal step':34s} {1e3 / n['rate']:8.3f} ms")


def _hand_logistic(model):
  x = model.ed_args[0]
  yf = tf.constant(model.ed_observed["y"], tf.float32)
  n01 = tfp.distributions.Normal(0., 1.)

  def lp(u):
    w, b = u[:, :-1], u[:, -1]
    logits = tf.matmul(w, x, transpose_b=True) + b[:, None]  # [S, N]
    return (tf.reduce_sum(n01.log_prob(u), -1) +
            tf.reduce_sum(yf * logits - tf.nn.softplus(logits), -1))
  return lp


def _hand_irt(model):
  i, k = model.ed_args
  yf = tf.constant(model.ed_observed["y"], tf.float32)
  n01, hn = tfp.distributions.Normal(0., 1.), tfp.distributions.HalfNormal(1.)
  tfd = tfp.distributions

  def lp(u):
    theta, mu_b = u[:, :i], u[:, i]
    raw_sb, raw_sg = u[:, i + 1], u[:, i + 2]
    beta, log_gamma = u[:, i + 3:i + 3 + k], u[:, i + 3 + k:]
    sb, sg = tf.nn.softplus(raw_sb), tf.nn.softplus(raw_sg)
    jac = tf.math.log_sigmoid(raw_sb) + tf.math.log_sigmoid(raw_sg)  # d softplus = sigmoid
    out = (tf.reduce_sum(n01.log_prob(theta), -1) + n01.log_prob(mu_b) + jac +
           hn.log_prob(sb) + hn.log_prob(sg) +
           tf.reduce_sum(tfd.Normal(mu_b[:, None], sb[:, None]).log_prob(beta), -1) +
           tf.reduce_sum(tfd.Normal(0., sg[:, None]).log_prob(log_gamma), -1))
    logits = tf.exp(log_gamma)[:, None, :] * (theta[:, :, None] - beta[:, None, :])
    return out + tf.reduce_sum(yf * logits - tf.nn.softplus(logits), [-2, -1])
  return lp


HAND_TF = {"logistic": _hand_logistic, "irt": _hand_irt}


# -- report ---------------------------------------------------------------------------------


def print_header(args):
  version = machine.version
  print(machine.machine_line())
  print(f"# Python {platform.python_version()}; NumPy {np.__version__}; TF {tf.__version__}; "
        f"TFP {tfp.__version__}; tf_keras {version('tf_keras')}; JAX {jax.__version__} "
        f"(jaxlib {version('jaxlib')}); NumPyro {version('numpyro')}; "
        f"edward_lite {ed.__version__}")
  print(f"# JAX devices: {jax.devices()}; float32 in both libraries; {args.steps} steps, "
        f"chunks of {CHUNK}; Adam at a constant rate; seed {args.seed}, data seed "
        f"{args.data_seed}")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--models", nargs="+", default=["logistic", "eight_schools", "irt"],
                      choices=["logistic", "eight_schools", "irt"])
  parser.add_argument("--families", nargs="+", default=None,
                      choices=["meanfield", "fullrank", "iaf", "realnvp"],
                      help="default: all four (--quick: meanfield)")
  parser.add_argument("--irt-iaf", action="store_true",
                      help="also run IAF on the IRT model (MADEs of width >= D = 1003: slow)")
  parser.add_argument("--steps", type=int, default=1000, help="a multiple of 100")
  parser.add_argument("--samples", type=int, default=None,
                      help=f"draws per step for every family (default {DEFAULT_SAMPLES})")
  parser.add_argument("--lr", type=float, default=None,
                      help=f"constant Adam rate for every family (default {DEFAULT_LR})")
  parser.add_argument("--iaf-layers", type=int, default=3)
  parser.add_argument("--iaf-hidden", type=int, default=32,
                      help="hidden width of the IAF MADEs (raised to D: NumPyro needs >= D)")
  parser.add_argument("--realnvp-layers", type=int, default=4)
  parser.add_argument("--realnvp-hidden", type=int, default=64)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--data-seed", type=int, default=0)
  parser.add_argument("--logistic-n", type=int, default=10_000)
  parser.add_argument("--logistic-d", type=int, default=20)
  parser.add_argument("--irt-students", type=int, default=800)
  parser.add_argument("--irt-items", type=int, default=100)
  parser.add_argument("--quick", action="store_true",
                      help="smoke run: 200 steps, logistic 2k x 20, IRT 200 x 30, "
                           "meanfield only (unless --families)")
  parser.add_argument("--profile", action="store_true",
                      help="also time edward_lite's log density + gradient alone against a "
                           "hand-written TF density, NumPyro's potential and full steps")
  parser.add_argument("--profile-reps", type=int, default=100)
  args = parser.parse_args()
  if args.quick:
    args.steps = min(args.steps, 200)
    args.logistic_n, args.irt_students, args.irt_items = 2000, 200, 30
    args.families = args.families or ["meanfield"]
  args.families = args.families or ["meanfield", "fullrank", "iaf", "realnvp"]
  if args.steps % CHUNK or args.steps < 2 * CHUNK:
    parser.error(f"--steps must be a multiple of {CHUNK}, at least {2 * CHUNK}")

  print_header(args)
  rows, failures = [], []
  for name in args.models:
    model = make_model(name, args)
    target = ed.make_target(model.ed_fn, *model.ed_args, observed=model.ed_observed)
    model.dim = target.dim
    diff = check_same_density(model, target)
    print(f"# {model.label}: D = {model.dim}; unconstrained log densities of the two "
          f"libraries agree to {diff:.1e} (relative){'' if diff < 1e-4 else '  MISMATCH'}")
    if diff >= 1e-4:
      failures.append(f"{model.label}: log densities differ ({diff:.1e})")
    for family in args.families:
      if name == "irt" and family == "iaf" and not args.irt_iaf:
        print(f"  skipping {model.label} / iaf (NumPyro's MADE width must be >= D = "
              f"{model.dim}; --irt-iaf runs it)", file=sys.stderr)
        continue
      samples = args.samples or DEFAULT_SAMPLES[family]
      lr = args.lr or DEFAULT_LR[family]
      print(f"  running {model.label} / {family} (S={samples}, lr={lr}) ...", file=sys.stderr,
            flush=True)
      with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = run_ed(model, family, samples, lr, args)
        theirs = run_np(model, family, samples, lr, args)
      gap = mean_gap(ours["draws"], theirs["draws"], model.latents) if theirs else None
      rows.append((model, family, samples, lr, ours, theirs, gap))
      print(f"    ed {ours['rate']:.0f} steps/s [{ours['compile_s']:.1f}s], ELBO "
            f"{fmt_elbo(ours)}" + (
                f"; numpyro {theirs['rate']:.0f} steps/s [{theirs['compile_s']:.1f}s, of "
                f"which svi.init {theirs['init_s']:.1f}s], ELBO "
                f"{fmt_elbo(theirs)}" if theirs else ""),
            file=sys.stderr, flush=True)

  print("\n| model | D | family / guide | S | lr | steps/s ours | steps/s NumPyro | "
        "compile s ours | compile s NumPyro | final ELBO ours | final ELBO NumPyro | "
        "ours / NumPyro steps/s | max mean gap (sd) |")
  print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
  for model, family, samples, lr, ours, theirs, gap in rows:
    if theirs:
      gap_text = f"{gap[0]:.2f} ({gap[1]})" if np.isfinite(gap[0]) else gap[1]
      print(f"| {model.label} | {model.dim} | {ours['desc']} / {theirs['desc']} | {samples} | "
            f"{lr:g} | {ours['rate']:,.0f} | {theirs['rate']:,.0f} | {ours['compile_s']:.1f} | "
            f"{theirs['compile_s']:.1f} | {fmt_elbo(ours)} | {fmt_elbo(theirs)} | "
            f"**{ours['rate'] / theirs['rate']:.2f}** | {gap_text} |")
    else:
      print(f"| {model.label} | {model.dim} | {ours['desc']} / - | {samples} | {lr:g} | "
            f"{ours['rate']:,.0f} | - | {ours['compile_s']:.1f} | - | {fmt_elbo(ours)} | - | "
            "- | - |")
  print("\nsteps/s: steps after the first chunk of 100 / their wall time (compile excluded); "
        "compile s: wall time of the whole call minus all its steps at that rate; final ELBO: "
        "mean ± s.e. of the per-step estimates over the last 10% of steps; max mean gap: "
        f"largest |mean_ours - mean_NumPyro| / sd_NumPyro over scalar latents ({DRAWS_CHECK} "
        "draws each).")
  print(f"# load average at the end: {os.getloadavg()[0]:.2f}")
  if failures:
    print("CHECKS FAILED:\n  " + "\n  ".join(failures))
  sys.stdout.flush()

  if args.profile:
    for name in args.models:
      model = make_model(name, args)
      profile(model, args.samples or DEFAULT_SAMPLES["meanfield"], args)
  if failures:
    sys.exit(1)


if __name__ == "__main__":
  main()
