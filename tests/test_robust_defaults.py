"""Default adaptation on models that froze a chain under one pooled step
size (issue 17), against analytic answers."""

import warnings

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import edward_lite as ed
from edward_lite.mcmc import schedule
import battery_models as bm  # the shared kid-score data

tfd = tfp.distributions


def kid_score(hs, iq):
  """The kid-score regression as in Stan: flat coefficients, HalfCauchy scale."""
  b = ed.Flat(shape=3, name="b")
  sigma = ed.HalfCauchy(0., 2.5, name="sigma")
  return ed.Normal(b[0] + b[1] * hs + b[2] * iq, sigma, name="score")


def student_t_reference(hs, iq, score):
  """b | y with flat b and p(sigma) ~ 1/sigma^2 (HalfCauchy(0, 2.5) at sigma
  near 18 differs from it by under 2% over the posterior): Student-t with
  nu = N + 1 - p, covariance SSE / (nu - 2) (X'X)^-1."""
  x = np.stack([np.ones_like(hs), hs, iq], 1)
  b_hat, sse = np.linalg.lstsq(x, score, rcond=None)[:2]
  nu = len(score) + 1 - 3
  return b_hat, np.sqrt(np.diag(sse[0] / (nu - 2) * np.linalg.inv(x.T @ x)))


@pytest.mark.slow
@pytest.mark.parametrize("chains, seed", [(8, 0), (8, 1), (5, 2)])
def test_default_adaptation_freezes_no_chain_on_a_flat_prior_regression(chains, seed):
  (hs, iq), score = bm.kid_score_data()
  score = score["kid_score"]
  post = ed.mcmc.sample(kid_score, hs, iq, observed={"score": score}, chains=chains,
                        warmup=500, draws=500, seed=seed, progress=False)
  assert post.stuck_chains() == []
  assert np.all(post.chain_accept > 0.5)
  b = post.draws["b"]
  assert np.max(ed.diagnostics.rhat(b)) < 1.01
  mean, sd = student_t_reference(hs, iq, score)
  ess = np.asarray(ed.diagnostics.ess_bulk(b))
  z = (b.mean(axis=(0, 1)) - mean) / (sd / np.sqrt(ess))
  assert np.all(np.abs(z) < 4), z
  np.testing.assert_allclose(b.std(axis=(0, 1)) / sd, 1., atol=0.12)


def _stuck_start():
  """Eight chains at the posterior mode but chain 4, whose sigma is 0.05."""
  init = np.tile([26., 6., 0.56, np.log(18.)], (8, 1))
  init[4, 3] = np.log(0.05)
  init[:, :3] += np.random.default_rng(0).normal(0., 0.01, (8, 3))
  return init


@pytest.mark.slow
def test_a_stuck_chain_is_moved_in_warmup_and_named_without_it():
  """One chain started where sigma is tiny.  Without warmup it never moves
  (the step size suits the others) and the summary names it; with warmup,
  even under one step size tuned to the mean acceptance (pooled=True, which
  froze it before warmup moved stuck chains), it continues from a healthy
  chain's state and no chain is stuck."""
  (hs, iq), score = bm.kid_score_data()
  score = score["kid_score"]
  init = _stuck_start()
  unwarmed = ed.mcmc.sample(kid_score, hs, iq, observed={"score": score}, chains=8, warmup=0,
                            draws=200, seed=0, init=init, progress=False)
  assert [c for c, kind, _ in unwarmed.stuck_chains() if kind == "stuck"] == [4]
  with pytest.warns(RuntimeWarning, match="Chain 4 is stuck"):
    unwarmed.summary()
  pooled = ed.mcmc.sample(kid_score, hs, iq, observed={"score": score}, chains=8, warmup=300,
                          draws=200, seed=0, init=init, pooled=True, progress=False)
  assert pooled.stuck_chains() == []
  assert np.all(pooled.chain_accept > 0.5)


