"""The peers' side of ``benchmarks/adaptation.py``: nutpie (PyMC models) and NumPyro.

Run in the peers' own virtual environment (never a project dependency):

    python3 -m venv /path/peers && /path/peers/bin/pip install nutpie pymc numpyro jax
    /path/peers/bin/python benchmarks/adaptation_peers.py TOOL POSTERIOR SEED OUT.npz [DATA.npz]

``TOOL`` is ``nutpie``, ``nutpie_low_rank`` or ``numpyro``; each runs at its
own defaults (nutpie: 400 warmup iterations for the diagonal metric, 800 for
the low-rank one; NumPyro: 1000) with 4 chains x 1000 kept draws.  The
script writes the kept draws by latent name (``[draws, chains, ...]``,
constrained values and deterministics, named as edward_lite's), the
gradient counts of warmup and sampling, the divergences and the compile and
sampling seconds to ``OUT.npz``; ``adaptation.py`` computes every
diagnostic from them with one function for all tools.

The models, written as a PyMC or NumPyro user writes them:

* ``kidiq``, ``earnings``, ``diamonds``, ``eight_schools``: the posteriordb
  Stan programs (``tests/posteriordb/README.md``), data read here;
* ``battery:NAME``: the robustness battery's edward_lite programs
  (``tests/battery_models.py``: ``linreg10``, ``logistic``, ``poisson``,
  ``ar3``, ``arma11``, ``garch11``, ``gauss_mix``, ``gp``, ``gp_poisson``)
  with the same density and transforms of the same constrained types: an
  ``ed.Flat(low=0.)`` as ``HalfFlat`` / ``ImproperUniform(positive)``, a
  bounded ``ed.Flat`` as ``Uniform`` (and a factor ``high - low`` that
  cancels its density where a bound is a parameter), a bounded ``ed.Flat``
  with a normal ``ed.Factor`` as ``TruncatedNormal`` (the same density up to
  a constant), ``ed.Factor`` as ``Potential`` / ``factor``, ``tf.scan`` as
  ``pytensor.scan`` / ``jax.lax.scan``.  Their data, NUTS target acceptance
  (where the model sets one) and dtype come from ``DATA.npz``, which
  ``adaptation.py`` writes (this environment has neither edward_lite nor
  TensorFlow).
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


def inputs(posterior, path=None):
  """The posterior's data, transformed as its Stan program does; a battery
  model's as ``adaptation.py`` wrote it to ``path``, with the lags of a
  time series and the squared distances of a GP's inputs."""
  if posterior.startswith("battery:"):
    saved = np.load(path)
    d = {k[5:]: saved[k] for k in saved.files if k.startswith("data:")}
    if posterior == "battery:ar3":  # K = battery_models.AR_K
      y, k = d["y"], 3
      d.update(lags=np.stack([y[k - 1 - j:len(y) - 1 - j] for j in range(k)], 1), y_next=y[k:])
    if posterior in ("battery:gp", "battery:gp_poisson"):
      x = d["x"].reshape(len(d["x"]), -1)
      d["d2"] = np.sum((x[:, None] - x[None]) ** 2, -1)
    return d
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


def settings(path):
  """``(target_accept or None, float64)`` of a battery model's ``DATA.npz``."""
  if path is None or not os.path.exists(path):
    return None, False
  saved = np.load(path)
  accept = float(saved["target_accept"])
  return (None if np.isnan(accept) else accept), bool(saved["float64"])


def by_draw(draws):
  """``{latent: [draws, chains, ...]}`` from ``{latent: [chains, draws, ...]}``."""
  return {name: np.moveaxis(np.asarray(x), 0, 1) for name, x in draws.items()}


# -- PyMC + nutpie --------------------------------------------------------------------


