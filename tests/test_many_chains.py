"""Answers at the scale edward_lite samples (issue 52): the summary's
statistics right to float64 precision and linear in draws x chains
(``analysis/column_summary.py``), nested R-hat of superchains, and per-chain
warnings that account for how many chains they test."""

import dataclasses
import math
import warnings

import numpy as np
import pytest

import edward_lite as ed
from edward_lite.analysis import column_summary
from edward_lite.mcmc import notes

# -- draws with known answers ---------------------------------------------------------


def _ar1(rng, draws, chains, phi, start=None, dtype=np.float64):
  """``[draws, chains]`` stationary AR(1) chains of unit variance, each
  starting from ``start`` (else a stationary draw)."""
  e = rng.standard_normal((draws, chains))
  x = np.empty((draws, chains))
  x[0] = e[0] if start is None else start
  scale = math.sqrt(1. - phi**2)
  for t in range(1, draws):
    x[t] = phi * x[t - 1] + scale * e[t]
  return x.astype(dtype)


def _mean_variance_of_ar1_mean(phi, n):
  """Var of the mean of ``n`` draws of a stationary unit-variance AR(1):
  ``(1 + 2 sum_{k<n} (1 - k/n) phi^k) / n``."""
  k = np.arange(1, n)
  return (1. + 2. * np.sum((1. - k / n) * phi**k)) / n


def test_moments_and_quantiles_are_exact_where_float32_sums_are_not():
  """A scalar of a 2-vector latent, 4,000 chains x 2,500 float32 draws
  around 1000 with sd 1 (10^7 values): the mean and sd equal NumPy's
  float64 ones to 1e-12, the quantiles np.quantile's exactly; NumPy's
  float32 mean and sd over the strided axes (the summary before) are 2% and
  2000% off."""
  rng = np.random.default_rng(0)
  draws = (1000. + rng.standard_normal((2500, 4000, 2))).astype(np.float32)
  x = draws[:, :, 0]
  assert x.size > column_summary.EXACT_LIMIT
  got = column_summary.summarize(x)
  x64 = x.astype(np.float64)
  assert abs(got["mean"] - x64.mean()) < 1e-12 * 1000.
  assert abs(got["sd"] / x64.std(ddof=1) - 1.) < 1e-10
  assert [got["q5"], got["q50"], got["q95"]] == list(np.quantile(x64, [0.05, 0.5, 0.95]))
  before = draws.mean(axis=(0, 1))[0], draws.std(axis=(0, 1), ddof=1)[0]
  assert abs(before[0] - x64.mean()) > 10. and before[1] > 10.


@pytest.mark.parametrize("scale, offset", [(100., 3.), (1e-3, 5.), (5., -1.)])
def test_quantiles_are_numpys_at_any_scale(scale, offset):
  """Student-t(3) draws, heavy-tailed, at scales and offsets where a draw
  minus the centre is rounded in float32: the quantiles are still exactly
  np.quantile's."""
  rng = np.random.default_rng(10)
  x = (offset + scale * rng.standard_t(3, size=(700, 800))).astype(np.float32)
  got = column_summary.summarize(x)
  assert [got["q5"], got["q50"], got["q95"]] == list(
      np.quantile(x.astype(np.float64), [0.05, 0.5, 0.95]))


def test_binned_ranks_give_the_exact_rank_r_hat():
  """Above ``EXACT_LIMIT`` the ranks come from float32 bins of relative
  width 2^-11: rank-normalized split R-hat within 1e-4 of the exact one on
  tied, offset, autocorrelated draws (ties as a random walk's rejections)."""
  rng = np.random.default_rng(1)
  x = _ar1(rng, 300, 1000, 0.9, dtype=np.float32) * 3. + 50.
  x = np.repeat(x[::3], 3, axis=0)                                     # tied draws
  assert x.size > column_summary.EXACT_LIMIT
  got = column_summary.summarize(x)
  exact = float(ed.diagnostics.rhat(x))
  assert got["r_hat"] > 1.01 and abs(got["r_hat"] - exact) < 1e-4, (got["r_hat"], exact)


