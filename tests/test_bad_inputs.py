"""The bad-input corpus (issue 14): what a new user gets wrong, across the
public API.

Every case is a call that must fail with a given exception type, a message
that names the offending variable, argument or file (a regex), and *before
compiled work*: the ``no_compiled_work`` fixture replaces the entry points of
compiled work -- the MCMC sampler's compiled chunk (``Program.run_chunk``),
the VI fit's compiled chunk (``vi.elbo.run_chunk``) and the predictive
simulations' compiled map (``simulation.map_draws``) -- with a function that
raises ``CompiledWorkStarted``, a ``BaseException`` no library code catches,
so a case whose error comes only from inside the compiled loop fails.

Cases share a few small models defined here; most take milliseconds (an
``ed.mcmc.sample`` case traces its model, never compiles it): the whole file
runs in about 15 s on a loaded 2-core machine.  Inputs that gave a raw
TensorFlow or NumPy error, ran into the compiled loop, hung (a dataset that
repeats forever) or were silently accepted (``target_accept=1.5``,
``jit_compile="no"``) when the corpus was written were fixed in the library;
``test_numpy_float64_draws_predict_with_a_float32_model`` and
``test_numpy_float64_parameter_follows_the_model_dtype`` keep the fixes that
made a failing call work.
"""

import collections
import json
import os
import re
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import edward_lite as ed
from edward_lite.distribute.strategies import resolve
from edward_lite.mcmc.compiled import Program
from test_nonfinite import bounds_from_latents, minus_infinity_factor  # shared models

tfd, tfb = tfp.distributions, tfp.bijectors
elbo_module = sys.modules["edward_lite.vi.elbo"]  # the fit's compiled chunk
simulation_module = sys.modules["edward_lite.model.simulation"]


class CompiledWorkStarted(BaseException):
  """A compiled chunk or map was entered: an input error came too late."""


@pytest.fixture
def no_compiled_work(monkeypatch):
  def refuse(*args, **kwargs):
    raise CompiledWorkStarted("compiled work started before the error")

  monkeypatch.setattr(Program, "run_chunk", refuse)
  monkeypatch.setattr(elbo_module, "run_chunk", refuse)
  monkeypatch.setattr(simulation_module, "map_draws", refuse)
  return refuse


# -- shared models and data --------------------------------------------------------

Y = np.array([0.5, -0.3, 1.2], np.float32)
OBS = {"y": Y}
X = np.array([[1., 0.], [0., 1.], [1., 1.]], np.float32)


def counts_as_float64(counts):
  rate = ed.Gamma(2., 1., name="rate")
  ed.Factor(tf.reduce_sum(tf.convert_to_tensor(counts, tf.float64)) * 0. + rate, name="term")


def ascending_over_scalars():
  # A bijector on vectors over a batch of scalars: TFP samples it, and only
  # its log density fails (tfd.Sample(tfd.Normal(0., 5.), 3) was meant).
  c = ed.TransformedDistribution(tfd.Normal(tf.zeros(3), 5.), tfb.Ascending(), name="c")
  return ed.Normal(c, 1., name="y")


def group_effects(codes):  # codes: int8, as pandas' category codes
  u = ed.Normal(tf.zeros(3), 1., name="u")
  return ed.Normal(tf.gather(u, codes), 1., name="y")


def poisson_counts_factor(counts):  # counts: an int64 column
  g1 = ed.Gamma(2., 1., name="g1")
  ed.Factor(tf.reduce_sum(tfp.distributions.Poisson(g1).log_prob(counts)), name="lik")


def negative_binomial_counts_factor(counts):
  g1 = ed.Gamma(2., 1., name="g1")
  p = ed.Beta(2., 2., name="p")
  lik = tfp.distributions.NegativeBinomial(g1, probs=p).log_prob(counts)
  ed.Factor(tf.reduce_sum(lik), name="lik")


def grouped_counts(counts, group):  # two int64 arguments; only counts meets floats
  rate = ed.Gamma(2. * tf.ones(2), 1., name="rate")
  per_row = tf.gather(rate, group)
  ed.Factor(tf.reduce_sum(counts * per_row), name="lik")


def constant_of_argument(x):  # x reaches the program as a Tensor
  mu = ed.Normal(0., 1., name="mu")
  return ed.Normal(mu + tf.constant(x[:-1]), 1., name="y")


def numpy_scalar_prior():  # np.log gives a NumPy float64 scalar
  beta = ed.LogNormal(np.log(0.5), 0.5, name="beta")
  phi_inv = ed.Exponential(1., name="phi_inv")
  return ed.Normal(beta * tf.ones(3) + phi_inv, 1., name="y")


def float64_distribution_built_by_user():
  beta = ed.as_random_variable(tfp.distributions.LogNormal(np.log(0.5), 0.5), name="beta")
  phi_inv = ed.Exponential(1., name="phi_inv")
  return ed.Normal(beta * tf.ones(3) + phi_inv, 1., name="y")


def normal_model():
  mu = ed.Normal(0., 1., name="mu")
  return ed.Normal(mu * tf.ones(3), 1., name="y")


def grouped_model(group):
  a = ed.Normal(tf.zeros(2), 1., name="a")
  return ed.Normal(tf.gather(a, group), 1., name="y")


def regression(x):
  w = ed.Normal(tf.zeros(2), 1., name="w")
  return ed.Normal(tf.einsum("nd,d->n", x, w), 1., name="y")


def scale_model(sigma):
  mu = ed.Normal(0., 5., name="mu")
  return ed.Normal(mu * tf.ones(3), sigma, name="y")


def poisson_model():
  lam = ed.Gamma(2., 1., name="lam")
  return ed.Poisson(lam * tf.ones(3), name="y")


def table_model(data):
  w = ed.Normal(0., 1., name="w")
  return ed.Normal(w * data["x1"].values + data["x2"].values, 1., name="y")


def _frame_with_nan():
  import pandas as pd  # pylint: disable=g-import-not-at-top
  return pd.DataFrame({"label": ["u", "v", "w"], "x1": [0.5, 1., 2.], "x2": [0., 1., np.nan]},
                      index=["a", "b", "c"])


def simplex_model():
  p = ed.Dirichlet(tf.ones(3), name="p")
  return ed.Categorical(probs=p, sample_shape=4, name="y")


def positive_model():
  s = ed.HalfNormal(1., name="s")
  return ed.Normal(tf.zeros(3), s, name="y")


def negative_scale_model():
  mu = ed.Normal(0., 1., name="mu")
  return ed.Normal(mu * tf.ones(3), -1., name="y")  # a constant scale outside its domain


def grouped_frame_model(frame):
  a = ed.Normal(tf.zeros(2), 1., name="a")
  return ed.Normal(tf.gather(a, frame["g"]), 1., name="y")


def _labels_frame():
  pd = pytest.importorskip("pandas")
  return pd.DataFrame({"g": ["a", "b", "a"], "x": [1., 2., 3.]})


def logistic_labels(x):
  w = ed.Normal(0., 1., name="w")
  return ed.Bernoulli(logits=w * x, name="y")


