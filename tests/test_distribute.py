"""Distributed inference on logical CPU devices: the sharded log density and
gradient equal the single-device ones, data- and chain-parallel MCMC and VI
give the single-device draws and fits for a seed on 1, 2 and 4 replicas, and
bad settings get clear errors.  (conftest.py splits the CPU into four
logical devices.)

The models are float64 so that round-off in the replicas' sums cannot flip a
sampler's accept or U-turn decision within these short runs.
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed
from conftest import LOGICAL_CPUS
from edward_lite.distribute.sharding import ShardedTarget
from edward_lite.distribute.strategies import num_replicas, resolve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
F64 = tf.float64
N, D = 203, 3  # N not divisible by 2 or 4: uneven shards
_rng = np.random.default_rng(0)
X = _rng.normal(size=(N, D))
OFFSET = _rng.normal(size=N)
W_TRUE = np.array([1., -0.5, 0.25])
Y = (_rng.uniform(size=N) < 1 / (1 + np.exp(-(X @ W_TRUE + 0.3 * OFFSET)))).astype(np.int32)


def logistic(x, offset, scale=1.):
  """Arguments with rows (``x``, keyword ``offset``) and without (``scale``)."""
  w = ed.Normal(tf.zeros(D, F64), tf.constant(scale, F64), name="w")
  tau = ed.HalfNormal(tf.constant(1., F64), name="tau")  # a constrained latent
  return ed.Bernoulli(logits=tf.linalg.matvec(x, w) + tau * offset, name="y")


@pytest.fixture(scope="module")
def strategies():
  return {r: ed.distribute.strategy("mirrored", devices=LOGICAL_CPUS[:r]) for r in (1, 2, 4)}


def _target():
  return ed.make_target(logistic, X, offset=OFFSET, scale=2., observed={"y": Y})


# -- strategies ----------------------------------------------------------------------


def test_strategy_factory_and_errors(strategies):
  assert num_replicas(strategies[4]) == 4
  assert ed.distribute.strategy("default").num_replicas_in_sync == 1
  assert ed.distribute.strategy(strategies[2]) is strategies[2]
  assert resolve(None) is None and resolve("default") is None
  assert ed.distribute.logical_cpus(4) == LOGICAL_CPUS
  with pytest.raises(ValueError, match="Unknown strategy 'gpus'"):
    ed.distribute.strategy("gpus")
  with pytest.raises(ValueError, match="needs tpu="):
    ed.distribute.strategy("tpu")
  with pytest.raises(ValueError, match="devices= applies to the 'mirrored'"):
    ed.distribute.strategy("tpu", devices=["/cpu:0"])
  with pytest.raises(ValueError, match="positive integer"):
    ed.distribute.logical_cpus(0)
  with pytest.raises(RuntimeError, match="before TensorFlow initializes its devices"):
    ed.distribute.logical_cpus(8)
  with pytest.raises(ValueError, match="parallel must be one of"):
    resolve(strategies[2], parallel="model")
  with pytest.raises(TypeError, match="strategy= must be"):
    resolve(4)


@pytest.mark.slow
def test_tpu_that_does_not_exist_fails_fast():
  # Off a TPU VM, 'local' finds no TPU; run in a subprocess so a TPU system
  # initialization attempt cannot touch this process's devices.
  code = ("import edward_lite as ed\n"
          "try:\n  ed.distribute.strategy('tpu', tpu='local')\n"
          "except RuntimeError as e:\n  print('ERROR', e)\n")
  start = time.time()
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, check=False)
  assert "ERROR No TPU could be reached at tpu='local'" in out.stdout, out.stderr[-2000:]
  assert time.time() - start < 120


# -- the sharded log density ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("parallel", ["data", pytest.param("chains", marks=pytest.mark.long)])
def test_sharded_log_prob_and_gradient_equal_single_device(strategies, parallel):
  target = _target()
  flat = tf.constant(np.random.default_rng(1).normal(size=(8, target.dim)))
  lp0, g0 = target.value_and_gradient_flat(flat)
  values = target.constrain(target.unflatten(flat))
  with tf.GradientTape() as tape:
    tape.watch(values)
    lj0 = target.log_joint(values)
  gj0 = tape.gradient(lj0, values)
  for r, strategy in strategies.items():
    sharded = ShardedTarget(target, strategy, parallel, model=logistic)
    assert isinstance(sharded, ed.model.Density)
    # The density and nothing more: the model's description is base's.
    assert not hasattr(sharded, "constrain") and sharded.base is target
    lp, g = tf.function(sharded.value_and_gradient_flat)(flat)
    np.testing.assert_allclose(lp, lp0, rtol=1e-12, err_msg=f"{r} replicas")
    np.testing.assert_allclose(g, g0, rtol=1e-10, atol=1e-12, err_msg=f"{r} replicas")
    with tf.GradientTape() as tape:
      tape.watch(values)
      lj = sharded.log_joint(values)
    gj = tape.gradient(lj, values)
    np.testing.assert_allclose(lj, lj0, rtol=1e-12)
    for name in values:
      np.testing.assert_allclose(gj[name], gj0[name], rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_data_parallel_counts_the_prior_once(strategies):
  # Each replica adds prior / R: the sum over 4 shards of (shard likelihood +
  # prior / 4) is the prior plus the full likelihood, checked term by term.
  target = _target()
  flat = tf.constant(np.random.default_rng(2).normal(size=(3, target.dim)))
  terms = target.log_prob_terms_flat(flat)
  prior = sum(v for k, v in terms.items() if k != "y")
  sharded = ShardedTarget(target, strategies[4], "data", model=logistic)
  np.testing.assert_allclose(sharded.log_prob_flat(flat), prior + terms["y"], rtol=1e-12)
  no_data = target.with_data(likelihood_scale=0.)
  np.testing.assert_allclose(no_data.log_prob_flat(flat), prior, rtol=1e-12)


def test_sharding_errors(strategies):
  target = _target()
  with pytest.raises(ValueError, match="at least one observation per replica.*N=3 rows"):
    small = ed.make_target(logistic, X[:3], offset=OFFSET[:3], observed={"y": Y[:3]})
    ShardedTarget(small, strategies[4], "data")

  def local_latents(x):
    z = ed.Normal(tf.zeros([x.shape[0]], F64), tf.constant(1., F64), name="z")
    return ed.Normal(z + x[:, 0], tf.constant(1., F64), name="y")

  with pytest.raises(ValueError, match="global latents"):
    ShardedTarget(ed.make_target(local_latents, X, observed={"y": X[:, 1]}),
                                strategies[2], "data", model=local_latents)
  sharded = ShardedTarget(target, strategies[4], "chains")
  with pytest.raises(ValueError, match="multiple of the 4 replicas; got 6"):
    sharded.log_prob_flat(tf.zeros([6, target.dim], F64))
  with pytest.raises(ValueError, match="chains to be a multiple of the 4 replicas"):
    ed.mcmc.sample(logistic, X, offset=OFFSET, observed={"y": Y}, chains=6, warmup=2,
                   draws=2, strategy=strategies[4], parallel="chains", progress=False)


# -- MCMC -------------------------------------------------------------------------------


def _sample(**kwargs):
  kwargs = {"warmup": 60, "draws": 40, "chains": 4, **kwargs}
  return ed.mcmc.sample(logistic, X, offset=OFFSET, observed={"y": Y}, seed=3,
                        progress=False, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("parallel", ["data", pytest.param("chains", marks=pytest.mark.long)])
def test_nuts_same_draws_on_1_2_4_replicas(strategies, parallel):
  # One pooled step size: with a step size per chain, each chain's own
  # adaptation feeds back its replicas' summation round-off (2.5e-8 relative
  # in 1 of 480 draws at 4 replicas), past this test's float64 tolerance.
  reference = _sample(jit_compile=False, pooled=True)
  for r, strategy in strategies.items():
    result = _sample(strategy=strategy, parallel=parallel, pooled=True)
    for name in ("w", "tau"):
      np.testing.assert_allclose(result.draws[name], reference.draws[name], rtol=1e-8,
                                 atol=1e-10, err_msg=f"{parallel}, {r} replicas, {name}")
    assert result.draws["w"].shape == (40, 4, D)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", [pytest.param("hmc", marks=pytest.mark.long),
                                    pytest.param("rwmh", marks=pytest.mark.long), "chees"])
def test_other_kernels_data_parallel(strategies, kernel):
  # Short runs: long leapfrog trajectories amplify round-off differences
  # chaotically (HMC's reach 1e-5 after 20 warmup iterations here).
  kwargs = dict(kernel=kernel, warmup=10, draws=10)
  reference = _sample(jit_compile=False, **kwargs)
  result = _sample(strategy=strategies[2], **kwargs)
  np.testing.assert_allclose(result.draws["w"], reference.draws["w"], rtol=1e-7, atol=1e-9)


@pytest.mark.slow
def test_data_parallel_nuts_recovers_conjugate_posterior(strategies):
  # y_i ~ N(mu, 1), mu ~ N(0, 10): posterior N(m, s^2) in closed form.
  rng = np.random.default_rng(4)
  y = rng.normal(1.5, 1., size=101)

  def normal_mean(ones):  # its data shape comes from an argument with N rows
    mu = ed.Normal(tf.constant(0., F64), tf.constant(10., F64), name="mu")
    return ed.Normal(mu * ones, tf.constant(1., F64), name="y")

  precision = 1 / 100. + len(y)
  m, s = y.sum() / precision, precision ** -0.5
  result = ed.mcmc.sample(normal_mean, np.ones_like(y), observed={"y": y}, chains=8, warmup=200,
                          draws=300, seed=5, progress=False, strategy=strategies[4])
  draws = result.draws["mu"]
  se = s / np.sqrt(result.summary().loc["mu", "ess_bulk"])
  assert abs(draws.mean() - m) < 4 * se
  assert abs(draws.std() / s - 1) < 0.15


# -- chain groups: the whole sampler per device ----------------------------------------


def _normal_mean_data():
  y = np.random.default_rng(4).normal(1.5, 1., size=101)
  precision = 1 / 100. + len(y)
  return y, y.sum() / precision, precision ** -0.5


def normal_mean(n):
  mu = ed.Normal(tf.constant(0., F64), tf.constant(10., F64), name="mu")
  return ed.Normal(mu, tf.constant(1., F64), sample_shape=n, name="y")


@pytest.mark.slow
@pytest.mark.parametrize("pooled, chains", [(True, 4), (False, 4), (None, 4),
                                            pytest.param(True, 32, marks=pytest.mark.long)])
def test_chain_groups_on_one_device_equal_the_single_device_sampler(strategies, pooled, chains):
  """32 chains: NUTS samples in rounds, in each block as on one device."""
  reference = _sample(pooled=pooled, chains=chains)
  result = _sample(strategy=strategies[1], parallel="chain_groups", pooled=pooled,
                   chains=chains)
  for name in ("w", "tau"):
    np.testing.assert_array_equal(result.draws[name], reference.draws[name])
  np.testing.assert_array_equal(result.step_size, reference.step_size)


@pytest.mark.parametrize("pooled, dense", [(True, False), (False, False), (True, True),
                                           (("bulk", True), False)])
def test_chain_groups_split_and_merge_are_inverse(strategies, pooled, dense):
  from edward_lite.mcmc import groups
  from edward_lite.mcmc.compiled import Program
  program = Program.get(logistic, (X,), {"offset": OFFSET}, {"y": Y}, ed.mcmc.ChEES(), 4, pooled)
  template = program.state_template(4, pooled, dense)
  rng = np.random.default_rng(0)
  state = tf.nest.map_structure(
      lambda x: tf.constant(rng.normal(size=x.shape).astype(x.dtype.as_numpy_dtype))
      if x.dtype.is_floating else x, template)
  chain_groups = groups.ChainGroups(strategies[2], 4, pooled)
  blocks = chain_groups.split(state)
  assert blocks[1].u.shape == (2, D + 1)
  np.testing.assert_array_equal(blocks[1].u, state.u[2:])
  np.testing.assert_array_equal(blocks[1].stream.batch_sums, state.stream.batch_sums[:, 2:])
  if dense:  # a sum over the chains: the first block's, the others add to zero
    np.testing.assert_array_equal(blocks[0].moments.draws.scatter, state.moments.draws.scatter)
    np.testing.assert_array_equal(blocks[1].moments.grads.scatter, 0.)
  for got, want in zip(tf.nest.flatten(chain_groups.merge(blocks)), tf.nest.flatten(state)):
    np.testing.assert_array_equal(got, want)


@pytest.mark.slow
# 64: blocks of 32 sample in rounds (long; the default run keeps 8)
@pytest.mark.parametrize("chains", [8, pytest.param(64, marks=pytest.mark.long)])
def test_chain_groups_recover_a_conjugate_posterior_reproducibly(strategies, chains):
  y, m, s = _normal_mean_data()
  kwargs = dict(observed={"y": y}, chains=chains, warmup=200, draws=300, seed=5,
                progress=False, strategy=strategies[2], parallel="chain_groups",
                init={"mu": 0.})
  result = ed.mcmc.sample(normal_mean, len(y), **kwargs)
  draws = result.draws["mu"]
  se = s / np.sqrt(result.summary().loc["mu", "ess_bulk"])
  assert abs(draws.mean() - m) < 4 * se
  assert abs(draws.std() / s - 1) < 0.15
  np.testing.assert_array_equal(ed.mcmc.sample(normal_mean, len(y), **kwargs).draws["mu"], draws)
  # Same initial state everywhere: the two blocks differ only by their seeds.
  assert not np.allclose(draws[:, 0], draws[:, chains // 2])


@pytest.mark.slow
def test_chain_groups_resume_from_a_checkpoint(strategies, tmp_path):
  y, _, _ = _normal_mean_data()
  kwargs = dict(observed={"y": y}, kernel="hmc", chains=4, warmup=60, draws=60, seed=2,
                chunk_size=20, progress=False, strategy=strategies[2], parallel="chain_groups")
  full = ed.mcmc.sample(normal_mean, len(y), **kwargs)

  def interrupt(info):
    if info["step"] == 80:
      raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    ed.mcmc.sample(normal_mean, len(y), checkpoint_dir=tmp_path, callback=interrupt, **kwargs)
  resumed = ed.mcmc.sample(normal_mean, len(y), checkpoint_dir=tmp_path, **kwargs)
  np.testing.assert_array_equal(resumed.draws["mu"], full.draws["mu"])
  with pytest.raises(ed.mcmc.CheckpointMismatchError, match="chain_groups"):
    ed.mcmc.sample(normal_mean, len(y), checkpoint_dir=tmp_path,
                   **dict(kwargs, strategy=strategies[4]))


def test_chain_groups_errors(strategies):
  with pytest.raises(ValueError, match="multiple of the 2 devices"):
    _sample(chains=3, strategy=strategies[2], parallel="chain_groups")
  with pytest.raises(ValueError, match="needs a strategy"):
    _sample(parallel="chain_groups")
  with pytest.raises(ValueError, match="parallel must be"):
    _sample(strategy=strategies[2], parallel="replicas")


# -- VI ---------------------------------------------------------------------------------


def _fit(**kwargs):
  return ed.vi.fit(logistic, X, offset=OFFSET, observed={"y": Y}, family="meanfield",
                   steps=60, samples=8, seed=6, chunk_size=30, progress=False, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [pytest.param(None, marks=pytest.mark.long), 40])
def test_vi_same_fit_on_1_2_4_replicas(strategies, batch_size):
  reference = _fit(jit_compile=False, batch_size=batch_size)
  for r, strategy in strategies.items():
    for parallel in ("data", "chains"):
      result = _fit(strategy=strategy, parallel=parallel, batch_size=batch_size)
      np.testing.assert_allclose(result.elbo, reference.elbo, rtol=1e-9,
                                 err_msg=f"{parallel}, {r} replicas")
      for key, value in reference.raw_params.items():
        np.testing.assert_allclose(result.raw_params[key], value, rtol=1e-9, atol=1e-12)


@pytest.mark.long  # the default run keeps data-parallel VI on 40 points
def test_vi_program_surrogate_data_parallel(strategies):
  # A variational program: the model density goes through log_joint.
  loc = tf.Variable(tf.zeros(D, F64))
  log_scale = tf.Variable(tf.fill([D], tf.constant(-1., F64)))
  tau_loc = tf.Variable(tf.constant(0., F64))

  def surrogate():
    ed.Normal(loc, tf.exp(log_scale), name="w")
    ed.LogNormal(tau_loc, tf.constant(0.3, F64), name="tau")

  def run(**kwargs):
    for v, init in ((loc, tf.zeros(D, F64)), (log_scale, tf.fill([D], tf.constant(-1., F64))),
                    (tau_loc, tf.constant(0., F64))):
      v.assign(init)
    fit = ed.vi.fit(logistic, X, offset=OFFSET, observed={"y": Y}, family=surrogate,
                    steps=30, samples=8, seed=7, progress=False, **kwargs)
    return fit.elbo, loc.numpy().copy()

  elbo0, loc0 = run(jit_compile=False)
  elbo, loc2 = run(strategy=strategies[2])
  np.testing.assert_allclose(elbo, elbo0, rtol=1e-9)
  np.testing.assert_allclose(loc2, loc0, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
def test_vi_distribution_errors(strategies):
  with pytest.raises(ValueError, match="batch_size=30 is not a multiple of 4"):
    _fit(strategy=strategies[4], batch_size=30)
  with pytest.raises(ValueError, match="samples=6 is not a multiple of 4"):
    ed.vi.fit(logistic, X, offset=OFFSET, observed={"y": Y}, samples=6, steps=2,
              strategy=strategies[4], parallel="chains", progress=False)
  uneven = tf.data.Dataset.from_tensor_slices({"y": Y, "x": X, "offset": OFFSET}).batch(30)
  with pytest.raises((ValueError, tf.errors.InvalidArgumentError),
                     match="must split evenly across the 4 replicas; its size is"):
    ed.vi.fit(logistic, dataset=uneven, num_examples=N, steps=2, strategy=strategies[4],
              progress=False)


@pytest.mark.slow
def test_vi_dataset_data_parallel(strategies):
  dataset = tf.data.Dataset.from_tensor_slices({"y": Y, "x": X, "offset": OFFSET}).batch(
      40, drop_remainder=True)
  kwargs = dict(dataset=dataset, num_examples=N, family="meanfield", steps=30, samples=8,
                seed=6, chunk_size=10, progress=False)
  reference = ed.vi.fit(logistic, jit_compile=False, **kwargs)
  for parallel in ("data", "chains"):
    result = ed.vi.fit(logistic, strategy=strategies[2], parallel=parallel, **kwargs)
    np.testing.assert_allclose(result.elbo, reference.elbo, rtol=1e-9)


# -- the example and its launch script -----------------------------------------------


@pytest.mark.slow
def test_distributed_logistic_example_equals_single_device(strategies):
  sys.path.insert(0, os.path.join(ROOT, "examples"))
  import distributed_logistic  # pylint: disable=import-outside-toplevel
  out = distributed_logistic.run(strategies[2], n=301, d=4, chains=4, warmup=40, draws=20,
                                 compare=True, dtype=np.float64, progress=False, pooled=True)
  assert out["replicas"] == 2 and out["posterior"].draws["w"].shape == (20, 4, 4)
  assert out["max_abs_diff"] < 1e-8


@pytest.mark.slow
def test_nuts_launch_script_runs_in_cpu_fallback():
  script = os.path.join(ROOT, "tpu_scripts", "nuts_logistic.py")
  out = subprocess.run(
      [sys.executable, script, "--strategy", "cpu", "--replicas", "2", "--n", "400", "--d", "3",
       "--warmup", "20", "--draws", "10"],
      capture_output=True, text=True, timeout=240, check=False,
      env=dict(os.environ, PYTHONPATH=ROOT))
  assert out.returncode == 0, out.stderr[-3000:]
  assert "2 replicas: wall" in out.stdout and "w[2]" in out.stdout


# -- programs with loops -----------------------------------------------------------------


def ar1_scan(y):
  """y_t | y_{t-1} ~ N(phi y_{t-1}, 1) through a tf.scan; phi ~ N(0, 1)."""
  phi = ed.Normal(tf.constant(0., F64), tf.constant(1., F64), name="phi")
  means = tf.scan(lambda _, y_prev: phi * y_prev, y[:-1], initializer=tf.constant(0., F64))
  return ed.Normal(means, tf.constant(1., F64), name="y")


@pytest.mark.long  # the default run keeps one case of each other distributed check
def test_loop_program_under_strategies(strategies):
  rng = np.random.default_rng(4)
  y = np.zeros(30)
  for t in range(1, 30):
    y[t] = 0.6 * y[t - 1] + rng.normal()
  target = ed.make_target(ar1_scan, y, observed={"y": y[1:]})
  assert target.has_loops
  flat = tf.constant(rng.normal(size=(4, 1)))
  lp0, g0 = target.value_and_gradient_flat(flat)
  sharded = ShardedTarget(target, strategies[2], "chains", model=ar1_scan)
  lp, g = tf.function(sharded.value_and_gradient_flat)(flat)
  np.testing.assert_allclose(lp, lp0, rtol=1e-12)
  np.testing.assert_allclose(g, g0, rtol=1e-10)
  # The posterior is N(S_xy / (1 + S_xx), 1 / (1 + S_xx)) on every layout.
  lag, now = y[:-1], y[1:]
  mean, sd = lag @ now / (1. + lag @ lag), (1. + lag @ lag) ** -0.5
  for parallel in ("chains", "chain_groups"):
    result = ed.mcmc.sample(ar1_scan, y, observed={"y": y[1:]}, chains=4, warmup=200,
                            draws=300, seed=6, progress=False, strategy=strategies[2],
                            parallel=parallel)
    row = result.summary().loc["phi"]
    assert abs(row["mean"] - mean) < 4 * row["mcse_mean"], parallel
    assert abs(row["sd"] / sd - 1.) < 0.2, parallel
  with pytest.raises(ValueError, match="cannot be cut: sample it with parallel='chains'"):
    ed.mcmc.sample(ar1_scan, y, observed={"y": y[1:]}, chains=4, warmup=2, draws=2,
                   progress=False, strategy=strategies[2], parallel="data")


def test_loop_program_variational_fit_with_samples_across_replicas(strategies):
  rng = np.random.default_rng(5)
  y = np.zeros(30)
  for t in range(1, 30):
    y[t] = 0.6 * y[t - 1] + rng.normal()
  lag, now = y[:-1], y[1:]
  mean, sd = lag @ now / (1. + lag @ lag), (1. + lag @ lag) ** -0.5
  # The posterior is Gaussian: mean-field ADVI is exact up to optimization noise.
  fit = ed.vi.fit(ar1_scan, y, observed={"y": y[1:]}, steps=1500, samples=8, seed=2,
                  learning_rate=0.02, progress=False, strategy=strategies[2], parallel="chains")
  draws = fit.sample(4000, seed=1)["phi"]
  assert abs(draws.mean() - mean) < 0.1 * sd
  assert abs(draws.std() / sd - 1.) < 0.1
