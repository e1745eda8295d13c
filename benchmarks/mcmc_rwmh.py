"""Random-walk Metropolis on a 1-D Gaussian mixture: throughput of many chains.

The "massively parallel MCMC" example: a mixture of four Gaussians (locs
[-2, 0, 3.2, 2.5], scales [1.2, 1, 5, 2.8], weights [0.2, 0.3, 0.1, 0.4];
exact mean 0.92, variance 9.70), random-walk Metropolis with proposal scale
0.1, no adaptation, initial states uniform(-2, 2), and only per-chain running
moments (Welford mean and M2, float32) kept -- nothing stored -- except for
TFP's ``sample_chain``, which stores every sample by design.

Implementations, all float32, all in one process:

* ``edward_lite``  -- ``ed.mcmc.sample(kernel=ed.mcmc.RWMH(scale=0.1,
  adapt=False), keep_draws=False, adapt_metric=False, warmup=0)`` with large
  chunks (the library's compiled ``tf.while_loop`` under XLA);
* ``edward_lite_groups`` -- the same with ``strategy=<2 logical CPU devices>,
  parallel="chain_groups"``: the compiled sampler once per core, each on half
  the chains;
* ``numpy``        -- a vectorized NumPy loop over steps (random numbers drawn
  in blocks of steps, in-place running moments);
* ``jax``          -- hand-written JAX, the whole loop in one ``jax.jit``
  (``lax.fori_loop``, running moments), one CPU device;
* ``jax_sharded``  -- the same, chains sharded over 2 host CPU devices with
  ``jax.shard_map`` (``XLA_FLAGS=--xla_force_host_platform_device_count=2``,
  set below before JAX is imported);
* ``blackjax``     -- BlackJAX's ``rmh`` kernel, vmapped over chains, in a
  jitted ``fori_loop`` with running moments;
* ``tfp``          -- ``tfp.mcmc.sample_chain`` with ``RandomWalkMetropolis``
  under ``tf.function(jit_compile=True)``; it stores every sample (float32),
  so settings above ``--tfp-max-samples`` are skipped.

Sweeps: (a) ``--sweep-chains`` (1000) chains and growing steps, (b)
``--sweep-steps`` (1000) steps and growing chains; ``--billion`` adds the
time to draw 10^9 samples with edward_lite and the fastest peer, and the
whole call's: compile, run and, for edward_lite, ``print_summary`` of the
streamed statistics (the peers print nothing).

Compile is measured separately from the run: JAX programs are compiled ahead
of time (``jit(...).lower(...).compile()``, once per chain count, since the
number of steps is a run-time argument); edward_lite's first ``sample`` call
for a chain count (1 draw) compiles its program, later calls with any number
of draws reuse it; TFP's ``sample_chain`` has a static number of results, so
it is compiled per setting and timed twice (compile = first call - second).
samples/s counts ``chains * steps`` over the run alone (host overhead of the
call included, compile excluded); ``cores`` is process CPU seconds / wall
seconds of the run (how many cores an implementation kept busy).

Each implementation's pooled mean/variance (mean of chain means; mean of
chain variances + variance of chain means) is printed; at the largest number
of steps of sweep (a) it is checked against the exact values with a loose
tolerance (mixing is slow at scale 0.1; checked only when there are at least
``--check-min-steps`` steps).

    cd /work/main && PYTHONPATH=. /work/benchvenv/bin/python benchmarks/mcmc_rwmh.py
    # small validation run:
    ... benchmarks/mcmc_rwmh.py --steps 1000 10000 100000 --chains 100 1000 10000
    # 10^9 samples (edward_lite and the fastest peer):
    ... benchmarks/mcmc_rwmh.py --billion [--billion-chains 1000] [--no-sweep]
    # alternated runs at one setting (RESULTS section 53's headline):
    ... benchmarks/mcmc_rwmh.py --paired 9 --sweep-chains 100000 --sweep-steps 1000 \
        --impls edward_lite_groups edward_lite_groups_adapt jax_sharded
"""

import os

# Two host CPU devices for the sharded JAX run; must be set before JAX (and
# TensorFlow, which parses the same XLA flags) is imported.
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=2").strip()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as P  # noqa: E402

import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import edward_lite as ed  # noqa: E402