def test_batch_means_ess_and_mcse_match_the_ar1_truth():
  """2,000 chains x 200 draws of AR(1), phi 0.95: the mean's true variance
  is known exactly; the between-chain ESS and MCSE are within 10% of it
  (their error is about sqrt(2 / 2000) = 3%), where Vehtari's estimator
  from such short chains is 35% low.  Tail ESS of independent draws is
  about S."""
  rng = np.random.default_rng(2)
  phi, n, c = 0.95, 200, 2000
  x = _ar1(rng, n, c, phi)
  true_var = _mean_variance_of_ar1_mean(phi, n) / c
  got = column_summary.summarize(x)
  true_ess = got["sd"]**2 / true_var
  assert abs(got["ess_bulk"] / true_ess - 1.) < 0.1, (got["ess_bulk"], true_ess)
  assert abs(got["mcse_mean"] / math.sqrt(true_var) - 1.) < 0.1
  iid = column_summary.summarize(rng.standard_normal((200, 2000)))
  assert abs(iid["ess_tail"] / 400_000 - 1.) < 0.1 and abs(iid["ess_bulk"] / 400_000 - 1.) < 0.1


def test_few_chains_cut_into_batches():
  """4 chains x 100,000 draws: batch-means ESS from 100 batches, within
  30% of the truth (its error is about sqrt(2 / 100) = 14%)."""
  rng = np.random.default_rng(3)
  phi, n = 0.8, 100_000
  x = _ar1(rng, n, 4, phi)
  got = column_summary.summarize(x)
  true_ess = got["sd"]**2 / (_mean_variance_of_ar1_mean(phi, n) / 4)
  assert abs(got["ess_bulk"] / true_ess - 1.) < 0.3, (got["ess_bulk"], true_ess)


@pytest.mark.parametrize("draws", [40, 41])
def test_nested_r_hat_tells_forgotten_starts_from_remembered_ones(draws):
  """16 superchains of 64 chains, each superchain's chains started at one
  point (spread as uniform(-2, 2) starts in units of the posterior sd):
  after a warmup far too short (AR(1) phi 0.99 still remembers its start)
  nested R-hat is far above 1.01, while split R-hat of the same short
  chains is above it anyway; stationary chains give nested R-hat below
  1.01 where split R-hat is above.  The exact path (few draws) and the
  binned one agree."""
  rng = np.random.default_rng(4)
  k, m = 16, 64
  starts = np.repeat(rng.uniform(-6., 6., k), m)
  remembered = _ar1(rng, draws, k * m, 0.99, start=starts)
  forgot = _ar1(rng, draws, k * m, 0.9)
  for x, nested_above in ((remembered, True), (forgot, False)):
    exact = column_summary.variable_statistics(x[..., None], k)
    assert (exact["nested_r_hat"][0] > 1.01) == nested_above
    assert exact["r_hat"][0] > 1.01
    binned = column_summary.summarize(x, k)  # all draws; the exact path drops an odd middle one
    assert binned["nested_r_hat"] == pytest.approx(exact["nested_r_hat"][0], rel=2e-3)


def test_non_finite_and_constant_draws():
  x = np.zeros((300, 1000))
  const = column_summary.summarize(x)
  assert const["ess_bulk"] == const["ess_tail"] == 300_000 and math.isnan(const["r_hat"])
  x[5, 7] = np.nan
  bad = column_summary.summarize(x)
  assert math.isnan(bad["mean"]) and math.isnan(bad["r_hat"]) and math.isnan(bad["q50"])


# -- superchains in the sampler --------------------------------------------------------


def _normal():
  return ed.Normal(0., 1., name="x")


