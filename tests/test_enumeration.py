"""Discrete latents summed out of the log density (model/enumeration.py).

Each test compares with an answer computed another way: the hand-
marginalized model's density (ed.MixtureSameFamily, a zero-inflated
Poisson written out), the assignment probabilities computed in NumPy at
each draw, and a change point's posterior by exact summation (conjugate
Gamma-Poisson segments).
"""

import pathlib
import warnings

import numpy as np
import pytest
import scipy.special as sp
import tensorflow as tf
import tensorflow_probability as tfp

import edward_lite as ed
from edward_lite.model import enumeration, per_chain_gradient

tfd = tfp.distributions

MU = np.array([-1.5, 2.0], np.float32)


def _mixture_data(n=40, seed=1):
  rng = np.random.default_rng(seed)
  z = rng.integers(2, size=n)
  return (MU[z] + rng.normal(size=n) * 0.9).astype(np.float32)


def mixture(n):
  """Two components at known means; the weight and the scale unknown."""
  w = ed.Beta(2., 2., name="w")
  sigma = ed.HalfNormal(2., name="sigma")
  z = ed.Bernoulli(probs=w, sample_shape=n, name="z")
  return ed.Normal(tf.gather(MU, z), sigma, name="y")


def mixture_marginal(n):
  w = ed.Beta(2., 2., name="w")
  sigma = ed.HalfNormal(2., name="sigma")
  return ed.MixtureSameFamily(tfd.Categorical(probs=tf.stack([1. - w, w])),
                              tfd.Normal(MU, sigma), sample_shape=n, name="y")


def test_the_summed_out_density_is_the_hand_marginalized_one():
  y = _mixture_data()
  summed = ed.make_target(mixture, len(y), observed={"y": y})
  marginal = ed.make_target(mixture_marginal, len(y), observed={"y": y})
  assert summed.names == marginal.names == ("w", "sigma")
  assert summed.enumerated_names == ("z",)
  assert not summed.enumeration.groups[0].joint  # by element: 2 runs, not 2^40
  u = tf.random.stateless_normal([6, summed.dim], [1, 2])
  np.testing.assert_allclose(summed.log_prob_flat(u), marginal.log_prob_flat(u), rtol=1e-5)
  value, grad = summed.value_and_gradient_flat(u)
  value_m, grad_m = marginal.value_and_gradient_flat(u)
  np.testing.assert_allclose(grad, grad_m, rtol=1e-4, atol=1e-4)
  # LOO's pointwise log-likelihood: log p(y_i | w, sigma), z_i summed out.
  x = {"w": np.full([3], 0.3, np.float32), "sigma": np.array([0.7, 1., 1.5], np.float32)}
  np.testing.assert_allclose(summed.log_likelihood(x)["y"], marginal.log_likelihood(x)["y"],
                             rtol=1e-5)


def test_the_terms_report_the_summed_out_group_as_one_term():
  """``log_prob_terms_flat`` (the non-finite diagnosis reads it): the
  independent terms as they are, ``z`` and ``y`` -- which change with z --
  as one term ``log sum_z p(z | w) p(y | z, sigma)``: the hand-marginalized
  model's ``y`` term; the terms sum to the marginal ``log_prob_flat``."""
  y = _mixture_data()
  summed = ed.make_target(mixture, len(y), observed={"y": y})
  marginal = ed.make_target(mixture_marginal, len(y), observed={"y": y})
  u = tf.random.stateless_normal([6, summed.dim], [3, 1])
  terms = summed.log_prob_terms_flat(u)
  assert list(terms) == ["w (Jacobian)", "w", "sigma (Jacobian)", "sigma", "z (summed out)"]
  np.testing.assert_allclose(tf.add_n(list(terms.values())), summed.log_prob_flat(u),
                             rtol=1e-5)
  exact = marginal.log_prob_terms_flat(u)
  np.testing.assert_allclose(terms["z (summed out)"], exact["y"], rtol=1e-5)
  for name in ("w (Jacobian)", "w", "sigma (Jacobian)", "sigma"):
    np.testing.assert_allclose(terms[name], exact[name], rtol=1e-5)


