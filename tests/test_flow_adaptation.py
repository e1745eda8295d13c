"""Flow-preconditioned MCMC (issue 54): ``adapt_metric="flow"`` and the
transported target it samples."""

import types
import warnings

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.mcmc import flow_adaptation, notes
from edward_lite.model.transported import Transport, TransportedTarget


def bounded_gaussian():
  ed.Normal(1., 2., name="mu")
  ed.LogNormal(0., 0.5, name="sigma")


def funnel(dim=6):
  v = ed.Normal(0., 3., name="v")
  return ed.Normal(tf.zeros(dim - 1), tf.exp(v / 2.), name="x")


def affine(loc, scale):
  loc, scale = tf.constant(loc, tf.float32), tf.constant(scale, tf.float32)
  return Transport(lambda v: (loc + scale * v, tf.reduce_sum(tf.math.log(scale)) +
                              tf.zeros(tf.shape(v)[:-1])),
                   lambda u: (u - loc) / scale, key="affine", description="an affine map")


def test_transported_density_is_the_change_of_variables():
  base = ed.make_target(bounded_gaussian)
  moved = TransportedTarget(base, affine([0.5, -1.], [2., 0.3]))
  v = tf.constant(np.random.RandomState(0).randn(5, 2), tf.float32)
  u = tf.constant(np.array([0.5, -1.]) + v.numpy() * [2., 0.3], tf.float32)
  expected = base.log_prob_flat(u).numpy() + np.log(2. * 0.3)
  np.testing.assert_allclose(moved.log_prob_flat(v).numpy(), expected, rtol=1e-5)
  value, grad = moved.value_and_gradient_flat(v)
  _, base_grad = base.value_and_gradient_flat(u)
  np.testing.assert_allclose(value.numpy(), expected, rtol=1e-5)
  np.testing.assert_allclose(grad.numpy(), base_grad.numpy() * [2., 0.3], rtol=1e-5)
  # Constrained draws go through T then the support's bijector; values back.
  x = moved.constrain_flat(v).numpy()
  np.testing.assert_allclose(x, base.constrain_flat(u).numpy(), rtol=1e-6)
  back = moved.flatten(moved.unconstrain(moved.split_constrained(x)))
  np.testing.assert_allclose(back.numpy(), v.numpy(), rtol=1e-4, atol=1e-5)
  terms = moved.log_prob_terms_flat(v)
  np.testing.assert_allclose(sum(t.numpy() for t in terms.values()), expected, rtol=1e-5)


def short_fit(model, family, steps=3):
  """A few steps of a fit (its k-hat warning, expected, silenced)."""
  with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "The fitted", RuntimeWarning)
    return ed.vi.fit(model, family=family, steps=steps, seed=1, init="uniform", warm_start=0,
                     jit_compile=False,
                     progress=False)


def test_init_values_start_where_they_say_through_the_transport():
  base = ed.make_target(bounded_gaussian)
  moved = TransportedTarget(base, affine([0.5, -1.], [2., 0.3]))
  v = flow_adaptation.starting_points(moved, {"mu": 3., "sigma": 2.}, 2, 0, 2.)
  np.testing.assert_allclose(moved.constrain_flat(v).numpy(), [[3., 2.]] * 2, rtol=1e-5)
  v = flow_adaptation.starting_points(moved, {"sigma": 0.5}, 3, 0, 2.)
  x = moved.constrain_flat(v).numpy()
  np.testing.assert_allclose(x[:, 1], 0.5, rtol=1e-5)
  assert np.all(np.abs(x[:, 0]) < 2.) and np.unique(x[:, 0]).size == 3  # drawn in (-2, 2)
  assert flow_adaptation.starting_points(moved, "prior", 3, 0, 2.) == "prior"