@pytest.mark.slow
def test_superchains_share_their_starts():
  """From 256 drawn starts on, chains start in 16 superchains: one
  near-zero random-walk step after the start, the chains of a superchain
  are where their superchain started, and the 16 starts differ."""
  post = ed.mcmc.sample(_normal, kernel=ed.mcmc.RWMH(scale=1e-6, adapt=False), chains=256,
                        warmup=0, draws=1, seed=0, progress=False, adapt_metric=False)
  assert post.superchains == 16
  x = post.draws["x"][0].reshape(16, 16)
  assert np.ptp(x, axis=1).max() < 1e-4 and len(np.unique(np.round(x[:, 0], 3))) == 16
  none = ed.mcmc.sample(_normal, kernel=ed.mcmc.RWMH(scale=1e-6, adapt=False), chains=256,
                        warmup=0, draws=1, seed=0, progress=False, adapt_metric=False,
                        superchains=0)
  assert none.superchains == 0 and len(np.unique(np.round(none.draws["x"][0], 3))) > 200


@pytest.mark.parametrize("value", [1, 3, -1, 2.5])
def test_bad_superchains_are_refused(value):
  with pytest.raises((ValueError, TypeError), match="superchains"):
    ed.mcmc.sample(_normal, chains=4, superchains=value, progress=False)


# -- warnings at many chains ------------------------------------------------------------


@pytest.fixture(scope="module")
def small_run():
  return ed.mcmc.sample(_normal, kernel="rwmh", chains=4, warmup=50, draws=40, seed=0,
                        progress=False)


def _as_result(small_run, x, log_prob, accept):
  """``small_run`` made to hold draws ``x [N, C]`` of ``x`` (their moments,
  log densities and acceptance), as a run of ``C`` chains."""
  n, c = x.shape
  x32 = x.astype(np.float32)
  return dataclasses.replace(
      small_run, chains=c, num_draws=n, draws={"x": x32},
      mean={"x": x.mean(axis=0)}, variance={"x": x.var(axis=0, ddof=1)},
      sample_stats={"log_prob": log_prob.astype(np.float32),
                    "accept_prob": np.broadcast_to(accept, (n, c)).astype(np.float32)},
      chain_accept=np.asarray(accept, np.float64), chain_divergent=np.zeros(c),
      superchains=0)


def _stationary(rng, n, c, phi=0.95):
  x = _ar1(rng, n, c, phi)
  accepted = rng.random((n, c)) < 0.3
  return x, -0.5 * x**2, accepted.mean(axis=0)


@pytest.mark.parametrize("draws", [20, 500])
def test_many_stationary_chains_raise_no_alarm(small_run, draws):
  """10^5 (20 draws) or 10^4 (500 draws) stationary autocorrelated chains,
  accepting 30% of random-walk proposals: no chain is called stuck or
  apart (before, tens were: a stretch of draws deep in the tail, or one
  accepting at most one of 20 proposals, happens by chance among so many)."""
  rng = np.random.default_rng(5)
  chains = 100_000 if draws == 20 else 10_000
  result = _as_result(small_run, *_stationary(rng, draws, chains))
  assert result.stuck_chains() == []


def test_planted_chains_are_still_named(small_run):
  """The same 10^4 chains with one that never left a far mode (mean 12 sds
  out, its own variance), one frozen far out, and one that spent 100 draws
  45 nats below the others' log density: each is named."""
  rng = np.random.default_rng(6)
  x, log_prob, accept = _stationary(rng, 500, 10_000)
  x[:, 11] = 12. + _ar1(rng, 500, 1, 0.95)[:, 0]
  x[:, 22] = -12. + 1e-4 * rng.standard_normal(500)
  accept[22] = 0.
  log_prob[:100, 33] -= 45.
  found = {c: kind for c, kind, _ in _as_result(small_run, x, log_prob, accept).stuck_chains()}
  assert found == {11: "apart", 22: "stuck", 33: "apart"}, found