def test_a_non_finite_summed_out_term_is_explained_by_its_parts():
  from edward_lite.model import nonfinite  # pylint: disable=import-outside-toplevel
  def mixture_scaled(scale):
    w = ed.Beta(2., 2., name="w")
    z = ed.Bernoulli(probs=w, sample_shape=3, name="z")
    return ed.Normal(tf.gather(MU, z), scale, name="y")
  target = ed.make_target(mixture_scaled, np.array([1., -1., 1.], np.float32),
                          observed={"y": np.zeros(3, np.float32)})
  reason = nonfinite.explain(target, np.zeros([2, 1], np.float32))
  assert reason.startswith("the log-density term of 'z (summed out)' is not finite at 2 of 2 "
                           "points: with z summed out, the term of 'y' is not finite"), reason
  assert "'scale' (the program's argument 'scale') has 1 non-positive value" in reason


def mixture_counted(n):
  """The mixture with an ed.Deterministic of the assignments."""
  w = ed.Beta(2., 2., name="w")
  sigma = ed.HalfNormal(2., name="sigma")
  z = ed.Bernoulli(probs=w, sample_shape=n, name="z")
  ed.Deterministic(tf.reduce_sum(z), name="ones")
  return ed.Normal(tf.gather(MU, z), sigma, name="y")


def test_pointwise_sums_out_or_says_what_it_needs():
  """One draw's pointwise log-likelihood is the hand-marginalized
  ``log(w N(y_i; 2, sigma) + (1 - w) N(y_i; -1.5, sigma))`` per
  observation, never a run at a prior draw of ``z``; the deterministic
  values need ``z``'s values or a seed to draw them from ``p(z | x, y)``."""
  from edward_lite.model import interpreter  # pylint: disable=import-outside-toplevel
  y = _mixture_data(n=12)
  target = ed.make_target(mixture_counted, len(y), observed={"y": y})
  values = {"w": tf.constant(0.3), "sigma": tf.constant(0.8)}
  exact = tfd.MixtureSameFamily(tfd.Categorical(probs=[0.7, 0.3]),
                                tfd.Normal(MU, 0.8)).log_prob(y)
  with pytest.raises(ValueError, match=r"values does not hold: pass their values, or seed="):
    target.pointwise(values)
  log_lik, deterministic = target.pointwise(values, seed=3)
  np.testing.assert_allclose(log_lik["y"], exact, rtol=1e-5)
  assert 0 <= int(deterministic["ones"]) <= len(y)
  z = tf.constant(np.arange(12) % 2, tf.int32)
  log_lik, deterministic = target.pointwise({**values, "z": z})
  np.testing.assert_allclose(log_lik["y"], exact, rtol=1e-5)  # summed out all the same
  assert int(deterministic["ones"]) == 6
  with pytest.raises(ValueError, match=r"pointwise needs values of the summed-out discrete "
                     r"latents \['z'\]"):
    interpreter.pointwise(target, values)
  log_lik = interpreter.pointwise(target, {**values, "z": z})[0]["y"]  # given z: conditional
  np.testing.assert_allclose(log_lik, tfd.Normal(tf.gather(MU, z), 0.8).log_prob(y), rtol=1e-5)


@pytest.mark.slow
def test_assignments_are_drawn_with_their_conditional_probabilities():
  y = _mixture_data()
  post = ed.mcmc.sample(mixture, len(y), observed={"y": y}, chains=4, warmup=300, draws=500,
                        seed=0, progress=False)
  z = post.draws["z"]
  assert z.shape == (500, 4, len(y)) and set(np.unique(z)) <= {0, 1}
  w, sigma = post.draws["w"][..., None], post.draws["sigma"][..., None]
  # p(z_i = 1 | w, sigma, y) at every draw, computed in NumPy.
  log1 = np.log(w) - 0.5 * ((y - MU[1]) / sigma) ** 2
  log0 = np.log1p(-w) - 0.5 * ((y - MU[0]) / sigma) ** 2
  exact = sp.expit(log1 - log0).mean(axis=(0, 1))
  se = np.sqrt(exact * (1 - exact) / z[..., 0].size) + 0.01
  assert np.all(np.abs(z.mean(axis=(0, 1)) - exact) < 5 * se)
  assert 0.2 < exact.min() or exact.min() < 0.05  # some points are clear-cut
  summary = post.summary()
  # The summed-out assignments only when asked for (issue 53, item 10).
  assert "w" in summary.index and "z[0]" not in summary.index
  assert any("not shown: z (summary(var_names=['z'])" in line
             for line in summary.attrs["methods"]), summary.attrs["methods"]
  assert "z[0]" in post.summary(var_names=["z"]).index


