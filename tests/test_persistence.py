"""posterior.save / fit.save / ed.load round trips: MCMC results with and
without kept draws; VI fits of every kind of surrogate (mean-field,
full-rank, a flow, a variational program), whose reloaded surrogate repeats
the original draws bit for bit; wrong models and damaged files refused."""

import json

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed

X = np.linspace(-1., 1., 8)
Y = np.float32([-1.2, -0.3, -0.9, 0.1, 0.4, 0.2, 1.3, 0.8])


def line(x):
  a = ed.Normal(0., 3., name="a")
  b = ed.Normal(0., 3., sample_shape=1, name="b")
  mu = ed.Deterministic(a + b[0] * x, name="mu")
  return ed.Normal(mu, 1., name="y")


@pytest.fixture(scope="module", params=[True, False], ids=["draws", "streaming"])
def result(request):
  return ed.mcmc.sample(line, X, observed={"y": Y}, chains=3, warmup=100, draws=120, seed=4,
                        jit_compile=False, progress=False, keep_draws=request.param)


@pytest.mark.slow
def test_round_trip_keeps_every_number(result, tmp_path):
  path = result.save(tmp_path / "fit")
  assert path.endswith("fit.npz")
  loaded = ed.load(tmp_path / "fit")  # the path given to save, as np.savez / np.load
  assert loaded.keep_draws == result.keep_draws and loaded.kernel.name == result.kernel.name
  if result.keep_draws:
    assert set(loaded.draws) == {"a", "b", "mu"}
    for name, value in result.draws.items():
      np.testing.assert_array_equal(loaded.draws[name], value)
    for name, value in result.sample_stats.items():
      np.testing.assert_array_equal(loaded.sample_stats[name], value)
  else:
    assert loaded.draws is None
  for field in ("step_size", "inverse_metric", "chain_accept", "num_gradients"):
    np.testing.assert_array_equal(getattr(loaded, field), getattr(result, field))
  for stat, values in result.streamed.items():
    for name, value in values.items():
      np.testing.assert_array_equal(loaded.streamed[stat][name], value)
  # The summary, computed again from the loaded arrays, is the same table.
  assert str(loaded.summary()) == str(result.summary())
  assert loaded.stuck_chains() == result.stuck_chains()


def test_model_reattached_for_log_likelihood_and_predictions(result, tmp_path):
  if not result.keep_draws:
    pytest.skip("needs draws")
  path = result.save(tmp_path / "fit.npz")
  bare = ed.load(path)
  with pytest.raises(ValueError, match="loaded without its model"):
    bare.log_likelihood()
  idata = bare.to_arviz(log_likelihood=False, posterior_predictive=False)
  np.testing.assert_array_equal(idata.posterior["a"].values, result.draws["a"].T)
  full = ed.load(path, line, X)
  np.testing.assert_allclose(full.log_likelihood()["y"], result.log_likelihood()["y"],
                             rtol=1e-6)
  np.testing.assert_array_equal(full.posterior_predictive(seed=2)["y"],
                                result.posterior_predictive(seed=2)["y"])


def test_load_errors_name_the_file(tmp_path):
  with pytest.raises(FileNotFoundError, match="no file .*missing' .nor with .npz added"):
    ed.load(tmp_path / "missing")
  junk = tmp_path / "junk.npz"
  junk.write_bytes(b"not a zip")
  with pytest.raises(ValueError, match="junk.npz is not a result saved by edward_lite"):
    ed.load(junk)
  other = tmp_path / "other.npz"
  np.savez(other, x=np.zeros(3))
  with pytest.raises(ValueError, match="other.npz is not a result saved"):
    ed.load(other)


def test_a_model_that_does_not_fit_is_refused(result, tmp_path):
  path = result.save(tmp_path / "fit.npz")

  def other(x):
    a = ed.Normal(0., 3., name="a")
    return ed.Normal(a + 0. * x, 1., name="y")

  with pytest.raises(ValueError, match="does not fit .*fit.npz"):
    ed.load(path, other, X)


