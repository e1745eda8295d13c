"""NUTS side by side: edward_lite, NumPyro, TFP and Stan on three models.

Measures, per implementation and model, for ``--chains`` chains x
(``--warmup`` + ``--draws``) iterations (default 4 x (1000 + 1000)):

* compile seconds and run seconds (compile excluded);
* total gradient evaluations (leapfrog steps summed over chains, warmup
  included) and seconds per gradient (run seconds / that total; vectorized
  samplers advance all chains together, so lanes idle while the longest tree
  finishes are part of the cost);
* min bulk ESS over all scalar parameters, ESS/s excluding and including
  compile, max R-hat (rank-normalized split, ``max(bulk, tail)``) and the
  divergences after warmup.  ESS and R-hat are computed for every
  implementation by ``edward_lite.analysis.diagnostics`` on ``[draws, chains, ...]``
  arrays of the constrained parameters, so the method is identical;
* ``cores`` (process CPU seconds / wall seconds of the timed call; n/a for
  Stan, whose chains run in subprocesses) and ``lockstep`` (for samplers that
  advance the chains as one batch: useful leapfrog steps / (chains x the
  steps of the longest tree in each iteration), after warmup -- 1.0 when
  every chain's tree has the same size);
* agreement of posterior means: between every pair of implementations,
  ``z = |m_a - m_b| / sqrt(mcse_a^2 + mcse_b^2)`` (max over parameters, flagged
  above ``--z-max``), and for eight schools against the long Stan reference
  ``tests/refs/eight_schools.json`` (a long Stan run).

Implementations (``--impls``):

* ``edward_lite``      -- ``ed.mcmc.sample(kernel="nuts")``: edward_lite's own
  iterative NUTS (``edward_lite/mcmc/nuts.py``) over batched chains in compiled
  chunks, Stan-style windowed diagonal metric and dual-averaging step size.
  Compile = a first tiny call (warmup=1, draws=1) that builds and compiles the
  program; the timed call reuses it.
* ``edward_lite_tfp``  -- the same sampler with TFP's ``NoUTurnSampler`` as the
  transition kernel (``TFPNUTS`` of ``tests/tfp_nuts.py``): the benchmark
  that decides which NUTS is the default.
* ``edward_lite_pooled`` -- ``edward_lite`` with ``pooled=True`` (one step
  size and one metric for all chains from the start);
  ``edward_lite_pooled_metric`` with ``pooled="metric"`` (per-chain step
  sizes, one metric from all chains); ``edward_lite_per_chain`` with
  ``pooled=False`` (per-chain step size and metric, Stan's scheme): what
  the default (the bulk of the chains sharing one step size after the
  initial window) costs or saves.
* ``numpyro``          -- NumPyro NUTS, ``chain_method="vectorized"``.
* ``numpyro_parallel`` -- NumPyro NUTS, ``chain_method="parallel"`` (pmap) over
  the host CPU devices (``XLA_FLAGS=--xla_force_host_platform_device_count=2``
  set below); only when chains <= devices (NumPyro would otherwise draw the
  chains sequentially), else skipped.  NumPyro compile = wall time spent in
  JAX tracing, lowering and XLA compilation (union of the intervals JAX
  reports through ``jax.monitoring``), run = wall - compile.
* ``tfp``              -- plain ``tfp.mcmc.NoUTurnSampler`` in
  ``DualAveragingStepSizeAdaptation`` (target 0.8, 80% of warmup), identity
  metric, one ``sample_chain`` under ``tf.function(jit_compile=True)`` on a
  hand-written batched unconstrained log density.  Sizes are static, so it is
  called twice: compile = first - second (scaled by gradient counts), run =
  second call, whose draws are used.
* ``tfp_windowed``     -- ``tfp.experimental.mcmc.windowed_adaptive_nuts`` on a
  ``tfd.JointDistributionNamed`` (diagonal metric, target 0.8), under XLA,
  called twice the same way but with the same seed (under XLA its seed is a
  compile-time constant: every new seed value recompiles the program).
* ``stan``             -- Stan NUTS via PyStan 3 (``--stan``; double precision,
  chains in parallel processes).  Compile = ``stan.build`` (C++ compile,
  from scratch);
  run = ``sample`` wall time (includes PyStan's JSON data/draw transfer,
  which dominates for the 100,000 x 54 logistic data: the time of a second,
  cached build is printed as a measure of it).
  httpstan's cached model is deleted first so the compile is real
  (``--stan-reuse-compiled`` keeps it; a cached build is marked ``*`` and left
  out of the compile-inclusive ratios).
  httpstan caches fits by seed; cached fits are deleted first, so the run is
  always real.

Models (``--models``):

1. ``eight_schools`` -- non-centered (mu, tau, theta_tilde[8]);
2. ``logistic``      -- Bayesian logistic regression, ``--logistic-n`` (100,000)
   x 54 synthetic: w ~ N(0, I); y ~ Bernoulli(logits = X w); data from seed
   ``--data-seed``: w_true ~ N(0, I), X_ij ~ N(0, 1/54) (so logits have unit
   scale, like standardized features);
3. ``irt``           -- hierarchical 2PL IRT, ``--irt-students`` (800) x
   ``--irt-items`` (100), every pair observed: theta_i ~ N(0,1); mu_beta ~
   N(0,1); sigma_beta, sigma_gamma ~ HalfNormal(1); beta_k ~ N(mu_beta,
   sigma_beta); log gamma_k ~ N(0, sigma_gamma); y_ik ~ Bernoulli(logit^-1(
   gamma_k (theta_i - beta_k))); 1,003 parameters; data from fixed true
   values (mu_beta 0, sigma_beta 1, sigma_gamma 0.5) and seed ``--data-seed``;
4. ``grad``          -- time per log-density gradient of the logistic model at
   ``--grad-n`` (581,012, covertype) x 54 for ``--grad-chains`` (1 4)
   chains: edward_lite's ``make_target(...).value_and_gradient_flat`` under
   ``tf.function(jit_compile=True)``, a hand-written TF density (the TF
   floor), ``jax.jit(vmap(value_and_grad))`` of a hand-written JAX log density
   and of NumPyro's potential energy.  Values and gradients are checked equal.

    cd /work/main && PYTHONPATH=. /work/benchvenv/bin/python benchmarks/mcmc_nuts.py [--stan]
    # small validation run:
    ... benchmarks/mcmc_nuts.py --stan --warmup 300 --draws 300 --logistic-n 5000 \\
        --irt-students 100 --irt-items 20 --grad-n 50000
"""

