"""Four public reference posteriors from posteriordb, written as edward_lite programs.

Data and reference summaries are in ``tests/posteriordb/`` (see its README):
long Stan runs (10 chains x 1000 draws) summarized per scalar parameter,
named as in Stan (``beta[1]`` is 1-based).  Each model here is the Stan
program written the way a Stan user would write it in edward_lite: flat
priors where Stan states none (``ed.Flat``), ``<lower=0>`` with a Cauchy or
Student-t prior as the half distribution.

Shared by ``tests/test_posteriordb.py`` and ``benchmarks/adaptation.py``.

A run agrees with a reference when, for every scalar parameter,
``z = (mean - ref_mean) / sqrt(mcse^2 + ref_mcse^2)`` and the same ``z`` of
the sd (``compare(..., with_sd=True)``) are within ``Z_MAX``.
"""

import dataclasses
import json
import pathlib
import zipfile

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import edward_lite as ed

__all__ = ["Posterior", "POSTERIORS", "load", "compare", "mcse_sd", "reference_mcse_sd", "Z_MAX"]

tfd = tfp.distributions
DATA = pathlib.Path(__file__).resolve().parent / "posteriordb"
Z_MAX = 4.


@dataclasses.dataclass
class Posterior:
  """A program, its arguments and observed values, and the reference."""
  name: str
  program: object
  args: tuple
  observed: dict
  reference: dict            # Stan name -> {"mean", "sd", "mcse_mean", ...}
  values: object             # draws dict -> {Stan name: [draws, chains] array}


def _data(name):
  path = DATA / f"{name}.json"
  if path.exists():
    return json.loads(path.read_text())
  with zipfile.ZipFile(DATA / f"{name}.json.zip") as z:
    return json.loads(z.read(f"{name}.json"))


def _reference(name):
  return json.loads((DATA / f"{name}.json").read_text())["params"]


def _scalars(prefix, draws):
  """``{prefix[1]: draws[..., 0], ...}`` for a vector latent ``[n, C, K]``."""
  return {f"{prefix}[{k + 1}]": draws[..., k] for k in range(draws.shape[-1])}


# -- kidiq-kidscore_momhsiq ----------------------------------------------------------


def kidiq_model(mom_hs, mom_iq):
  beta = ed.Flat(shape=3, name="beta")
  sigma = ed.HalfCauchy(0., 2.5, name="sigma")
  return ed.Normal(beta[0] + beta[1] * mom_hs + beta[2] * mom_iq, sigma, name="kid_score")


def _kidiq():
  d = _data("kidiq")
  return Posterior(
      "kidiq-kidscore_momhsiq", kidiq_model,
      (np.asarray(d["mom_hs"], np.float32), np.asarray(d["mom_iq"], np.float32)),
      {"kid_score": np.asarray(d["kid_score"], np.float32)},
      _reference("kidiq-kidscore_momhsiq"),
      lambda x: {**_scalars("beta", x["beta"]), "sigma": x["sigma"]})


# -- earnings-logearn_interaction_z --------------------------------------------------


def earnings_model(z_height, male):
  beta = ed.Flat(shape=4, name="beta")
  sigma = ed.Flat(low=0., name="sigma")
  mu = beta[0] + beta[1] * z_height + beta[2] * male + beta[3] * z_height * male
  return ed.Normal(mu, sigma, name="log_earn")


def _earnings():
  d = _data("earnings")
  height = np.asarray(d["height"], np.float64)
  z_height = (height - height.mean()) / height.std(ddof=1)
  return Posterior(
      "earnings-logearn_interaction_z", earnings_model,
      (z_height.astype(np.float32), np.asarray(d["male"], np.float32)),
      {"log_earn": np.log(np.asarray(d["earn"], np.float64)).astype(np.float32)},
      _reference("earnings-logearn_interaction_z"),
      lambda x: {**_scalars("beta", x["beta"]), "sigma": x["sigma"]})


# -- diamonds-diamonds ---------------------------------------------------------------


def diamonds_model(xc):
  b = ed.Normal(0., 1., sample_shape=xc.shape[-1], name="b")
  intercept = ed.StudentT(3., 8., 10., name="Intercept")
  sigma = ed.HalfStudentT(3., 0., 10., name="sigma")
  return ed.Normal(intercept + tf.linalg.matvec(xc, b), sigma, name="Y")


def _diamonds():
  d = _data("diamonds")
  x = np.asarray(d["X"], np.float64)[:, 1:]
  xc = x - x.mean(axis=0)
  return Posterior(
      "diamonds-diamonds", diamonds_model, (xc.astype(np.float32),),
      {"Y": np.asarray(d["Y"], np.float32)}, _reference("diamonds-diamonds"),
      lambda x: {**_scalars("b", x["b"]), "Intercept": x["Intercept"], "sigma": x["sigma"]})


# -- eight_schools-eight_schools_noncentered -----------------------------------------