def test_draws_of_summed_out_latents_are_made_a_block_at_a_time(monkeypatch):
  # After a run, each kept draw's assignments are drawn from p(z | w, sigma, y):
  # a batch of draws at a time, bounded by enumeration.pair_block (here 250
  # draws, 4000 in 16 batches, one seed per batch); the frequencies match
  # the conditional probabilities computed in NumPy at two parameter values.
  y = _mixture_data()
  target = ed.make_target(mixture, len(y), observed={"y": y})
  monkeypatch.setattr(enumeration, "pair_block", lambda *args: 250)
  w = np.repeat(np.array([0.3, 0.7], np.float32), 2000)
  sigma = np.repeat(np.array([1.2, 0.8], np.float32), 2000)
  z = target.deterministic({"w": w, "sigma": sigma}, seed=5)["z"]
  assert z.shape == (4000, len(y))
  for half in (slice(0, 2000), slice(2000, 4000)):
    wi, si = w[half][0], sigma[half][0]
    log1 = np.log(wi) - 0.5 * ((y - MU[1]) / si) ** 2
    log0 = np.log1p(-wi) - 0.5 * ((y - MU[0]) / si) ** 2
    exact = sp.expit(log1 - log0)
    se = np.sqrt(exact * (1 - exact) / 2000)
    assert np.all(np.abs(z[half].mean(axis=0) - exact) < 5 * se + 1e-3)
  # A second call (another run's draws) reuses the target's one trace.
  again = target.deterministic({"w": w, "sigma": sigma}, seed=5)["z"]
  np.testing.assert_array_equal(again, z)
  assert target._derived[0].experimental_get_tracing_count() == 1  # pylint: disable=protected-access


def change_point(t_len):
  tau = ed.Categorical(logits=tf.zeros([t_len]), name="tau")
  early = ed.Gamma(2., 1., name="early")
  late = ed.Gamma(2., 1., name="late")
  rate = tf.where(tf.range(t_len) < tau, early, late)
  return ed.Poisson(rate, name="y")


def _change_point_posterior(y, a=2., b=1.):
  """p(tau | y) by summation: each segment's rate integrates out in closed form."""
  t_len = len(y)
  cum = np.concatenate([[0.], np.cumsum(y)])
  tau = np.arange(t_len)

  def segment(n, s):
    return sp.gammaln(a + s) - (a + s) * np.log(b + n)

  log_p = segment(tau, cum[tau]) + segment(t_len - tau, cum[-1] - cum[tau])
  p = np.exp(log_p - log_p.max())
  p /= p.sum()
  early = (a + cum[tau]) / (b + tau)
  late = (a + cum[-1] - cum[tau]) / (b + t_len - tau)
  return p, float(p @ early), float(p @ late)


MEANS20 = np.linspace(-4., 4., 20).astype(np.float32)


def twenty_components(n):
  """Per-observation assignments to 20 components: 20 configurations (a loop)."""
  sigma = ed.HalfNormal(1., name="sigma")
  weights = ed.Dirichlet(tf.ones(20), name="weights")
  z = ed.Categorical(probs=weights, sample_shape=n, name="z")
  return ed.Normal(tf.gather(MEANS20, z), sigma, name="y")


def switch_and_change_point(t_len):
  """Two groups of different sizes: a change point over t_len positions and
  a global two-valued switch of the noise (padded to the larger count)."""
  tau = ed.Categorical(logits=tf.zeros([t_len]), name="tau")
  early = ed.Gamma(2., 1., name="early")
  late = ed.Gamma(2., 1., name="late")
  ed.Poisson(tf.where(tf.range(t_len) < tau, early, late), name="y")
  noisy = ed.Bernoulli(probs=0.3, name="noisy")
  scale = ed.HalfNormal(1., name="scale")
  return ed.Normal(0., scale * (1. + tf.cast(noisy, tf.float32)), sample_shape=3, name="x")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["change_point", "twenty_components", "two_groups"])
