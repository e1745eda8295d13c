"""posterior.save / ed.load round trips, with and without kept draws."""

import numpy as np
import pytest

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


def test_round_trip_keeps_every_number(result, tmp_path):
  path = result.save(tmp_path / "fit")
  assert path.endswith("fit.npz")
  loaded = ed.load(path)
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
  assert str(loaded.summary(print_table=False)) == str(result.summary(print_table=False))
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