# -- VI fits: fit.save / ed.load ---------------------------------------------------


def scaled_line(x):
  a = ed.Normal(0., 3., name="a")
  b = ed.Normal(0., 3., sample_shape=1, name="b")
  sigma = ed.HalfNormal(1., name="sigma")  # a constrained latent
  mu = ed.Deterministic(a + b[0] * x, name="mu")
  return ed.Normal(mu, sigma, name="y")


VI_FAMILIES = ["meanfield", "fullrank", ed.vi.RealNVP(layers=2, hidden=(8,)),
               ed.vi.MAF(layers=2, hidden=(8,)), ed.vi.IAF(layers=2, hidden=(8,))]


@pytest.fixture(scope="module", params=VI_FAMILIES,
                ids=["meanfield", "fullrank", "realnvp", "maf", "iaf"])
def vi_fit(request):
  return ed.vi.fit(scaled_line, X, observed={"y": Y}, family=request.param, steps=150,
                   warm_start=50, seed=3, progress=False)


def _assert_nested_equal(a, b):
  assert type(a) is type(b)
  if isinstance(a, dict):
    assert list(a) == list(b)
    for key in a:
      _assert_nested_equal(a[key], b[key])
  else:
    np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@pytest.mark.long_cases("realnvp", "maf", "iaf")  # flows; kept: mean-field, full-rank
def test_vi_round_trip_repeats_the_draws(vi_fit, tmp_path):
  path = vi_fit.save(tmp_path / "vi")
  assert path.endswith("vi.npz")
  full = ed.load(path, scaled_line, X)
  assert isinstance(full, ed.vi.VIResult)
  # The same variables in the same compiled draw: bit-identical draws.
  for seed in (0, 5):
    expected, found = vi_fit.sample(700, seed=seed), full.sample(700, seed=seed)
    assert list(found) == ["a", "b", "sigma", "mu"]
    for name, value in expected.items():
      np.testing.assert_array_equal(found[name], value)
  values = {k: v[:50] for k, v in vi_fit.sample(50, seed=1).items()}
  np.testing.assert_array_equal(full.log_prob(values), vi_fit.log_prob(values))
  _assert_nested_equal(full.params, vi_fit.params)
  _assert_nested_equal(full.raw_params, vi_fit.raw_params)
  assert full.settings == vi_fit.settings and full.family.name == vi_fit.family.name
  assert repr(full) == repr(vi_fit)
  assert str(full.summary()) == str(vi_fit.summary())
  arviz = pytest.importorskip("arviz")
  del arviz
  idata = full.to_arviz(draws=200, seed=2)
  np.testing.assert_array_equal(idata.posterior["a"].values,
                                vi_fit.to_arviz(draws=200, seed=2).posterior["a"].values)


@pytest.mark.long_cases("maf", "iaf")  # the default run keeps RealNVP
def test_vi_loaded_without_the_model_answers_from_the_file(vi_fit, tmp_path):
  path = vi_fit.save(tmp_path / "vi.npz")
  bare = ed.load(path)
  np.testing.assert_array_equal(bare.elbo, vi_fit.elbo)
  assert (bare.steps, bare.samples, bare.converged, bare.nonfinite) == \
      (vi_fit.steps, vi_fit.samples, vi_fit.converged, vi_fit.nonfinite)
  assert bare.settings == vi_fit.settings and bare.timings == vi_fit.timings
  _assert_nested_equal(bare.params, vi_fit.params)
  _assert_nested_equal(bare.raw_params, vi_fit.raw_params)
  for call in (lambda: bare.sample(10), bare.summary, bare.to_arviz, lambda: bare.k_hat,
               bare.posterior_predictive, lambda: bare.log_prob({"a": np.zeros(1)})):
    with pytest.raises(ValueError, match=r"^This VI fit was loaded without its model: pass "
                       r"it to ed\.load\(path, model, \*args\)"):
      call()
  # A loaded fit saves again to the same file contents.
  again = ed.load(bare.save(tmp_path / "again.npz"), scaled_line, X)
  np.testing.assert_array_equal(again.sample(100, seed=4)["sigma"],
                                vi_fit.sample(100, seed=4)["sigma"])


