"""The peers' side of ``benchmarks/adaptation.py``: nutpie (PyMC models) and NumPyro.

Run in the peers' own virtual environment (never a project dependency):

    python3 -m venv /path/peers && /path/peers/bin/pip install nutpie pymc numpyro jax
    /path/peers/bin/python benchmarks/adaptation_peers.py TOOL POSTERIOR SEED OUT.npz

``TOOL`` is ``nutpie``, ``nutpie_low_rank`` or ``numpyro``; each runs at its
own defaults (nutpie: 400 warmup iterations for the diagonal metric, 800 for
the low-rank one; NumPyro: 1000) with 4 chains x 1000 kept draws.  The
script writes the kept draws by latent name (``[draws, chains, ...]``), the
gradient counts of warmup and sampling, the divergences and the compile and
sampling seconds to ``OUT.npz``; ``adaptation.py`` computes every
diagnostic from them with one function for all tools.

The models are the posteriordb Stan programs (``tests/posteriordb/README.md``)
written as a PyMC or NumPyro user writes them.
"""

import json
import os
import pathlib
import sys
import time
import zipfile

import numpy as np

DATA = pathlib.Path(__file__).resolve().parent.parent / "tests" / "posteriordb"
CHAINS, DRAWS = 4, 1000


def data(name):
  path = DATA / f"{name}.json"
  if path.exists():
    return json.loads(path.read_text())
  with zipfile.ZipFile(DATA / f"{name}.json.zip") as z:
    return json.loads(z.read(f"{name}.json"))


def inputs(posterior):
  """The posterior's data, transformed as its Stan program does."""
  if posterior == "kidiq":
    d = data("kidiq")
    return dict(mom_hs=np.asarray(d["mom_hs"], float), mom_iq=np.asarray(d["mom_iq"], float),
                y=np.asarray(d["kid_score"], float))
  if posterior == "earnings":
    d = data("earnings")
    h = np.asarray(d["height"], float)
    z = (h - h.mean()) / h.std(ddof=1)
    return dict(z=z, male=np.asarray(d["male"], float), y=np.log(np.asarray(d["earn"], float)))
  if posterior == "diamonds":
    d = data("diamonds")
    x = np.asarray(d["X"], float)[:, 1:]
    return dict(xc=x - x.mean(0), y=np.asarray(d["Y"], float))
  if posterior == "eight_schools":
    d = data("eight_schools")
    return dict(sigma=np.asarray(d["sigma"], float), y=np.asarray(d["y"], float))
  raise ValueError(posterior)


def by_draw(draws):
  """``{latent: [draws, chains, ...]}`` from ``{latent: [chains, draws, ...]}``."""
  return {name: np.moveaxis(np.asarray(x), 0, 1) for name, x in draws.items()}


# -- PyMC + nutpie --------------------------------------------------------------------


def pymc_model(posterior):
  import pymc as pm  # pylint: disable=import-outside-toplevel
  d = inputs(posterior)
  with pm.Model() as model:
    if posterior == "kidiq":
      beta = pm.Flat("beta", shape=3)
      sigma = pm.HalfCauchy("sigma", 2.5)
      pm.Normal("y", beta[0] + beta[1] * d["mom_hs"] + beta[2] * d["mom_iq"], sigma,
                observed=d["y"])
    elif posterior == "earnings":
      beta = pm.Flat("beta", shape=4)
      sigma = pm.HalfFlat("sigma")
      mu = beta[0] + beta[1] * d["z"] + beta[2] * d["male"] + beta[3] * d["z"] * d["male"]
      pm.Normal("y", mu, sigma, observed=d["y"])
    elif posterior == "diamonds":
      b = pm.Normal("b", 0., 1., shape=d["xc"].shape[1])
      intercept = pm.StudentT("Intercept", nu=3., mu=8., sigma=10.)
      sigma = pm.HalfStudentT("sigma", nu=3., sigma=10.)
      pm.Normal("y", intercept + pm.math.dot(d["xc"], b), sigma, observed=d["y"])
    else:
      theta_trans = pm.Normal("theta_trans", 0., 1., shape=8)
      mu = pm.Normal("mu", 0., 5.)
      tau = pm.HalfCauchy("tau", 5.)
      pm.Normal("y", theta_trans * tau + mu, d["sigma"], observed=d["y"])
  return model