def test_a_far_chain_that_diverged_is_not_called_multimodal(small_run):
  """ChEES on eight schools (non-centred) at 10^5 chains: one chain far out
  in tau's tail with 31 of the run's 2,050 divergences (chains' mean 0.02)
  was called "sampled apart ... may be multimodal".  A far chain carrying
  many times the mean chain's divergences is named as diverging where the
  others did not; a far chain without them is still apart, and scattered
  single divergences name nothing."""
  rng = np.random.default_rng(8)
  x, log_prob, accept = _stationary(rng, 500, 10_000)
  x[:, 11] = 12. + _ar1(rng, 500, 1, 0.95)[:, 0]
  x[:, 22] = -12. + _ar1(rng, 500, 1, 0.95)[:, 0]
  result = _as_result(small_run, x, log_prob, accept)
  divergent = np.where(rng.random(10_000) < 0.02, 1., 0.)
  divergent[11] = 31.
  result = dataclasses.replace(result, chain_divergent=divergent / 500)
  found = {c: kind for c, kind, _ in result.stuck_chains()}
  assert found == {11: "diverging", 22: "apart"}, found
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    said = result.summary().attrs["notes"]
  diverging = [note for note in said if note.startswith("Chain 11 ")]
  assert len(diverging) == 1 and "diverged where the others did not (31 of the run's" in \
      diverging[0] and "multimodal" not in diverging[0], diverging


def test_acceptance_too_low_for_chance_is_stuck():
  """Chernoff: at 10^5 chains a chain accepting none of 20 proposals may
  be chance (0.7^20 = 8e-4), none of 500 is not."""
  accept = np.full(100_000, 0.3)
  accept[[3, 4]] = [0., 0.01]
  assert not notes._accepts_too_little(accept, 20).any()  # pylint: disable=protected-access
  assert list(np.flatnonzero(notes._accepts_too_little(accept, 500))) == [3, 4]  # pylint: disable=protected-access
  assert list(np.flatnonzero(notes._accepts_too_little(accept[:12], 20))) == [3, 4]  # pylint: disable=protected-access


def test_summary_reports_nested_r_hat_and_says_how(small_run):
  """With superchains the r_hat column is nested R-hat, the header says so,
  and its warning names the superchains; above ``EXACT_LIMIT`` the header
  names the batch-means ESS and binned ranks."""
  rng = np.random.default_rng(7)
  starts = np.repeat(rng.uniform(-6., 6., 16), 64)
  x = _ar1(rng, 300, 1024, 0.99, start=starts)
  result = dataclasses.replace(_as_result(small_run, x, -0.5 * x**2, np.full(1024, 0.3)),
                               superchains=16)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    table = result.summary()
  methods = table.attrs["methods"]
  assert any("nested R-hat of 16 superchains" in line for line in methods)
  assert any("batch means" in line for line in methods)
  nested = column_summary.summarize(x, 16)["nested_r_hat"]
  assert table.loc["x", "r_hat"] == pytest.approx(nested) and nested > 1.01
  assert any("16 superchains, each started from its own point, disagree" in note
             for note in table.attrs["notes"])


def _convergence_said(small_run, x, superchains=0):
  """The summary's convergence warnings on draws ``x [N, C]``."""
  result = dataclasses.replace(_as_result(small_run, x, -0.5 * x**2, np.full(x.shape[1], 0.3)),
                               superchains=superchains)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return result.summary().attrs["notes"]


def test_chains_in_two_modes_are_said_to_sample_different_regions(small_run):
  """1,000 chains, each mixing well (AR(1) phi 0.9) in one of two modes
  16 sds apart, half in each: named; the same chains in one mode, and
  slowly mixing ones (phi 0.98) whose split R-hat is high from
  autocorrelation alone, are not."""
  rng = np.random.default_rng(8)
  x = _ar1(rng, 500, 1000, 0.9)
  assert not any("different regions" in n for n in _convergence_said(small_run, x))
  slow = _ar1(rng, 500, 1000, 0.98)
  assert column_summary.summarize(slow)["r_hat"] > 1.01
  assert not any("different regions" in n or "not mixed" in n
                 for n in _convergence_said(small_run, slow))
  x[:, ::2] += 16.
  said = _convergence_said(small_run, x)
  assert any("different regions: the posterior may be multimodal" in n for n in said), said