import os

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=2").strip()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from typing import Any, Callable, Dict, Optional  # noqa: E402

import numpy as np  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import edward_lite as ed  # noqa: E402
from edward_lite.analysis import diagnostics  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import zoo  # noqa: E402  (eight schools, shared with the tests)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import irt_2pl  # noqa: E402  (the IRT 2PL model and data, shared with the VI examples)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402  (the header every benchmark prints)

try:
  import numpyro  # noqa: E402
  import numpyro.distributions as npd  # noqa: E402
  from numpyro.infer import MCMC as NumPyroMCMC, NUTS as NumPyroNUTS  # noqa: E402
except ImportError:  # pragma: no cover
  numpyro = None

tfd = tfp.distributions

REF_EIGHT_SCHOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                 "refs", "eight_schools.json")
TARGET_ACCEPT = 0.8

# -- compile-time accounting for JAX ------------------------------------------------------

_JAX_COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
                       "/jax/core/compile/jaxpr_to_mlir_module_duration",
                       "/jax/core/compile/backend_compile_duration")


class JaxCompileTimer:
  """Wall seconds JAX spends tracing, lowering and compiling while active
  (the union of the reported time spans, so nested traces count once)."""

  def __init__(self):
    self.spans = []
    self.active = False
    jax.monitoring.register_event_time_span_listener(self._listen)

  def _listen(self, event, start, end, **kwargs):
    del kwargs
    if self.active and event in _JAX_COMPILE_EVENTS:
      self.spans.append((start, end))

  def __enter__(self):
    self.spans, self.active = [], True
    return self

  def __exit__(self, *exc):
    self.active = False

  def seconds(self):
    total, last_end = 0., -np.inf
    for start, end in sorted(self.spans):
      if end > last_end:
        total += end - max(start, last_end)
        last_end = end
    return total


JAX_COMPILE_TIMER = JaxCompileTimer()


# -- models -------------------------------------------------------------------------------


@dataclasses.dataclass
class Model:
  """One model in every framework, with canonical parameter names and shapes."""
  name: str
  params: Dict[str, tuple]           # canonical order = flat unconstrained layout
  positive: tuple                    # parameters constrained by exp
  ed_fn: Callable
  ed_args: tuple
  ed_observed: dict
  np_fn: Optional[Callable]
  np_args: tuple
  np_kwargs: dict
  tf_log_prob: Callable              # flat unconstrained [C, D] -> [C], hand-written TF
  jd: Any                            # tfd.JointDistributionNamed (unpinned)
  pins: dict
  stan_code: str
  stan_data: dict
  ref: Optional[dict] = None         # reference posterior (eight schools)

  @property
  def dim(self):
    return int(sum(np.prod(s, dtype=int) for s in self.params.values()))

  def split_flat(self, u):
    """Flat unconstrained [..., D] -> dict of constrained [..., *shape] (NumPy)."""
    out, offset = {}, 0
    for name, shape in self.params.items():
      size = int(np.prod(shape, dtype=int))
      x = u[..., offset:offset + size].reshape(u.shape[:-1] + tuple(shape))
      out[name] = np.exp(x) if name in self.positive else x
      offset += size
    return out


# Eight schools ----------------------------------------------------------------------------

Y8, S8 = zoo.EIGHT_SCHOOLS_Y, zoo.EIGHT_SCHOOLS_SIGMA
eight_schools_ed = zoo.eight_schools


def eight_schools_np(sigma, y=None):
  mu = numpyro.sample("mu", npd.Normal(0., 5.))
  tau = numpyro.sample("tau", npd.HalfCauchy(5.))
  theta_tilde = numpyro.sample("theta_tilde", npd.Normal(0., 1.).expand([8]).to_event(1))
  numpyro.sample("y", npd.Normal(mu + tau * theta_tilde, sigma).to_event(1), obs=y)


def eight_schools_tf(u):
  mu, log_tau, tt = u[:, 0], u[:, 1], u[:, 2:]
  tau = tf.exp(log_tau)
  lp = tfd.Normal(0., 5.).log_prob(mu) + tfd.HalfCauchy(0., 5.).log_prob(tau) + log_tau
  lp += tf.reduce_sum(tfd.Normal(0., 1.).log_prob(tt), -1)
  theta = mu[:, None] + tau[:, None] * tt
  return lp + tf.reduce_sum(tfd.Normal(theta, S8).log_prob(Y8), -1)