def probability_model():
  logit = ed.Normal(0., 1., name="logit")
  del logit
  return ed.Bernoulli(probs=1.5, sample_shape=3, name="b")


def positive_regression(x):
  w = ed.Normal(tf.zeros(2), 1., name="w")
  s = ed.HalfNormal(1., name="s")
  return ed.Normal(tf.einsum("nd,d->n", x, w), s, name="y")


def correlation_model():
  chol = ed.CholeskyLKJ(3, 2., name="L")
  return ed.MultivariateNormalTriL(tf.zeros(3), chol, name="y")


def ordered_model():
  cut = ed.Flat(support="ordered", shape=3, name="c")
  return ed.Normal(cut, 1., name="y")


def flat_model():
  m = ed.Flat(name="m")
  return ed.Normal(m * tf.ones(3), 1., name="y")


def discrete_latent():
  k = ed.Poisson(3., name="k")
  return ed.Normal(tf.cast(k, tf.float32) * tf.ones(3), 1., name="y")


def unnamed_model():
  mu = ed.Normal(0., 1.)
  return ed.Normal(mu * tf.ones(3), 1., name="y")


def duplicate_names():
  a = ed.Normal(0., 1., name="a")
  ed.Normal(a, 1., name="a")
  return ed.Normal(a * tf.ones(3), 1., name="y")


def python_if_on_latent():
  mu = ed.Normal(0., 1., name="mu")
  if mu > 0:
    return ed.Normal(mu * tf.ones(3), 1., name="y")
  return ed.Normal(-mu * tf.ones(3), 1., name="y")


_draws = {"n": 0}


def stochastic_structure():
  _draws["n"] += 1
  mu = ed.Normal(0., 1., name="mu")
  if _draws["n"] % 2:
    ed.Normal(0., 1., name="extra")
  return ed.Normal(mu * tf.ones(3), 1., name="y")


def with_options(x, scale=1.):
  mu = ed.Normal(0., scale, name="mu")
  return ed.Normal(mu + x, 1., name="y")


MCMC = dict(kernel="rwmh", chains=2, warmup=10, draws=10, seed=1, progress=False,
            max_init_tries=3)
FIT = dict(steps=10, samples=4, progress=False)


def sample(model=normal_model, *args, observed=OBS, **settings):
  return ed.mcmc.sample(model, *args, observed=observed, **{**MCMC, **settings})


def fit(model=normal_model, *args, observed=OBS, **settings):
  return ed.vi.fit(model, *args, observed=observed, **{**FIT, **settings})


def log_joint(model, **values):
  return ed.make_log_joint_fn(model)(**values)


def predictive(posterior, model=normal_model, *args, **kwargs):
  return ed.posterior_predictive(model, posterior, *args, **kwargs)


def _write(path, text):
  with open(path, "w") as f:
    f.write(text)
  return path


def _checkpoint_file(tmp):
  return _write(os.path.join(tmp, "not_a_dir"), "a file")


def _corrupt_meta(tmp):
  os.makedirs(os.path.join(tmp, "ckpt"))
  _write(os.path.join(tmp, "ckpt", "meta.json"), '{"format": 2, "model": {"co')
  return os.path.join(tmp, "ckpt")


def _foreign_meta(tmp):
  os.makedirs(os.path.join(tmp, "ckpt"))
  _write(os.path.join(tmp, "ckpt", "meta.json"), json.dumps({"format": 2, "model": "x"}))
  return os.path.join(tmp, "ckpt")


def _meta_is_a_directory(tmp):
  os.makedirs(os.path.join(tmp, "ckpt", "meta.json"))
  return os.path.join(tmp, "ckpt")


def _lock_is_a_directory(tmp):
  os.makedirs(os.path.join(tmp, "ckpt", "lock"))
  return os.path.join(tmp, "ckpt")


def _state_without_meta(tmp):
  os.makedirs(os.path.join(tmp, "ckpt"))
  np.savez(os.path.join(tmp, "ckpt", "state.npz"), step=np.asarray(3))
  return os.path.join(tmp, "ckpt")


# -- the corpus ---------------------------------------------------------------------

Case = collections.namedtuple("Case", ["id", "call", "error", "pattern"])



class _RoundsWithAdaptation(ed.mcmc.NUTS):
  """Breaks the sampler's rule: runs rounds and adapts from each transition."""

  def adapt_update(self, adapt_state, kstate_before, info, step_size, step):
    return adapt_state


def case(id_, call, error, pattern):
  return Case(id_, call, error, pattern)


