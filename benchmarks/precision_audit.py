"""Precision of the result layer's reductions over draws, chains, data and
steps (issue 52, "right at any count"): each reduction as it was and as it
is, against a float64 NumPy reference on the same float32 values.  "Before"
runs the library with a float32 state where it still takes one (section 1),
else the old expression, written out here on the same values.

1. The streaming statistics (``ed.mcmc.streaming``) as the sampler updates
   them inside its compiled loop (``run_begin``, ``accumulate``,
   ``run_end``, ``stream_close``, in segments that end at a batch's end or
   the half's, as ``chunk.run_chunk`` runs them), fed ``n`` = 10^4, 10^5,
   10^6 float32 draws per chain of 4 chains of three columns: iid N(1, 2^2),
   an AR(1) (rho = 0.9) with the same marginal, and iid N(1000, 1).  A
   float32 Welford state (as before, written out here), the same with
   compensated (TwoSum) updates (what a device without float64 would
   need), and the library's float64 shifted sums (as now).  Errors: the chains' means (also in units of their MCSE) and
   variances (``stream_summary``), the batch means (``batch_sums / b``,
   also in units of their sd), and the ESS of the mean; the largest over
   chains.
2. ``stream_summary``'s reductions over 10^6 chains (mean, sd, ESS) of a
   float32 state: NumPy's float32 sums over the strided chain axis, and now.
3. The per-chain acceptance totals folded over chunks on the host
   (``run.fold_totals``; ``MCMCResult.chain_accept``), 10^6 one-transition
   chunks.
4. VI: a step's ELBO estimate (``elbo.elbo_and_gradients``), the mean of
   10^4 terms ``log p - log q`` near -10^6 compiled by XLA, with ``q = p``
   up to that constant (a good fit of much data: the Monte Carlo error is
   round-off); a dataset fit's full-data log density summed over 10^4
   batches (``DatasetBatches.full_log_prob_fn``); ``ed.vi.train``'s
   held-out ELBO of a batch of 10^7 rows (``train_result.Evaluator``); the
   PSIS-weighted sd of ``VIResult.summary`` (``sum w x^2 - mean^2`` and the
   centred sum, float64 draws near 10^8 with sd 1).

Prints two Markdown tables (every reduction; the streaming statistics by
draws per chain).  About a minute on one CPU core:

    python benchmarks/precision_audit.py
"""

import math

import numpy as np
import tensorflow as tf

import edward_lite as ed
from edward_lite.mcmc import adaptation
from edward_lite.mcmc import run as mcmc_run
from edward_lite.mcmc import streaming
from edward_lite.vi import elbo, families, minibatch, surrogates

CHAINS = 4
ROWS = []  # (where, reduces over, before dtype, after dtype, scale, error before, error after)


def row(where, over, before, after, scale, err_before, err_after):
  ROWS.append((where, over, before, after, scale, err_before, err_after))


def rel(estimate, reference):
  """Largest relative error ``|est - ref| / |ref|``."""
  estimate, reference = np.asarray(estimate, np.float64), np.asarray(reference, np.float64)
  return float(np.max(np.abs(estimate - reference) / np.abs(reference)))


# -- 1. the streaming statistics inside the compiled loop ----------------------------

def draws(n, seed=0):
  """float32 ``[n, C, 3]``: iid N(1, 4), AR(1) rho 0.9 N(1, 4), iid N(1000, 1)."""
  rng = np.random.default_rng(seed)
  e = rng.normal(size=(n, CHAINS, 3))
  x = np.empty_like(e)
  x[:, :, 0] = 1. + 2. * e[:, :, 0]
  x[:, :, 2] = 1000. + e[:, :, 2]
  rho, block, prev = 0.9, 100, e[0, :, 1]  # AR(1) in blocks: closed form inside each
  scaled = e[:, :, 1] * math.sqrt(1. - rho ** 2)
  for start in range(0, n, block):
    part = scaled[start:start + block]
    t = np.arange(1, len(part) + 1)[:, None]
    ar = rho ** t * (prev + np.cumsum(part * rho ** -t, axis=0))
    x[start:start + block, :, 1], prev = 1. + 2. * ar, ar[-1]
  return x.astype(np.float32)


