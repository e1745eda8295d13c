"""The hard-geometry posteriors under the peers: nutpie and NumPyro (issue 54, item 4).

Run in the peers' own environment (no TensorFlow needed); it saves each run's
draws, gradient count, divergences and seconds, and ``hard_geometry.py
--peer-draws DIR`` analyses them with the same estimators and references as
edward_lite's runs.  Each run is 4 chains x (1000 warmup + 1000 draws) with
every gradient counted: warmup and sampling leapfrog steps, and for NeuTra
the SVI steps that fit its flow (one gradient of the model per step and
particle).

Tools:

- ``nutpie``: nutpie's default (diagonal mass matrix from draws and gradients).
- ``nutpie_lowrank``: ``adaptation="low_rank"``.
- ``nutpie_flow``: ``adaptation="flow"``, nutpie's experimental
  normalizing-flow adaptation (JAX backend; it trains on the warmup's draws
  and gradients, so no gradients beyond the leapfrog steps are counted).
- ``numpyro``: NumPyro's NUTS (diagonal mass matrix, Stan's windows).
- ``numpyro_neutra``: NumPyro's ``NeuTraReparam`` with an ``AutoBNAFNormal``
  guide (as NumPyro's NeuTra example), fitted by SVI (``NEUTRA_STEPS`` steps of
  one particle), then NUTS in the flow's base space.  Not on ``irt2pl``: a
  block neural autoregressive flow of 1,003 dimensions with hidden factors 8
  has 8,024 units a layer (64 million weights).

    python3 -m venv /work/peervenv
    /work/peervenv/bin/pip install nutpie pymc numpyro jax flowjax
    /work/peervenv/bin/python benchmarks/hard_geometry_peers.py --out /tmp/peers \\
        [--posteriors funnel10,banana] [--tools nutpie,numpyro] [--seeds 0,1,2]
    PYTHONPATH=. .venv/bin/python benchmarks/hard_geometry.py --peer-draws /tmp/peers
"""

import argparse
import os
import time

import numpy as np

CHAINS, WARMUP, DRAWS = 4, 1000, 1000
NEUTRA_STEPS = 10_000

EIGHT_Y = np.array([28., 8., -3., 7., -1., 1., 18., 12.])
EIGHT_SIGMA = np.array([15., 10., 16., 11., 9., 11., 10., 18.])
GP_X = np.arange(-10., 11., 2.)
GP_K = np.array([40, 37, 29, 12, 4, 3, 9, 19, 77, 82, 33])
IRT_STUDENTS, IRT_ITEMS = 800, 100


def irt_data(seed=0):
  """``examples/irt_2pl.py``'s ``make_data`` (the same generator and draws;
  that module needs TensorFlow, which this environment has not)."""
  rng = np.random.default_rng(seed)
  theta = rng.normal(size=IRT_STUDENTS)
  beta = rng.normal(0., 1., size=IRT_ITEMS)
  gamma = np.exp(rng.normal(0., 0.5, size=IRT_ITEMS))
  logits = gamma * (theta[:, None] - beta)
  return (rng.uniform(size=logits.shape) < 1. / (1. + np.exp(-logits))).astype(np.int32)


# -- the posteriors, in PyMC (nutpie) and NumPyro --------------------------------------

def pymc_model(posterior):
  import pymc as pm  # pylint: disable=import-outside-toplevel
  import pytensor.tensor as pt  # pylint: disable=import-outside-toplevel
  with pm.Model() as model:
    if posterior.startswith("funnel"):
      dim = int(posterior[len("funnel"):])
      v = pm.Normal("v", 0., 3.)
      pm.Normal("x", 0., pt.exp(v / 2.), shape=dim - 1)
    elif posterior == "banana":
      x1 = pm.Normal("x1", 0., 10.)
      pm.Normal("x2", 0.03 * (x1 ** 2 - 100.), 1.)
    elif posterior == "eight_schools_centred":
      mu = pm.Normal("mu", 0., 5.)
      tau = pm.HalfCauchy("tau", 5.)
      theta = pm.Normal("theta", mu, tau, shape=8)
      pm.Normal("y", theta, EIGHT_SIGMA, observed=EIGHT_Y)
    elif posterior == "gp_poisson":
      rho = pm.Gamma("rho", alpha=25., beta=4.)
      alpha = pm.HalfNormal("alpha", 2.)
      f_tilde = pm.Normal("f_tilde", 0., 1., shape=len(GP_X))
      d2 = (GP_X[:, None] - GP_X[None, :]) ** 2
      cov = alpha ** 2 * pt.exp(-0.5 * d2 / rho ** 2) + 1e-10 * np.eye(len(GP_X))
      f = pm.Deterministic("f", pt.linalg.cholesky(cov) @ f_tilde)
      pm.Poisson("k", pt.exp(f), observed=GP_K)
    elif posterior == "irt2pl":
      theta = pm.Normal("theta", 0., 1., shape=IRT_STUDENTS)
      mu_beta = pm.Normal("mu_beta", 0., 1.)
      sigma_beta = pm.HalfNormal("sigma_beta", 1.)
      sigma_gamma = pm.HalfNormal("sigma_gamma", 1.)
      beta = pm.Normal("beta", mu_beta, sigma_beta, shape=IRT_ITEMS)
      log_gamma = pm.Normal("log_gamma", 0., sigma_gamma, shape=IRT_ITEMS)
      logits = pt.exp(log_gamma)[None, :] * (theta[:, None] - beta[None, :])
      pm.Bernoulli("y", logit_p=logits, observed=irt_data())
    else:
      raise ValueError(f"unknown posterior {posterior!r}")
  return model