CASES = [
    # Random-variable constructors.
    case("rv-name-not-a-string", lambda t: ed.Normal(0., 1., name=3), TypeError,
         r"name=.*non-empty string.*3"),
    case("rv-empty-name", lambda t: ed.Normal(0., 1., name=""), TypeError,
         r"name=.*non-empty string"),
    case("rv-negative-sample-shape", lambda t: ed.Normal(0., 1., sample_shape=-2, name="x"),
         TypeError, r"sample_shape of random variable 'x'.*-2"),
    case("rv-float-sample-shape", lambda t: ed.Normal(0., 1., sample_shape=(2, 1.5), name="x"),
         TypeError, r"sample_shape of random variable 'x'.*\(2, 1\.5\)"),
    case("rv-value-wrong-shape", lambda t: ed.Normal(0., 1., value=np.zeros(3), name="x"),
         ValueError, r"'x' has shape \[3\]; expected \[\]"),
    case("rv-value-string", lambda t: ed.Normal(0., 1., value="zero", name="x"), TypeError,
         r"'x'"),
    case("rv-value-wrong-tensor-dtype",
         lambda t: ed.Normal(0., 1., value=tf.constant(0., tf.float64), name="x"), TypeError,
         r"'x' has dtype float64.*float32"),
    case("rv-bernoulli-value-not-boolean-like",
         lambda t: ed.Bernoulli(probs=0.5, value=0.5, name="b"), TypeError, r"'b'.*int32"),
    # Issue 53, item 9: a value= off the support, checked as observed data are.
    case("rv-dirichlet-value-off-the-simplex",
         lambda t: ed.Dirichlet([1., 1.], value=[0.7, 0.7], name="p"), ValueError,
         r"value= given to random variable 'p' is outside the support of its Dirichlet "
         r"distribution.*\[0\.7, 0\.7\]"),
    case("rv-bernoulli-value-two", lambda t: ed.Bernoulli(probs=0.5, value=2, name="b"),
         ValueError, r"value= given to random variable 'b' .* expects 0 or 1.*is 2"),
    case("rv-unknown-keyword", lambda t: ed.Normal(0., 1., sclae=2., name="x"), TypeError,
         r"sclae"),
    case("rv-string-parameter", lambda t: ed.Normal("zero", 1., name="x"), TypeError,
         r"Random variable 'x' \(Normal\): .*'zero'"),
    case("rv-incompatible-parameter-shapes",
         lambda t: ed.Normal(tf.zeros(2), tf.ones(3), name="x"), ValueError,
         r"Random variable 'x' \(Normal\): .*loc.*scale.*\(2,\).*\(3,\)"),
    case("rv-mixed-float-dtypes",
         lambda t: ed.Normal(tf.zeros(2, tf.float64), tf.ones(2, tf.float32), name="x"),
         TypeError, r"Random variable 'x' \(Normal\): .*incompatible dtypes"),
    case("flat-unknown-support", lambda t: ed.Flat(support="simplx", shape=3, name="p"),
         ValueError, r"'p'.*unknown support='simplx'"),
    case("flat-simplex-scalar-shape", lambda t: ed.Flat(support="simplex", name="p"),
         ValueError, r"'p'.*needs a vector shape"),
    case("flat-bounds-with-constrained-type",
         lambda t: ed.Flat(low=0., support="ordered", shape=3, name="o"), ValueError,
         r"'o'.*low= and high="),
    case("flat-low-above-high", lambda t: ed.Flat(low=1., high=0., name="f"), ValueError,
         r"'f'.*low.*high"),
    case("flat-negative-shape", lambda t: ed.Flat(shape=-1, name="f"), ValueError,
         r"ed\.Flat 'f': shape= must be a shape.*-1"),
    case("flat-string-bound", lambda t: ed.Flat(low="a", name="f"), TypeError,
         r"ed\.Flat 'f': low= must be a number.*'a'"),
    case("factor-integer", lambda t: ed.Factor(tf.constant(1), name="pen"), TypeError,
         r"'pen'.*floating.*int32"),
    case("factor-string", lambda t: ed.Factor("big", name="pen"), TypeError, r"'pen'"),

    # The log joint.
    case("log-joint-not-callable", lambda t: ed.make_log_joint_fn(3), TypeError, r"callable"),
    case("log-joint-unknown-name", lambda t: log_joint(normal_model, mu=0., y=Y, z=1.),
         ValueError, r"'z'"),
    case("log-joint-missing-value", lambda t: log_joint(normal_model, mu=0.), ValueError,
         r"'y'"),
    case("log-joint-wrong-shape", lambda t: log_joint(normal_model, mu=0., y=np.zeros(4)),
         ValueError, r"'y' has shape \[4\]"),
    case("log-joint-string-value", lambda t: log_joint(normal_model, mu="zero", y=Y), TypeError,
         r"'mu'"),
    case("log-joint-unnamed", lambda t: log_joint(unnamed_model, y=Y), ValueError,
         r"make_log_joint_fn.*Normal and no name="),

    # make_target.
    case("target-not-callable", lambda t: ed.make_target("model"), TypeError,
         r"callable program.*str"),
    case("target-observed-list", lambda t: ed.make_target(normal_model, observed=[Y]),
         TypeError, r"observed= must be a dict"),
    case("target-observed-unknown-name",
         lambda t: ed.make_target(normal_model, observed={"why": Y}), ValueError,
         r"\['why'\].*not random variables"),
    case("target-observed-wrong-shape",
         lambda t: ed.make_target(normal_model, observed={"y": np.zeros(5, np.float32)}),
         ValueError, r"'y' has shape \[5\]; expected \[3\]"),
    case("target-observed-nan",
         lambda t: ed.make_target(normal_model, observed={"y": np.array([0., np.nan, 1.])}),
         ValueError, r"'y' contains 1 non-finite value\(s\) \(NaN or inf\), the first at index 1;"),
    case("target-dataframe-nan-names-column-and-row",
         lambda t: ed.make_target(table_model, _frame_with_nan()), ValueError,
         r"'data' .*contains 1 non-finite value\(s\) \(NaN or inf\), the first in column "
         r"'x2' at row 'c';"),
    case("target-observed-inf-list",
         lambda t: ed.make_target(normal_model, observed={"y": [0., float("inf"), 1.]}),
         ValueError, r"'y' contains 1 non-finite"),
    case("target-observed-string",
         lambda t: ed.make_target(normal_model, observed={"y": "abc"}), (TypeError, ValueError),
         r"'y'"),
    case("target-argument-string-labels-as-index",
         lambda t: ed.make_target(grouped_model, np.array(["a", "b", "a"]), observed=OBS),
         ValueError, r"its arguments: group: string \[3\] \(argument 'group' holds strings.*"
                     r"integer codes"),
    # Issue 53, item 3: string labels in a DataFrame column, used as indices.
    case("target-dataframe-string-labels-as-index",
         lambda t: ed.make_target(grouped_frame_model, _labels_frame(), observed=OBS),
         ValueError, r"\(column 'g' of argument 'frame' holds strings, [^()]*integer codes "
                     r"with pandas\.factorize\(column\)\[0\]\)\.$"),
    case("target-argument-string-in-arithmetic",
         lambda t: ed.make_target(lambda x: ed.Normal(x * 2., 1., name="y"),
                                  np.array(["1", "2", "3"]), observed=OBS), (TypeError, ValueError),
         r"'x'.*strings"),
    case("target-argument-nan",
         lambda t: ed.make_target(regression, np.array([[np.nan, 0.]] * 3, np.float32),
                                  observed=OBS), ValueError, r"Argument 'x'.*3 non-finite"),
    case("target-argument-nan-in-dict",
         lambda t: ed.make_target(lambda d: regression(d["x"]), {"x": X * np.nan},
                                  observed=OBS), ValueError, r"'x'.*non-finite"),
    case("target-argument-wrong-shape",
         lambda t: ed.make_target(regression, np.zeros([3, 5], np.float32), observed=OBS),
         ValueError, r"regression failed after random variable 'w' at test_bad_inputs\.py:\d+ "
         r"\(return .*einsum.*Expected dimension 5.*its arguments: x: float32 \[3, 5\]"),
    case("target-discrete-latent", lambda t: ed.make_target(discrete_latent, observed=OBS),
         ValueError, r"'k'.*discrete support"),
    case("target-unnamed", lambda t: ed.make_target(unnamed_model, observed=OBS), ValueError,
         r"Normal and no name="),
    case("target-duplicate-name", lambda t: ed.make_target(duplicate_names, observed=OBS),
         ValueError, r"'a'"),
    case("target-python-if-on-latent",
         lambda t: ed.make_target(python_if_on_latent, observed=OBS), TypeError, r"'mu'"),
    case("target-stochastic-structure",
         lambda t: ed.make_target(stochastic_structure, observed=OBS), ValueError,
         r"change from run to run.*'extra': latent \[\] float32 then absent"),
    case("target-poisson-negative-count",
         lambda t: ed.make_target(poisson_model, observed={"y": np.array([1., -1., 2.])}),
         ValueError, r"'y' is outside the support of its Poisson.*-1"),
    case("target-poisson-fractional-count",
         lambda t: ed.make_target(poisson_model, observed={"y": np.array([1., 1.5, 2.])}),
         ValueError, r"'y'.*Poisson.*1\.5"),
    case("target-halfnormal-negative",
         lambda t: ed.make_target(lambda: ed.HalfNormal(tf.ones(2), name="h"),
                                  observed={"h": np.array([1., -2.], np.float32)}),
         ValueError, r"'h'.*-2"),
    case("target-dtype-integer", lambda t: ed.make_target(normal_model, observed=OBS,
                                                          dtype=tf.int32), (TypeError, ValueError),
         r"dtype.*int32"),
    case("target-dtype-unknown", lambda t: ed.make_target(normal_model, observed=OBS,
                                                          dtype="float17"), (TypeError, ValueError),
         r"float17"),
    case("target-observed-factor",
         lambda t: ed.make_target(minus_infinity_factor, observed={"penalty": 0.}),
         (ValueError, TypeError), r"'penalty'"),
    case("target-unnamed-factor",
         lambda t: ed.make_target(lambda: (ed.Normal(0., 1., name="mu"), ed.Factor(1.))),
         ValueError, r"with ed\.Factor and no name="),
    case("target-nan-fixed-by-condition",
         lambda t: ed.make_target(lambda: _in_block(ed.condition(mu=np.nan))), ValueError,
         r"fixed inside the program for random variable 'mu' contains 1 non-finite"),
    case("target-float64-distribution-built-by-user",
         lambda t: ed.make_target(float64_distribution_built_by_user, observed=OBS), TypeError,
         r"mixes floating dtypes after random variable 'phi_inv' .*the model runs in float32, "
         r"but random variable 'beta' is float64:"),
    case("sample-bijector-needs-an-event",
         lambda t: ed.mcmc.sample(ascending_over_scalars, observed=OBS, chains=2, warmup=10,
                                  draws=10, progress=False), ValueError,
         r"random variable 'c' \(TransformedDistribution\).*Ascending acts on events of at "
         r"least 1 dimension.*event shape \[\], batch shape \[3\].*tfd\.Sample"),
    case("target-int8-indices",
         lambda t: ed.make_target(group_effects, np.array([0, 2, 1], np.int8), observed=OBS),
         ValueError, r"group_effects failed after random variable 'u'.*tf\.gather\(u, codes\)"
         r".*int32 or int64, not int8: convert the indices with \.astype\(np\.int32\)"),
    case("target-unknown-keyword", lambda t: ed.make_target(with_options, 0., observed=OBS,
                                                            scael=2.), TypeError, r"scael"),

    # ed.condition / ed.do.
    case("condition-unknown-name",
         lambda t: _in_block(ed.condition(mux=0.)), ValueError, r"ed\.condition.*'mux'"),
    case("do-unknown-name", lambda t: _in_block(ed.do(mux=0.)), ValueError, r"ed\.do.*'mux'"),
    case("condition-wrong-shape", lambda t: _in_block(ed.condition(mu=np.zeros(4))), ValueError,
         r"'mu' has shape \[4\]"),
    case("do-wrong-shape", lambda t: _in_block(ed.do(mu=np.zeros(4))), ValueError,
         r"'mu' has shape \[4\]"),
    case("do-string-value", lambda t: _in_block(ed.do(mu="zero")), TypeError, r"'mu'"),

    # ed.mcmc.sample settings.
    case("sample-chains-zero", lambda t: sample(chains=0), ValueError, r"chains"),
    case("sample-chains-float", lambda t: sample(chains=2.5), (TypeError, ValueError),
         r"chains.*2\.5"),
    case("sample-chains-string", lambda t: sample(chains="4"), (TypeError, ValueError),
         r"chains.*'4'"),
    case("sample-chains-bool", lambda t: sample(chains=True), (TypeError, ValueError),
         r"chains.*True"),
    case("sample-warmup-negative", lambda t: sample(warmup=-1), ValueError, r"warmup.*-1"),
    case("sample-draws-zero", lambda t: sample(draws=0), ValueError, r"draws.*0"),
    case("sample-thin-zero", lambda t: sample(thin=0), ValueError, r"thin.*0"),
    case("sample-thin-float", lambda t: sample(thin=1.5), ValueError, r"thin.*1\.5"),
    case("sample-kernel-typo", lambda t: sample(kernel="nutz"), ValueError,
         r"'nutz'.*nuts"),
    case("sample-kernel-number", lambda t: sample(kernel=42), (TypeError, ValueError),
         r"kernel.*42"),
    case("sample-target-accept-above-one",
         lambda t: sample(kernel=ed.mcmc.NUTS(target_accept=1.5)), ValueError,
         r"target_accept.*1\.5"),
    case("sample-target-accept-zero", lambda t: sample(kernel=ed.mcmc.HMC(target_accept=0.)),
         ValueError, r"target_accept.*0"),
    case("sample-leapfrog-zero", lambda t: sample(kernel=ed.mcmc.HMC(num_leapfrog_steps=0)),
         ValueError, r"num_leapfrog_steps.*0"),
    case("sample-tree-depth-huge", lambda t: sample(kernel=ed.mcmc.NUTS(max_tree_depth=100)),
         ValueError, r"max_tree_depth.*100"),
    case("sample-rwmh-negative-scale", lambda t: sample(kernel=ed.mcmc.RWMH(scale=-1.)),
         ValueError, r"scale.*-1"),
    case("sample-rwmh-target-accept-two", lambda t: sample(kernel=ed.mcmc.RWMH(target_accept=2)),
         ValueError, r"RWMH target_accept.*\(0, 1\); got 2"),
    case("sample-chees-negative-learning-rate",
         lambda t: sample(kernel=ed.mcmc.ChEES(learning_rate=-1.)), ValueError,
         r"ChEES learning_rate.*-1"),
    case("sample-kernel-rounds-with-adaptation",
         lambda t: sample(kernel=_RoundsWithAdaptation()), TypeError,
         r"_RoundsWithAdaptation runs rounds.*adapt_update"),
    case("sample-init-typo", lambda t: sample(init="unifrom"), ValueError,
         r"init must be.*'unifrom'"),
    case("sample-init-unknown-name", lambda t: sample(init={"mu": 0., "sigma": 1.}), ValueError,
         r"\['sigma'\].*not latent"),
    case("sample-init-partial-outside-support",
         lambda t: sample(positive_regression, X, init={"s": -2.}), ValueError,
         r"init values for \['s'\] are outside the support"),
    case("sample-init-wrong-shape", lambda t: sample(regression, X, init={"w": np.zeros(3)}),
         ValueError, r"'w' has shape \(3,\)"),
    case("sample-init-outside-support", lambda t: sample(positive_model, init={"s": -1.}),
         ValueError, r"\['s'\].*outside the support"),
    case("sample-init-outside-support-says-value-and-support",
         lambda t: sample(positive_model, init={"s": -1.}), ValueError,
         r"'s' is -1 where its HalfNormal distribution expects non-negative values"),
    case("sample-init-outside-simplex-shows-the-vector",
         lambda t: sample(simplex_model, observed={"y": np.array([0, 1, 2, 1], np.int32)},
                          init={"p": [0.5, 0.7, -0.2]}), ValueError,
         r"'p' is \[ ?0\.5, 0\.7, -0\.2\] where its Dirichlet distribution expects "
         r"vectors on the probability simplex"),
    # Finite images of values outside the support: the round trip finds them.
    case("sample-init-simplex-not-summing-to-one",
         lambda t: sample(simplex_model, observed={"y": np.array([0, 1, 2, 1], np.int32)},
                          init={"p": [0.3, 0.3, 0.3]}), ValueError,
         r"'p' is \[ ?0\.3, 0\.3, 0\.3\] where its Dirichlet distribution expects "
         r"vectors on the probability simplex"),
    case("fit-init-not-a-correlation-cholesky-factor",
         lambda t: fit(correlation_model, init={"L": 2 * np.eye(3)}), ValueError,
         r"'L' is \[\[2\., 0\., 0\.\].*CholeskyLKJ distribution expects Cholesky factors "
         r"of correlation matrices"),
    case("sample-init-not-increasing", lambda t: sample(ordered_model, init={"c": [0., -1., 2.]}),
         ValueError, r"'c' is \[ ?0\., -1\., ?2\.\] where .* expects increasing vectors"),
    case("sample-init-value-string", lambda t: sample(init={"mu": "zero"}), ValueError,
         r"init value for 'mu' is not a number.*'zero'"),
    case("sample-constant-scale-negative",
         lambda t: sample(negative_scale_model), ValueError,
         r"The Normal 'y' has the constant parameter 'scale' = -1, outside its domain "
         r"\('scale' must be positive\).*fix the model"),
    case("sample-constant-probability-above-one",
         lambda t: sample(probability_model, observed={"b": np.array([0, 1, 1], np.int32)}),
         ValueError, r"The Bernoulli 'b' has the constant parameter 'probs' = 1.5, outside its "
         r"domain \('probs' is a probability, in \[0, 1\]\)"),
    case("sample-bernoulli-labels-not-integers",
         lambda t: sample(logistic_labels, np.array([1., 2., 3.], np.float32),
                          observed={"y": np.array([0., 0.5, 1.])}), TypeError,
         r"'y' holds 0\.5 at index \[1\], not an integer: a Bernoulli variable takes "
         r"integer values \(int32\), so it is outside its support"),
    case("fit-constant-scale-negative", lambda t: fit(negative_scale_model), ValueError,
         r"constant parameter 'scale' = -1"),
    case("sample-init-array-wrong-shape", lambda t: sample(init=np.zeros([3, 1])), ValueError,
         r"\[chains, D\] = \[2, 1\]; got \[3, 1\]"),
    case("sample-init-array-nan", lambda t: sample(init=np.full([2, 1], np.nan)), ValueError,
         r"init array holds 2 NaN.*chain 0, latent 'mu'"),
    case("sample-init-radius-zero", lambda t: sample(init_radius=0.), ValueError,
         r"init_radius.*0"),
    case("sample-init-radius-string", lambda t: sample(init_radius="2"), ValueError,
         r"init_radius must be a positive number; got '2'"),
    case("sample-seed-negative", lambda t: sample(seed=-1), ValueError, r"seed.*-1"),
    case("sample-seed-float", lambda t: sample(seed=1.5), (TypeError, ValueError),
         r"seed.*1\.5"),
    case("sample-seed-string", lambda t: sample(seed="abc"), (TypeError, ValueError),
         r"seed.*'abc'"),
    case("sample-chunk-size-zero", lambda t: sample(chunk_size=0), ValueError,
         r"chunk_size.*0"),
    case("sample-step-size-negative", lambda t: sample(step_size=-0.1), ValueError,
         r"step_size.*-0\.1"),
    case("sample-step-size-string", lambda t: sample(step_size="big"), ValueError,
         r"step_size must be a positive number; got 'big'"),
    case("sample-adapt-metric-typo", lambda t: sample(adapt_metric="full"), ValueError,
         r"adapt_metric.*'full'"),
    case("sample-low-rank-without-gradients",
         lambda t: sample(kernel="rwmh", adapt_metric="low_rank"),
         ValueError, r"adapt_metric='low_rank' is estimated from gradients; the rwmh kernel"),
    case("sample-adaptive-warmup-not-bool", lambda t: sample(adaptive_warmup="yes"),
         ValueError, r"adaptive_warmup must be True or False; got 'yes'"),
    case("sample-chees-unpooled", lambda t: sample(kernel="chees", pooled=False),
         ValueError, r"the chees kernel estimates one metric.*pooled"),
    case("sample-pooled-typo", lambda t: sample(pooled="yes"), ValueError, r"pooled.*'yes'"),
    case("sample-parallel-typo", lambda t: sample(parallel="rows"), ValueError,
         r"parallel.*'rows'"),
    case("sample-chain-groups-without-strategy", lambda t: sample(parallel="chain_groups"),
         ValueError, r"chain_groups.*strategy"),
    case("sample-strategy-typo", lambda t: sample(strategy="mirorred"), ValueError,
         r"'mirorred'"),
    case("sample-strategy-number", lambda t: sample(strategy=42), TypeError, r"strategy=.*42|int"),
    case("sample-strategy-tpu-without-address", lambda t: sample(strategy="tpu"), ValueError,
         r"strategy\('tpu'\) needs tpu="),
    case("sample-max-init-tries-zero", lambda t: sample(max_init_tries=0), ValueError,
         r"max_init_tries"),
    case("sample-dtype-integer", lambda t: sample(dtype=tf.int32), (TypeError, ValueError),
         r"int32"),
    case("sample-callback-not-callable", lambda t: sample(callback="print"), TypeError,
         r"callback"),
    case("sample-keep-draws-string", lambda t: sample(keep_draws="no"), TypeError,
         r"keep_draws.*'no'"),
    case("sample-jit-compile-string", lambda t: sample(jit_compile="no"), TypeError,
         r"jit_compile must be True or False; got 'no'"),
    case("sample-observed-list", lambda t: sample(observed=[Y]), TypeError, r"observed="),
    case("sample-model-not-callable", lambda t: ed.mcmc.sample("model", **MCMC), TypeError,
         r"callable"),
    case("sample-model-keyword-not-a-parameter", lambda t: sample(with_options, 0., scael=2.),
         TypeError, r"'scael'.*scale"),
    case("sample-discrete-latent", lambda t: sample(discrete_latent), ValueError,
         r"'k'.*discrete"),
    case("sample-no-latents", lambda t: sample(lambda: ed.Normal(0., 1., name="y"),
                                               observed={"y": 0.}), ValueError,
         r"no latent variables"),
    case("sample-negative-sigma-data", lambda t: sample(scale_model, np.array([1., -1., 2.],
                                                                             np.float32)),
         ValueError, r"term of 'y'.*'scale' \(the program's argument 'sigma'\).*non-positive"),
    case("sample-factor-minus-infinity",
         lambda t: sample(minus_infinity_factor, observed=None), ValueError,
         r"term of 'penalty'.*-inf"),
    case("sample-observed-outside-latent-bounds",
         lambda t: sample(bounds_from_latents, observed={"y": np.array([0., 5.], np.float32)}),
         ValueError, r"term of 'y'.*outside the support of its TruncatedNormal"),
    case("sample-flat-prior-init", lambda t: sample(flat_model, init="prior"),
         NotImplementedError, r"'m'.*improper flat prior"),

    # ed.vi.fit settings.
    case("fit-family-typo", lambda t: fit(family="meanfeild"), ValueError,
         r"'meanfeild'.*meanfield"),
    case("fit-family-number", lambda t: fit(family=42), (TypeError, ValueError), r"family.*42"),
    case("fit-realnvp-no-layers", lambda t: fit(family=ed.vi.RealNVP(layers=0)), ValueError,
         r"layers.*0"),
    case("fit-meanfield-negative-init-scale",
         lambda t: fit(family=ed.vi.MeanField(init_scale=-1.)), ValueError,
         r"init_scale.*-1"),
    case("fit-steps-zero", lambda t: fit(steps=0), ValueError, r"steps.*0"),
    case("fit-samples-zero", lambda t: fit(samples=0), ValueError, r"samples.*0"),
    case("fit-learning-rate-negative", lambda t: fit(learning_rate=-0.1), ValueError,
         r"learning_rate.*-0\.1"),
    case("fit-learning-rate-string", lambda t: fit(learning_rate="fast"),
         (TypeError, ValueError), r"learning_rate.*'fast'"),
    case("fit-optimizer-string", lambda t: fit(optimizer="adam"), TypeError,
         r"optimizer must be a Keras optimizer.*str"),
    case("fit-batch-size-zero", lambda t: fit(batch_size=0), ValueError, r"batch_size.*0"),
    case("fit-batch-size-above-n", lambda t: fit(batch_size=10), ValueError,
         r"batch_size.*10.*3"),
    case("fit-batch-size-and-dataset",
         lambda t: fit(batch_size=2, dataset=tf.data.Dataset.from_tensor_slices(
             {"y": Y}).batch(2)), ValueError, r"batch_size=.*dataset=.*not both"),
    case("fit-dataset-a-list", lambda t: fit(dataset=[{"y": Y}]), TypeError,
         r"dataset.*tf\.data\.Dataset.*list"),
    case("fit-dataset-unknown-key",
         lambda t: fit(dataset=tf.data.Dataset.from_tensor_slices({"why": Y}).batch(2)),
         ValueError, r"'why'"),
    case("fit-dataset-repeats-forever",
         lambda t: fit(regression, dataset=tf.data.Dataset.from_tensor_slices(
             {"x": X, "y": Y}).batch(2).repeat()), ValueError, r"dataset= repeats forever"),
    case("fit-on-nonfinite-typo", lambda t: fit(on_nonfinite="ignore"), ValueError,
         r"on_nonfinite.*'ignore'"),
    case("fit-tol-string", lambda t: fit(tol="small"), ValueError,
         r"tol must be a positive number or None; got 'small'"),
    case("fit-init-radius-string", lambda t: fit(init_radius="2"), ValueError,
         r"init_radius must be a positive number; got '2'"),
    case("fit-tol-negative", lambda t: fit(tol=-1e-3), ValueError, r"tol.*-0\.001"),
    case("fit-init-typo", lambda t: fit(init="zeros"), ValueError, r"init must be.*'zeros'"),
    case("fit-init-partial-unknown-name", lambda t: fit(regression, X, init={"v": 0.}),
         ValueError, r"\['v'\] are not latent variables"),
    case("fit-init-outside-support", lambda t: fit(positive_model, init={"s": -1.}),
         ValueError, r"'s'.*outside the support"),
    case("fit-flat-prior-init", lambda t: fit(flat_model, init="prior"), NotImplementedError,
         r"init='prior' cannot draw \['m'\].*improper flat prior"),
    case("fit-warm-start-negative", lambda t: fit(family="fullrank", warm_start=-1), ValueError,
         r"warm_start.*-1"),
    case("fit-stl-with-iaf", lambda t: fit(regression, X, family="iaf", stl=True), ValueError,
         r"stl=True.*'iaf'"),
    case("fit-chunk-size-zero", lambda t: fit(chunk_size=0), ValueError, r"chunk_size.*0"),
    case("fit-seed-negative", lambda t: fit(seed=-3), ValueError, r"seed.*-3"),
    case("fit-init-radius-negative", lambda t: fit(init_radius=-1.), ValueError,
         r"init_radius.*-1"),
    case("fit-program-args-not-a-tuple",
         lambda t: fit(family=lambda a: ed.Normal(0., 1., name="mu"), program_args=3), TypeError,
         r"program_args must be a tuple.*int"),
    case("fit-observed-list", lambda t: fit(observed=[Y]), TypeError, r"observed= must be a dict"),
    case("fit-no-latents", lambda t: fit(lambda: ed.Normal(0., 1., name="y"),
                                         observed={"y": 0.}), ValueError,
         r"no latent variables"),
    case("fit-discrete-latent", lambda t: fit(discrete_latent), ValueError, r"'k'.*discrete"),
    case("fit-strategy-typo", lambda t: fit(strategy="mirorred"), ValueError, r"'mirorred'"),
    case("fit-jit-compile-string", lambda t: fit(jit_compile="yes"), TypeError,
         r"jit_compile must be True or False; got 'yes'"),
    case("fit-callback-not-callable", lambda t: fit(callback=3), TypeError, r"callback"),
    case("fit-keyword-typo", lambda t: fit(sampels=8), TypeError, r"'sampels'.*samples="),
    case("fit-negative-sigma-data", lambda t: fit(scale_model, np.array([1., -1., 2.],
                                                                       np.float32)),
         ValueError, r"every step would be skipped.*term of 'y'.*'sigma'.*non-positive"),
    case("fit-program-family-not-drawing-latents",
         lambda t: fit(family=lambda: ed.Normal(0., 1., name="other")), ValueError,
         r"'mu'|'other'"),

    # ed.posterior_predictive / ed.prior_predictive.
    case("predictive-not-a-posterior", lambda t: predictive("draws"), TypeError,
         r"MCMCResult, a VIResult or a non-empty dict.*str"),
    case("predictive-empty-dict", lambda t: predictive({}), TypeError, r"non-empty dict"),
    case("predictive-unequal-draws",
         lambda t: predictive({"mu": np.zeros(4), "nu": np.zeros(5)},
                              lambda: ed.Normal(ed.Normal(0., 1., name="mu") +
                                                ed.Normal(0., 1., name="nu"), 1., name="y")),
         ValueError, r"leading.*'mu': 4.*'nu': 5"),
    case("predictive-unknown-latent", lambda t: predictive({"mu": np.zeros(4),
                                                            "sigma": np.zeros(4)}),
         ValueError, r"\['sigma'\].*no such random variable"),
    case("predictive-draws-of-wrong-shape", lambda t: predictive({"mu": np.zeros([4, 3])}),
         ValueError, r"'mu'"),
    case("predictive-new-input-nan",
         lambda t: predictive({"w": np.zeros([4, 2], np.float32)}, regression,
                              np.full([5, 2], np.nan, np.float32)), ValueError,
         r"Argument 'x'.*non-finite"),
    case("predictive-seed-negative", lambda t: predictive({"mu": np.zeros(4, np.float32)},
                                                          seed=-1), ValueError, r"seed.*-1"),
    case("predictive-dtype-integer", lambda t: predictive({"mu": np.zeros(4, np.float32)},
                                                          dtype="int32"), TypeError,
         r"dtype must be a floating dtype.*'int32'"),
    case("prior-predictive-flat", lambda t: ed.prior_predictive(flat_model, draws=5),
         NotImplementedError, r"'m'.*improper flat prior"),
    case("prior-predictive-draws-zero", lambda t: ed.prior_predictive(normal_model, draws=0),
         ValueError, r"draws.*0"),
    case("prior-predictive-seed-negative",
         lambda t: ed.prior_predictive(normal_model, draws=5, seed=-1), ValueError,
         r"seed.*-1"),
    case("prior-predictive-dtype", lambda t: ed.prior_predictive(normal_model, dtype="int32"),
         (TypeError, ValueError), r"int32"),
    case("prior-predictive-not-callable", lambda t: ed.prior_predictive(None), TypeError,
         r"callable"),

    # A NumPy integer column cast with convert_to_tensor (it arrives as a Tensor).
    case("program-convert-to-tensor-dtype-of-data",
         lambda t: sample(counts_as_float64, np.arange(5), observed={}), TypeError,
         r"counts_as_float64.*dtype float64 for Tensor with dtype int64.*tf\.cast.*"
         r"counts: int64 \[5\]"),

    # An int64 count column meeting floats in a density or a Factor.
    case("program-integer-argument-in-poisson-log-prob",
         lambda t: sample(poisson_counts_factor, np.arange(5), observed={}), TypeError,
         r"poisson_counts_factor failed at test_bad_inputs\.py:\d+ \(.*log_prob\(counts\).*\): "
         r"Cannot convert 0\.0 to EagerTensor of dtype int64; its integer argument 'counts' "
         r"\(int64\) meets floats there.*: cast it, tf\.cast\(counts, tf\.float32\)\.$"),
    case("program-integer-argument-in-negative-binomial-log-prob",
         lambda t: fit(negative_binomial_counts_factor, np.arange(5), observed={}), TypeError,
         r"negative_binomial_counts_factor failed at .*for Tensor with dtype int64; its integer "
         r"argument 'counts' \(int64\) meets floats.*tf\.cast\(counts, tf\.float32\)\.$"),
    case("program-integer-argument-times-latent",
         lambda t: sample(grouped_counts, np.arange(5), np.array([0, 1, 0, 1, 1]), observed={}),
         TypeError, r"grouped_counts failed at .*\(ed\.Factor\(tf\.reduce_sum\(counts \* per_row\)"
         r".*its integer argument 'counts' \(int64\) meets.*tf\.cast\(counts, tf\.float32\)"),

    # tf.constant of an argument, which fails only in a graph.
    case("program-tf-constant-of-an-argument",
         lambda t: sample(constant_of_argument, np.arange(4, dtype=np.float32)), TypeError,
         r"tf\.constant was given a Tensor at test_bad_inputs\.py:\d+ \(.*tf\.constant\(x\[:-1\]\)"
         r".*\), which it takes only eagerly.*use the Tensor as it is.*tf\.convert_to_tensor\(x\)"),

    # Strategies.
    case("strategy-unknown-kind", lambda t: ed.distribute.strategy("gpus"), ValueError,
         r"'gpus'.*mirrored"),
    case("strategy-devices-for-default",
         lambda t: ed.distribute.strategy("default", devices=["/cpu:0"]), ValueError,
         r"devices=.*'default'"),
    case("strategy-tpu-for-mirrored", lambda t: ed.distribute.strategy("mirrored", tpu="x"),
         ValueError, r"tpu=.*'mirrored'"),
    case("strategy-tpu-without-address", lambda t: ed.distribute.strategy("tpu"), ValueError,
         r"tpu="),
    case("strategy-tpu-name-off-cloud",
         lambda t: ed.distribute.strategy("tpu", tpu="no-such-tpu", timeout=20), RuntimeError,
         r"No TPU (could be reached|answered) at tpu='no-such-tpu'"),
    case("strategy-timeout-string",
         lambda t: ed.distribute.strategy("tpu", tpu="grpc://127.0.0.1:1", timeout="1m"),
         ValueError, r"timeout.*'1m'"),
    case("strategy-unknown-device",
         lambda t: ed.distribute.strategy("mirrored", devices=["/device:CPU:97"]),
         ValueError, r"devices= names \['/device:CPU:97'\].*this host does not have"),
    case("strategy-devices-a-string",
         lambda t: ed.distribute.strategy("mirrored", devices="/cpu:0"), ValueError,
         r"devices= must be a non-empty list.*'/cpu:0'"),
    case("strategy-logical-cpus-zero", lambda t: ed.distribute.logical_cpus(0), ValueError,
         r"logical_cpus.*0"),
    case("strategy-resolve-parallel-typo",
         lambda t: resolve("default", parallel="replicas"), ValueError,
         r"parallel.*'replicas'"),

    # Checkpoints.
    case("checkpoint-dir-is-a-file-fit",
         lambda t: fit(checkpoint_dir=_checkpoint_file(t)), NotADirectoryError, r"not_a_dir"),
    case("checkpoint-meta-truncated-fit", lambda t: fit(checkpoint_dir=_corrupt_meta(t)),
         ed.mcmc.CheckpointCorruptError, r"meta\.json.*delete"),
    case("checkpoint-meta-truncated-sample", lambda t: sample(checkpoint_dir=_corrupt_meta(t)),
         ed.mcmc.CheckpointCorruptError, r"meta\.json.*delete"),
    case("checkpoint-meta-foreign", lambda t: sample(checkpoint_dir=_foreign_meta(t)),
         (ed.mcmc.CheckpointCorruptError, ed.mcmc.CheckpointMismatchError), r"meta\.json"),
    case("checkpoint-meta-is-a-directory",
         lambda t: sample(checkpoint_dir=_meta_is_a_directory(t)),
         (ed.mcmc.CheckpointCorruptError, IsADirectoryError), r"meta\.json"),
    case("checkpoint-state-without-meta",
         lambda t: fit(checkpoint_dir=_state_without_meta(t)), ed.mcmc.CheckpointCorruptError,
         r"without meta\.json"),
    case("checkpoint-lock-is-a-directory",
         lambda t: sample(checkpoint_dir=_lock_is_a_directory(t)), ed.mcmc.CheckpointCorruptError,
         r"lock .*ckpt/lock is a directory.*delete it"),
    case("checkpoint-dir-number", lambda t: sample(checkpoint_dir=42), TypeError,
         r"checkpoint_dir.*42"),
]