def make_eight_schools(args):
  del args
  jd = tfd.JointDistributionNamed(dict(
      mu=tfd.Normal(0., 5.), tau=tfd.HalfCauchy(0., 5.),
      theta_tilde=tfd.Sample(tfd.Normal(0., 1.), 8),
      y=lambda mu, tau, theta_tilde: tfd.Independent(
          tfd.Normal(mu[..., None] + tau[..., None] * theta_tilde, S8), 1)))
  with open(REF_EIGHT_SCHOOLS) as f:
    ref = json.load(f)
  return Model(
      name="eight_schools", params={"mu": (), "tau": (), "theta_tilde": (8,)},
      positive=("tau",), ed_fn=eight_schools_ed, ed_args=(S8,), ed_observed={"y": Y8},
      np_fn=eight_schools_np, np_args=(jnp.asarray(S8),), np_kwargs={"y": jnp.asarray(Y8)},
      tf_log_prob=eight_schools_tf, jd=jd, pins={"y": Y8},
      stan_code=ref["stan_program"],
      stan_data=dict(J=8, y=Y8.astype(float).tolist(), sigma=S8.astype(float).tolist()),
      ref=ref)


# Logistic regression ----------------------------------------------------------------------

LOGISTIC_STAN = """
data { int<lower=0> N; int<lower=1> D; matrix[N, D] X; array[N] int<lower=0, upper=1> y; }
parameters { vector[D] w; }
model {
  w ~ std_normal();
  y ~ bernoulli_logit_glm(X, 0, w);
}
"""


def logistic_data(n, d=54, seed=0):
  """X_ij ~ N(0, 1/d), w_true ~ N(0, I), y ~ Bernoulli(logits = X w_true)."""
  rng = np.random.default_rng(seed)
  x = (rng.normal(size=(n, d)) / np.sqrt(d)).astype(np.float32)
  w = rng.normal(size=d).astype(np.float32)
  y = (rng.uniform(size=n) < 1. / (1. + np.exp(-(x @ w)))).astype(np.int32)
  return x, y


def logistic_ed(x):
  w = ed.Normal(tf.zeros(x.shape[1]), 1., name="w")
  return ed.Bernoulli(logits=tf.linalg.matvec(x, w), name="y")


def logistic_np(x, y=None):
  w = numpyro.sample("w", npd.Normal(0., 1.).expand([x.shape[1]]).to_event(1))
  numpyro.sample("y", npd.Bernoulli(logits=x @ w).to_event(1), obs=y)


def logistic_tf_log_prob(x, y):
  x, yf = tf.constant(x), tf.constant(y, tf.float32)
  const = -0.5 * x.shape[1] * np.log(2 * np.pi)

  def log_prob(u):
    logits = tf.matmul(u, x, transpose_b=True)  # [C, N]
    return (const - 0.5 * tf.reduce_sum(tf.square(u), -1) +
            tf.reduce_sum(yf * logits - tf.nn.softplus(logits), -1))

  return log_prob


def logistic_jax_log_prob(x, y):
  x, yf = jnp.asarray(x), jnp.asarray(y, jnp.float32)
  const = -0.5 * x.shape[1] * np.log(2 * np.pi)

  def log_prob(w):  # one chain: [D] -> scalar
    logits = x @ w
    return const - 0.5 * jnp.sum(w * w) + jnp.sum(yf * logits - jax.nn.softplus(logits))

  return log_prob


def make_logistic(args):
  x, y = logistic_data(args.logistic_n, seed=args.data_seed)
  xt = tf.constant(x)
  d = x.shape[1]
  jd = tfd.JointDistributionNamed(dict(
      w=tfd.Sample(tfd.Normal(0., 1.), d),
      y=lambda w: tfd.Independent(tfd.Bernoulli(logits=tf.einsum("nd,...d->...n", xt, w)), 1)))
  return Model(
      name="logistic", params={"w": (d,)}, positive=(), ed_fn=logistic_ed, ed_args=(xt,),
      ed_observed={"y": y}, np_fn=logistic_np, np_args=(jnp.asarray(x),),
      np_kwargs={"y": jnp.asarray(y)}, tf_log_prob=logistic_tf_log_prob(x, y), jd=jd,
      pins={"y": y}, stan_code=LOGISTIC_STAN,
      stan_data=dict(N=int(x.shape[0]), D=d, X=x.astype(float), y=y.astype(int)))


# Hierarchical 2PL IRT -----------------------------------------------------------------------

IRT_STAN = """
data { int<lower=1> I; int<lower=1> K; array[I, K] int<lower=0, upper=1> y; }
parameters {
  vector[I] theta;
  real mu_beta;
  real<lower=0> sigma_beta;
  real<lower=0> sigma_gamma;
  vector[K] beta;
  vector[K] log_gamma;
}
model {
  vector[K] gamma = exp(log_gamma);
  theta ~ std_normal();
  mu_beta ~ std_normal();
  sigma_beta ~ std_normal();
  sigma_gamma ~ std_normal();
  beta ~ normal(mu_beta, sigma_beta);
  log_gamma ~ normal(0, sigma_gamma);
  for (i in 1:I)
    y[i] ~ bernoulli_logit(gamma .* (theta[i] - beta));
}
"""


def irt_np(students, items, y=None):
  theta = numpyro.sample("theta", npd.Normal(0., 1.).expand([students]).to_event(1))
  mu_beta = numpyro.sample("mu_beta", npd.Normal(0., 1.))
  sigma_beta = numpyro.sample("sigma_beta", npd.HalfNormal(1.))
  sigma_gamma = numpyro.sample("sigma_gamma", npd.HalfNormal(1.))
  beta = numpyro.sample("beta", npd.Normal(mu_beta, sigma_beta).expand([items]).to_event(1))
  log_gamma = numpyro.sample("log_gamma",
                             npd.Normal(0., sigma_gamma).expand([items]).to_event(1))
  logits = jnp.exp(log_gamma) * (theta[:, None] - beta)
  numpyro.sample("y", npd.Bernoulli(logits=logits).to_event(2), obs=y)


