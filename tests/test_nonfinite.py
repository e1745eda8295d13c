"""A density that is not finite at any starting point (issue 14): the error
names the term responsible and the likely cause, before compiled work, in
``ed.mcmc.sample`` and ``ed.vi.fit`` alike (``edward_lite.model.nonfinite``)."""

import sys

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.mcmc.compiled import Program
from edward_lite.model import nonfinite

# The modules (their names are shadowed by the functions they export).
elbo_module = sys.modules["edward_lite.vi.elbo"]  # the fit's compiled chunk

RUN = dict(kernel="rwmh", chains=2, warmup=10, draws=10, seed=3, progress=False,
           max_init_tries=3)
FIT = dict(steps=10, samples=4, progress=False)


class CompiledWork(BaseException):
  """Raised by the compiled chunk of a sampler or a fit: too late for an input error."""


@pytest.fixture(autouse=True)
def no_compiled_work(monkeypatch):
  def refuse(*args, **kwargs):
    raise CompiledWork("a compiled chunk ran")

  monkeypatch.setattr(Program, "run_chunk", refuse)
  monkeypatch.setattr(elbo_module, "run_chunk", refuse)


def scale_from_data(sigma):
  mu = ed.Normal(0., 5., name="mu")
  return ed.Normal(mu * tf.ones(3), sigma, name="y")


SIGMA = np.array([1., -1., 2.], np.float32)
Y3 = np.zeros(3, np.float32)


def minus_infinity_factor():
  mu = ed.Normal(0., 1., name="mu")
  ed.Factor(tf.constant(-np.inf), name="penalty")
  return mu


def bounds_from_latents():
  # The support check cannot test data against bounds computed from a latent;
  # no value of mu puts both observations within mu +- 1.
  mu = ed.Normal(0., 5., name="mu")
  return ed.TruncatedNormal(mu * tf.ones(2), 1., mu - 1., mu + 1., name="y")


TABLE = np.array([1., np.nan, 2.], np.float32)  # read from the module, not an argument


def nan_in_closure():
  mu = ed.Normal(0., 1., name="mu")
  return ed.Normal(mu + TABLE, 1., name="y")


CASES = {
    "negative sigma data": (scale_from_data, (SIGMA,), {"y": Y3},
                            r"term of 'y'.*'scale' \(the program's argument 'sigma'\) has 1 "
                            r"non-positive value.*index \[1\] is -1.*must be positive"),
    "factor of -inf": (minus_infinity_factor, (), None,
                       r"term of 'penalty'.*ed\.Factor adds -inf"),
    "observed outside latent bounds": (bounds_from_latents, (), {"y": np.array([0., 5.],
                                                                               np.float32)},
                                       r"term of 'y'.*observed value is outside the support "
                                       r"of its TruncatedNormal"),
    "NaN in a closure": (nan_in_closure, (), {"y": Y3},
                         r"term of 'y'.*'loc' has 1 NaN value.*index \[1\]"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_sample_names_the_term_and_the_cause(case):
  model, args, observed, pattern = CASES[case]
  with pytest.raises(ValueError, match="non-finite initial log density after 3 tries: .*" +
                     pattern):
    ed.mcmc.sample(model, *args, observed=observed, **RUN)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fit_names_the_term_and_the_cause_instead_of_skipping_every_step(case):
  model, args, observed, pattern = CASES[case]
  with pytest.raises(ValueError, match="every step would be skipped: .*" + pattern):
    ed.vi.fit(model, *args, observed=observed, **FIT)


def test_the_support_check_alone_does_not_see_latent_bounds():
  target = ed.make_target(bounds_from_latents, observed={"y": np.array([0., 5.], np.float32)})
  assert target.names == ("mu",)


def test_given_init_values_are_named_as_such():
  with pytest.raises(ValueError, match="at the given init values: .*term of 'y'.*'scale'"):
    ed.mcmc.sample(scale_from_data, SIGMA, observed={"y": Y3}, init={"mu": 0.}, **RUN)


@pytest.mark.slow
def test_a_latent_term_and_a_prior_draw_that_is_nan():
  def gamma_rate(r):
    lam = ed.Gamma(2., r, name="lam")
    return ed.Poisson(lam, name="y")

  with pytest.raises(ValueError, match=r"^2 of 2 chains.*term of 'lam'.*'rate' \(the "
                     r"program's argument 'r'\) has 1 non-positive value\(s\): -1"):
    ed.mcmc.sample(gamma_rate, np.float32(-1.), observed={"y": np.float32(1.)}, init="prior",
                   **RUN)


def test_fit_still_skips_steps_when_some_points_are_finite():
  def sqrt_model():
    mu = ed.Normal(0., 3., name="mu")
    return ed.Normal(tf.sqrt(mu), 1., name="y")  # NaN for mu < 0 only

  target = ed.make_target(sqrt_model, observed={"y": 1.})
  points = np.array([[-1.], [1.]], np.float32)
  assert nonfinite.nonfinite_terms(target, points)["y"].tolist() == [True, False]
  assert nonfinite.explain(target, points[1:]) is None
  reason = nonfinite.explain(target, points, "draws")
  assert reason.startswith("the log-density term of 'y' is not finite at 1 of 2 draws: ")
  assert "'loc' has 1 NaN value" in reason
  # Finite at the initial location: the fit is not refused (the compiled
  # chunk is what runs next).
  with pytest.raises(CompiledWork):
    ed.vi.fit(sqrt_model, observed={"y": 1.}, init={"mu": 0.5}, **FIT)