def pymc_model(posterior, path):
  import pymc as pm  # pylint: disable=import-outside-toplevel
  import pytensor  # pylint: disable=import-outside-toplevel
  import pytensor.tensor as pt  # pylint: disable=import-outside-toplevel
  d = inputs(posterior, path)
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
    elif posterior == "eight_schools":
      theta_trans = pm.Normal("theta_trans", 0., 1., shape=8)
      mu = pm.Normal("mu", 0., 5.)
      tau = pm.HalfCauchy("tau", 5.)
      pm.Normal("y", theta_trans * tau + mu, d["sigma"], observed=d["y"])
    elif posterior == "battery:linreg10":
      b = pm.Flat("b", shape=10)
      sigma = pm.HalfFlat("sigma")
      pm.Normal("y", b[0] + pm.math.dot(d["x"], b[1:]), sigma, observed=d["y"])
    elif posterior == "battery:logistic":
      beta = pm.Flat("beta", shape=3)
      pm.Bernoulli("switched", logit_p=beta[0] + beta[1] * d["dist100"]
                   + beta[2] * d["arsenic"], observed=d["switched"])
    elif posterior == "battery:poisson":
      beta = pm.Normal("beta", 0., 2.5, shape=3)
      eta = (beta[0] + beta[1] * d["roach1"] + beta[2] * d["treatment"]
             + np.log(d["exposure"]))
      pm.Poisson("y", pm.math.exp(eta), observed=d["y"])
    elif posterior == "battery:ar3":
      alpha = pm.Normal("alpha", 0., 10.)
      beta = pm.Normal("beta", 0., 10., shape=3)
      sigma = pm.HalfCauchy("sigma", 2.5)
      pm.Normal("y", alpha + pm.math.dot(d["lags"], beta), sigma, observed=d["y_next"])
    elif posterior == "battery:arma11":
      y = d["y"]
      mu = pm.Normal("mu", 0., 10.)
      phi = pm.TruncatedNormal("phi", 0., 2., lower=-1., upper=1.)
      theta = pm.TruncatedNormal("theta", 0., 2., lower=-1., upper=1.)
      sigma = pm.HalfCauchy("sigma", 5.)
      err1 = y[0] - (mu + phi * mu)
      err = pytensor.scan(lambda drive, prev, theta: drive - theta * prev,
                          sequences=y[1:] - mu - phi * y[:-1], outputs_info=err1,
                          non_sequences=theta, return_updates=False)
      pm.Potential("err", pm.logp(pm.Normal.dist(0., sigma),
                                  pt.concatenate([err1[None], err])).sum())
    elif posterior == "battery:garch11":
      r = d["r"]
      mu = pm.Flat("mu")
      alpha0 = pm.HalfFlat("alpha0")
      alpha1 = pm.Uniform("alpha1", 0., 1.)
      beta1 = pm.Uniform("beta1", 0., 1. - alpha1)
      pm.Potential("beta1_flat", pt.log1p(-alpha1))  # cancels Uniform's 1 / (1 - alpha1)
      var1 = pt.ones(())  # sigma[1]^2 = battery_models.GARCH_SIGMA1^2
      var = pytensor.scan(lambda shock, prev, beta1: shock + beta1 * prev,
                          sequences=alpha0 + alpha1 * (r[:-1] - mu) ** 2, outputs_info=var1,
                          non_sequences=beta1, return_updates=False)
      pm.Normal("r", mu, pt.sqrt(pt.concatenate([var1[None], var])), observed=r)
    elif posterior == "battery:gauss_mix":
      mu = pm.Normal("mu", 0., 2., shape=2, transform=pm.distributions.transforms.ordered,
                     initval=[-1., 1.])
      sigma = pm.HalfNormal("sigma", 2.)
      theta = pm.Beta("theta", 5., 5.)
      pm.NormalMixture("y", w=pt.stack([theta, 1. - theta]), mu=mu, sigma=sigma,
                       observed=d["y"])
    elif posterior == "battery:gp":
      rho = pm.InverseGamma("rho", 5., 5.)
      alpha = pm.HalfNormal("alpha", 1.)
      sigma = pm.HalfNormal("sigma", 1.)
      n = len(d["y"])
      k = alpha**2 * pt.exp(-0.5 * d["d2"] / rho**2) + (sigma**2 + 1e-6) * np.eye(n)
      pm.MvNormal("y", np.zeros(n), cov=k, observed=d["y"])
    elif posterior == "battery:gp_poisson":
      rho = pm.Gamma("rho", 25., 4.)
      alpha = pm.HalfNormal("alpha", 2.)
      n = len(d["k"])
      f_tilde = pm.Normal("f_tilde", 0., 1., shape=n)
      cov = alpha**2 * pt.exp(-0.5 * d["d2"] / rho**2) + 1e-10 * np.eye(n)
      f = pm.Deterministic("f", pt.dot(pt.linalg.cholesky(cov), f_tilde))
      pm.Poisson("k", pm.math.exp(f), observed=d["k"])
    else:
      raise ValueError(posterior)
  return model