def numpyro_model(posterior):
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  import numpyro  # pylint: disable=import-outside-toplevel
  import numpyro.distributions as dist  # pylint: disable=import-outside-toplevel

  def model():
    if posterior.startswith("funnel"):
      dim = int(posterior[len("funnel"):])
      v = numpyro.sample("v", dist.Normal(0., 3.))
      numpyro.sample("x", dist.Normal(jnp.zeros(dim - 1), jnp.exp(v / 2.)).to_event(1))
    elif posterior == "banana":
      x1 = numpyro.sample("x1", dist.Normal(0., 10.))
      numpyro.sample("x2", dist.Normal(0.03 * (x1 ** 2 - 100.), 1.))
    elif posterior == "eight_schools_centred":
      mu = numpyro.sample("mu", dist.Normal(0., 5.))
      tau = numpyro.sample("tau", dist.HalfCauchy(5.))
      theta = numpyro.sample("theta", dist.Normal(mu * jnp.ones(8), tau).to_event(1))
      numpyro.sample("y", dist.Normal(theta, EIGHT_SIGMA).to_event(1), obs=EIGHT_Y)
    elif posterior == "gp_poisson":
      rho = numpyro.sample("rho", dist.Gamma(25., 4.))
      alpha = numpyro.sample("alpha", dist.HalfNormal(2.))
      f_tilde = numpyro.sample("f_tilde", dist.Normal(jnp.zeros(len(GP_X)), 1.).to_event(1))
      d2 = (GP_X[:, None] - GP_X[None, :]) ** 2
      cov = alpha ** 2 * jnp.exp(-0.5 * d2 / rho ** 2) + 1e-10 * jnp.eye(len(GP_X))
      f = numpyro.deterministic("f", jnp.linalg.cholesky(cov) @ f_tilde)
      numpyro.sample("k", dist.Poisson(jnp.exp(f)).to_event(1), obs=GP_K)
    elif posterior == "irt2pl":
      theta = numpyro.sample("theta", dist.Normal(jnp.zeros(IRT_STUDENTS), 1.).to_event(1))
      mu_beta = numpyro.sample("mu_beta", dist.Normal(0., 1.))
      sigma_beta = numpyro.sample("sigma_beta", dist.HalfNormal(1.))
      sigma_gamma = numpyro.sample("sigma_gamma", dist.HalfNormal(1.))
      beta = numpyro.sample("beta", dist.Normal(mu_beta * jnp.ones(IRT_ITEMS),
                                                sigma_beta).to_event(1))
      log_gamma = numpyro.sample("log_gamma", dist.Normal(jnp.zeros(IRT_ITEMS),
                                                          sigma_gamma).to_event(1))
      logits = jnp.exp(log_gamma)[None, :] * (theta[:, None] - beta[None, :])
      numpyro.sample("y", dist.Bernoulli(logits=logits).to_event(2), obs=irt_data())
    else:
      raise ValueError(f"unknown posterior {posterior!r}")
  return model


# -- the runs ---------------------------------------------------------------------------

def _chains_first(x):
  """``[chains, draws, ...]`` -> ``[draws, chains, ...]`` (edward_lite's order)."""
  return np.swapaxes(np.asarray(x), 0, 1)


def run_nutpie(posterior, seed, variant):
  import nutpie  # pylint: disable=import-outside-toplevel
  model = pymc_model(posterior)
  options = {}
  t0 = time.perf_counter()  # the compile included, as in edward_lite's runs
  if variant == "flow":
    compiled = nutpie.compile_pymc_model(model, backend="jax", gradient_backend="jax")
    options["adaptation"] = "flow"
  else:
    compiled = nutpie.compile_pymc_model(model)
    if variant == "lowrank":
      options["adaptation"] = "low_rank"
  trace = nutpie.sample(compiled, chains=CHAINS, tune=WARMUP, draws=DRAWS, seed=seed,
                        progress_bar=False, save_warmup=True, cores=2, **options)
  wall = time.perf_counter() - t0
  steps = int(trace.sample_stats["n_steps"].sum() + trace.warmup_sample_stats["n_steps"].sum())
  draws = {name: _chains_first(trace.posterior[name].values) for name in trace.posterior.data_vars}
  return draws, steps, 0, int(trace.sample_stats["diverging"].sum()), wall