@pytest.mark.parametrize("family", ["fullrank", pytest.param("iaf", marks=pytest.mark.slow)])
def test_a_fits_transport_is_its_family_map_and_inverts(family):
  fit = short_fit(funnel, family)
  transport = fit.transport()
  v = tf.constant(np.random.RandomState(2).randn(7, 6), tf.float32)
  u, log_det = transport.forward_and_log_det(v)
  bijector = fit.family.bijector(fit._surrogate.params(), 6)  # pylint: disable=protected-access
  np.testing.assert_allclose(u.numpy(), bijector.forward(v).numpy(), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(log_det.numpy(),
                             bijector.forward_log_det_jacobian(v, event_ndims=1).numpy(),
                             rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(transport.inverse(u).numpy(), v.numpy(), atol=1e-4)
  # Identified by content: the same fit twice gives the same key, another fit another.
  assert fit.transport().key == transport.key
  other = short_fit(funnel, family, steps=4)
  assert other.transport().key != transport.key
  assert fit.num_gradients == 3 * fit.samples  # no start search, no warm start


@pytest.mark.slow
def test_flow_run_is_exact_and_counts_the_fits_gradients():
  # A linear transport (mean-field VI) on a Gaussian with a constrained
  # latent: the chains must give the exact posterior whatever the fit.
  flow = ed.mcmc.FlowAdaptation(family="meanfield", steps=200, samples=16)
  result = ed.mcmc.sample(bounded_gaussian, chains=4, warmup=300, draws=1000, seed=3,
                          adapt_metric=flow, progress=False)
  mu, sigma = result.draws["mu"], result.draws["sigma"]
  table = result.summary()
  assert abs(mu.mean() - 1.) < 4 * table.loc["mu", "mcse_mean"]
  assert abs(np.log(sigma).mean()) < 4 * 0.5 / np.sqrt(table.loc["sigma", "ess_bulk"])
  assert abs(mu.std() / 2. - 1.) < 0.1 and abs(np.log(sigma).std() / 0.5 - 1.) < 0.1
  record = result.transport
  assert record["family"] == "meanfield" and record["fitted_here"]
  assert record["num_gradients"] >= 200 * 16
  assert result.total_gradients == int(result.num_gradients.sum()) + record["num_gradients"]
  # The ELBO fit is refit by the Fisher divergence on 2000 of its draws,
  # whose gradients are counted.
  assert record["refit"]["pairs"] == 2000 and record["refit"]["loss"] < 0.1
  # A fit given directly is sampled through as it is, its gradients counted
  # too: the same fit, refit by hand with the run's seed, gives the same draws.
  fit = ed.vi.fit(bounded_gaussian, family="meanfield", steps=200, samples=16, seed=3,
                  progress=False)
  elbo_only = fit.num_gradients
  fit.refit_by_fisher(2000, seed=3)
  assert fit.num_gradients == elbo_only + 2000 == record["num_gradients"]
  again = ed.mcmc.sample(bounded_gaussian, chains=4, warmup=300, draws=1000, seed=3,
                         adapt_metric=fit, progress=False)
  assert not again.transport["fitted_here"] and again.transport["refit"] is None
  np.testing.assert_allclose(again.draws["mu"], mu, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_fisher_refit_moves_a_gaussian_fit_to_the_exact_one():
  # A Gaussian posterior and a mean-field family: the Fisher divergence is 0
  # at the exact mean and sds only, whatever draws the pairs come from. A
  # fit stopped after 80 ELBO steps (sds 0.47 and 0.57 for 0.5 and 3) is
  # refit onto the exact means and the first sd; the second, 5 times too
  # narrow, moves most of the way (Adam's 2000 steps at 0.005 bound how far
  # a raw parameter goes: the refit corrects a fit, it does not replace one).
  def gaussian():
    ed.Normal([1., -2.], [0.5, 3.], name="x")

  fit = ed.vi.fit(gaussian, family="meanfield", steps=80, samples=4, init="prior", seed=1,
                  progress=False)
  before = fit.params["x"]["scale"]
  record = fit.refit_by_fisher(512, seed=1)
  after = fit.params["x"]
  assert np.all(np.abs(after["loc"] - [1., -2.]) < 0.01 * np.array([0.5, 3.]))
  assert abs(after["scale"][0] / 0.5 - 1.) < 0.01 < abs(before[0] / 0.5 - 1.)
  assert abs(after["scale"][1] - 3.) < 0.5 * abs(before[1] - 3.)
  assert record["pairs"] == 512


@pytest.mark.slow
def test_the_refit_runs_by_default_up_to_its_dimension_and_when_asked_above():
  # Each refit step inverts the flow (one network pass per dimension for an
  # autoregressive flow): by default it runs up to REFIT_MAX_DIM dimensions.
  def wide():
    ed.Normal(tf.zeros(flow_adaptation.REFIT_MAX_DIM + 1), 1., name="x")

  def run(refit):
    flow = ed.mcmc.FlowAdaptation("meanfield", steps=5, samples=4, refit=refit)
    return flow_adaptation.fit_transport(flow, wide, (), {}, None, seed=0, dtype=None,
                                         progress=False, checkpoint_dir=None)

  fit, info = run(None)
  assert info["refit"] is None
  elbo_only, before = fit.num_gradients, fit.params["x"]["scale"]
  fit, info = run(300)
  assert info["refit"]["pairs"] == 300 and fit.num_gradients == elbo_only + 300
  assert np.all(np.abs(fit.params["x"]["scale"] - 1.) < 0.7 * np.abs(before - 1.))


def summary_notes(result):
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    table = result.summary()
  return table, [str(w.message) for w in caught]


@pytest.mark.slow
def test_flow_removes_the_funnels_geometry():
  # Neal's funnel in 6 dimensions, centred: v ~ N(0, 3), x | v ~ N(0, e^v).
  # The default adaptation cannot reach the neck, and the summary says the
  # flow may help; through a fitted IAF the chains give v's exact
  # marginal, including its lower tail, and no such hint.
  default = ed.mcmc.sample(funnel, chains=4, warmup=500, draws=1000, seed=0, progress=False)
  _, said = summary_notes(default)
  assert any("adapt_metric='flow'" in note for note in said), said
  result = ed.mcmc.sample(funnel, chains=4, warmup=500, draws=1000, seed=0,
                          adapt_metric=ed.mcmc.FlowAdaptation(steps=600, samples=32),
                          progress=False)
  v = result.draws["v"]
  table, said = summary_notes(result)
  assert not any("adapt_metric='flow'" in note for note in said), said
  assert table["r_hat"].max() < 1.01
  assert abs(v.mean()) < 4 * table.loc["v", "mcse_mean"]
  assert abs(v.std() / 3. - 1.) < 0.08
  tail = (v < -5.).mean()  # exact: Phi(-5 / 3) = 0.0478
  assert abs(tail - 0.0478) < 4 * np.sqrt(0.0478 * 0.9522 / table.loc["v", "ess_tail"])
  assert table.loc["v", "ess_bulk"] > 1000
  assert result.divergences.sum() <= 10


def test_the_geometry_hint_needs_a_sign_a_gradient_kernel_and_no_flow():
  nuts = types.SimpleNamespace(transport=None, kernel=ed.mcmc.NUTS())
  assert notes.geometry_hint(nuts, []) is None
  hint = notes.geometry_hint(nuts, ["divergences", "low E-BFMI"])
  assert hint.startswith("The divergences and low E-BFMI suggest") and "'flow'" in hint
  # Divergences alone: after the divergence note's higher target_accept.
  hint = notes.geometry_hint(nuts, ["divergences"])
  assert hint.startswith("If the divergences stay at a higher target_accept") and "'flow'" in hint
  assert notes.geometry_hint(types.SimpleNamespace(transport=None, kernel=ed.mcmc.RWMH()),
                             ["divergences"]) is None
  assert notes.geometry_hint(types.SimpleNamespace(transport={}, kernel=ed.mcmc.NUTS()),
                             ["divergences"]) is None


def test_bad_flow_settings_are_named():
  with pytest.raises(ValueError, match="Unknown variational family 'nope'"):
    ed.mcmc.FlowAdaptation(family="nope")
  with pytest.raises(ValueError, match="steps"):
    ed.mcmc.FlowAdaptation(steps=0)
  with pytest.raises(ValueError, match="FlowAdaptation refit"):
    ed.mcmc.FlowAdaptation(refit=-1)
  with pytest.raises(ValueError, match="'flow', an ed.mcmc.FlowAdaptation"):
    ed.mcmc.sample(bounded_gaussian, adapt_metric="flows", progress=False)
  with pytest.raises(ValueError, match="adapt_metric='flow' runs the chains on one device"):
    ed.mcmc.sample(bounded_gaussian, adapt_metric="flow", strategy="default", progress=False)
  fit = short_fit(funnel, "meanfield")
  with pytest.raises(ValueError, match="fit was made for latents"):
    ed.mcmc.sample(bounded_gaussian, adapt_metric=fit, progress=False)


def regression(x):
  w = ed.Normal(0., 1., sample_shape=2, name="w")
  sigma = ed.HalfNormal(1., name="sigma")
  return ed.Normal(tf.linalg.matvec(x, w), sigma, name="y")


@pytest.mark.slow
def test_a_flow_run_resumes_predicts_and_saves_as_any_run(tmp_path):
  rng = np.random.RandomState(0)
  x = rng.randn(30, 2).astype(np.float32)
  y = (x @ [1., -0.5] + 0.3 * rng.randn(30)).astype(np.float32)
  kwargs = dict(observed={"y": y}, chains=2, warmup=60, draws=60, seed=5, chunk_size=30,
                progress=False, adapt_metric=ed.mcmc.FlowAdaptation("meanfield", steps=50))
  straight = ed.mcmc.sample(regression, x, **kwargs)
  chunks = []

  def stop(info):
    chunks.append(info)
    if len(chunks) == 3:
      raise KeyboardInterrupt

  ckpt = tmp_path / "run"
  with pytest.raises(KeyboardInterrupt):
    ed.mcmc.sample(regression, x, checkpoint_dir=str(ckpt), callback=stop, **kwargs)
  assert (ckpt / "flow_fit").is_dir()
  resumed = ed.mcmc.sample(regression, x, checkpoint_dir=str(ckpt), **kwargs)
  np.testing.assert_array_equal(resumed.draws["w"], straight.draws["w"])
  # Predictions are the model's at the (constrained) draws.
  new_x = np.eye(2, dtype=np.float32)
  predicted = resumed.posterior_predictive(new_x, seed=1)["y"]
  assert predicted.shape[-1] == 2
  np.testing.assert_allclose(predicted.reshape(-1, 2).mean(0),
                             resumed.draws["w"].reshape(-1, 2).mean(0), atol=0.1)
  path = resumed.save(str(tmp_path / "flow_run.npz"))
  loaded = ed.load(path, regression, x)
  np.testing.assert_array_equal(loaded.draws["sigma"], resumed.draws["sigma"])
  assert loaded.transport == resumed.transport