def run_nutpie(posterior, seed, path, low_rank):
  import nutpie  # pylint: disable=import-outside-toplevel
  # The battery model's NUTS target acceptance where it sets one (none of the
  # nine does), else nutpie's default; PyMC is float64 throughout.
  accept, _ = settings(path)
  t0 = time.perf_counter()
  compiled = nutpie.compile_pymc_model(pymc_model(posterior, path))
  compile_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  trace = nutpie.sample(compiled, chains=CHAINS, draws=DRAWS, seed=seed, progress_bar=False,
                        low_rank_modified_mass_matrix=low_rank, cores=CHAINS,
                        **({} if accept is None else {"target_accept": accept}))
  sampling_s = time.perf_counter() - t0
  post = trace.posterior
  draws = {k: post[k].values for k in post.data_vars}
  steps = trace.sample_stats["n_steps"].values
  warm = trace.warmup_sample_stats["n_steps"].values
  return dict(draws=draws, warmup_grads=int(warm.sum()), sampling_grads=int(steps.sum()),
              divergences=int(trace.sample_stats["diverging"].values.sum()),
              warmup=int(warm.shape[1]), compile_s=compile_s, sampling_s=sampling_s)


# -- NumPyro --------------------------------------------------------------------------


def numpyro_model(posterior, path):
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  import numpyro  # pylint: disable=import-outside-toplevel
  import numpyro.distributions as dist  # pylint: disable=import-outside-toplevel
  d = {k: jnp.asarray(v) for k, v in inputs(posterior, path).items()}
  flat = lambda support, shape=(): dist.ImproperUniform(support, (), shape)
  real, positive = dist.constraints.real, dist.constraints.positive

  def model():
    if posterior == "kidiq":
      beta = numpyro.sample("beta", flat(real, (3,)))
      sigma = numpyro.sample("sigma", dist.HalfCauchy(2.5))
      numpyro.sample("y", dist.Normal(beta[0] + beta[1] * d["mom_hs"] + beta[2] * d["mom_iq"],
                                      sigma), obs=d["y"])
    elif posterior == "earnings":
      beta = numpyro.sample("beta", flat(real, (4,)))
      sigma = numpyro.sample("sigma", flat(positive))
      mu = beta[0] + beta[1] * d["z"] + beta[2] * d["male"] + beta[3] * d["z"] * d["male"]
      numpyro.sample("y", dist.Normal(mu, sigma), obs=d["y"])
    elif posterior == "diamonds":
      b = numpyro.sample("b", dist.Normal(0., 1.).expand([d["xc"].shape[1]]).to_event(1))
      intercept = numpyro.sample("Intercept", dist.StudentT(3., 8., 10.))
      sigma = numpyro.sample("sigma", dist.FoldedDistribution(dist.StudentT(3., 0., 10.)))
      numpyro.sample("y", dist.Normal(intercept + d["xc"] @ b, sigma), obs=d["y"])
    elif posterior == "eight_schools":
      theta_trans = numpyro.sample("theta_trans", dist.Normal(0., 1.).expand([8]).to_event(1))
      mu = numpyro.sample("mu", dist.Normal(0., 5.))
      tau = numpyro.sample("tau", dist.HalfCauchy(5.))
      numpyro.sample("y", dist.Normal(theta_trans * tau + mu, d["sigma"]), obs=d["y"])
    elif posterior == "battery:linreg10":
      b = numpyro.sample("b", flat(real, (10,)))
      sigma = numpyro.sample("sigma", flat(positive))
      numpyro.sample("y", dist.Normal(b[0] + d["x"] @ b[1:], sigma), obs=d["y"])
    elif posterior == "battery:logistic":
      beta = numpyro.sample("beta", flat(real, (3,)))
      numpyro.sample("switched", dist.Bernoulli(
          logits=beta[0] + beta[1] * d["dist100"] + beta[2] * d["arsenic"]), obs=d["switched"])
    elif posterior == "battery:poisson":
      beta = numpyro.sample("beta", dist.Normal(0., 2.5).expand([3]).to_event(1))
      eta = (beta[0] + beta[1] * d["roach1"] + beta[2] * d["treatment"]
             + jnp.log(d["exposure"]))
      numpyro.sample("y", dist.Poisson(jnp.exp(eta)), obs=d["y"])
    elif posterior == "battery:ar3":
      alpha = numpyro.sample("alpha", dist.Normal(0., 10.))
      beta = numpyro.sample("beta", dist.Normal(0., 10.).expand([3]).to_event(1))
      sigma = numpyro.sample("sigma", dist.HalfCauchy(2.5))
      numpyro.sample("y", dist.Normal(alpha + d["lags"] @ beta, sigma), obs=d["y_next"])
    elif posterior == "battery:arma11":
      y = d["y"]
      mu = numpyro.sample("mu", dist.Normal(0., 10.))
      phi = numpyro.sample("phi", dist.TruncatedNormal(0., 2., low=-1., high=1.))
      theta = numpyro.sample("theta", dist.TruncatedNormal(0., 2., low=-1., high=1.))
      sigma = numpyro.sample("sigma", dist.HalfCauchy(5.))
      err1 = y[0] - (mu + phi * mu)
      _, err = jax.lax.scan(lambda prev, drive: (drive - theta * prev,) * 2, err1,
                            y[1:] - mu - phi * y[:-1])
      numpyro.factor("err", dist.Normal(0., sigma).log_prob(
          jnp.concatenate([err1[None], err])).sum())
    elif posterior == "battery:garch11":
      r = d["r"]
      mu = numpyro.sample("mu", flat(real))
      alpha0 = numpyro.sample("alpha0", flat(positive))
      alpha1 = numpyro.sample("alpha1", dist.Uniform(0., 1.))
      beta1 = numpyro.sample("beta1", dist.Uniform(0., 1. - alpha1))
      numpyro.factor("beta1_flat", jnp.log1p(-alpha1))  # cancels Uniform's 1 / (1 - alpha1)
      var1 = jnp.ones((), r.dtype)  # sigma[1]^2 = battery_models.GARCH_SIGMA1^2
      _, var = jax.lax.scan(lambda prev, shock: (shock + beta1 * prev,) * 2, var1,
                            alpha0 + alpha1 * (r[:-1] - mu) ** 2)
      numpyro.sample("r", dist.Normal(mu, jnp.sqrt(jnp.concatenate([var1[None], var]))),
                     obs=r)
    elif posterior == "battery:gauss_mix":
      mu = numpyro.sample("mu", flat(dist.constraints.ordered_vector, (2,)))
      numpyro.factor("mu_prior", dist.Normal(0., 2.).log_prob(mu).sum())
      sigma = numpyro.sample("sigma", dist.HalfNormal(2.))
      theta = numpyro.sample("theta", dist.Beta(5., 5.))
      numpyro.sample("y", dist.MixtureSameFamily(
          dist.Categorical(probs=jnp.stack([theta, 1. - theta])), dist.Normal(mu, sigma)),
                     obs=d["y"])
    elif posterior == "battery:gp":
      rho = numpyro.sample("rho", dist.InverseGamma(5., 5.))
      alpha = numpyro.sample("alpha", dist.HalfNormal(1.))
      sigma = numpyro.sample("sigma", dist.HalfNormal(1.))
      n = len(d["y"])
      k = alpha**2 * jnp.exp(-0.5 * d["d2"] / rho**2) + (sigma**2 + 1e-6) * jnp.eye(n)
      numpyro.sample("y", dist.MultivariateNormal(jnp.zeros(n), covariance_matrix=k),
                     obs=d["y"])
    elif posterior == "battery:gp_poisson":
      rho = numpyro.sample("rho", dist.Gamma(25., 4.))
      alpha = numpyro.sample("alpha", dist.HalfNormal(2.))
      n = len(d["k"])
      f_tilde = numpyro.sample("f_tilde", dist.Normal(0., 1.).expand([n]).to_event(1))
      cov = alpha**2 * jnp.exp(-0.5 * d["d2"] / rho**2) + 1e-10 * jnp.eye(n)
      f = numpyro.deterministic("f", jnp.linalg.cholesky(cov) @ f_tilde)
      numpyro.sample("k", dist.Poisson(jnp.exp(f)), obs=d["k"])
    else:
      raise ValueError(posterior)

  return model


def run_numpyro(posterior, seed, path):
  import jax  # pylint: disable=import-outside-toplevel
  import numpyro  # pylint: disable=import-outside-toplevel
  from numpyro.infer import MCMC, NUTS  # pylint: disable=import-outside-toplevel
  numpyro.set_host_device_count(CHAINS)
  accept, float64 = settings(path)  # target acceptance: as nutpie's
  if float64:  # as the battery model runs in edward_lite (NumPyro's default: float32)
    numpyro.enable_x64()
  kernel = NUTS(numpyro_model(posterior, path),
                **({} if accept is None else {"target_accept_prob": accept}))
  mcmc = MCMC(kernel, num_warmup=1000, num_samples=DRAWS,
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
  path = sys.argv[5] if len(sys.argv) > 5 else None
  if tool == "numpyro":
    res = run_numpyro(posterior, seed, path)
  else:
    res = run_nutpie(posterior, seed, path, low_rank=tool == "nutpie_low_rank")
  draws = by_draw(res.pop("draws"))
  np.savez(out, **{"draw:" + k: v for k, v in draws.items()},
           **{k: np.asarray(v) for k, v in res.items()})


if __name__ == "__main__":
  os.environ.setdefault("XLA_FLAGS", "")
  main()
