"""The per-transition statistics: what each kernel records, what it gives
one value always (kept as no memory), and the counts the summary warns by
with or without kept draws."""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.mcmc import kept_draws

pytestmark = pytest.mark.slow  # each samples: 5-10 s

RUN = dict(chains=8, warmup=150, draws=120, seed=3, progress=False)


def correlated():
  """A 2-D Gaussian of correlation 0.99: NUTS needs trees deeper than 2."""
  cov = np.array([[1., 0.99], [0.99, 1.]])
  return ed.MultivariateNormalTriL(np.zeros(2, np.float32),
                                   np.linalg.cholesky(cov).astype(np.float32), name="x")


def funnel():
  """Neal's funnel, centred: NUTS diverges in its neck."""
  v = ed.Normal(0., 3., name="v")
  return ed.Normal(tf.zeros(4), tf.exp(v / 2.), name="z")


def _summary(result):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return result.summary()


def test_a_random_walk_records_no_gradients_or_trees_and_keeps_no_bytes_for_them():
  """RWMH evaluates no gradient and builds no tree: its ``num_gradients``
  and ``tree_depth`` are zeros of the draws' shape held in no memory (a
  broadcast), its row in the compiled buffers is the draws, acceptance,
  divergence and log density only, and NUTS' row holds all six."""
  result = ed.mcmc.sample(correlated, kernel="rwmh", **RUN)
  for name in ("num_gradients", "tree_depth"):
    value = result.sample_stats[name]
    assert value.shape == (120, 8) and value.dtype == np.int32 and not value.any()
    assert value.strides == (0, 0), name
  assert "energy" not in result.sample_stats
  assert result.sample_stats["accept_prob"].strides != (0, 0)
  assert result.total_gradients == 0
  assert kept_draws.row_bytes(2, tf.float32, ed.mcmc.RWMH()) == 2 * 4 + 4 + 1 + 4
  assert kept_draws.row_bytes(2, tf.float32, ed.mcmc.NUTS()) == 2 * 4 + 4 + 1 + 4 + 4 + 4 + 4
  assert kept_draws.row_bytes(2, tf.float64, ed.mcmc.ChEES()) == 2 * 8 + 8 + 1 + 4 + 8 + 8


def test_trees_at_the_limit_are_counted_with_or_without_kept_draws():
  """``chain_max_depth`` is each chain's share of transitions whose tree
  reached ``max_tree_depth``: the kept ``tree_depth``'s share computed
  another way, the same for the same seed streamed, and the streamed
  summary warns by it."""
  kernel = ed.mcmc.NUTS(max_tree_depth=2)
  kept = ed.mcmc.sample(correlated, kernel=kernel, **RUN)
  streamed = ed.mcmc.sample(correlated, kernel=kernel, keep_draws=False, **RUN)
  share = np.mean(kept.sample_stats["tree_depth"] >= 2, axis=0)
  assert share.mean() > 0.5  # the correlated Gaussian needs deeper trees
  np.testing.assert_allclose(kept.chain_max_depth, share, rtol=1e-12)
  np.testing.assert_array_equal(streamed.chain_max_depth, kept.chain_max_depth)
  said = " ".join(_summary(streamed).attrs["notes"])
  assert f"{100 * share.mean():.1f}% of transitions hit the maximum tree depth 2" in said, said
  short = dict(RUN, warmup=20, draws=10)
  assert ed.mcmc.sample(correlated, kernel="chees", **short).chain_max_depth is None


def test_divergences_are_counted_without_kept_draws():
  """The funnel's divergences after warmup, per chain: the kept
  ``diverging`` statistic's sums, and the same from the run's totals when
  the draws are streamed; the streamed summary names them."""
  kept = ed.mcmc.sample(funnel, kernel="nuts", **RUN)
  streamed = ed.mcmc.sample(funnel, kernel="nuts", keep_draws=False, **RUN)
  counts = kept.sample_stats["diverging"].sum(axis=0)
  assert counts.sum() > 0
  np.testing.assert_array_equal(kept.divergences, counts)
  np.testing.assert_array_equal(streamed.divergences, counts)
  said = " ".join(_summary(streamed).attrs["notes"])
  assert f"{counts.sum()} divergent transitions after warmup" in said, said


@pytest.mark.parametrize("kernel", ["rwmh", "chees"])
def test_a_saved_result_loads_with_its_kernel_and_statistics(tmp_path, kernel):
  """A saved run's file holds no constant statistic; the loaded result has
  its kernel's class (ChEES' fixed ``jitter`` is not an argument) and every
  statistic, equal to the run's."""
  result = ed.mcmc.sample(correlated, kernel=kernel, **RUN)
  path = result.save(str(tmp_path / "run.npz"))
  assert not any(name.startswith("sample_stats/tree_depth") for name in np.load(path))
  loaded = ed.load(path)
  assert type(loaded.kernel) is type(result.kernel)
  assert sorted(loaded.sample_stats) == sorted(result.sample_stats)
  for name, value in result.sample_stats.items():
    np.testing.assert_array_equal(loaded.sample_stats[name], value)