@pytest.mark.slow
def test_vi_variational_program_round_trip(tmp_path):
  loc, raw_scale = tf.Variable(0.), tf.Variable(-1.)

  def q():
    ed.Normal(loc, tf.nn.softplus(raw_scale), name="a")
    ed.Normal(0.1 * tf.ones([1]), 0.5, name="b")  # fixed
    ed.LogNormal(0., 0.3, name="sigma")

  fit = ed.vi.fit(scaled_line, X, observed={"y": Y}, family=q, steps=40, seed=2,
                  progress=False)
  path = fit.save(tmp_path / "program")
  with pytest.raises(ValueError, match="variational program 'test_vi_variational_program_"
                     r"round_trip.<locals>.q'.*family=program"):
    ed.load(path, scaled_line, X).sample(5)
  fitted = loc.numpy(), raw_scale.numpy()
  loc.assign(3.), raw_scale.assign(3.)  # the saved values are assigned back
  loaded = ed.load(path, scaled_line, X, family=q)
  assert (loc.numpy(), raw_scale.numpy()) == fitted
  np.testing.assert_array_equal(loaded.sample(300, seed=1)["a"], fit.sample(300, seed=1)["a"])
  _assert_nested_equal(ed.load(path).raw_params, fit.raw_params)


def _rewrite(path, out, **changes):
  with np.load(path, allow_pickle=False) as data:
    arrays = {k: data[k] for k in data.files}
  header = json.loads(str(arrays["__header__"]))
  for key, value in changes.items():
    if key == "header":
      header.update(value)
    elif value is None:
      del arrays[key]
    else:
      arrays[key] = value
  arrays["__header__"] = np.array(json.dumps(header))
  np.savez(out, **arrays)
  return out


def _no_compiled_work(monkeypatch):
  """Building the surrogate or the result is where compiled work starts."""
  from edward_lite.vi import results, surrogates  # pylint: disable=g-import-not-at-top

  def refuse(*unused_args, **unused_kwargs):
    raise AssertionError("reached the surrogate")

  monkeypatch.setattr(surrogates.FlatSurrogate, "__init__", refuse)
  monkeypatch.setattr(results.VIResult, "__init__", refuse)


def test_vi_model_that_does_not_fit_is_refused_before_compiled_work(tmp_path, monkeypatch):
  fit = ed.vi.fit(scaled_line, X, observed={"y": Y}, steps=5, seed=1, progress=False)
  path = fit.save(tmp_path / "vi.npz")

  def renamed(x):
    a = ed.Normal(0., 3., name="a")
    c = ed.Normal(0., 3., sample_shape=1, name="c")
    sigma = ed.HalfNormal(1., name="sigma")
    return ed.Normal(ed.Deterministic(a + c[0] * x, name="mu"), sigma, name="y")

  def reshaped(x):
    a = ed.Normal(0., 3., name="a")
    b = ed.Normal(0., 3., sample_shape=2, name="b")
    sigma = ed.HalfNormal(1., name="sigma")
    return ed.Normal(ed.Deterministic(a + b[0] * x, name="mu"), sigma, name="y")

  _no_compiled_work(monkeypatch)
  for other in (renamed, reshaped):
    with pytest.raises(ValueError, match=r"does not fit .*vi\.npz: its latents are .*the "
                       "saved fit's"):
      ed.load(path, other, X)