def test_the_default_bulk_step_size_leaves_a_stuck_chain_its_own():
  """In the first windows every chain adapts its own step size: chain 4,
  started where sigma is tiny, adapts a far smaller one and moves; from the
  first window end after iteration 50 the bulk shares one step size (chain 4
  keeps its own while it is apart), by the end of warmup chain 4 has
  rejoined it, and the draws match the analytic posterior.  (With a warmup
  of 100, chain 4 stayed apart through sampling on one CPU and seed, named
  by ``stuck_chains``; 200 rescues it on seeds 0-4 there.)"""
  (hs, iq), score = bm.kid_score_data()
  score = score["kid_score"]
  steps = []
  post = ed.mcmc.sample(kid_score, hs, iq, observed={"score": score}, chains=8, warmup=200,
                        draws=400, seed=0, init=_stuck_start(), chunk_size=5, progress=False,
                        callback=lambda info: steps.append((info["step"], info["step_size"])))
  run = schedule.short_windows_schedule(200, 400, bulk=True)
  first_shared = min(p.start for p in run if p.share)
  shared = np.array([s for step, s in steps if first_shared + 5 <= step < post.warmup])
  bulk = np.delete(shared, 4, axis=1)
  assert np.all(bulk == bulk[:, :1])  # the bulk holds one step size
  alone = np.array([s for step, s in steps if step < first_shared])
  others = np.delete(alone, 4, axis=1)
  assert np.any(alone[:, 4] < 0.2 * np.median(others, axis=1))  # chain 4 adapted alone
  final = np.array([s for step, s in steps if step >= post.warmup])[0]
  assert np.unique(final).size == 1  # chain 4 rejoined: one step size for sampling
  assert post.stuck_chains() == []
  b = post.draws["b"]
  mean, sd = student_t_reference(hs, iq, score)
  z = (b.mean(axis=(0, 1)) - mean) / (sd / np.sqrt(np.asarray(ed.diagnostics.ess_bulk(b))))
  assert np.all(np.abs(z) < 4), z


def _underflowing_sqrt():
  # sqrt of a density that underflows to 0 for s above ~0.44: a finite log
  # density whose gradient is NaN (a GP's sqrt(spd) does this; issue 32).
  s = ed.LogNormal(0., 1., name="s")
  ed.Factor(tf.sqrt(tf.exp(-0.5 * tf.square(30. * s))), name="f")


def test_a_start_with_a_nan_gradient_is_redrawn_or_refused():
  with pytest.raises(ValueError, match=r"4 of 4 chains have a finite initial log density but "
                                       r"a non-finite gradient at the given init values "
                                       r"\(chain 0: the gradient of 's'\)"):
    ed.mcmc.sample(_underflowing_sqrt, chains=4, warmup=10, draws=10, progress=False,
                   init=np.ones([4, 1], np.float32))
  # Drawn starts: such chains are drawn again, so no run is lost to a NaN
  # first leapfrog (before: step sizes NaN, every transition divergent).
  result = ed.mcmc.sample(_underflowing_sqrt, chains=4, warmup=100, draws=50, seed=0,
                          progress=False)
  assert np.all(np.isfinite(result.step_size)) and np.all(result.chain_accept > 0.5)


def _finite_at_one_point():
  # Finite only where x is exactly 0: every step away is rejected, and warmup
  # shrinks the step size until it underflows (issue 32: such a run returned
  # its starting point repeated, quietly).
  x = ed.Flat(name="x")
  ed.Normal(0., 1., name="y")
  ed.Factor(tf.where(tf.equal(x, 0.), 0., np.float32(np.nan)), name="f")


@pytest.mark.parametrize("kernel, sign", [
    ("nuts", r"the step size of 4 of 4 chains collapsed to 1\.\d+e-38"),  # float32's underflow
    ("rwmh", r"every one of its 20 sampling transitions diverged in every chain")])
def test_a_run_that_cannot_move_stops_naming_the_latent(kernel, sign):
  with pytest.raises(ed.mcmc.SamplingFailedError,
                     match=sign + r".*Moving 'x' alone .*'f' .*adds NaN"):
    ed.mcmc.sample(_finite_at_one_point, chains=4, warmup=200, draws=20, kernel=kernel,
                   init={"x": np.zeros(4, np.float32)}, progress=False, seed=0)


def test_init_may_name_some_latents_the_others_start_uniform():
  def model():
    mu = ed.Normal(0., 10., name="mu")
    s = ed.HalfNormal(1., name="s")
    return ed.Normal(mu, s, name="y")

  given = np.array([3., -4., 5., 6.], np.float32)
  # warmup=0 and one kept draw: the first draw's chains start at mu = given
  # (RWMH's first proposal may move them: compare the run's starting state).
  from edward_lite.mcmc import compiled, initial_states  # pylint: disable=import-outside-toplevel
  program = compiled.Program.get(model, (), {}, {"y": 1.}, ed.mcmc.NUTS(), 4, True)
  u = initial_states.initial_state(program, {"mu": given}, 4, tf.constant([0, 1]), 2., 10)
  mu_col, s_col = u[:, 0], u[:, 1]  # mu's coordinate and log(s)
  np.testing.assert_allclose(mu_col, given)
  assert np.all(np.abs(s_col) <= 2.) and len(set(s_col.tolist())) == 4  # uniform, per chain
  fit = ed.vi.fit(model, observed={"y": 1.}, init={"mu": 2.}, steps=5, progress=False)
  assert np.isfinite(fit.elbo).all()


