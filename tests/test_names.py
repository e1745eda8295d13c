"""One name per concept (issue 30, item 6): ``draws=`` is the count of draws
in every call, ``num_gradients`` the gradient count, ``seed`` follows one
rule, ``ed.posterior_predictive`` sits beside ``ed.prior_predictive`` and
``ed.distribute`` exports what users call.  The spellings of 0.1 still work,
with a ``DeprecationWarning`` pointing at the user's line (pytest.ini
ignores DeprecationWarning, so these tests ask for it)."""

import inspect
import warnings

import numpy as np
import pytest

import edward_lite as ed
from edward_lite.mcmc.results import MCMCResult
from edward_lite.runtime.deprecation import RenamedKeys, renamed_keywords
from edward_lite.vi.results import VIResult

X = np.linspace(-1., 1., 10).astype(np.float32)
Y = (0.3 + 1.2 * X + np.random.default_rng(0).normal(0., 1., 10)).astype(np.float32)


def line(x):
  a = ed.Normal(0., 3., name="a")
  b = ed.Normal(0., 3., name="b")
  return ed.Normal(a + b * x, 1., name="y")


@pytest.fixture(scope="module")
def vi_fit():
  return ed.vi.fit(line, X, observed={"y": Y}, steps=200, seed=1, progress=False)


@pytest.fixture(scope="module")
def posterior():
  return ed.mcmc.sample(line, X, observed={"y": Y}, chains=2, warmup=100, draws=100, seed=4,
                        progress=False)


def same(a, b):
  assert a.keys() == b.keys()
  for k in a:
    np.testing.assert_array_equal(a[k], b[k])


def test_the_draw_counts_are_draws_in_every_public_signature():
  for fn in (ed.mcmc.sample, VIResult.sample, VIResult.resample, VIResult.importance, VIResult.posterior_predictive, VIResult.flat_draws,
             MCMCResult.flat_draws, ed.posterior_predictive, ed.prior_predictive):
    params = inspect.signature(fn).parameters
    assert "draws" in params and "n" not in params and "count" not in params, fn.__qualname__
  assert "proposals" in inspect.signature(VIResult.resample).parameters


def test_to_arviz_signatures_count_draws_and_default_seed_none():  # no ArviZ needed
  assert "draws" in inspect.signature(VIResult.to_arviz).parameters
  for fn in (VIResult.to_arviz, MCMCResult.to_arviz):
    assert "prior_draws" in inspect.signature(fn).parameters
  for fn in (VIResult.to_arviz, MCMCResult.to_arviz):
    assert inspect.signature(fn).parameters["seed"].default is None


def test_seed_defaults_follow_the_rule():
  for fn in (ed.mcmc.sample, ed.vi.fit, ed.posterior_predictive, ed.prior_predictive):
    assert inspect.signature(fn).parameters["seed"].default == 0, fn.__qualname__
  for fn in (VIResult.sample, VIResult.resample, VIResult.importance,
             VIResult.posterior_predictive, MCMCResult.posterior_predictive):
    assert inspect.signature(fn).parameters["seed"].default is None, fn.__qualname__


def test_vi_sample_n_warns_and_gives_the_same_draws(vi_fit):
  with pytest.deprecated_call(match=r"`n=` is deprecated; use `draws=`"):
    old = vi_fit.sample(n=50, seed=3)
  same(old, vi_fit.sample(draws=50, seed=3))
  with pytest.raises(TypeError, match=r"`n=`.*`draws=`"):
    vi_fit.sample(n=50, draws=50)


def test_the_warning_points_at_the_users_line(vi_fit):
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    vi_fit.sample(n=5, seed=0)
  assert [w.filename for w in caught if w.category is DeprecationWarning] == [__file__]


def test_resample_old_keywords_read_the_old_way(vi_fit):
  new = vi_fit.resample(draws=30, proposals=200, seed=5)
  with pytest.deprecated_call(match=r"`draws=` is deprecated; use `proposals=`"):
    old = vi_fit.resample(n=30, draws=200, seed=5)
  same(old, new)
  with pytest.deprecated_call(match=r"`draws=` is deprecated; use `proposals=`"):
    positional = vi_fit.resample(30, draws=200, seed=5)  # 0.1's resample(n, draws=S)
  same(positional, new)
  with pytest.deprecated_call(match=r"`n=` is deprecated; use `draws=`"):
    only_n = vi_fit.resample(n=30, seed=5)
  same(only_n, vi_fit.resample(draws=30, seed=5))
  assert len(vi_fit.resample(draws=7, seed=5)["a"]) == 7  # new call: draws is the count
  with pytest.raises(TypeError, match=r"`draws=`.*`proposals=`"):
    vi_fit.resample(n=30, draws=200, proposals=200)