def _in_block(context):
  with context:
    return normal_model()


# Cases whose error is found by evaluating the log density at the initial
# points (no start has a finite one), which overlaps the first chunk's
# compile; every other error comes before the compile starts.
FOUND_BY_EVALUATION = {"sample-negative-sigma-data", "sample-factor-minus-infinity",
                       "sample-observed-outside-latent-bounds"}


@pytest.fixture
def endless_compile(monkeypatch):
  """The first chunk's compile (on its thread) does not end until the test
  does: an error that waited for it would arrive after ``TIMEOUT_S``."""
  release = threading.Event()
  original = Program._concrete_function  # pylint: disable=protected-access

  def blocked(self, fn, key, args):
    concrete = original(self, fn, key, args)
    if fn is not self._run_chunk_fn:  # pylint: disable=protected-access
      return concrete  # the initial states' search, say
    return lambda *a: release.wait(endless_compile.TIMEOUT_S) and concrete(*a)

  monkeypatch.setattr(Program, "_concrete_function", blocked)
  yield
  release.set()


endless_compile.TIMEOUT_S = 120.


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, no_compiled_work, tmp_path, monkeypatch, request):  # pylint: disable=redefined-outer-name
  if case.id in FOUND_BY_EVALUATION:
    # The compile overlaps the initial states' search; the error it finds
    # does not wait for it (it waited 8 s of a 16 s wait; issue 53, item 2).
    request.getfixturevalue("endless_compile")
  else:
    # Every other error comes before the first chunk is traced.
    monkeypatch.setattr(Program, "compile_chunk_during", no_compiled_work)
  start = time.time()
  with pytest.raises(case.error) as info:
    case.call(str(tmp_path))
  if case.id in FOUND_BY_EVALUATION:
    assert time.time() - start < endless_compile.TIMEOUT_S / 4, time.time() - start
  message = str(info.value)
  assert re.search(case.pattern, message, re.S), (
      f"{type(info.value).__name__}: {message!r} does not match {case.pattern!r}")


