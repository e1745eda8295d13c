"""Post-processing linear in the number of chains (issue 32, item 1): the
summary's stuck-chain check takes its medians once per parameter, and many
stuck or apart chains make one note, not one per chain."""

import dataclasses
import warnings

import numpy as np
import pytest

import edward_lite as ed
from edward_lite.mcmc import notes
from edward_lite.mcmc import results as results_module


def _normal():
  ed.Normal(np.zeros(3, np.float32), 1., name="x")
  ed.Normal(0., 1., name="y")


@pytest.fixture(scope="module")
def run():
  return ed.mcmc.sample(_normal, chains=12, warmup=100, draws=100, seed=3, progress=False)


def test_stuck_chain_medians_are_taken_once_per_parameter(run, monkeypatch):
  calls = []
  median = np.median

  def counting(*args, **kwargs):
    calls.append(1)
    return median(*args, **kwargs)

  monkeypatch.setattr(results_module.np, "median", counting)
  moved = dict(run.mean, x=run.mean["x"].copy())
  moved["x"][[2, 7], 1] += 50.  # two chains far out in x[1]
  found = dataclasses.replace(run, mean=moved).stuck_chains()
  assert [(c, kind) for c, kind, _ in found] == [(2, "apart"), (7, "apart")]
  assert "x[1] mean" in found[0][2]
  # Three medians per parameter (means, variances, the frozen threshold),
  # whatever the number of chains (it was three per parameter and chain),
  # and four for the stretches far below in log density (per-chain medians
  # and their median, the median sd, the median chain's lowest stretch).
  assert len(calls) == 3 * len(run.target.names) + 4


def test_many_stuck_chains_make_one_note(run):
  accept = run.chain_accept.copy()
  accept[[1, 3, 4, 5, 8, 9, 10]] = 0.
  many = dataclasses.replace(run, chain_accept=accept)
  assert [c for c, kind, _ in many.stuck_chains() if kind == "stuck"] == [1, 3, 4, 5, 8, 9, 10]
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    many.summary()
  notes = [str(w.message) for w in caught if "stuck" in str(w.message)]
  assert len(notes) == 1 and notes[0].startswith("7 of 12 chains (1, 3, 4, 5, 8, ...) are stuck")
  accept[[3, 4, 5, 8, 9, 10]] = run.chain_accept[[3, 4, 5, 8, 9, 10]]
  few = dataclasses.replace(run, chain_accept=accept)
  with pytest.warns(RuntimeWarning, match=r"Chain 1 is stuck \(acceptance 0.00\)"):
    few.summary()


def _ar1(rng, draws, chains, phi):
  x = np.empty((draws, chains))
  x[0] = rng.normal(size=chains)
  for t in range(1, draws):
    x[t] = phi * x[t - 1] + np.sqrt(1 - phi ** 2) * rng.normal(size=chains)
  return x


def _r_hat_note(run, x):
  """The summary's words on this R-hat of draws ``x`` [draws, chains] of y."""
  many = dataclasses.replace(run, draws=dict(run.draws, y=x.astype(np.float32)),
                             num_draws=x.shape[0], chains=x.shape[1])
  r_hat = float(ed.diagnostics.rhat(x))
  return notes.r_hat_advice(many, r_hat, "y", ())


def test_r_hat_of_many_short_mixed_chains_is_said_to_be_undecided(run):
  """1,000 stationary AR(1) chains (phi 0.9, tau 19) of 200 draws: R-hat
  about sqrt(1 + 2 / 10.5) ~ 1.09 > 1.01 from autocorrelation alone.  The
  same chains shifted apart in two groups of 500 keep the plain warning."""
  rng = np.random.default_rng(0)
  x = _ar1(rng, 200, 1000, 0.9)
  r_hat = float(ed.diagnostics.rhat(x))
  assert 1.03 < r_hat < 1.2  # what stationary chains give, not a failure to mix
  note = _r_hat_note(run, x)
  assert "with 200 draws per chain" in note and "cannot tell" in note, note
  x[:, :500] += 1.5
  note = _r_hat_note(run, x)
  assert "have not mixed" in note, note
  # Four long chains as autocorrelated (ESS ~50 a chain in 1,000 draws): they
  # mix badly, and the plain warning stays.
  long = _ar1(rng, 1000, 4, 0.95)
  assert "have not mixed" in _r_hat_note(run, long)


def test_ebfmi_of_many_short_chains_is_read_pooled():
  """E-BFMI of energies with lag-1 autocorrelation phi is about 2 (1 - phi).
  10^4 well-explored chains (phi 0.5, E-BFMI ~1) of 20 draws: chains one by
  one fall below 0.3 by chance, pooled they do not, so no warning; energies
  that explore poorly (phi 0.9, E-BFMI ~0.2) are warned about pooled; long
  chains are read one by one, as Stan does."""
  rng = np.random.default_rng(1)
  good = _ar1(rng, 20, 10_000, 0.5)
  assert np.sum(ed.diagnostics.ebfmi(good).numpy() < 0.3) >= 5  # chance, one by one
  assert 0.9 < float(ed.diagnostics.ebfmi(good, pooled=True)) < 1.  # 19/20 of 1
  assert notes.ebfmi_note(good) is None
  poor = notes.ebfmi_note(_ar1(rng, 20, 10_000, 0.9))
  assert poor.startswith("E-BFMI of the 10000 chains pooled is 0.19,"), poor
  long = _ar1(rng, 1000, 4, 0.5)
  long[:, 2] = _ar1(rng, 1000, 1, 0.95)[:, 0]
  assert notes.ebfmi_note(long).startswith("E-BFMI below 0.3 in 1 chain(s)")


def test_divergence_note_names_the_kernel_that_ran():
  """The advice raises the target acceptance of the kernel that ran, above
  its own (a ChEES run was told to build ``NUTS(target_accept=0.95)``),
  and from many chains states the divergences' share of the transitions:
  3,356 divergences in 10^5 chains of 200 draws are 0.017% of them."""
  few = np.array([2, 0, 1, 0])
  nuts = notes.divergence_note(ed.mcmc.NUTS(), few, 500)
  assert nuts.startswith("3 divergent transitions after warmup in 2 of 4 chains;"), nuts
  assert "from 0.8 (e.g. kernel=ed.mcmc.NUTS(target_accept=0.95), or 0.99" in nuts
  assert "ChEES(target_accept=0.8)" in notes.divergence_note(ed.mcmc.ChEES(), few, 500)
  assert "NUTS(target_accept=0.99))" in notes.divergence_note(
      ed.mcmc.NUTS(target_accept=0.95), few, 500)
  saturated = notes.divergence_note(ed.mcmc.NUTS(target_accept=0.99), few, 500)
  assert "target_accept" not in saturated and "reparameterize" in saturated
  many = np.zeros(100_000, np.int64)
  chains = np.random.default_rng(0).choice(100_000, 3000, replace=False)
  many[chains] = 1
  many[chains[:356]] = 2
  chees = notes.divergence_note(ed.mcmc.ChEES(), many, 200)
  assert chees.startswith("3356 divergent transitions after warmup in 3000 of 100000 chains "
                          "(0.017% of transitions);"), chees