# Two logical CPU devices for edward_lite_groups (one block of chains per core).
ED_DEVICES = ed.distribute.logical_cpus(2)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402  (the header every benchmark prints)

try:
  import blackjax  # noqa: E402
except ImportError:  # pragma: no cover
  blackjax = None

tfd = tfp.distributions

LOCS = np.array([-2., 0., 3.2, 2.5], np.float32)
SCALES = np.array([1.2, 1., 5., 2.8], np.float32)
WEIGHTS = np.array([0.2, 0.3, 0.1, 0.4], np.float32)
PROPOSAL_SCALE = 0.1
INIT_RADIUS = 2.
# log w_k - log s_k - log sqrt(2 pi): the per-component constant.
LOG_CONST = (np.log(WEIGHTS) - np.log(SCALES) - 0.5 * np.log(2 * np.pi)).astype(np.float32)
INV_SCALES = (1. / SCALES).astype(np.float32)


def exact_moments():
  mean = float(np.sum(WEIGHTS * LOCS))
  second = float(np.sum(WEIGHTS * (SCALES ** 2 + LOCS ** 2)))
  return mean, second - mean ** 2


EXACT_MEAN, EXACT_VAR = exact_moments()


def pooled_moments(chain_mean, chain_var):
  """Pooled mean and variance from per-chain means and variances."""
  chain_mean = np.asarray(chain_mean, np.float64).reshape(-1)
  chain_var = np.asarray(chain_var, np.float64).reshape(-1)
  return float(chain_mean.mean()), float(chain_var.mean() + chain_mean.var())


class Result(dict):
  """compile_s, run_s, mean, var, cpu_s (process CPU seconds of the run), note;
  or skipped."""


# -- edward_lite ------------------------------------------------------------------


def mixture_ed():
  return ed.MixtureSameFamily(tfd.Categorical(probs=WEIGHTS), tfd.Normal(LOCS, SCALES),
                              name="x")


_ED_COMPILE = {}  # chains -> compile seconds (the compiled program is cached by ed)


def run_edward_lite(chains, steps, seed, chunk, adapt=False, **parallel):
  # adapt=True: the adaptive kernel, run with warmup=0 (nothing adapts, but
  # the loop carries the step size's adaptation, as after any warmup).
  kernel = ed.mcmc.RWMH(scale=PROPOSAL_SCALE, adapt=adapt)
  common = dict(kernel=kernel, chains=chains, warmup=0, keep_draws=False, adapt_metric=False,
                init="uniform", init_radius=INIT_RADIUS, progress=False, **parallel)
  key = (chains, bool(parallel), adapt)
  if key not in _ED_COMPILE:
    start = time.perf_counter()
    ed.mcmc.sample(mixture_ed, draws=1, seed=seed + 1, chunk_size=1, **common)
    _ED_COMPILE[key] = time.perf_counter() - start
  start, cpu = time.perf_counter(), time.process_time()
  result = ed.mcmc.sample(mixture_ed, draws=steps, seed=seed, chunk_size=min(steps, chunk),
                          **common)
  run_s, cpu = time.perf_counter() - start, time.process_time() - cpu
  start = time.perf_counter()
  with contextlib.redirect_stdout(io.StringIO()):
    result.print_summary()  # the streamed statistics' table, as a user prints it
  summary_s = time.perf_counter() - start
  if result.timings["compile_s"] > 0:
    raise AssertionError("edward_lite recompiled on the timed call: "
                         f"{result.timings}")
  mean, var = pooled_moments(result.mean["x"], result.variance["x"])
  return Result(compile_s=_ED_COMPILE[key], run_s=run_s, mean=mean, var=var, cpu_s=cpu,
                summary_s=summary_s, note=f"in-loop {result.timings['sampling_s']:.3g}s, "
                f"print_summary {summary_s:.2g}s")


def run_edward_lite_groups(chains, steps, seed, chunk, adapt=False):
  """The same sampler with the chains split over the two cores:
  ``parallel="chain_groups"`` on two logical CPU devices."""
  strategy = ed.distribute.strategy("mirrored", devices=ED_DEVICES)
  return run_edward_lite(chains, steps, seed, chunk, adapt=adapt, strategy=strategy,
                         parallel="chain_groups")