def test_corpus_size_and_unique_ids():
  assert len(CASES) >= 80
  assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("call", [
    lambda: sample(),
    lambda: sample(parallel="data", strategy="default"),
    lambda: fit(),
    lambda: fit(regression, X, batch_size=2),
    lambda: ed.prior_predictive(normal_model, draws=3),
    lambda: predictive({"mu": np.zeros(3, np.float32)}),
], ids=["sample", "sample-default-strategy", "fit", "fit-minibatch", "prior-predictive",
        "predictive"])
def test_the_guard_sees_the_compiled_work_of_valid_calls(call, no_compiled_work):  # pylint: disable=redefined-outer-name
  # The hooks are the entry points: a valid call reaches them (so an error
  # raised by a corpus case came before).
  del no_compiled_work
  with pytest.raises(CompiledWorkStarted):
    call()


def test_numpy_float64_draws_predict_with_a_float32_model():
  # Fixed with the corpus: NumPy's float64 draws of a float32 program gave a
  # raw TensorFlow dtype error; they now run in float32, as make_target's data.
  out = ed.posterior_predictive(normal_model, {"mu": np.zeros(4)})
  assert out["y"].shape == (4, 3) and out["y"].dtype == np.float32


def test_numpy_float64_parameter_follows_the_model_dtype():
  # Fixed with issue 32: ed.LogNormal(np.log(0.5), 0.5) made 'beta' float64
  # and the dtype error named 'phi_inv', the variable built last.  In a model
  # run a NumPy float given to a constructor is converted as data are.
  target = ed.make_target(numpy_scalar_prior, observed=OBS)
  assert target.latents["beta"].dtype == tf.float32
  lp = target.log_joint({"beta": np.float32([0.5]), "phi_inv": np.float32([1.])})
  assert lp.dtype == tf.float32 and np.isfinite(lp).all()
  target = ed.make_target(lambda: ed.LogNormal(np.log(0.5), 0.5, name="beta"),
                          dtype=tf.float64)
  assert target.latents["beta"].dtype == tf.float64
  # Outside a model run the constructor keeps TFP's dtype.
  assert ed.LogNormal(np.log(0.5), 0.5, name="beta").dtype == tf.float64