def test_a_thin_direction_keeps_the_low_rank_metric_through_an_early_disagreement():
  """Log earnings on uncentred height, flat priors (the battery's
  loglinreg): intercept and slope correlate at -0.998.  On its way in, seed
  2's draws and gradients disagreed along that direction at iterations 40
  and 53, which once sent the run to the diagonal metric for good (R-hat
  1.02).  The final metric must whiten the posterior: the draws' covariance
  in the metric's coordinates has eigenvalues near 1 (the diagonal alone
  gave 0.03 and 57)."""
  m = bm.MODELS["loglinreg"]
  args, obs = m.data()
  post = ed.mcmc.sample(m.program, *args, observed=obs, chains=4, seed=2, progress=False)
  t = post.target
  draws = {k: v.reshape((-1,) + v.shape[2:]) for k, v in post.draws.items() if k in t.names}
  u = t.flatten(t.unconstrain(draws)).numpy().astype(np.float64)
  lower = np.linalg.cholesky(np.asarray(post.inverse_metric, np.float64))
  whitened = np.linalg.solve(lower, np.linalg.solve(lower, np.cov(u.T)).T)
  vals = np.linalg.eigvalsh(whitened)
  assert vals.min() > 0.5 and vals.max() < 2., vals
  mean, sd = m.reference()["b"]
  b = post.draws["b"]
  z = (b.mean(axis=(0, 1)) - mean) / (sd / np.sqrt(np.asarray(ed.diagnostics.ess_bulk(b))))
  assert np.all(np.abs(z) < 4), z
  assert np.max(ed.diagnostics.rhat(b)) < 1.01


def _normal_mean():
  mu = ed.Normal(0., 10., name="mu")
  return ed.Normal(mu, 1., sample_shape=5, name="y")


def test_a_stretch_far_below_the_others_log_density_is_named():
  """A chain that began sampling in a minor mode and left it moves the
  moments without moving R-hat (Lotka-Volterra on the lynx and hare data:
  one chain of 8 began 45 nats below, sd 2, for 69 draws; the rates' sds came
  out 15% too large at R-hat 1.003).  Its stretch is named as apart and the
  summary warns; the same run without the stretch names nothing."""
  post = ed.mcmc.sample(_normal_mean, observed={"y": [0.3, -0.2, 0.8, 0.1, 0.5]}, chains=4,
                        draws=400, seed=0, progress=False)
  assert post.stuck_chains() == []
  lp = post.sample_stats["log_prob"]
  spread = np.median(lp.std(axis=0))
  lp[:60, 2] -= 20 * spread  # chain 2's first 60 draws, as if in a mode far below
  (found,) = post.stuck_chains()
  assert found[:2] == (2, "apart") and found[2].startswith("draws 0-"), found
  with pytest.warns(RuntimeWarning, match="Chain 2 sampled apart"):
    post.summary()


def test_no_stretch_is_far_below_in_stationary_chains_with_a_skewed_log_density():
  """The log density's left tail is long (``-chi2_d / 2`` for a Gaussian):
  1000 stationary chains of 1000 draws at d = 1 and d = 50 name none."""
  from edward_lite.analysis.chains import stretches_far_below  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  for dim in (1, 50):
    assert stretches_far_below(-0.5 * rng.chisquare(dim, (1000, 1000))) == {}
  lp = -0.5 * rng.chisquare(8, (1000, 10))
  lp[100:140, 7] -= 25.
  assert list(stretches_far_below(lp)) == [7]


def _autocorrelated_chi2(rng, draws, chains, dim, phi):
  """-chi^2_dim / 2 of AR(1) Gaussian components: a stationary log density
  with a long left tail and autocorrelation time (1 + phi) / (1 - phi)."""
  x = np.empty((draws, chains, dim))
  x[0] = rng.normal(size=(chains, dim))
  for t in range(1, draws):
    x[t] = phi * x[t - 1] + np.sqrt(1 - phi ** 2) * rng.normal(size=(chains, dim))
  return -0.5 * (x ** 2).sum(-1)


def test_no_stretch_is_far_below_in_64_autocorrelated_stationary_chains():
  """64 chains whose draws are autocorrelated (tau 19-65) with a long-tailed
  log density: a block of 20 draws falls 5-7 sds below by chance (the
  first rule named 12 chains in these 9 runs), and a one-block excursion
  into the tail comes back; neither is named.  A stretch of 60 draws far
  below is."""
  from edward_lite.analysis.chains import stretches_far_below  # pylint: disable=import-outside-toplevel
  for seed in range(3):
    rng = np.random.default_rng(seed)
    for dim, phi in ((1, 0.9), (4, 0.97), (10, 0.95)):
      lp = _autocorrelated_chi2(rng, 1000, 64, dim, phi)
      assert stretches_far_below(lp) == {}, (seed, dim, phi)
  spread = np.median(lp.std(axis=0))
  lp[300:320, 5] -= 6 * spread  # one block: an excursion into the tail
  assert stretches_far_below(lp) == {}
  lp[500:560, 9] -= 8 * spread  # three blocks: a stretch in a mode far below
  assert list(stretches_far_below(lp)) == [9]