def eight_schools_model(sigma):
  theta_trans = ed.Normal(tf.zeros_like(sigma), 1., name="theta_trans")
  mu = ed.Normal(0., 5., name="mu")
  tau = ed.HalfCauchy(0., 5., name="tau")
  return ed.Normal(theta_trans * tau + mu, sigma, name="y")


def _eight_schools():
  d = _data("eight_schools")

  def values(x):
    theta = x["theta_trans"] * x["tau"][..., None] + x["mu"][..., None]
    return {**_scalars("theta_trans", x["theta_trans"]), "mu": x["mu"], "tau": x["tau"],
            **_scalars("theta", theta)}

  return Posterior(
      "eight_schools-eight_schools_noncentered", eight_schools_model,
      (np.asarray(d["sigma"], np.float32),), {"y": np.asarray(d["y"], np.float32)},
      _reference("eight_schools-eight_schools_noncentered"), values)


# -- arma-arma11 ---------------------------------------------------------------------


def arma11_model(y):
  """Stan's arma11 as posteriordb has it: ``phi`` and ``theta`` unbounded
  with normal(0, 2) priors; ``err[t] = y[t] - mu - phi y[t-1] - theta
  err[t-1]`` (a ``tf.scan``), ``err[1] = y[1] - (mu + phi mu)``."""
  mu = ed.Normal(0., 10., name="mu")
  phi = ed.Normal(0., 2., name="phi")
  theta = ed.Normal(0., 2., name="theta")
  sigma = ed.HalfCauchy(0., 2.5, name="sigma")
  err1 = y[0] - (mu + phi * mu)
  drive = y[1:] - mu - phi * y[:-1]
  err = tf.scan(lambda prev, d: d - theta * prev, drive, initializer=err1)
  ed.Factor(tfd.Normal(0., sigma).log_prob(tf.concat([err1[None], err], 0)), name="err")


def _arma():
  d = _data("arma")
  return Posterior(
      "arma-arma11", arma11_model, (np.asarray(d["y"], np.float32),), {},
      _reference("arma-arma11"), lambda x: {k: x[k] for k in ("mu", "phi", "theta", "sigma")})


POSTERIORS = {"kidiq": _kidiq, "earnings": _earnings, "diamonds": _diamonds,
              "eight_schools": _eight_schools, "arma": _arma}


def load(name):
  """The ``Posterior`` named ``name`` (a key of ``POSTERIORS``)."""
  return POSTERIORS[name]()


def mcse_sd(x):
  """MCSE of the sd of draws ``x [draws, chains]`` (the ``posterior`` R
  package's: from the ESS of the squared deviations)."""
  d2 = (x - x.mean())**2
  ess = float(ed.diagnostics.ess(d2))
  return np.sqrt(np.var(d2, ddof=1) / ess) / (2 * np.sqrt(np.mean(d2)))


def reference_mcse_sd(sd_ref, mcse_mean_ref, mcse_sd_ref, x):
  """The MCSE of a reference's sd: its own where it gives one, else from its
  ESS, ``(sd_ref / mcse_mean_ref)^2``, and the kurtosis ``k`` of the draws
  ``x`` being checked: ``sd_ref sqrt((k - 1) / (4 ESS))``, the delta
  method's for the sd of ESS independent draws.  arma11's reference gives
  means and mean squares only; without its own error the sd's ``z`` at 64
  chains (whose own MCSE is small) read a 2% difference as 4 standard
  errors.  0 for an exact reference (``mcse_mean_ref`` 0)."""
  if mcse_sd_ref > 0 or mcse_mean_ref <= 0:
    return mcse_sd_ref
  d = np.asarray(x, np.float64) - np.mean(x)
  kurtosis = np.mean(d**4) / np.mean(d**2)**2
  return np.sqrt((kurtosis - 1.) / 4.) * mcse_mean_ref  # 1 / sqrt(ESS) = mcse_mean_ref / sd_ref


def compare(posterior, draws, with_sd=False):
  """Per scalar parameter of the reference: ``(z, sd ratio)`` of a run's
  draws ``{latent: [n, C, ...]}`` (``z`` of the mean with the run's MCSE
  from its own draws, ``ed.diagnostics.mcse_mean``, and the reference's);
  with ``with_sd`` also ``z`` of the sd (``mcse_sd``, and the reference's
  ``reference_mcse_sd``)."""
  out = {}
  for name, x in posterior.values(draws).items():
    if name not in posterior.reference:  # eight schools' reference: theta, not theta_trans
      continue
    ref = posterior.reference[name]
    x = np.asarray(x, np.float64)
    mcse = float(ed.diagnostics.mcse_mean(x))
    z = (x.mean() - ref["mean"]) / np.hypot(mcse, ref["mcse_mean"])
    sd = x.std(ddof=1)
    row = (float(z), float(sd / ref["sd"]))
    if with_sd:
      ref_mcse_sd = reference_mcse_sd(ref["sd"], ref["mcse_mean"], ref.get("mcse_sd", 0.), x)
      row += (float((sd - ref["sd"]) / np.hypot(mcse_sd(x), ref_mcse_sd)),)
    out[name] = row
  return out