def run_numpyro(posterior, seed, neutra):
  import jax  # pylint: disable=import-outside-toplevel
  from numpyro.infer import MCMC, NUTS, SVI, Trace_ELBO  # pylint: disable=import-outside-toplevel
  jax.config.update("jax_enable_x64", posterior == "gp_poisson")
  model = numpyro_model(posterior)
  key = jax.random.PRNGKey(seed)
  fit_gradients, transform = 0, None
  t0 = time.perf_counter()
  if neutra:
    from numpyro.infer.autoguide import AutoBNAFNormal  # pylint: disable=import-outside-toplevel
    from numpyro.infer.reparam import NeuTraReparam  # pylint: disable=import-outside-toplevel
    from numpyro.optim import Adam  # pylint: disable=import-outside-toplevel
    guide = AutoBNAFNormal(model, hidden_factors=[8, 8])
    svi = SVI(model, guide, Adam(0.003), Trace_ELBO())
    key, fit_key = jax.random.split(key)
    fit = svi.run(fit_key, NEUTRA_STEPS, progress_bar=False)
    fit_gradients = NEUTRA_STEPS
    reparam = NeuTraReparam(guide, fit.params)
    model = reparam.reparam(model)
    transform = reparam.transform_sample
  mcmc = MCMC(NUTS(model), num_warmup=WARMUP, num_samples=DRAWS, num_chains=CHAINS,
              chain_method="sequential", progress_bar=False)
  warm_key, run_key = jax.random.split(key)
  mcmc.warmup(warm_key, extra_fields=("num_steps",), collect_warmup=True)
  warm_steps = int(np.sum(mcmc.get_extra_fields()["num_steps"]))
  mcmc.run(run_key, extra_fields=("num_steps", "diverging"))
  extra = mcmc.get_extra_fields()
  samples = mcmc.get_samples(group_by_chain=True)
  wall = time.perf_counter() - t0
  if transform is not None:
    latent = samples["auto_shared_latent"]
    flat = transform(latent.reshape((-1,) + latent.shape[2:]))
    samples = {k: v.reshape(latent.shape[:2] + v.shape[1:]) for k, v in flat.items()}
    if posterior == "gp_poisson":  # the deterministic f, from the transformed latents
      import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
      d2 = (GP_X[:, None] - GP_X[None, :]) ** 2
      cov = (samples["alpha"][..., None, None] ** 2
             * jnp.exp(-0.5 * d2 / samples["rho"][..., None, None] ** 2) + 1e-10 * jnp.eye(11))
      samples["f"] = jnp.einsum("...ij,...j->...i", jnp.linalg.cholesky(cov), samples["f_tilde"])
  draws = {k: _chains_first(v) for k, v in samples.items()}
  steps = warm_steps + int(np.sum(extra["num_steps"]))
  return draws, steps + fit_gradients, fit_gradients, int(np.sum(extra["diverging"])), wall


TOOLS = {
    "nutpie": lambda p, s: run_nutpie(p, s, "diag"),
    "nutpie_lowrank": lambda p, s: run_nutpie(p, s, "lowrank"),
    "nutpie_flow": lambda p, s: run_nutpie(p, s, "flow"),
    "numpyro": lambda p, s: run_numpyro(p, s, neutra=False),
    "numpyro_neutra": lambda p, s: run_numpyro(p, s, neutra=True),
}
POSTERIORS = ["funnel10", "funnel100", "eight_schools_centred", "gp_poisson", "banana", "irt2pl"]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", required=True)
  parser.add_argument("--posteriors", default=",".join(POSTERIORS))
  parser.add_argument("--tools", default=",".join(TOOLS))
  parser.add_argument("--seeds", default="0,1,2")
  a = parser.parse_args()
  os.makedirs(a.out, exist_ok=True)
  for posterior in a.posteriors.split(","):
    for tool in a.tools.split(","):
      if tool == "numpyro_neutra" and posterior == "irt2pl":
        print(f"{posterior} | {tool} | not run (see the module docstring)", flush=True)
        continue
      for seed in (int(s) for s in a.seeds.split(",")):
        try:
          draws, total, fit, divergences, wall = TOOLS[tool](posterior, seed)
        except Exception as error:  # pylint: disable=broad-except
          print(f"{posterior} | {tool} | {seed} | failed: {type(error).__name__}: {error}",
                flush=True)
          continue
        np.savez(os.path.join(a.out, f"{posterior}__{tool}__{seed}.npz"),
                 total=total, fit=fit, divergences=divergences, wall=wall,
                 **{f"draw_{k}": np.asarray(v, np.float64) for k, v in draws.items()})
        print(f"{posterior} | {tool} | {seed} | {total} gradients ({fit} fit) | "
              f"{divergences} div | {wall:.0f} s", flush=True)


if __name__ == "__main__":
  main()