def test_a_chain_in_a_mode_of_negligible_mass_is_told_apart_from_a_wider_one():
  """``restarts.far_below`` on a window of 8 chains at dimension 8 (the
  Lotka-Volterra case: log density sd 2): a chain 45 below the median with
  the others' spread is in a negligible mode; one 28 below whose draws spread
  ten times wider along every axis (a funnel's mouth: 18.4 more log volume)
  is not; early windows (no moments given) judge stuck chains only; a
  non-finite chain is left to the stuck rule; two chains cannot say which is
  off."""
  from edward_lite.mcmc import adaptation, restarts  # pylint: disable=import-outside-toplevel
  n = 50
  mean = np.full(8, -130.)
  mean[5], mean[2] = -175., -158.
  window = {"log_prob": mean * n, "log_prob_sq": (mean ** 2 + 4.) * n,
            "accept_prob": np.full(8, 0.8 * n)}
  var = np.full((8, 8), 0.01)
  var[2] *= 100.
  moments = adaptation.WelfordState(np.array(float(n)), np.zeros((8, 8)), var * (n - 1))
  assert np.flatnonzero(restarts.stuck_chains(window, n, moments)).tolist() == [5]
  assert not restarts.stuck_chains(window, n).any()
  volumes = restarts.log_volumes(moments)
  assert not restarts.far_below({k: v[:2] for k, v in window.items()}, n, volumes[:2], 8).any()
  window["log_prob"][0] = -np.inf
  assert not restarts.far_below(window, n, volumes, 8).any()
  # A coordinate that did not move in float32 moments: a finite volume, no
  # NumPy warning (float32's floor of 1e-300 was 0, and its log warned).
  flat = adaptation.WelfordState(np.float32(n), np.zeros((8, 8), np.float32),
                                 (var * (n - 1)).astype(np.float32))
  flat.m2[3, 4] = 0.
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert np.all(np.isfinite(restarts.log_volumes(flat)))


def _minor_mode():
  """N(0, 1) with a mode of a millionth of its mass at 30 (sd 1), out of a
  random walk's reach: a chain started there accepts as often as the others."""
  x = ed.Flat(name="x")
  ed.Factor(tf.reduce_logsumexp(tf.stack([
      tfd.Normal(0., 1.).log_prob(x), np.log(1e-6) + tfd.Normal(30., 1.).log_prob(x)]), 0),
      name="f")


def _minor_mode_starts(chains, every):
  init = np.zeros([chains, 1], np.float32)
  init[every - 1::every] = 30.
  return init


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_walk_warmup_moves_a_chain_out_of_a_mode_of_negligible_mass(seed):
  """Random-walk Metropolis moves a chain whose mode holds a negligible
  share of the mass (``restarts.far_below``) at its Stan windows' ends from
  ``MIN_WARMUP`` on, as the gradient kernels' warmup does: before, chain 5
  sampled the minor mode on seed 0 (it accepts as often as the others, so
  it was not stuck).  The draws then have the major mode's mean and sd."""
  post = ed.mcmc.sample(_minor_mode, kernel="rwmh", chains=8, warmup=300, draws=300,
                        seed=seed, init=_minor_mode_starts(8, 6), progress=False)
  x = post.draws["x"]
  assert np.all(np.abs(x.mean(0)) < 1.), x.mean(0)
  assert post.stuck_chains() == []
  assert abs(x.std() - 1.) < 0.1


@pytest.mark.slow
def test_random_walk_warmup_moves_every_chain_out_at_many_chains():
  """The same at 10^5 chains, 1% of them (one in 100) started in the minor
  mode: none is left there after warmup (a far-started superchain's chains
  stayed out at 10^5 random-walk chains of a Weibull regression: 610 of them,
  widening the table's sd 9-fold; RESULTS section 57)."""
  chains = 100_000
  post = ed.mcmc.sample(_minor_mode, kernel="rwmh", chains=chains, warmup=300, draws=100,
                        seed=0, init=_minor_mode_starts(chains, 100), keep_draws=False,
                        progress=False)
  assert np.sum(np.abs(post.mean["x"]) > 10.) == 0
  table = post.summary()
  assert abs(table.loc["x", "sd"] - 1.) < 0.01