def _dirichlet_beside_a_flat(alpha):
  p = ed.Dirichlet(alpha, name="p")
  ed.Categorical(probs=p, name="k")
  mu = ed.Flat(name="mu")
  ed.Factor(-0.5 * tf.square(mu), name="prior_mu")


def test_numpy_float64_argument_meeting_float32_latents_is_converted():
  # Fixed with issue 32: float64 concentrations (as data files give them)
  # made 'p' float64 beside a float32 'mu', and sampling stopped with "MCMC
  # needs all latent variables in one floating dtype" without naming the
  # argument.  Float64 data are converted as in any other conflict.
  alpha = np.array([2., 2.])
  target = ed.make_target(_dirichlet_beside_a_flat, alpha, observed={"k": 1})
  assert {n: i.dtype for n, i in target.latents.items()} == {"p": tf.float32,
                                                             "mu": tf.float32}
  # log p(p, mu | k = 1) = log Dirichlet(p | 2, 2) + log p_1 - mu^2 / 2
  p, mu = np.float32([[0.3, 0.7]]), np.float32([0.5])
  expected = np.log(6. * 0.3 * 0.7) + np.log(0.7) - 0.125
  np.testing.assert_allclose(target.log_joint({"p": p, "mu": mu}), [expected], rtol=1e-5)
  assert ed.make_target(_dirichlet_beside_a_flat, alpha, observed={"k": 1},
                        dtype=tf.float64).latents["p"].dtype == tf.float64