def irt_tf_log_prob(y, students, items):
  yf = tf.constant(y, tf.float32)
  n01, hn = tfd.Normal(0., 1.), tfd.HalfNormal(1.)

  def log_prob(u):
    i, k = students, items
    theta, mu_b = u[:, :i], u[:, i]
    log_sb, log_sg = u[:, i + 1], u[:, i + 2]
    beta, log_gamma = u[:, i + 3:i + 3 + k], u[:, i + 3 + k:]
    sb, sg = tf.exp(log_sb), tf.exp(log_sg)
    lp = (tf.reduce_sum(n01.log_prob(theta), -1) + n01.log_prob(mu_b) +
          hn.log_prob(sb) + log_sb + hn.log_prob(sg) + log_sg +
          tf.reduce_sum(tfd.Normal(mu_b[:, None], sb[:, None]).log_prob(beta), -1) +
          tf.reduce_sum(tfd.Normal(0., sg[:, None]).log_prob(log_gamma), -1))
    logits = tf.exp(log_gamma)[:, None, :] * (theta[:, :, None] - beta[:, None, :])
    return lp + tf.reduce_sum(yf * logits - tf.nn.softplus(logits), [-2, -1])

  return log_prob


def make_irt(args):
  i, k = args.irt_students, args.irt_items
  y = irt_2pl.make_data(args.data_seed, i, k)
  jd = tfd.JointDistributionNamed(dict(
      theta=tfd.Sample(tfd.Normal(0., 1.), i),
      mu_beta=tfd.Normal(0., 1.),
      sigma_beta=tfd.HalfNormal(1.),
      sigma_gamma=tfd.HalfNormal(1.),
      beta=lambda mu_beta, sigma_beta: tfd.Independent(
          tfd.Normal(mu_beta[..., None] + tf.zeros(k), sigma_beta[..., None]), 1),
      log_gamma=lambda sigma_gamma: tfd.Independent(
          tfd.Normal(tf.zeros(k), sigma_gamma[..., None]), 1),
      y=lambda theta, beta, log_gamma: tfd.Independent(tfd.Bernoulli(
          logits=tf.exp(log_gamma)[..., None, :] * (theta[..., :, None] - beta[..., None, :])),
          2)))
  return Model(
      name="irt", params={"theta": (i,), "mu_beta": (), "sigma_beta": (), "sigma_gamma": (),
                          "beta": (k,), "log_gamma": (k,)},
      positive=("sigma_beta", "sigma_gamma"), ed_fn=irt_2pl.model, ed_args=(i, k),
      ed_observed={"y": y}, np_fn=irt_np, np_args=(i, k), np_kwargs={"y": jnp.asarray(y)},
      tf_log_prob=irt_tf_log_prob(y, i, k), jd=jd, pins={"y": y}, stan_code=IRT_STAN,
      stan_data=dict(I=i, K=k, y=y.astype(int)))


MODEL_BUILDERS = {"eight_schools": make_eight_schools, "logistic": make_logistic,
                  "irt": make_irt}


# -- one sampling run -------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
  draws: Optional[Dict[str, np.ndarray]] = None  # name -> [draws, chains, *shape] float64
  compile_s: float = float("nan")
  run_s: float = float("nan")
  n_grads: float = float("nan")                  # summed over chains, warmup included
  divergences: float = float("nan")              # after warmup, summed over chains
  cpu_s: float = float("nan")                    # process CPU seconds of the timed call
  wall_s: float = float("nan")                   # wall seconds of the timed call
  compile_cached: bool = False                   # compile_s is a cache hit (Stan)
  grads_draws: Optional[np.ndarray] = None       # [draws, chains] leapfrogs after warmup
  note: str = ""
  skipped: str = ""


def _as_draws(d, model, warmup=0):
  return {name: np.asarray(d[name], np.float64)[warmup:] for name in model.params}


def run_edward_lite(model, args, kernel=None, pooled=None):
  common = dict(observed=model.ed_observed, kernel=kernel or ed.mcmc.NUTS(),
                chains=args.chains, progress=False, pooled=pooled)
  start = time.perf_counter()
  ed.mcmc.sample(model.ed_fn, *model.ed_args, warmup=1, draws=1, seed=args.seed + 1, **common)
  compile_s = time.perf_counter() - start
  start, cpu = time.perf_counter(), time.process_time()
  result = ed.mcmc.sample(model.ed_fn, *model.ed_args, warmup=args.warmup, draws=args.draws,
                          seed=args.seed, **common)
  run_s, cpu = time.perf_counter() - start, time.process_time() - cpu
  t = result.timings
  total_grads = float(np.sum(result.num_gradients))
  sampling_grads = float(np.sum(result.sample_stats["num_gradients"]))
  warm_grads = total_grads - sampling_grads
  note = (f"warmup {t['warmup_s']:.1f}s/{warm_grads:.0f} grads "
          f"({1e6 * t['warmup_s'] / max(warm_grads, 1):.0f} us/grad) + sampling "
          f"{t['sampling_s']:.1f}s/{sampling_grads:.0f} grads "
          f"({1e6 * t['sampling_s'] / max(sampling_grads, 1):.0f} us/grad)")
  if t["compile_s"] > 0:
    note += f"; RECOMPILED on the timed call ({t['compile_s']:.1f}s)"
  return Run(draws=_as_draws(result.draws, model), compile_s=compile_s, run_s=run_s,
             n_grads=total_grads, grads_draws=np.asarray(result.sample_stats["num_gradients"]),
             divergences=float(np.sum(result.divergences)), cpu_s=cpu, wall_s=run_s, note=note)


