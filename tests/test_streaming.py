"""Constant-memory statistics (ed.mcmc.streaming) against known answers:
AR(1) chains with a known effective sample size, the statistics of the
same draws computed from the kept draws, and float64 NumPy on the same
float32 draws at counts where float32 accumulation is wrong."""

import os

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from edward_lite.analysis import diagnostics
from edward_lite.mcmc import adaptation, streaming
from edward_lite.mcmc import run as mcmc_run

C, D, N = 4, 3, 4000
RHO = np.array([0., 0.5, 0.9])


def _ar1(seed=0, offsets=0.):
  """Unit-variance AR(1) chains ``[N, C, D]`` with coefficients RHO."""
  rng = np.random.default_rng(seed)
  e = rng.normal(size=(N, C, D))
  x = np.zeros((N, C, D))
  x[0] = e[0] / np.sqrt(1 - RHO ** 2)
  for t in range(1, N):
    x[t] = RHO * x[t - 1] + e[t]
  return x * np.sqrt(1 - RHO ** 2) + offsets


@tf.function(jit_compile=True)
def _stream(xs):
  state = streaming.stream_init(C, D, tf.float64)

  def body(i, state):
    return i + 1, streaming.stream_update(state, xs[i], i >= N // 2)

  return tf.while_loop(lambda i, _: i < N, body, (0, state))[1]


def test_batch_means_ess_matches_ar1_theory():
  x = _ar1()
  out = streaming.stream_summary(_stream(tf.constant(x)))
  theory = C * N * (1 - RHO) / (1 + RHO)  # ESS of the mean of AR(1) chains
  np.testing.assert_allclose(out["ess"], theory, rtol=0.2)
  np.testing.assert_allclose(out["mcse_mean"], 1 / np.sqrt(theory), rtol=0.15)
  # Moments equal those of the kept draws; memory stayed at K batches.
  np.testing.assert_allclose(out["mean"], x.mean(axis=(0, 1)), rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(out["sd"], x.std(axis=(0, 1), ddof=1), rtol=1e-10)
  np.testing.assert_allclose(out["variance"], x.var(axis=0, ddof=1), rtol=1e-10)
  assert out["count"] == N


def test_split_rhat_flags_chains_that_disagree():
  mixed = streaming.stream_summary(_stream(tf.constant(_ar1(1))))
  np.testing.assert_allclose(mixed["r_hat"], np.asarray(diagnostics.rhat(_ar1(1))), atol=0.01)
  assert np.all(mixed["r_hat"] < 1.01)
  # One chain offset by 1 sd: split R-hat sees it (the split halves too).
  offsets = np.zeros((C, D))
  offsets[0] = 1.
  stuck = streaming.stream_summary(_stream(tf.constant(_ar1(1, offsets))))
  assert np.all(stuck["r_hat"] > 1.05)


@tf.function(jit_compile=True, autograph=False)
def _segments(xs, state, split_at):
  """The statistics of ``xs [n, C, D]`` updated as the sampler does: runs of
  ``accumulate`` that end at a batch's end or the half's (``chunk.py``)."""
  n = tf.shape(xs)[0]

  def segment(i, s):
    end = tf.minimum(n, i + s.batch_size - s.in_batch)
    end = tf.where(i < split_at, tf.minimum(end, split_at), end)
    second = i >= split_at
    j, acc = tf.while_loop(lambda j, _: j < end,
                           lambda j, acc: (j + 1, streaming.accumulate(acc, xs[j])),
                           (i, streaming.run_begin(s, xs[i])))
    return j, streaming.stream_close(streaming.run_end(s, acc, second))

  return tf.while_loop(lambda i, _: i < n, segment, (0, state))[1]


def test_float32_draws_are_streamed_in_float64():
  # 10^5 float32 draws per chain of N(1000, 1): a float32 state's mean was
  # off by 2e-6 of it (0.7 MCSE), its variance by 3e-5, its batch means by
  # 0.1 of their sd and the ESS by 0.6% (benchmarks/precision_audit.py).
  n, chains = 100_000, 2
  x = (1000. + np.random.default_rng(4).standard_normal((n, chains, 1))).astype(np.float32)
  size = -(-n // streaming.NUM_BATCHES) + 1  # the slots do not fill up: no merging
  state = _segments(tf.constant(x), streaming.stream_init(chains, 1, tf.float32, batch_size=size),
                    tf.constant(n // 2))
  out = streaming.stream_summary(state)
  x64 = x.astype(np.float64)
  np.testing.assert_allclose(out["chain_mean"], x64.mean(0), rtol=1e-13)
  np.testing.assert_allclose(out["variance"], x64.var(0, ddof=1), rtol=1e-12)
  filled = int(state.filled)
  assert filled == n // size
  np.testing.assert_allclose(state.batch_sums[:filled].numpy() / size,
                             x64[:filled * size].reshape(filled, size, chains, 1).mean(1),
                             rtol=1e-14)
  assert state.halves.mean.dtype == state.batch_sums.dtype == tf.float64


def test_stream_summary_sums_over_chains_in_float64():
  # 10^6 chains of a float32 state: NumPy's float32 sums over the strided
  # chain axis were off by 1e-5 in the mean, 7e-6 in the sd, 4e-5 in the ESS.
  chains, dim, half = 10 ** 6, 2, 50
  rng = np.random.default_rng(5)
  f32 = lambda a: tf.constant(a, tf.float32)  # pylint: disable=unnecessary-lambda-assignment
  state = streaming.StreamState(
      adaptation.WelfordState(f32([half, half]),
                              f32(1. + 0.05 * rng.standard_normal((2, chains, dim))),
                              f32(half * rng.uniform(0.5, 1.5, (2, chains, dim)))),
      f32(12. + rng.standard_normal((8, chains, dim))), f32(np.zeros((chains, dim))),
      tf.constant(0), tf.constant(12), tf.constant(8))
  as64 = tf.nest.map_structure(
      lambda t: tf.cast(t, tf.float64) if t.dtype == tf.float32 else t, state)
  out, reference = streaming.stream_summary(state), streaming.stream_summary(as64)
  for key in ("mean", "sd", "ess", "mcse_mean", "r_hat", "chain_mean", "variance"):
    np.testing.assert_allclose(out[key], reference[key], rtol=1e-12, err_msg=key)
    assert out[key].dtype == np.float64, key


def test_run_totals_fold_in_float64():
  # The acceptance of 10^5 one-transition chunks: a float32 running total of
  # 0.7 drifted by 5e-4 of it.
  totals = None
  for _ in range(100_000):
    totals = mcmc_run.fold_totals(
        totals, {"accept_prob": np.float32([0.7]), "n_grads": np.int32([3])}, False)
  sampling = totals["sampling"]
  np.testing.assert_allclose(sampling["accept_prob"], 1e5 * np.float64(np.float32(0.7)),
                             rtol=1e-12)
  assert sampling["n_grads"].dtype == np.int32 and sampling["n_grads"][0] == 300_000


def test_too_few_draws_give_nan_ess():
  state = streaming.stream_init(C, D, tf.float64)
  for i in range(6):
    state = streaming.stream_update(state, tf.ones([C, D], tf.float64) * i, i >= 3)
  out = streaming.stream_summary(state)
  assert np.all(np.isnan(out["ess"])) and np.all(np.isnan(out["mcse_mean"]))
  np.testing.assert_allclose(out["mean"], 2.5)


def normal_normal():
  mu = ed.Normal(0., 1., name="mu")
  return ed.Normal(mu, 1., sample_shape=5, name="y")


@pytest.mark.slow
def test_sampler_without_draws_reports_ess_and_split_rhat():
  kwargs = dict(observed={"y": np.float32([0.5, 1., -0.2, 0.3, 0.8])}, chains=4, warmup=100,
                draws=800, seed=3, progress=False)
  kept = ed.mcmc.sample(normal_normal, **kwargs)
  streamed = ed.mcmc.sample(normal_normal, keep_draws=False, **kwargs)
  ours, reference = streamed.summary().loc["mu"], kept.summary().loc["mu"]
  assert abs(ours["ess_bulk"] / reference["ess_bulk"] - 1) < 0.35
  assert abs(ours["r_hat"] - reference["r_hat"]) < 0.01
  np.testing.assert_allclose(ours["mean"], reference["mean"], rtol=1e-5)
  assert np.isnan(ours["q5"]) and np.isnan(ours["ess_tail"])


def test_streamed_split_rhat_equals_split_rhat_of_the_draws():
  # Even draws: the streamed halves are split R-hat's half-chains, so the
  # moment formula and the draws formula must agree to round-off.
  result = ed.mcmc.sample(normal_normal, observed={"y": np.float32([0.5, 1., -0.2, 0.3, 0.8])},
                          chains=3, warmup=20, draws=40, seed=5, progress=False)
  np.testing.assert_allclose(result.streamed["r_hat"]["mu"],
                             np.asarray(diagnostics.split_rhat(result.draws["mu"])), rtol=1e-5)
  # float32 draws, float64 statistics of them.
  assert result.draws["mu"].dtype == np.float32
  assert result.mean["mu"].dtype == result.variance["mu"].dtype == np.float64
  assert result.streamed["ess"]["mu"].dtype == result.chain_accept.dtype == np.float64
  # The moment formula against BDA3's, written out in NumPy.
  x = np.random.default_rng(0).normal(size=(2, 6, 50)) + np.arange(6)[:, None] * 0.1
  n, w = 50, x.var(-1, ddof=1).mean(-1)
  expected = np.sqrt(((n - 1) / n * w + x.mean(-1).var(-1, ddof=1)) / w)
  np.testing.assert_allclose(
      diagnostics.psrf_from_moments(x.mean(-1), x.var(-1, ddof=1), n).numpy(), expected,
      rtol=1e-12)


def _rss_bytes():
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_host_memory_without_draws_does_not_grow_with_chunks():
  # 10^5 chains: the per-chain totals of one chunk are 4 x 10^5 values (~1.6
  # MB); held chunk by chunk, 300 chunks would add ~480 MB of resident memory.
  rss = []
  ed.mcmc.sample(normal_normal, observed={"y": np.float32([0.5, 1., -0.2, 0.3, 0.8])},
                 chains=100_000, warmup=0, draws=600, chunk_size=2, seed=3, progress=False,
                 kernel="rwmh", keep_draws=False, callback=lambda info: rss.append(_rss_bytes()))
  assert len(rss) == 300
  growth = rss[-1] - rss[30]
  assert growth < 100e6, f"resident memory grew {growth / 1e6:.0f} MB over 270 chunks"