@tf.function(jit_compile=True, autograph=False)
def stream(xs, state, split_at):
  """The sampler's segments over ``xs [n, C, D]``."""
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


def two_sum(hi, lo, y):
  """``(hi, lo) + y`` with ``hi + lo`` carrying the rounding error (Knuth's TwoSum)."""
  s = hi + y
  bb = s - hi
  return s, lo + ((hi - (s - bb)) + (y - bb))


@tf.function(jit_compile=True, autograph=False)
def welford32(xs, b, compensate):
  """float32 Welford moments and batch sums of ``xs [n, C, D]`` over the
  whole run, as the sampler updated them before (``compensate=False``), or
  with every running sum a compensated pair (the float32 option)."""
  add = two_sum if compensate else lambda hi, lo, y: (hi + y, lo)
  n = tf.shape(xs)[0]
  zeros = tf.zeros_like(xs[0])
  sums = tf.zeros([streaming.NUM_BATCHES, *xs.shape[1:]], xs.dtype)

  def body(i, mean, mean_lo, m2, m2_lo, part, part_lo, sums):
    x = xs[i]
    count = tf.cast(i + 1, xs.dtype)
    delta = (x - mean) - mean_lo
    mean, mean_lo = add(mean, mean_lo, delta / count)
    m2, m2_lo = add(m2, m2_lo, delta * ((x - mean) - mean_lo))
    part, part_lo = add(part, part_lo, x)
    full = tf.equal((i + 1) % b, 0)
    sums = tf.where(full, tf.tensor_scatter_nd_update(sums, [[(i + 1) // b - 1]],
                                                      (part + part_lo)[None]), sums)
    part, part_lo = tf.where(full, zeros, part), tf.where(full, zeros, part_lo)
    return i + 1, mean, mean_lo, m2, m2_lo, part, part_lo, sums

  out = tf.while_loop(lambda i, *_: i < n, body, (0, zeros, zeros, zeros, zeros, zeros, zeros,
                                                  sums))
  return out[1] + out[2], (out[3] + out[4]) / tf.cast(n - 1, xs.dtype), out[7]


def ess_of(chain_mean, chain_var, batch_means, b, n):
  """The streamed ESS formula (module docstring of ``streaming``) in float64."""
  chains = chain_mean.shape[0]
  grand = chain_mean.mean(0)
  pooled = ((n - 1) * chain_var.sum(0) + n * ((chain_mean - grand) ** 2).sum(0)) / (
      chains * n - 1)
  sigma2 = (b * batch_means.var(axis=0, ddof=1)).mean(0)
  return chains * n * pooled / sigma2


def streaming_drift(sizes):
  """Section 1: errors per column and state dtype."""
  columns = ["N(1, 2^2)", "AR(1) 0.9", "N(1000, 1)"]
  results = {}
  for n in sizes:
    x = draws(n)
    x64 = x.astype(np.float64)
    ref_mean, ref_var = x64.mean(0), x64.var(0, ddof=1)

    def reference_batches(b, filled):
      return x64[:filled * b].reshape(filled, b, CHAINS, 3).mean(1)  # [a, C, D]

    xs = tf.constant(x)
    b0 = -(-n // streaming.NUM_BATCHES)  # the sampler's first b
    for name in ("float32", "float32 TwoSum", "float64"):
      if name.startswith("float32"):  # no merging: b0 slots of b0 draws
        mean, var, sums = (t.numpy() for t in welford32(xs, tf.constant(b0),
                                                        name == "float32 TwoSum"))
        b, filled = b0, n // b0
        bm = sums[:filled].astype(np.float64) / b
        ess = ess_of(mean.astype(np.float64), var.astype(np.float64), bm, b, n)
      else:
        init = streaming.stream_init(CHAINS, 3, tf.float32, batch_size=b0)
        state = stream(xs, init, tf.constant(n // 2))
        out = streaming.stream_summary(state)
        mean, var, ess = out["chain_mean"], out["variance"], out["ess"]
        b, filled = int(state.batch_size), int(state.filled)  # K slots full: b doubled
        bm = np.asarray(state.batch_sums[:filled], np.float64) / b
      ref_bm = reference_batches(b, filled)
      ref_ess = ess_of(ref_mean, ref_var, ref_bm, b, n)
      mcse = np.sqrt(b * ref_bm.var(axis=0, ddof=1) / n)  # each chain's mean's [C, D]
      for d, column in enumerate(columns):
        results[(n, name, column)] = dict(
            mean=rel(mean[:, d], ref_mean[:, d]), var=rel(var[:, d], ref_var[:, d]),
            mean_in_mcse=float(np.max(np.abs(mean[:, d] - ref_mean[:, d]) / mcse[:, d])),
            batch_mean=rel(bm[:, :, d], ref_bm[:, :, d]),
            batch_mean_in_sd=float(np.max(np.abs(bm[:, :, d] - ref_bm[:, :, d]))
                                   / ref_bm[:, :, d].std(axis=0, ddof=1).mean()),
            ess=rel(ess[d], ref_ess[d]))
  return columns, results


def print_drift(sizes, columns, results):
  print("\n### Streaming statistics: float32 Welford and batch sums drift\n")
  print("Largest relative error over 4 chains (the chain means also in units of their "
        "MCSE, the batch means in units of their own sd); n draws per chain.\n")
  print("| n per chain | column | state | mean | mean / its MCSE | variance | batch means | "
        "batch means / their sd | ESS |")
  print("|---|---|---|---|---|---|---|---|---|")
  for n in sizes:
    for column in columns:
      for name in ("float32", "float32 TwoSum", "float64"):
        r = results[(n, name, column)]
        print(f"| 10^{round(math.log10(n))} | {column} | {name} | {r['mean']:.1e} | "
              f"{r['mean_in_mcse']:.1e} | {r['var']:.1e} | {r['batch_mean']:.1e} | {r['batch_mean_in_sd']:.1e} | "
              f"{r['ess']:.1e} |")


# -- 2. stream_summary over many chains --------------------------------------------

def summary_over_chains(chains=10 ** 6, dim=4, n=1000, seed=1):
  """Section 2: a float32 state of ``chains`` chains, summarized as it is
  (float32 arrays, the old reductions) and in float64."""
  rng = np.random.default_rng(seed)
  half = n // 2
  means = (1. + 0.05 * rng.standard_normal((2, chains, dim))).astype(np.float32)
  m2s = ((half - 1) * rng.chisquare(half - 1, (2, chains, dim)) / (half - 1)).astype(np.float32)
  sums = (half // 4 * (1. + 0.1 * rng.standard_normal((8, chains, dim)))).astype(np.float32)
  state = streaming.StreamState(
      adaptation.WelfordState(np.float32([half, half]), means, m2s), sums,
      np.zeros((chains, dim), np.float32), 0, half // 4, 8)
  state64 = tf.nest.map_structure(
      lambda a: np.asarray(a, np.float64) if np.asarray(a).dtype == np.float32 else a, state)
  reference = streaming.stream_summary(state64)
  # As before: the same formulas on the float32 arrays (NumPy reduces in their dtype).
  counts, n_all = state.halves.count, np.float32(n)
  chain_mean = (counts[0] * means[0] + counts[1] * means[1]) / n_all
  chain_m2 = m2s[0] + m2s[1] + (counts[0] * counts[1] / n_all) * (means[1] - means[0]) ** 2
  grand = chain_mean.mean(axis=0)
  pooled = (chain_m2.sum(axis=0) + n_all * ((chain_mean - grand) ** 2).sum(axis=0)) / (
      chains * n_all - 1)
  batch_means = sums / np.float32(half // 4)
  sigma2 = (np.float32(half // 4) * batch_means.var(axis=0, ddof=1)).mean(axis=0)
  old = dict(mean=grand, sd=np.sqrt(pooled), ess=chains * n_all * pooled / sigma2)
  new = streaming.stream_summary(state)  # the float32 state, as it is summarized now
  for key in ("mean", "sd", "ess"):
    row(f"mcmc/streaming.py:stream_summary ({key})", "chains", "float32", "float64",
        f"10^{round(math.log10(chains))} chains x {dim}", rel(old[key], reference[key]),
        rel(new[key], reference[key]))


# -- 3. acceptance totals over chunks --------------------------------------------------

def accept_totals(chunks=10 ** 6, chains=256, seed=2):
  """Section 3: ``fold_totals`` over ``chunks`` one-transition chunks."""
  rng = np.random.default_rng(seed)
  totals, reference = None, np.zeros(chains)
  old = np.zeros(chains, np.float32)
  for _ in range(chunks):
    accept = rng.uniform(0.6, 1., chains).astype(np.float32)
    totals = mcmc_run.fold_totals(totals, {"accept_prob": accept}, False)
    old = old + accept  # as before: a float32 running total
    reference += accept
  row("mcmc/run.py:fold_totals (accept_prob)", "chunks (draws)", "float32", "float64",
      f"10^{round(math.log10(chunks))} chunks", rel(old, reference),
      rel(totals["sampling"]["accept_prob"], reference))


# -- 4. VI ---------------------------------------------------------------------------

def big_data_fit():
  x = ed.Normal(0., 1., name="x")
  ed.Factor(-1e6 + 0. * x, name="data")  # as a good fit of much data: log p - log q ~ -1e6
  return x


def vi_elbo(samples=10 ** 4):
  """Section 4a: one step's ELBO estimate over ``samples`` draws (q = p up to
  the constant, so the Monte Carlo error is round-off)."""
  target = ed.make_target(big_data_fit)
  surrogate = surrogates.FlatSurrogate(families.get_family("meanfield"), target,
                                       np.zeros([1], np.float32), np.ones([1]))

  @tf.function(jit_compile=True, autograph=False)
  def step():
    value, _, u, log_q = elbo.elbo_and_gradients(surrogate, target, tf.constant([1, 2]),
                                                 samples, False, tf.constant(0))
    log_p = surrogate.model_log_prob(target, u)
    return value, tf.reduce_mean(log_p - log_q), log_p, log_q  # now, as before, the terms

  now, old, log_p, log_q = (t.numpy() for t in step())
  terms = log_p.astype(np.float64) - log_q
  reference, mc_error = terms.mean(), terms.std() / math.sqrt(samples)
  row("vi/elbo.py:elbo_and_gradients (VIResult.elbo)", "draws", "model's (float32)", "float64",
      f"10^{round(math.log10(samples))} draws near -1e6 (error before {abs(old - reference):.2g}"
      f" nats, Monte Carlo error {mc_error:.1g})", rel(old, reference), rel(now, reference))


def regression(x):
  w = ed.Normal(0., 1., sample_shape=2, name="w")
  b = ed.Normal(0., 1., name="b")
  return ed.Normal(tf.linalg.matvec(x, w) + b, 1., name="y")


def vi_dataset(num_batches=10 ** 4, size=10, seed=3):
  """Section 4b: the full-data log density of a dataset fit over ``num_batches``."""
  rows = num_batches * size
  rng = np.random.default_rng(seed)
  data = {"x": rng.normal(size=(rows, 2)).astype(np.float32),
          "y": (200. + rng.normal(size=rows)).astype(np.float32)}
  dataset = tf.data.Dataset.from_tensor_slices(data).batch(size)
  batches = minibatch.DatasetBatches(regression, (), {}, None, dataset, rows)
  full = batches.full_log_prob_fn(surrogates.FlatSurrogate.model_log_prob, batches.target)
  u = tf.random.stateless_normal([3, 3], [5, 6])
  term = tf.function(lambda u, batch, scale: batches.target_for(
      batches.target, batch, scale).log_prob_flat(u), jit_compile=True, autograph=False)
  prior = term(u, next(iter(dataset)), 0.).numpy()
  reference, old = prior.astype(np.float64), prior
  for batch in dataset:
    value = term(u, batch, 1.).numpy()
    reference = reference + (value.astype(np.float64) - prior)
    old = old + (value - prior)  # as before: a float32 running total
  row("vi/minibatch.py:DatasetBatches.full_log_prob_fn (importance weights)", "batches (data)",
      "model's (float32)", "float64", f"10^{round(math.log10(num_batches))} batches, total "
      f"{reference[0]:.0e}", rel(old, reference), rel(full(u).numpy(), reference))


def vi_train_rows(rows=10 ** 7, seed=4):
  """Section 4c: ``ed.vi.train``'s held-out ELBO of one batch of ``rows``."""
  loc, log_scale = tf.Variable(3.), tf.Variable(0.5)

  def model(x):
    return ed.Normal(loc + tf.zeros_like(x), tf.exp(log_scale), name="x")

  rng = np.random.default_rng(seed)
  small = (3. + rng.standard_normal(16)).astype(np.float32)
  result = ed.vi.train(model, None, tf.data.Dataset.from_tensor_slices({"x": small}).batch(16),
                       steps=1, progress=False)
  x = (3. + np.exp(0.5) * rng.standard_normal(rows)).astype(np.float32)
  now = result.elbo(tf.data.Dataset.from_tensor_slices({"x": x}).batch(rows))["elbo"]
  per_row = ed.Normal(loc, tf.exp(log_scale)).distribution.log_prob(x)
  old = tf.function(lambda v: tf.reduce_sum(v), jit_compile=True)(per_row).numpy() / rows
  reference = per_row.numpy().astype(np.float64).mean()
  row("vi/train_result.py:Evaluator (TrainResult.elbo)", "rows (data)", "model's (float32)",
      "float64", f"10^{round(math.log10(rows))} rows", rel(old, reference), rel(now, reference))


def vi_psis_sd(draws=4000, seed=5):
  """Section 4d: the PSIS-weighted sd of float64 draws near 1e8 with sd 1."""
  rng = np.random.default_rng(seed)
  x = 1e8 + rng.standard_normal(draws)
  w = np.exp(ed.psis.psis(rng.normal(0., 0.1, draws))[0])
  mean = np.sum(w * x)
  old = np.sqrt(max(np.sum(w * x ** 2) - mean ** 2, 0.))
  now = np.sqrt(np.sum(w * (x - mean) ** 2))
  # The reference: the centred sum about the float64 mean of exact deviations.
  reference = np.sqrt(np.sum(w * ((x - 1e8) - np.sum(w * (x - 1e8))) ** 2))
  row("vi/results.py:VIResult.summary (psis_sd)", "draws", "float64, uncentred",
      "float64, centred", f"{draws} draws, mean 1e8, sd 1", rel(old, reference),
      rel(now, reference))


def main():
  tf.get_logger().setLevel("ERROR")  # the loop is traced once per size and dtype, by design
  sizes = [10 ** 4, 10 ** 5, 10 ** 6]
  columns, results = streaming_drift(sizes)
  n = sizes[-1]
  for column in columns:
    before, after = results[(n, "float32", column)], results[(n, "float64", column)]
    for key, label in (("mean", "chain means"), ("var", "chain variances"),
                       ("batch_mean", "batch means"), ("ess", "ESS")):
      row(f"mcmc/streaming.py:accumulate, stream_close ({label}, {column})", "draws",
          "draws' (float32)", "float64", "10^6 draws x 4 chains", before[key], after[key])
  summary_over_chains()
  accept_totals(10 ** 6)
  vi_elbo()
  vi_dataset()
  vi_train_rows()
  vi_psis_sd()
  print("| reduction | over | dtype before | dtype after | scale | rel. error before | "
        "rel. error after |")
  print("|---|---|---|---|---|---|---|")
  for where, over, before, after, scale, eb, ea in ROWS:
    print(f"| {where} | {over} | {before} | {after} | {scale} | {eb:.1e} | {ea:.1e} |")
  print_drift(sizes, columns, results)


if __name__ == "__main__":
  main()