def test_many_configurations_are_summed_over_chain_configuration_pairs(model, monkeypatch):
  # Above enumeration_plan.UNROLL configurations the density is evaluated for
  # every (chain, configuration) pair in one vectorized batch; the same value
  # and gradient as the configurations' loop, chain by chain.  Compiled with
  # XLA, the chains in blocks of 3 (as 10^5 chains are in blocks bounded by
  # enumeration.PAIR_BLOCK_ELEMENTS): 4 chains, the last block padded.
  rng = np.random.default_rng(0)
  y = rng.poisson(3., 25).astype(np.float32)
  if model == "change_point":
    target = ed.make_target(change_point, 25, observed={"y": y})
  elif model == "twenty_components":
    target = ed.make_target(twenty_components, 30,
                            observed={"y": rng.normal(size=30).astype(np.float32) * 3})
  else:
    target = ed.make_target(switch_and_change_point, 25,
                            observed={"y": y, "x": np.array([0.5, -2., 1.], np.float32)})
    assert [g.count for g in target.enumeration.groups] == [25, 2]
  assert target.enumeration.loops and target.sums_out_in_pairs
  u = tf.random.stateless_normal([4, target.dim], [3, 4]) * 0.5
  value, grad = target.value_and_gradient_flat(u)
  state = target.unflatten(u)
  loop_value, loop_grads = per_chain_gradient.batched_value_and_gradient(
      target.density_fn(), state, loops=True)
  np.testing.assert_allclose(value, loop_value, rtol=2e-5, atol=1e-4)
  np.testing.assert_allclose(grad, target.flatten(loop_grads), rtol=2e-4, atol=2e-4)
  monkeypatch.setattr(enumeration, "pair_block", lambda *args: 3)
  compiled = tf.function(target.value_and_gradient_flat, jit_compile=True)(u)
  np.testing.assert_allclose(compiled[0], value, rtol=2e-5, atol=1e-4)
  np.testing.assert_allclose(compiled[1], grad, rtol=2e-4, atol=2e-4)


@pytest.mark.slow
def test_a_change_point_matches_its_posterior_by_summation():
  rng = np.random.default_rng(3)
  y = np.concatenate([rng.poisson(1.5, 12), rng.poisson(5., 18)]).astype(np.float32)
  p, early, late = _change_point_posterior(y)
  target = ed.make_target(change_point, len(y), observed={"y": y})
  assert target.enumeration.loops  # 30 positions: run in a loop, not unrolled
  post = ed.mcmc.sample(change_point, len(y), observed={"y": y}, chains=4, warmup=300,
                        draws=500, seed=0, progress=False)
  tau = post.draws["tau"].ravel()
  frequency = np.bincount(tau, minlength=len(y)) / tau.size
  assert np.abs(frequency - p).max() < 0.05
  assert abs(tau.mean() - p @ np.arange(len(y))) < 0.5
  for name, exact in (("early", early), ("late", late)):
    draws = post.draws[name]
    assert abs(draws.mean() - exact) < 5 * draws.std() / np.sqrt(tau.size / 10), name
  # A scalar switch is in the default summary (per-point assignments are not),
  # with the mean of its draws; a user reads the change point there.
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    summary = post.summary()
  assert list(summary.index) == ["early", "late", "tau"], list(summary.index)
  assert summary.loc["tau", "mean"] == pytest.approx(tau.mean(), rel=1e-6)
  assert not any("not shown" in line for line in summary.attrs["methods"])


def zero_inflated(n):
  rate = ed.Gamma(2., 0.5, name="rate")
  inflation = ed.Beta(1., 1., name="inflation")
  zero = ed.Bernoulli(probs=inflation, sample_shape=n, name="zero")
  # Selected with tf.where, not multiplied by (1 - zero): a rate of exactly 0
  # meeting a positive count has an infinite derivative, and 0 * inf is NaN.
  return ed.Poisson(tf.where(zero == 1, 0., rate), name="y")


def zero_inflated_marginal(n):
  rate = ed.Gamma(2., 0.5, name="rate")
  inflation = ed.Beta(1., 1., name="inflation")
  return ed.MixtureSameFamily(tfd.Categorical(probs=tf.stack([inflation, 1. - inflation])),
                              tfd.Poisson(tf.stack([0., rate])), sample_shape=n, name="y")