def test_vi_corrupted_file_is_refused_before_compiled_work(tmp_path, monkeypatch):
  fit = ed.vi.fit(scaled_line, X, observed={"y": Y}, steps=5, seed=1, progress=False)
  path = fit.save(tmp_path / "vi.npz")
  _no_compiled_work(monkeypatch)
  cases = {
      "short.npz": dict(**{"variables/0": np.zeros(3, np.float32)}),
      "nan.npz": dict(**{"variables/0": np.full(6, np.nan, np.float32)}),
      "missing.npz": dict(**{"variables/0": None}),
      "elbo.npz": dict(elbo=np.zeros(2)),
      "header.npz": dict(header={"surrogate": None}),
  }
  for name, changes in cases.items():
    bad = _rewrite(path, tmp_path / name, **changes)
    for args in ((), (scaled_line, X)):
      with pytest.raises(ValueError, match=f"{name} is not a usable VI fit saved by "
                         r"edward_lite \(fit.save\): "):
        ed.load(bad, *args)


@pytest.mark.slow
def test_vi_dataset_fit_needs_its_dataset_again(tmp_path):
  def regression(x):
    w = ed.Normal(0., 1., name="w")
    return ed.Normal(w * x, 1., name="y")

  dataset = tf.data.Dataset.from_tensor_slices(
      {"x": np.float32(X), "y": Y}).batch(4)
  fit = ed.vi.fit(regression, dataset=dataset, steps=20, seed=1, progress=False)
  path = fit.save(tmp_path / "streamed")
  with pytest.raises(ValueError, match=r"streamed its data from a tf.data dataset: pass it "
                     r"again, ed.load\(path, model, \*args, dataset=dataset\)"):
    ed.load(path, regression)
  loaded = ed.load(path, regression, dataset=dataset)
  np.testing.assert_array_equal(loaded.sample(100, seed=3)["w"], fit.sample(100, seed=3)["w"])
  # Importance weights take the same pass over the whole dataset.
  np.testing.assert_array_equal(loaded.importance(200, seed=1).log_weights,
                                fit.importance(200, seed=1).log_weights)


@pytest.mark.filterwarnings("ignore:The fitted iaf")  # 20 steps: a loose fit, as intended
def test_vi_autoregressive_flow_saved_before_spread_degrees_loads_as_fitted(tmp_path):
  """An IAF narrower than its dimension: a fit saved now loads with the
  spread hidden degrees it was fitted with; a file saved before
  ``hidden_degrees`` existed (no such key) loads with the cycling degrees
  it was fitted with, and saves again so."""
  def gaussians():
    return ed.Normal(tf.range(8.), 1., name="x")

  fit = ed.vi.fit(gaussians, family=ed.vi.IAF(layers=1, hidden=(3,)), steps=20, seed=0,
                  progress=False)
  values = {"x": fit.sample(20, seed=1)["x"]}
  path = fit.save(tmp_path / "now.npz")
  now = ed.load(path, gaussians)
  assert now.family.hidden_degrees == "spread"
  np.testing.assert_array_equal(now.log_prob(values), fit.log_prob(values))
  with np.load(path) as data:
    arrays = {k: data[k] for k in data.files}
  header = json.loads(str(arrays["__header__"]))
  del header["family"]["hidden_degrees"]
  arrays["__header__"] = np.array(json.dumps(header))
  np.savez(tmp_path / "old.npz", **arrays)
  old = ed.load(tmp_path / "old.npz", gaussians)
  assert old.family.hidden_degrees == "cycle"
  cycled = ed.vi.IAF(layers=1, hidden=(3,), hidden_degrees="cycle")
  params = {k: tf.constant(v) for k, v in fit.raw_params.items()}
  u = tf.constant(values["x"], tf.float32)  # x's own bijector is the identity
  np.testing.assert_allclose(old.log_prob(values), cycled.distribution(params, 8).log_prob(u),
                             rtol=1e-5)
  assert not np.allclose(old.log_prob(values), now.log_prob(values))
  assert ed.load(old.save(tmp_path / "again.npz"), gaussians).family.hidden_degrees == "cycle"