def run_edward_lite_tfp(model, args):
  from tfp_nuts import TFPNUTS  # tests/tfp_nuts.py
  return run_edward_lite(model, args, kernel=TFPNUTS())


def run_edward_lite_pooled(model, args):
  return run_edward_lite(model, args, pooled=True)


def run_edward_lite_pooled_metric(model, args):
  return run_edward_lite(model, args, pooled="metric")


def run_edward_lite_per_chain(model, args):
  return run_edward_lite(model, args, pooled=False)


def _run_numpyro(model, args, chain_method):
  if numpyro is None:
    return Run(skipped="numpyro is not installed")
  if chain_method == "parallel" and args.chains > jax.local_device_count():
    return Run(skipped=f"chains={args.chains} > {jax.local_device_count()} host devices "
                       "(NumPyro would run them sequentially)")
  mcmc = NumPyroMCMC(NumPyroNUTS(model.np_fn, target_accept_prob=TARGET_ACCEPT),
                     num_warmup=args.warmup, num_samples=args.draws, num_chains=args.chains,
                     chain_method=chain_method, progress_bar=False)
  key = jax.random.PRNGKey(args.seed)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    start, cpu = time.perf_counter(), time.process_time()
    with JAX_COMPILE_TIMER as timer:
      mcmc.warmup(key, *model.np_args, extra_fields=("num_steps",), collect_warmup=True,
                  **model.np_kwargs)
      warm_grads = float(np.sum(mcmc.get_extra_fields()["num_steps"]))
      mcmc.run(mcmc.post_warmup_state.rng_key, *model.np_args,
               extra_fields=("num_steps", "diverging"), **model.np_kwargs)
      samples = jax.device_get(mcmc.get_samples(group_by_chain=True))
      extra = jax.device_get(mcmc.get_extra_fields(group_by_chain=True))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
  compile_s = timer.seconds()
  draws = {k: np.swapaxes(np.asarray(samples[k], np.float64), 0, 1) for k in model.params}
  return Run(draws=draws, compile_s=compile_s, run_s=wall - compile_s,
             n_grads=warm_grads + float(np.sum(extra["num_steps"])),
             divergences=float(np.sum(extra["diverging"])), cpu_s=cpu, wall_s=wall,
             grads_draws=np.swapaxes(np.asarray(extra["num_steps"]), 0, 1),
             note=f"wall {wall:.1f}s incl. JAX compile")


def run_numpyro(model, args):
  return _run_numpyro(model, args, "vectorized")


def run_numpyro_parallel(model, args):
  return _run_numpyro(model, args, "parallel")


def _time_twice(fn, seeds, grads_of):
  """Calls ``fn(seed)`` twice: (first wall, second wall, first out, second out, cpu of 2nd)."""
  start = time.perf_counter()
  out1 = tf.nest.map_structure(lambda t: t.numpy(), fn(seeds[0]))
  t1 = time.perf_counter() - start
  start, cpu = time.perf_counter(), time.process_time()
  out2 = tf.nest.map_structure(lambda t: t.numpy(), fn(seeds[1]))
  t2, cpu = time.perf_counter() - start, time.process_time() - cpu
  g1, g2 = grads_of(out1), grads_of(out2)
  compile_s = max(t1 - t2 * g1 / max(g2, 1.), 0.)
  return compile_s, t2, out2, cpu, t1


def run_tfp(model, args):
  chains, total = args.chains, args.warmup + args.draws
  kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
      tfp.mcmc.NoUTurnSampler(model.tf_log_prob, step_size=tf.constant(0.1, tf.float32)),
      num_adaptation_steps=int(0.8 * args.warmup), target_accept_prob=TARGET_ACCEPT)

  @tf.function(jit_compile=True)
  def sample(seed):
    u0 = tf.random.stateless_uniform([chains, model.dim], seed, -2., 2.)
    return tfp.mcmc.sample_chain(
        num_results=total, num_burnin_steps=0, current_state=u0, kernel=kernel,
        trace_fn=lambda _, pkr: (pkr.inner_results.leapfrogs_taken,
                                 pkr.inner_results.has_divergence),
        seed=seed + 1)

  seeds = [tf.constant([args.seed, 11]), tf.constant([args.seed, 12])]
  compile_s, run_s, (u, (leapfrogs, diverging)), cpu, t1 = _time_twice(
      sample, seeds, lambda out: float(np.sum(out[1][0])))
  draws = {k: np.asarray(v, np.float64) for k, v in model.split_flat(u[args.warmup:]).items()}
  return Run(draws=draws, compile_s=compile_s, run_s=run_s, n_grads=float(np.sum(leapfrogs)),
             grads_draws=np.asarray(leapfrogs[args.warmup:]),
             divergences=float(np.sum(diverging[args.warmup:])), cpu_s=cpu, wall_s=run_s,
             note=f"identity metric; 1st call {t1:.1f}s")


def run_tfp_windowed(model, args):
  chains = args.chains

  @tf.function(jit_compile=True)
  def sample(seed):
    draws, trace = tfp.experimental.mcmc.windowed_adaptive_nuts(
        args.draws, model.jd, n_chains=chains, num_adaptation_steps=args.warmup,
        discard_tuning=False, dual_averaging_kwargs=dict(target_accept_prob=TARGET_ACCEPT),
        seed=seed, **model.pins)
    draws = draws._asdict() if hasattr(draws, "_asdict") else dict(draws)
    return draws, trace["n_steps"], trace["diverging"]

  # The seed becomes a compile-time constant here (under XLA a new seed value
  # recompiles the whole program), so both calls use the same seed: the second
  # call repeats the first's work exactly, without compiling.
  seeds = [tf.constant([args.seed, 21])] * 2
  compile_s, run_s, (draws, n_steps, diverging), cpu, t1 = _time_twice(
      sample, seeds, lambda out: float(np.sum(out[1])))
  return Run(draws=_as_draws(draws, model, args.warmup), compile_s=compile_s, run_s=run_s,
             n_grads=float(np.sum(n_steps)), divergences=float(np.sum(diverging[args.warmup:])),
             grads_draws=np.asarray(n_steps[args.warmup:]),
             cpu_s=cpu, wall_s=run_s, note=f"1st call {t1:.1f}s; same seed twice")