def test_chains_still_moving_from_their_starts_drift(small_run):
  """2,000 chains started 20 sds out with a warmup far too short (AR(1)
  phi 0.99 from there, so the transient lasts the run): "drift", whether or
  not the starts were shared in superchains; stationary chains: none."""
  rng = np.random.default_rng(9)
  stationary = _ar1(rng, 200, 2000, 0.95)
  assert not any("drift" in n for n in _convergence_said(small_run, stationary, 16))
  moving = _ar1(rng, 200, 2000, 0.99, start=20. + rng.uniform(-2., 2., 2000))
  for superchains in (0, 16):
    said = _convergence_said(small_run, moving, superchains)
    assert any("parameter(s) drift" in n and "run a longer warmup" in n for n in said), said
    # small_run is a random walk's: the way out a longer run is not.
    assert any('sample with gradients (kernel="chees" or "nuts")' in n for n in said), said
  with_gradients = dataclasses.replace(small_run, kernel=ed.mcmc.NUTS())
  assert not any("sample with gradients" in n
                 for n in _convergence_said(with_gradients, moving, 16))


@pytest.mark.slow
def test_streamed_summary_agrees_with_the_kept_one():
  """512 chains x 600 draws (above ``EXACT_LIMIT``), the same seed kept and
  streamed: the same mean, sd, MCSE (the chains' means in both) and drift;
  nested R-hat of the raw streamed moments near that of the ranks; a
  saved and loaded result keeps its superchains and its summary."""
  kwargs = dict(kernel="rwmh", chains=512, warmup=100, draws=600, seed=1, progress=False)
  kept = ed.mcmc.sample(_normal, **kwargs)
  streamed = ed.mcmc.sample(_normal, keep_draws=False, **kwargs)
  assert kept.superchains == streamed.superchains == 16
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    a, b = kept.summary(), streamed.summary()
  for column in ("mean", "sd", "mcse_mean"):
    assert a.loc["x", column] == pytest.approx(b.loc["x", column], rel=1e-6), column
  assert abs(a.loc["x", "r_hat"] - b.loc["x", "r_hat"]) < 2e-3 and a.loc["x", "r_hat"] < 1.01
  stats = kept._stats("x")  # pylint: disable=protected-access
  assert stats["drift"] == pytest.approx(streamed.streamed["drift"]["x"], rel=1e-6)
  assert abs(stats["drift_z"]) < 4.
  assert a.attrs["notes"] == [] and b.attrs["notes"] == []


@pytest.mark.slow
def test_saved_result_keeps_its_superchains(tmp_path):
  post = ed.mcmc.sample(_normal, kernel="rwmh", chains=256, warmup=50, draws=40, seed=0,
                        progress=False)
  loaded = ed.load(post.save(str(tmp_path / "run")))
  assert loaded.superchains == 16
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    assert loaded.summary().equals(post.summary())


# -- the warnings battery, bounded (benchmarks/warnings_battery.py runs it whole) ----


@pytest.mark.slow
@pytest.mark.parametrize("target, kernel, chains", [
    ("gauss2d", "rwmh", 10_000), ("eight_schools", "nuts", 1000), ("logistic", "chees", 1000),
    ("far_chain", "nuts", 1000), ("bimodal", "rwmh", 1000), ("short_warmup", "rwmh", 1000)])
def test_warnings_battery_bounded(target, kernel, chains):
  """Unimodal posteriors at their defaults raise no warning of a stuck,
  apart or drifting chain, multimodality or chains that have not mixed;
  each planted problem is named."""
  import os  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
  try:
    import warnings_battery  # pylint: disable=import-outside-toplevel
  finally:
    sys.path.pop(0)
  row = warnings_battery.run(target, kernel, chains, seed=0, draws=200, keep_draws=True)
  assert row["ok"], (row["said"], row["notes"])