def test_vi_to_arviz_n_warns_and_gives_the_same_draws(vi_fit):
  pytest.importorskip("arviz")
  with pytest.deprecated_call(match=r"`n=` is deprecated; use `draws=`"):
    old = vi_fit.to_arviz(n=40, seed=2, log_likelihood=False, posterior_predictive=False)
  new = vi_fit.to_arviz(draws=40, seed=2, log_likelihood=False, posterior_predictive=False)
  np.testing.assert_array_equal(old.posterior["a"].values, new.posterior["a"].values)
  with pytest.raises(TypeError):
    vi_fit.to_arviz(n=40, draws=40)


def test_to_arviz_prior_warns_and_gives_the_same_prior_draws(posterior, vi_fit):
  pytest.importorskip("arviz")
  for result in (posterior, vi_fit):
    with pytest.deprecated_call(match=r"`prior=` is deprecated; use `prior_draws=`"):
      old = result.to_arviz(prior=20, seed=2, log_likelihood=False, posterior_predictive=False)
    new = result.to_arviz(prior_draws=20, seed=2, log_likelihood=False,
                          posterior_predictive=False)
    for name in new.prior.data_vars:
      np.testing.assert_array_equal(old.prior[name].values, new.prior[name].values)
    assert new.prior[name].values.shape[:2] == (1, 20)


def test_ed_predictive_is_a_deprecated_alias(posterior):
  with pytest.deprecated_call(match=r"`ed.predictive` is deprecated; use "
                                    r"`ed.posterior_predictive`"):
    old_fn = ed.predictive
  assert old_fn is ed.posterior_predictive
  assert "predictive" not in ed.__all__ and "posterior_predictive" in ed.__all__
  same(old_fn(line, posterior, X, seed=2), ed.posterior_predictive(line, posterior, X, seed=2))
  with pytest.deprecated_call():
    from edward_lite.analysis.predictive import predictive  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  assert predictive is ed.posterior_predictive


def test_result_methods_default_to_the_runs_seed(posterior, vi_fit):
  assert posterior.seed == 4
  same(posterior.posterior_predictive(), ed.posterior_predictive(line, posterior, seed=4))
  same(vi_fit.posterior_predictive(draws=20), ed.posterior_predictive(line, vi_fit, draws=20,
                                                                       seed=1))


def test_num_gradients_is_the_gradient_count(posterior):
  stats = posterior.sample_stats
  assert "num_gradients" in stats and "n_grads" not in dict(stats)
  np.testing.assert_array_equal(posterior.num_gradients.shape, (2,))
  assert stats["num_gradients"].sum() <= posterior.num_gradients.sum()
  with pytest.deprecated_call(match=r"`\['n_grads'\]` is deprecated; use "
                                    r"`\['num_gradients'\]`"):
    old = stats["n_grads"]
  np.testing.assert_array_equal(old, stats["num_gradients"])


def test_the_callback_reads_num_gradients():
  seen = []
  ed.mcmc.sample(line, X, observed={"y": Y}, chains=2, warmup=20, draws=20, seed=0,
                 progress=False, callback=seen.append, adaptive_warmup=False)
  assert all("num_gradients" in info and "gradients" not in dict(info) for info in seen)
  with pytest.deprecated_call():
    np.testing.assert_array_equal(seen[0]["gradients"], seen[0]["num_gradients"])


def test_saved_results_keep_the_seed_and_the_new_key(posterior, tmp_path):
  loaded = ed.load(posterior.save(tmp_path / "run.npz"))
  assert loaded.seed == 4
  np.testing.assert_array_equal(loaded.sample_stats["num_gradients"],
                                posterior.sample_stats["num_gradients"])


def test_distribute_exports_what_users_call():
  assert sorted(ed.distribute.__all__) == ["PARALLEL_MODES", "logical_cpus", "strategy"]
  assert set(dir(ed.distribute)) == set(ed.distribute.__all__)
  assert ed.distribute.PARALLEL_MODES == ("data", "chains", "chain_groups")
  from edward_lite.distribute import strategies  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  for name in ("resolve", "num_replicas", "ShardedTarget"):
    with pytest.deprecated_call(match=rf"`ed.distribute.{name}` is deprecated"):
      getattr(ed.distribute, name)
  assert strategies.resolve(None) is None


def test_parallel_modes_are_what_sample_accepts():
  with pytest.raises(ValueError, match="chain_groups"):
    ed.mcmc.sample(line, X, observed={"y": Y}, parallel="replicas", progress=False)
  with pytest.raises(ValueError, match="strategy"):  # accepted: asks for its devices
    ed.mcmc.sample(line, X, observed={"y": Y}, parallel="chain_groups", progress=False)


def test_the_renaming_helper():
  @renamed_keywords(n="draws")
  def f(draws=1, seed=None):
    return draws, seed

  with pytest.deprecated_call():
    assert f(n=3) == (3, None)
  assert f(3) == (3, None) and f(draws=4, seed=1) == (4, 1)
  with pytest.raises(TypeError, match="both"):
    f(n=3, draws=3)
  keys = RenamedKeys(new=1, renamed={"old": "new"})
  assert list(keys) == ["new"] and keys.get("missing") is None
  with pytest.deprecated_call():
    assert keys["old"] == 1 and keys.get("old") == 1 and "old" in keys