def run_stan(model, args):
  try:
    import stan  # pylint: disable=g-import-not-at-top
    import httpstan.cache  # pylint: disable=g-import-not-at-top
    import httpstan.models  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    return Run(skipped=f"PyStan not installed ({e})")
  model_name = httpstan.models.calculate_model_name(model.stan_code)
  if not args.stan_reuse_compiled and model.name not in _STAN_CLEARED:
    httpstan.cache.delete_model_directory(model_name)
    _STAN_CLEARED.add(model.name)
  cached = httpstan.cache.model_directory(model_name).exists()
  start = time.perf_counter()
  posterior = stan.build(model.stan_code, data=model.stan_data, random_seed=args.seed + 1)
  compile_s = time.perf_counter() - start
  # A second build finds the compiled model in the cache: its time is PyStan's
  # data handling (JSON), which is part of every build and every sample call.
  start = time.perf_counter()
  posterior = stan.build(model.stan_code, data=model.stan_data, random_seed=args.seed + 1)
  data_s = time.perf_counter() - start
  for path in httpstan.cache.model_directory(model_name).rglob("*.jsonlines.gz"):
    path.unlink()  # cached fits would make `sample` return instantly
  start = time.perf_counter()
  fit = posterior.sample(num_chains=args.chains, num_samples=args.draws,
                         num_warmup=args.warmup, save_warmup=True)
  run_s = time.perf_counter() - start
  draws = {}
  for name, shape in model.params.items():
    x = np.asarray(fit[name], np.float64)  # [*shape (or 1), draws * chains], draw-major
    x = x.reshape(tuple(shape) + (-1, args.chains))
    draws[name] = np.moveaxis(x, (-2, -1), (0, 1))[args.warmup:]
  leapfrogs = np.asarray(fit["n_leapfrog__"]).reshape(-1, args.chains)
  divergent = np.asarray(fit["divergent__"]).reshape(-1, args.chains)[args.warmup:]
  return Run(draws=draws, compile_s=compile_s, run_s=run_s, n_grads=float(leapfrogs.sum()),
             divergences=float(divergent.sum()), compile_cached=cached,
             note=("build from httpstan cache" if cached else "fresh C++ compile") +
             f"; a cached build takes {data_s:.1f}s (PyStan data handling)"
             "; chains in parallel processes")


_STAN_CLEARED = set()

IMPLS = {
    "edward_lite": run_edward_lite,
    "edward_lite_tfp": run_edward_lite_tfp,
    "edward_lite_pooled": run_edward_lite_pooled,
    "edward_lite_pooled_metric": run_edward_lite_pooled_metric,
    "edward_lite_per_chain": run_edward_lite_per_chain,
    "numpyro": run_numpyro,
    "numpyro_parallel": run_numpyro_parallel,
    "tfp": run_tfp,
    "tfp_windowed": run_tfp_windowed,
    "stan": run_stan,
}


# -- evaluation -------------------------------------------------------------------------------


def flat_params(draws, model):
  """{name: [draws, chains, *shape]} -> ([draws, chains, P], labels)."""
  cols, labels = [], []
  for name, shape in model.params.items():
    x = draws[name].reshape(draws[name].shape[:2] + (-1,))
    cols.append(x)
    labels += [name + (f"[{','.join(map(str, i))}]" if shape else "")
               for i in np.ndindex(*shape)] if shape else [name]
  return np.concatenate(cols, axis=-1), labels


def evaluate(run, model):
  x, labels = flat_params(run.draws, model)
  ess = np.asarray(diagnostics.ess_bulk(x))
  rhat = np.asarray(diagnostics.rhat(x))
  mcse = np.asarray(diagnostics.mcse_mean(x))
  stats = dict(min_ess=float(np.nanmin(ess)), worst=labels[int(np.nanargmin(ess))],
               max_rhat=float(np.nanmax(rhat)), mean=x.mean(axis=(0, 1)), mcse=mcse,
               sd=x.std(axis=(0, 1)), labels=labels, finite=bool(np.all(np.isfinite(x))))
  stats["ess_per_s"] = stats["min_ess"] / run.run_s
  stats["ess_per_s_total"] = stats["min_ess"] / (run.run_s + run.compile_s)
  stats["s_per_grad"] = run.run_s / run.n_grads
  return stats


def check_reference(model, stats, args):
  """Eight schools: z-scores of posterior means against the long Stan run."""
  if model.ref is None:
    return None
  zs = []
  offset = 0
  for name, shape in model.params.items():
    ref = model.ref["params"][name]
    size = int(np.prod(shape, dtype=int))
    m, s = stats["mean"][offset:offset + size], stats["mcse"][offset:offset + size]
    zs.append(np.abs(m - np.asarray(ref["mean"])) /
              np.sqrt(np.asarray(ref["mcse_mean"]) ** 2 + s ** 2))
    offset += size
  return float(np.max(np.concatenate(zs)))