@pytest.mark.long  # the default run keeps the change point and assignment draws by enumeration
def test_zero_inflated_poisson_fits_as_the_marginalized_model_under_vi():
  rng = np.random.default_rng(4)
  y = np.where(rng.random(50) < 0.3, 0, rng.poisson(3., 50)).astype(np.float32)
  summed = ed.make_target(zero_inflated, len(y), observed={"y": y})
  marginal = ed.make_target(zero_inflated_marginal, len(y), observed={"y": y})
  u = tf.random.stateless_normal([5, summed.dim], [3, 4])
  np.testing.assert_allclose(summed.log_prob_flat(u), marginal.log_prob_flat(u), rtol=1e-5)
  fits = [ed.vi.fit(m, len(y), observed={"y": y}, steps=300, seed=0, progress=False)
          for m in (zero_inflated, zero_inflated_marginal)]
  for name in ("rate", "inflation"):
    a, b = (fit.sample(draws=2000, seed=1)[name].mean() for fit in fits)
    assert abs(a - b) < 0.02 * abs(b), name
  assert "zero" in fits[0].sample(draws=10, seed=1)


def chain_of_switches(n):
  """Each y_t depends on two neighbouring switches: not local by element."""
  s = ed.Bernoulli(probs=0.3, sample_shape=n + 1, name="s")
  level = ed.Normal(0., 1., name="level")
  sf = tf.cast(s, tf.float32)
  return ed.Normal(level + sf[1:] + sf[:-1], 0.5, name="y")


def test_coupled_switches_are_summed_jointly_or_refused():
  y = np.array([0.1, 1.2, 2.1, 0.9, 0.2], np.float32)
  target = ed.make_target(chain_of_switches, len(y), observed={"y": y})
  group = target.enumeration.groups[0]
  assert group.joint and group.count == 2 ** 6
  level = np.array([[0.3]], np.float32)
  states = np.array(np.meshgrid(*[[0, 1]] * 6, indexing="ij")).reshape(6, -1).T
  sf = states.astype(np.float64)
  log_terms = ((states * np.log(0.3) + (1 - states) * np.log(0.7)).sum(1)
               + tfd.Normal(level[0, 0] + sf[:, 1:] + sf[:, :-1], 0.5).log_prob(y).numpy().sum(1))
  exact = sp.logsumexp(log_terms) + tfd.Normal(0., 1.).log_prob(0.3).numpy()
  np.testing.assert_allclose(target.log_prob_flat(level), [exact], rtol=1e-5)
  y_long = np.zeros(20, np.float32)
  with pytest.raises(ValueError, match=r"'s' \(Bernoulli, 2 values, shape \[21\]\).*4096"):
    ed.make_target(chain_of_switches, len(y_long), observed={"y": y_long})


def test_a_latent_with_infinite_discrete_support_is_still_refused():
  def model():
    k = ed.Poisson(3., name="k")
    return ed.Normal(tf.cast(k, tf.float32), 1., name="y")
  with pytest.raises(ValueError, match="'k'.*only finite supports"):
    ed.make_target(model, observed={"y": 2.})


MU3 = np.array([-2., 0., 3.], np.float32)


def three_components(kind):
  def program(n):
    w = ed.Dirichlet(tf.ones(3), name="w")
    s = ed.HalfNormal(1., name="s")
    if kind == "marginal":
      return ed.MixtureSameFamily(tfd.Categorical(probs=w), tfd.Normal(MU3, s),
                                  sample_shape=n, name="y")
    if kind == "onehot":
      z = ed.OneHotCategorical(probs=w, sample_shape=n, dtype=tf.float32, name="z")
      return ed.Normal(tf.linalg.matvec(z, MU3), s, name="y")
    z = ed.Categorical(probs=w, sample_shape=n, name="z")
    return ed.Normal(tf.gather(MU3, z), s, name="y")
  return program


@pytest.mark.parametrize("kind", ["categorical", "onehot"])
def test_categorical_and_one_hot_assignments_sum_to_the_mixture(kind):
  y = np.array([-2., 0.1, 3., 2.5, -1.8, 0.3], np.float32)
  summed = ed.make_target(three_components(kind), len(y), observed={"y": y})
  marginal = ed.make_target(three_components("marginal"), len(y), observed={"y": y})
  assert summed.enumeration.groups[0].count == 3
  u = tf.random.stateless_normal([3, summed.dim], [5, 6])
  np.testing.assert_allclose(summed.log_prob_flat(u), marginal.log_prob_flat(u), rtol=1e-5)