def test_init_inside_the_support_starts_where_given():
  # The round trip that refuses the cases above keeps a valid start: a
  # simplex p maps to SoftmaxCentered's inverse log(p[:-1] / p[-1]), and a
  # valid correlation Cholesky factor is accepted as it is.
  from edward_lite.model.init_values import parse_init  # pylint: disable=g-import-not-at-top
  target = ed.make_target(simplex_model, observed={"y": np.array([0, 1, 2, 1], np.int32)})
  p = np.array([0.2, 0.3, 0.5], np.float32)
  np.testing.assert_allclose(parse_init(target, {"p": p}, chains=2),
                             np.log(p[:2] / p[2])[None].repeat(2, 0), rtol=1e-5)
  chol = np.linalg.cholesky(np.array([[1., .3, .1], [.3, 1., .2], [.1, .2, 1.]], np.float32))
  target = ed.make_target(correlation_model, observed=OBS)
  assert parse_init(target, {"L": chol}, chains=1).shape == (1, 3)


def test_a_log_joint_at_values_off_the_support_is_not_an_error():
  # The value= check is for a user's own constructor call: a log joint (a
  # tracer sets the values) at a point outside the support stays -inf or
  # NaN, as in Edward2.
  def model():
    s = ed.HalfNormal(1., name="s")
    return ed.Normal(0., s, name="y")

  value = ed.make_log_joint_fn(model)(s=-1., y=0.)
  assert not np.isfinite(value.numpy())
  with pytest.raises(ValueError, match="value= given to random variable 's'"):
    ed.HalfNormal(1., value=-1., name="s")


def test_a_sampler_keyword_misspelled_into_the_models_kwargs_warns(no_compiled_work):  # pylint: disable=redefined-outer-name
  # Issue 53, item 5: draw=20 for a model taking **kwargs went to the model
  # and 1000 draws ran; the call warns before any compiled work.
  def model(**kwargs):
    del kwargs
    return ed.Normal(0., 1., name="x")

  with pytest.warns(UserWarning, match=r"Keyword 'draw' goes to the model '[\w.<>]*model' .*"
                                       r"did you mean draws=\?"):
    with pytest.raises(CompiledWorkStarted):
      ed.mcmc.sample(model, draw=20, chains=2, warmup=20, progress=False)