def print_header():
  version = machine.version
  print(machine.machine_line())
  print(f"# Python {platform.python_version()}; NumPy {np.__version__}; TF {tf.__version__}; "
        f"TFP {tfp.__version__}; JAX {jax.__version__} (jaxlib {version('jaxlib')}); NumPyro "
        f"{version('numpyro')}; PyStan {version('pystan')} (httpstan {version('httpstan')}); "
        f"edward_lite {ed.__version__}")
  print(f"# JAX devices: {jax.devices()}; XLA_FLAGS={os.environ.get('XLA_FLAGS')}")


def report_model(model, runs, stats, args):
  print(f"\n## {model.name}: {args.chains} chains x ({args.warmup} warmup + {args.draws} "
        f"draws), {model.dim} parameters")
  head = (f"  {'impl':17s}{'compile s':>10s}{'run s':>9s}{'grads':>10s}{'grads/it':>9s}"
          f"{'us/grad':>9s}{'min ESS':>9s}{'ESS/s':>9s}{'ESS/s+c':>9s}{'R-hat':>7s}"
          f"{'div':>5s}{'cores':>6s}{'lockstep':>9s}")
  print(head)
  iters = args.chains * (args.warmup + args.draws)
  for name, run in runs.items():
    if run.skipped:
      print(f"  {name:17s}skipped: {run.skipped}")
      continue
    s = stats[name]
    cores = run.cpu_s / run.wall_s if np.isfinite(run.cpu_s) else float("nan")
    g = run.grads_draws
    lockstep = (f"{g.sum() / (g.shape[1] * g.max(axis=1).sum()):9.2f}"
                if g is not None and g.size and "parallel processes" not in run.note else f"{'-':>9s}")
    print(f"  {name:17s}{run.compile_s:9.2f}{'*' if run.compile_cached else ' '}{run.run_s:9.2f}{run.n_grads:10.0f}"
          f"{run.n_grads / iters:9.1f}{s['s_per_grad'] * 1e6:9.1f}{s['min_ess']:9.0f}"
          f"{s['ess_per_s']:9.1f}{s['ess_per_s_total']:9.1f}{s['max_rhat']:7.3f}"
          f"{run.divergences:5.0f}{cores:6.2f}{lockstep}   {run.note}")
  failures = []
  ok = {n: s for n, s in stats.items()}
  for name, s in ok.items():
    if not s["finite"]:
      failures.append(f"{model.name}/{name}: non-finite draws")
  # Agreement of posterior means.
  if model.ref is not None:
    for name, s in ok.items():
      z = check_reference(model, s, args)
      verdict = "ok" if z <= args.z_max else "DISAGREES"
      if z > args.z_max:
        failures.append(f"{model.name}/{name} vs reference (z={z:.1f})")
      print(f"  {name:17s} vs Stan reference (4 x 25,000): max |z| = {z:.2f} {verdict}  "
            f"(mu {s['mean'][0]:.2f}, tau {s['mean'][1]:.2f}; ref mu 4.39, tau 3.57)")
  names = list(ok)
  for i, a in enumerate(names):
    for b in names[i + 1:]:
      sa, sb = ok[a], ok[b]
      z = np.abs(sa["mean"] - sb["mean"]) / np.sqrt(sa["mcse"] ** 2 + sb["mcse"] ** 2)
      worst = int(np.nanargmax(z))
      verdict = "ok" if z[worst] <= args.z_max else "DISAGREE"
      if z[worst] > args.z_max:
        failures.append(f"{model.name}: {a} vs {b} (z={z[worst]:.1f} at {sa['labels'][worst]})")
      print(f"  means {a:>13s} vs {b:<17s} max |z| {z[worst]:6.2f} at {sa['labels'][worst]:14s}"
            f" ({sa['mean'][worst]:.3f} vs {sb['mean'][worst]:.3f})  {verdict}")
  # Ratios edward_lite / best peer.
  if "edward_lite" in ok and len(ok) > 1:
    e = ok["edward_lite"]
    peers = {n: s for n, s in ok.items() if n != "edward_lite"}
    fresh = {n: s for n, s in peers.items() if not runs[n].compile_cached}
    for key, label, higher in (("ess_per_s", "ESS/s excl. compile", True),
                               ("ess_per_s_total", "ESS/s incl. compile", True),
                               ("s_per_grad", "s/gradient", False)):
      pool = fresh if key == "ess_per_s_total" and fresh else peers
      best = (max if higher else min)(pool, key=lambda n: pool[n][key])
      print(f"  edward_lite / best peer, {label:20s}: {e[key] / peers[best][key]:6.2f} "
            f"(best peer {best}; {'higher' if higher else 'lower'} is better for edward_lite)")
    target = {n: s for n, s in peers.items() if n.startswith(("numpyro", "stan"))}
    if target:  # the target: at least the best of Stan and NumPyro
      best = max(target, key=lambda n: target[n]["ess_per_s"])
      print(f"  edward_lite / best of Stan and NumPyro, ESS/s excl. compile: "
            f"{e['ess_per_s'] / target[best]['ess_per_s']:6.2f} ({best})")
    ed_c = runs["edward_lite"].compile_s
    # tfp's compile time is estimated as a difference of two calls; a value
    # near zero is that estimate's noise, not a compile time.
    timed = {n for n in (fresh or peers) if runs[n].compile_s >= 0.05}
    if timed:
      best_c = min(timed, key=lambda n: runs[n].compile_s)
      print(f"  edward_lite / best peer, {'compile seconds':20s}: "
            f"{ed_c / runs[best_c].compile_s:6.2f} (best peer {best_c})")
  return failures