def mixture_of(x):
  """The mixture with its size from the data argument (minibatches resize it)."""
  w = ed.Beta(2., 2., name="w")
  sigma = ed.HalfNormal(2., name="sigma")
  z = ed.Bernoulli(probs=w * tf.ones_like(x), name="z")
  return ed.Normal(tf.gather(MU, z), sigma, name="y")


def test_a_minibatch_sums_out_its_own_assignments():
  y = _mixture_data(n=40)
  x = np.zeros_like(y)
  summed = ed.make_target(mixture_of, x, observed={"y": y})
  marginal = ed.make_target(mixture_marginal, 10, observed={"y": y[:10]})
  batch = summed.with_data(args=(x[:10],), observed={"y": y[:10]})
  u = tf.random.stateless_normal([4, summed.dim], [7, 8])
  np.testing.assert_allclose(batch.log_prob_flat(u), marginal.log_prob_flat(u), rtol=1e-5)


def _mixture_grid_means(y):
  """E[w], E[sigma] under `mixture_marginal` by quadrature on a 2-D grid."""
  w = np.linspace(0.0005, 0.9995, 1000)[:, None, None]
  sigma = np.linspace(0.002, 4., 2000)[None, :, None]
  like = np.logaddexp(np.log1p(-w) - 0.5 * ((y - MU[0]) / sigma) ** 2,
                      np.log(w) - 0.5 * ((y - MU[1]) / sigma) ** 2) - np.log(sigma)
  log_p = (like.sum(-1) + np.log(w[..., 0] * (1 - w[..., 0]))
           - 0.125 * sigma[..., 0] ** 2)
  p = np.exp(log_p - log_p.max())
  p /= p.sum()
  return float((p * w[..., 0]).sum()), float((p * sigma[..., 0]).sum())


@pytest.mark.parametrize("kernel,chains,draws", [("hmc", 4, 1000), ("chees", 32, 300),
                                                 ("rwmh", 64, 1000)])
@pytest.mark.slow
def test_every_kernel_samples_a_model_with_summed_out_assignments(kernel, chains, draws):
  y = _mixture_data()
  exact = _mixture_grid_means(y)
  post = ed.mcmc.sample(mixture, len(y), observed={"y": y}, kernel=kernel, chains=chains,
                        warmup=500, draws=draws, seed=0, progress=False)
  assert post.draws["z"].shape == (draws, chains, len(y))
  assert ("energy" in post.sample_stats) == (kernel != "rwmh")  # no momentum, no E-BFMI
  summary = post.summary(var_names=["w", "sigma"])
  for name, value in zip(("w", "sigma"), exact):
    row = summary.loc[name]
    assert row["r_hat"] < 1.02, (kernel, name, row["r_hat"])
    assert abs(row["mean"] - value) < 4 * row["mcse_mean"], (kernel, name, row["mean"], value)


@pytest.mark.slow
def test_the_coal_mining_example_matches_its_exact_means_at_many_chains():
  # examples/change_point.py: 112 years, the switch summed out over
  # (chain, year) pairs; 512 random-walk chains recover the exact posterior
  # means (by conjugacy, computed there and again here by summation).
  import importlib.util  # pylint: disable=import-outside-toplevel
  spec = importlib.util.spec_from_file_location(
      "change_point_example", pathlib.Path(__file__).parents[1] / "examples" / "change_point.py")
  example = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(example)
  y = example.DISASTERS
  p, early, late = _change_point_posterior(y, a=1., b=1.)
  exact = example.exact_means(y)
  np.testing.assert_allclose(exact, [early, late, p @ np.arange(len(y))], rtol=1e-9)
  post = ed.mcmc.sample(example.disasters, len(y), observed={"disasters": y}, chains=512,
                        kernel="rwmh", warmup=600, draws=200, seed=1, progress=False)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    summary = post.summary()
  for name, value in zip(["early", "late", "switch"], exact):
    row = summary.loc[name]
    assert abs(row["mean"] - value) < 4 * row["mcse_mean"], (name, row["mean"], value)