def run_nutpie(posterior, seed, low_rank):
  import nutpie  # pylint: disable=import-outside-toplevel
  t0 = time.perf_counter()
  compiled = nutpie.compile_pymc_model(pymc_model(posterior))
  compile_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  trace = nutpie.sample(compiled, chains=CHAINS, draws=DRAWS, seed=seed, progress_bar=False,
                        low_rank_modified_mass_matrix=low_rank, cores=CHAINS)
  sampling_s = time.perf_counter() - t0
  post = trace.posterior
  draws = {k: post[k].values for k in post.data_vars if k in ("beta", "sigma", "b",
                                                               "Intercept", "theta_trans",
                                                               "mu", "tau")}
  steps = trace.sample_stats["n_steps"].values
  warm = trace.warmup_sample_stats["n_steps"].values
  return dict(draws=draws, warmup_grads=int(warm.sum()), sampling_grads=int(steps.sum()),
              divergences=int(trace.sample_stats["diverging"].values.sum()),
              warmup=int(warm.shape[1]), compile_s=compile_s, sampling_s=sampling_s)


# -- NumPyro --------------------------------------------------------------------------


def numpyro_model(posterior):
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  import numpyro  # pylint: disable=import-outside-toplevel
  import numpyro.distributions as dist  # pylint: disable=import-outside-toplevel
  d = {k: jnp.asarray(v) for k, v in inputs(posterior).items()}

  def model():
    if posterior == "kidiq":
      beta = numpyro.sample("beta", dist.ImproperUniform(dist.constraints.real, (), (3,)))
      sigma = numpyro.sample("sigma", dist.HalfCauchy(2.5))
      numpyro.sample("y", dist.Normal(beta[0] + beta[1] * d["mom_hs"] + beta[2] * d["mom_iq"],
                                      sigma), obs=d["y"])
    elif posterior == "earnings":
      beta = numpyro.sample("beta", dist.ImproperUniform(dist.constraints.real, (), (4,)))
      sigma = numpyro.sample("sigma", dist.ImproperUniform(dist.constraints.positive, (), ()))
      mu = beta[0] + beta[1] * d["z"] + beta[2] * d["male"] + beta[3] * d["z"] * d["male"]
      numpyro.sample("y", dist.Normal(mu, sigma), obs=d["y"])
    elif posterior == "diamonds":
      b = numpyro.sample("b", dist.Normal(0., 1.).expand([d["xc"].shape[1]]).to_event(1))
      intercept = numpyro.sample("Intercept", dist.StudentT(3., 8., 10.))
      sigma = numpyro.sample("sigma", dist.FoldedDistribution(dist.StudentT(3., 0., 10.)))
      numpyro.sample("y", dist.Normal(intercept + d["xc"] @ b, sigma), obs=d["y"])
    else:
      theta_trans = numpyro.sample("theta_trans", dist.Normal(0., 1.).expand([8]).to_event(1))
      mu = numpyro.sample("mu", dist.Normal(0., 5.))
      tau = numpyro.sample("tau", dist.HalfCauchy(5.))
      numpyro.sample("y", dist.Normal(theta_trans * tau + mu, d["sigma"]), obs=d["y"])

  return model


def run_numpyro(posterior, seed):
  import jax  # pylint: disable=import-outside-toplevel
  import numpyro  # pylint: disable=import-outside-toplevel
  from numpyro.infer import MCMC, NUTS  # pylint: disable=import-outside-toplevel
  numpyro.set_host_device_count(CHAINS)
  mcmc = MCMC(NUTS(numpyro_model(posterior)), num_warmup=1000, num_samples=DRAWS,
              num_chains=CHAINS, chain_method="vectorized", progress_bar=False)
  key = jax.random.PRNGKey(seed)
  t0 = time.perf_counter()
  mcmc.warmup(key, collect_warmup=True, extra_fields=("num_steps",))
  warm = np.asarray(mcmc.get_extra_fields()["num_steps"])
  warmup_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=("num_steps", "diverging"))
  sampling_s = time.perf_counter() - t0
  extra = mcmc.get_extra_fields()
  draws = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
  return dict(draws=draws, warmup_grads=int(warm.sum()),
              sampling_grads=int(np.asarray(extra["num_steps"]).sum()),
              divergences=int(np.asarray(extra["diverging"]).sum()), warmup=1000,
              # NumPyro compiles inside its first call: warmup's time holds the compile.
              compile_s=0., sampling_s=warmup_s + sampling_s)


def main():
  tool, posterior, seed, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
  if tool == "numpyro":
    res = run_numpyro(posterior, seed)
  else:
    res = run_nutpie(posterior, seed, low_rank=tool == "nutpie_low_rank")
  draws = by_draw(res.pop("draws"))
  np.savez(out, **{"draw:" + k: v for k, v in draws.items()},
           **{k: np.asarray(v) for k, v in res.items()})


if __name__ == "__main__":
  os.environ.setdefault("XLA_FLAGS", "")
  main()