def bench_model(model, impls, args):
  runs, stats = {}, {}
  for name in impls:
    if name == "stan" and not args.stan:
      continue
    print(f"  running {name} on {model.name} ...", file=sys.stderr, flush=True)
    try:
      run = IMPLS[name](model, args)
    except Exception as e:  # noqa: BLE001 -- report and go on with the other peers
      run = Run(skipped=f"error: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
    runs[name] = run
    if not run.skipped:
      stats[name] = evaluate(run, model)
  return report_model(model, runs, stats, args)


# -- gradient timing at covertype size ---------------------------------------------------------


def _time_calls(fn, reps):
  times = []
  for _ in range(reps):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return float(np.median(times)), float(np.min(times))


def bench_gradient(args):
  n = args.grad_n
  x, y = logistic_data(n, seed=args.data_seed)
  d = x.shape[1]
  print(f"\n## Logistic regression log-density gradient, N={n} x D={d} "
        f"(median of {args.grad_reps} calls, after a compile call)")
  xt = tf.constant(x)
  target = ed.make_target(logistic_ed, xt, observed={"y": y})
  ed_vg = tf.function(target.value_and_gradient_flat, jit_compile=True)
  tf_lp = logistic_tf_log_prob(x, y)
  tf_vg = tf.function(lambda u: tfp.math.value_and_gradient(tf_lp, u), jit_compile=True)
  jax_lp = logistic_jax_log_prob(x, y)
  jax_vg = jax.jit(jax.vmap(jax.value_and_grad(jax_lp)))
  impls = {"edward_lite": lambda u: ed_vg(tf.constant(u)),
           "tf_hand": lambda u: tf_vg(tf.constant(u)),
           "jax_hand": lambda u: jax_vg(jnp.asarray(u))}
  if numpyro is not None:
    from numpyro.infer.util import initialize_model  # pylint: disable=g-import-not-at-top
    info = initialize_model(jax.random.PRNGKey(0), logistic_np, model_args=(jnp.asarray(x),),
                            model_kwargs={"y": jnp.asarray(y)})
    potential = info.potential_fn
    np_vg = jax.jit(jax.vmap(jax.value_and_grad(lambda w: -potential({"w": w}))))
    impls["numpyro_potential"] = lambda u: np_vg(jnp.asarray(u))
  failures = []
  for chains in args.grad_chains:
    u = np.random.default_rng(1).uniform(-0.5, 0.5, (chains, d)).astype(np.float32)
    results, reference = {}, None
    for name, fn in impls.items():
      start = time.perf_counter()
      lp, g = (np.asarray(t) for t in fn(u))
      compile_s = time.perf_counter() - start
      med, best = _time_calls(lambda: [np.asarray(t) for t in fn(u)], args.grad_reps)
      results[name] = (compile_s, med, best)
      if reference is None:
        reference = (name, lp, g)
      else:
        rname, rlp, rg = reference
        if not (np.allclose(lp, rlp, rtol=1e-4) and
                np.allclose(g, rg, rtol=1e-3, atol=1e-3 * np.abs(rg).max())):
          failures.append(f"grad: {name} differs from {rname} (C={chains})")
          print(f"  {name} value/gradient differ from {rname}: {lp[:2]} vs {rlp[:2]}; "
                f"max |dg| {np.abs(g - rg).max():.3g}")
    best_peer = min((n for n in results if n != "edward_lite"), key=lambda n: results[n][1])
    for name, (compile_s, med, best) in results.items():
      print(f"  C={chains:<3d} {name:18s} first call (compile) {compile_s:6.2f} s   "
            f"{med * 1e3:8.2f} ms/call (min {best * 1e3:7.2f})   {med * 1e3 / chains:8.2f} "
            f"ms per chain-gradient")
    print(f"  C={chains:<3d} edward_lite / fastest peer ({best_peer}): "
          f"{results['edward_lite'][1] / results[best_peer][1]:.2f}x time per gradient")
  return failures


# -- main -----------------------------------------------------------------------------------------


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--models", nargs="+", default=["eight_schools", "logistic", "irt", "grad"],
                      choices=["eight_schools", "logistic", "irt", "grad"])
  parser.add_argument("--impls", nargs="+", default=list(IMPLS), choices=list(IMPLS))
  parser.add_argument("--stan", action="store_true", help="include Stan (PyStan 3)")
  parser.add_argument("--stan-reuse-compiled", action="store_true",
                      help="use httpstan's cached compiled model if there is one (by default "
                           "it is deleted first, so the C++ compile is measured)")
  parser.add_argument("--chains", type=int, default=4)
  parser.add_argument("--warmup", type=int, default=1000)
  parser.add_argument("--draws", type=int, default=1000)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--data-seed", type=int, default=0)
  parser.add_argument("--logistic-n", type=int, default=100_000)
  parser.add_argument("--irt-students", type=int, default=800)
  parser.add_argument("--irt-items", type=int, default=100)
  parser.add_argument("--grad-n", type=int, default=581_012)
  parser.add_argument("--grad-chains", type=int, nargs="+", default=[1, 4])
  parser.add_argument("--grad-reps", type=int, default=20)
  parser.add_argument("--z-max", type=float, default=5.,
                      help="max |z| of a posterior-mean difference before it is flagged")
  args = parser.parse_args()

  print_header()
  impls = ["edward_lite"] + [n for n in args.impls if n != "edward_lite"] \
      if "edward_lite" in args.impls else list(args.impls)
  failures = []
  for name in args.models:
    if name == "grad":
      failures += bench_gradient(args)
    else:
      failures += bench_model(MODEL_BUILDERS[name](args), impls, args)
    sys.stdout.flush()
  if failures:
    print("\nCHECKS FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
  print("\nall checks passed")


if __name__ == "__main__":
  main()