def run_edward_lite_groups_adapt(chains, steps, seed, chunk):
  """``edward_lite_groups`` with the adaptive kernel (``RWMH(adapt=True)``)."""
  return run_edward_lite_groups(chains, steps, seed, chunk, adapt=True)


# -- NumPy --------------------------------------------------------------------------


def logp_np(x):
  z = (x[:, None] - LOCS) * INV_SCALES
  a = LOG_CONST - np.float32(0.5) * z * z
  m = a.max(axis=1)
  return m + np.log(np.exp(a - m[:, None]).sum(axis=1))


def run_numpy(chains, steps, seed):
  rng = np.random.default_rng(seed)
  start, cpu = time.perf_counter(), time.process_time()
  x = rng.uniform(-INIT_RADIUS, INIT_RADIUS, chains).astype(np.float32)
  lp = logp_np(x)
  mean = np.zeros(chains, np.float32)
  m2 = np.zeros(chains, np.float32)
  delta = np.empty(chains, np.float32)
  block = int(max(1, min(1000, 2 ** 21 // chains)))  # steps of random numbers per draw
  scale = np.float32(PROPOSAL_SCALE)
  t = 0
  while t < steps:
    b = min(block, steps - t)
    eps = rng.standard_normal((b, chains), dtype=np.float32)
    eps *= scale
    log_u = np.log1p(-rng.random((b, chains), dtype=np.float32))  # log U, U in (0, 1]
    for j in range(b):
      prop = x + eps[j]
      lp_prop = logp_np(prop)
      accept = log_u[j] < lp_prop - lp
      np.copyto(x, prop, where=accept)
      np.copyto(lp, lp_prop, where=accept)
      t += 1
      np.subtract(x, mean, out=delta)
      mean += delta / np.float32(t)
      delta *= x - mean
      m2 += delta
  run_s, cpu = time.perf_counter() - start, time.process_time() - cpu
  m, v = pooled_moments(mean, m2 / max(steps - 1, 1))
  return Result(compile_s=0., run_s=run_s, mean=m, var=v, cpu_s=cpu)


# -- JAX (hand-written) ---------------------------------------------------------------


def logp_jax(x):
  z = (x[..., None] - LOCS) * INV_SCALES
  return jax.scipy.special.logsumexp(LOG_CONST - 0.5 * z * z, axis=-1)


def _welford(t, x, mean, m2):
  delta = x - mean
  mean = mean + delta / t
  return mean, m2 + delta * (x - mean)


def _jax_chain_loop(key, x, steps):
  """RWMH on chains x[C] for ``steps`` steps; returns (mean, m2) per chain."""
  lp = logp_jax(x)
  zeros = jnp.zeros_like(x)

  def body(i, carry):
    key, x, lp, mean, m2 = carry
    key, k_prop, k_acc = jax.random.split(key, 3)
    prop = x + PROPOSAL_SCALE * jax.random.normal(k_prop, x.shape, x.dtype)
    lp_prop = logp_jax(prop)
    accept = jnp.log(jax.random.uniform(k_acc, x.shape, x.dtype)) < lp_prop - lp
    x = jnp.where(accept, prop, x)
    lp = jnp.where(accept, lp_prop, lp)
    mean, m2 = _welford((i + 1).astype(x.dtype), x, mean, m2)
    return key, x, lp, mean, m2

  _, _, _, mean, m2 = jax.lax.fori_loop(0, steps, body, (key, x, lp, zeros, zeros))
  return mean, m2


def _jax_init(seed, chains):
  key = jax.random.key(seed)
  k_init, k_run = jax.random.split(key)
  x0 = jax.random.uniform(k_init, (chains,), jnp.float32, -INIT_RADIUS, INIT_RADIUS)
  return k_run, x0


_JAX_COMPILED = {}  # (variant, chains) -> (compiled, compile seconds)


def _compile_jax(variant, chains, fn, key, x0):
  cache_key = (variant, chains)
  if cache_key not in _JAX_COMPILED:
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(key, x0, jnp.int32(1)).compile()
    _JAX_COMPILED[cache_key] = (compiled, time.perf_counter() - start)
  return _JAX_COMPILED[cache_key]


def _run_compiled(compiled, compile_s, key, x0, steps):
  start, cpu = time.perf_counter(), time.process_time()
  mean, m2 = compiled(key, x0, jnp.int32(steps))
  mean, m2 = np.asarray(mean), np.asarray(m2)
  run_s, cpu = time.perf_counter() - start, time.process_time() - cpu
  m, v = pooled_moments(mean, m2 / max(steps - 1, 1))
  return Result(compile_s=compile_s, run_s=run_s, mean=m, var=v, cpu_s=cpu)


def run_jax(chains, steps, seed):
  key, x0 = _jax_init(seed, chains)
  compiled, compile_s = _compile_jax("jax", chains, _jax_chain_loop, key, x0)
  return _run_compiled(compiled, compile_s, key, x0, steps)


def run_jax_sharded(chains, steps, seed):
  devices = jax.devices("cpu")
  if len(devices) < 2:
    raise RuntimeError("only one host CPU device (XLA_FLAGS not applied before JAX import?)")
  if chains % len(devices):
    raise RuntimeError(f"chains={chains} not divisible by {len(devices)} devices")
  mesh = Mesh(np.array(devices), ("c",))

  def local(key, x, steps):
    key = jax.random.fold_in(key, jax.lax.axis_index("c"))
    return _jax_chain_loop(key, x, steps)

  fn = jax.shard_map(local, mesh=mesh, in_specs=(P(), P("c"), P()),
                     out_specs=(P("c"), P("c")), check_vma=False)
  key, x0 = _jax_init(seed, chains)
  x0 = jax.device_put(x0, jax.sharding.NamedSharding(mesh, P("c")))
  compiled, compile_s = _compile_jax("jax_sharded", chains, fn, key, x0)
  return _run_compiled(compiled, compile_s, key, x0, steps)


# -- BlackJAX -------------------------------------------------------------------------


def run_blackjax(chains, steps, seed):
  if blackjax is None:
    raise RuntimeError("blackjax is not installed")

  def proposal(key, position):
    return position + PROPOSAL_SCALE * jax.random.normal(key, jnp.shape(position), position.dtype)

  rmh = blackjax.rmh(logp_jax, proposal)

  def loop(key, x0, steps):
    state = jax.vmap(rmh.init)(x0)
    zeros = jnp.zeros_like(x0)

    def body(i, carry):
      key, state, mean, m2 = carry
      key, sub = jax.random.split(key)
      state, _ = jax.vmap(rmh.step)(jax.random.split(sub, chains), state)
      mean, m2 = _welford((i + 1).astype(x0.dtype), state.position, mean, m2)
      return key, state, mean, m2

    _, _, mean, m2 = jax.lax.fori_loop(0, steps, body, (key, state, zeros, zeros))
    return mean, m2

  key, x0 = _jax_init(seed, chains)
  compiled, compile_s = _compile_jax("blackjax", chains, loop, key, x0)
  return _run_compiled(compiled, compile_s, key, x0, steps)


# -- TFP sample_chain -------------------------------------------------------------------


def run_tfp(chains, steps, seed):
  mixture = tfd.MixtureSameFamily(tfd.Categorical(probs=WEIGHTS), tfd.Normal(LOCS, SCALES))
  kernel = tfp.mcmc.RandomWalkMetropolis(
      mixture.log_prob, new_state_fn=tfp.mcmc.random_walk_normal_fn(scale=PROPOSAL_SCALE))

  @tf.function(jit_compile=True)
  def run(x0, seed):
    samples = tfp.mcmc.sample_chain(num_results=steps, current_state=x0, kernel=kernel,
                                    num_burnin_steps=0, trace_fn=None, seed=seed)
    mean = tf.reduce_mean(samples, 0)
    return mean, tf.reduce_mean(tf.square(samples - mean), 0)

  x0 = tf.random.stateless_uniform([chains], [seed, 1], -INIT_RADIUS, INIT_RADIUS)
  seeds = tf.constant([[seed, 2], [seed, 3]], tf.int32)
  start = time.perf_counter()
  run(x0, seeds[0])[0].numpy()
  first = time.perf_counter() - start
  start, cpu = time.perf_counter(), time.process_time()
  mean, var = (t.numpy() for t in run(x0, seeds[1]))
  run_s, cpu = time.perf_counter() - start, time.process_time() - cpu
  m, v = pooled_moments(mean, var * steps / max(steps - 1, 1))
  return Result(compile_s=max(first - run_s, 0.), run_s=run_s, mean=m, var=v, cpu_s=cpu,
                note="stores all samples")


IMPLS = {
    "edward_lite": run_edward_lite,
    "edward_lite_groups": run_edward_lite_groups,
    "edward_lite_groups_adapt": run_edward_lite_groups_adapt,
    "numpy": run_numpy,
    "jax": run_jax,
    "jax_sharded": run_jax_sharded,
    "blackjax": run_blackjax,
    "tfp": run_tfp,
}


# -- driver -------------------------------------------------------------------------------


def run_one(name, chains, steps, args):
  samples = chains * steps
  if name == "tfp" and samples > args.tfp_max_samples:
    return Result(skipped=f"stores {samples:.1e} samples > --tfp-max-samples "
                          f"{args.tfp_max_samples:.1e} ({4 * samples / 2**30:.1f} GiB)")
  if name == "numpy" and samples > args.numpy_max_samples:
    return Result(skipped=f"{samples:.1e} samples > --numpy-max-samples")
  try:
    if name.startswith("edward_lite"):
      res = IMPLS[name](chains, steps, args.seed, args.ed_chunk)
    else:
      res = IMPLS[name](chains, steps, args.seed)
  except Exception as e:  # noqa: BLE001 -- report and go on with the other peers
    return Result(skipped=f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
  res["rate"] = samples / res["run_s"]
  return res


def print_header():
  print(machine.machine_line())
  print(f"# Python {platform.python_version()}; NumPy {np.__version__}; TF {tf.__version__}; "
        f"TFP {tfp.__version__}; JAX {jax.__version__} (jaxlib "
        f"{getattr(jax.lib, '__version__', None) or machine.version('jaxlib')}); BlackJAX "
        f"{getattr(blackjax, '__version__', 'not installed')}; edward_lite {ed.__version__}")
  print(f"# JAX devices: {jax.devices()}; XLA_FLAGS={os.environ.get('XLA_FLAGS')}")
  print(f"# target: mixture of 4 Gaussians, exact mean {EXACT_MEAN:.2f}, variance "
        f"{EXACT_VAR:.2f}; RWMH scale {PROPOSAL_SCALE}, float32, running moments only")


def print_row(label, name, res):
  if "skipped" in res:
    print(f"  {label:24s} {name:12s} skipped: {res['skipped']}")
    return
  print(f"  {label:24s} {name:12s} compile {res['compile_s']:7.2f} s  run {res['run_s']:9.3f} s"
        f"  {res['rate']:10.3g} samples/s  cores {res['cpu_s'] / res['run_s']:4.2f}"
        f"  mean {res['mean']:6.3f}  var {res['var']:6.3f}"
        + (f"  ({res['note']})" if res.get("note") else ""))
  sys.stdout.flush()


def sweep(title, settings, impls, args):
  print(f"\n## {title}")
  table = []
  for chains, steps in settings:
    label = f"C={chains:<7d} T={steps:<8d}"
    row = {}
    for name in impls:
      row[name] = run_one(name, chains, steps, args)
      print_row(label, name, row[name])
    table.append(((chains, steps), row))
  return table


def print_summary(title, table, impls):
  print(f"\n## {title}: samples/s excluding compile (compile seconds in brackets)")
  width = 20
  print(f"  {'setting':22s}" + "".join(f"{n:>{width}s}" for n in impls) +
        f"{'ed / best peer':>26s}")
  for (chains, steps), row in table:
    cells = []
    for name in impls:
      r = row[name]
      cells.append("skipped" if "skipped" in r else f"{r['rate']:.3g} [{r['compile_s']:.1f}]")
    peers = {n: r["rate"] for n, r in row.items()
             if not n.startswith("edward_lite") and "rate" in r}
    ours = {n: r["rate"] for n, r in row.items() if n.startswith("edward_lite") and "rate" in r}
    ratio = "-"
    if peers and ours:
      best, mine = max(peers, key=peers.get), max(ours, key=ours.get)
      ratio = f"{ours[mine] / peers[best]:.2f} ({mine[len('edward_lite'):] or 'ed'} / {best})"
    print(f"  C={chains:<7d} T={steps:<9d}" + "".join(f"{c:>{width}s}" for c in cells) +
          f"  {ratio:>30s}")


def check_moments(table, args):
  """Checks each implementation's mean/variance at the most steps of sweep (a)."""
  failures = []
  if not table:
    return failures
  (chains, steps), row = max(table, key=lambda item: (item[0][1], item[0][0]))
  print(f"\n## Check at the most steps (C={chains}, T={steps}): exact mean {EXACT_MEAN:.2f} "
        f"+- {args.tol_mean}, variance {EXACT_VAR:.2f} +- {args.tol_var}")
  for name, r in row.items():
    if "skipped" in r:
      print(f"  {name:12s} not checked ({r['skipped']})")
      continue
    ok = abs(r["mean"] - EXACT_MEAN) <= args.tol_mean and abs(r["var"] - EXACT_VAR) <= args.tol_var
    if steps < args.check_min_steps:
      verdict = f"not checked: T < --check-min-steps {args.check_min_steps}"
    else:
      verdict = "ok" if ok else "FAILED"
      if not ok:
        failures.append(name)
    print(f"  {name:12s} mean {r['mean']:6.3f}  var {r['var']:6.3f}  {verdict}")
  # Every setting: finite and in a plausible range (init is uniform(-2, 2)).
  for (c, t), row in table:
    for name, r in row.items():
      if "mean" in r and not (np.isfinite(r["mean"]) and np.isfinite(r["var"])
                              and -2.5 < r["mean"] < 4. and 0. < r["var"] < 20.):
        print(f"  {name} at C={c}, T={t}: implausible mean {r['mean']} / var {r['var']}")
        failures.append(f"{name}@C={c},T={t}")
  return failures


def billion(args, sweep_tables):
  total = int(args.billion_total)
  chains = args.billion_chains
  steps = total // chains
  print(f"\n## {total:.3g} samples: C={chains} x T={steps}")
  # The fastest peer at this chain count from the sweeps, else a short calibration.
  peer = args.billion_peer
  if peer is None:
    rates = {}
    for table in sweep_tables:
      for (c, t), row in table:
        if c == chains:
          for name, r in row.items():
            if not name.startswith("edward_lite") and "rate" in r and name != "tfp":
              rates.setdefault(name, []).append((t, r["rate"]))
    if rates:
      peer = max(rates, key=lambda n: max(rates[n])[1])  # rate at the most steps
      print(f"  fastest peer from the sweeps at C={chains}: {peer}")
    else:
      calib = {n: run_one(n, chains, 10_000, args) for n in ("jax", "jax_sharded", "blackjax",
                                                               "numpy")}
      calib = {n: r["rate"] for n, r in calib.items() if "rate" in r}
      peer = max(calib, key=calib.get)
      print(f"  fastest peer in a calibration run (C={chains}, T=10^4): {peer} "
            f"({ {n: f'{v:.3g}' for n, v in calib.items()} })")
  out = {}
  ours = [n for n in ("edward_lite", "edward_lite_groups") if n in args.impls]
  for name in ours + [peer]:
    r = run_one(name, chains, steps, args)
    out[name] = r
    if "skipped" in r:
      print(f"  {name:18s} skipped: {r['skipped']}")
      continue
    r["whole_s"] = r["run_s"] + r["compile_s"] + r.get("summary_s", 0.)
    print(f"  {name:18s} {total:.3g} samples in {r['run_s']:8.2f} s run + {r['compile_s']:.2f} s "
          f"compile" + (f" + {r['summary_s']:.2f} s print_summary" if "summary_s" in r else "")
          + f" = {r['whole_s']:8.2f} s  ({r['rate']:.3g} samples/s)  "
          f"mean {r['mean']:.3f} var {r['var']:.3f}")
  for name in ours:
    if "rate" in out[name] and "rate" in out[peer]:
      print(f"  {name} / {peer}: {out[name]['rate'] / out[peer]['rate']:.2f} (samples/s ratio); "
            f"whole call {out[name]['whole_s'] / out[peer]['whole_s']:.2f} of the peer's time")
  failures = []
  for name, r in out.items():
    if "mean" not in r:
      continue
    if steps < args.check_min_steps:
      print(f"  {name}: moments not checked (T < --check-min-steps {args.check_min_steps})")
    elif not (abs(r["mean"] - EXACT_MEAN) <= args.tol_mean and
              abs(r["var"] - EXACT_VAR) <= args.tol_var):
      print(f"  {name}: moments outside tolerance")
      failures.append(f"{name}@billion")
    else:
      print(f"  {name}: moments ok")
  return failures


def paired(args):
  """``--paired N``: the implementations alternated N times at
  ``--sweep-chains`` x ``--sweep-steps`` (compiled first); medians and the
  median of each run's ratio to the last implementation's run beside it."""
  chains, steps = args.sweep_chains, args.sweep_steps
  print(f"\n## Paired: C={chains} x T={steps}, {args.paired} alternated runs each")
  times = {name: [] for name in args.impls}
  for name in args.impls:
    run_one(name, chains, min(steps, 10), args)  # compile (and warm) first
  for _ in range(args.paired):
    for name in args.impls:
      r = run_one(name, chains, steps, args)
      times[name].append(r.get("run_s", np.nan))
  last = args.impls[-1]
  for name in args.impls:
    t = np.asarray(times[name])
    ratio = np.median(np.asarray(times[last]) / t)
    print(f"  {name:26s} median {np.median(t):7.3f} s  min {t.min():7.3f} s  "
          f"{chains * steps / np.median(t):.3g} samples/s  rate / {last}'s: {ratio:.2f}")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--impls", nargs="+", default=list(IMPLS), choices=list(IMPLS))
  parser.add_argument("--sweep-chains", type=int, default=1000,
                      help="chains of sweep (a), growing steps")
  parser.add_argument("--steps", type=int, nargs="+",
                      default=[1_000, 10_000, 100_000, 1_000_000], help="steps of sweep (a)")
  parser.add_argument("--sweep-steps", type=int, default=1000,
                      help="steps of sweep (b), growing chains")
  parser.add_argument("--chains", type=int, nargs="+", default=[100, 1_000, 10_000, 100_000],
                      help="chains of sweep (b)")
  parser.add_argument("--no-sweep", action="store_true", help="skip sweeps (a) and (b)")
  parser.add_argument("--billion", action="store_true",
                      help="time 10^9 samples for edward_lite and the fastest peer")
  parser.add_argument("--billion-chains", type=int, default=1000)
  parser.add_argument("--billion-total", type=float, default=1e9,
                      help="samples for --billion (shrink to test the code path)")
  parser.add_argument("--billion-peer", choices=[n for n in IMPLS if not n.startswith("edward_lite") and n != "tfp"],
                      help="peer for --billion (default: fastest in the sweeps)")
  parser.add_argument("--tfp-max-samples", type=float, default=2.5e8,
                      help="skip TFP sample_chain above this many stored samples (4 bytes each)")
  parser.add_argument("--numpy-max-samples", type=float, default=2e9)
  parser.add_argument("--ed-chunk", type=int, default=1_000_000,
                      help="edward_lite chunk_size (transitions per compiled call)")
  parser.add_argument("--tol-mean", type=float, default=0.3)
  parser.add_argument("--tol-var", type=float, default=1.5)
  parser.add_argument("--check-min-steps", type=int, default=100_000)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--paired", type=int, default=0,
                      help="alternate --impls this many times at --sweep-chains x "
                           "--sweep-steps (no sweeps); ratios to the last of --impls")
  args = parser.parse_args()

  print_header()
  impls = ["edward_lite"] + [n for n in args.impls if n != "edward_lite"] \
      if "edward_lite" in args.impls else list(args.impls)
  failures, tables = [], []
  if args.paired:
    paired(args)
    return
  if not args.no_sweep:
    table_a = sweep(f"(a) {args.sweep_chains} chains, growing steps",
                    [(args.sweep_chains, t) for t in args.steps], impls, args)
    table_b = sweep(f"(b) {args.sweep_steps} steps, growing chains",
                    [(c, args.sweep_steps) for c in args.chains], impls, args)
    tables = [table_a, table_b]
    print_summary("(a) growing steps", table_a, impls)
    print_summary("(b) growing chains", table_b, impls)
    failures += check_moments(table_a, args)
  if args.billion:
    failures += billion(args, tables)
  if failures:
    print(f"\nCHECKS FAILED: {failures}")
    sys.exit(1)
  print("\nall checks passed")


if __name__ == "__main__":
  main()
