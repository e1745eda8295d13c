"""Public reference posteriors (posteriordb) at the sampler's defaults (issue 29).

Four posteriors that the diagonal metric of Stan's windows needed many
gradients for (strongly correlated regressions; eight schools), and ARMA(1,1)
on real data, where a chain started at ``|theta| > 1`` used to stay stuck:
no stuck chain, max R-hat below 1.01, every mean and sd within 4 Monte Carlo
standard errors of the long Stan run, and a short warmup.  The full sweep
(4, 8 and 64 chains, three seeds, and the peers side by side) is
``benchmarks/adaptation.py``.
"""

import numpy as np
import pytest

import edward_lite as ed
import posteriordb_models as pdb


def _check(name, chains, seed):
  p = pdb.load(name)
  post = ed.mcmc.sample(p.program, *p.args, observed=p.observed, chains=chains, seed=seed,
                        progress=False)
  assert post.stuck_chains() == []
  draws = {k: np.asarray(v, np.float64) for k, v in p.values(post.draws).items()}
  rhat = {k: float(np.max(ed.diagnostics.rhat(v))) for k, v in draws.items()}
  assert max(rhat.values()) < 1.01, rhat
  for label, (z, ratio, z_sd) in pdb.compare(p, post.draws, with_sd=True).items():
    assert abs(z) < pdb.Z_MAX and abs(z_sd) < pdb.Z_MAX, (label, z, ratio, z_sd)
  return post


@pytest.mark.slow
@pytest.mark.parametrize("name", ["kidiq", "earnings", "diamonds", "eight_schools"])
def test_reference_posterior_at_defaults(name):
  post = _check(name, chains=4, seed=0)
  # The adaptive warmup ended well before its bound of 1000 iterations.
  assert post.warmup < 600


@pytest.mark.long  # the default run keeps the battery's simulated arma11
def test_arma_on_real_data_strands_no_chain_at_8_chains():
  """Seed 0 at 8 chains started a chain at theta = 1.25, whose log density
  overflows: warmup moves it to a healthy chain's state (``restarts``)."""
  _check("arma", chains=8, seed=0)


def test_a_references_sd_error_is_its_own_or_from_its_ess_and_the_kurtosis():
  # arma11's reference gives no MCSE of its sd: it is derived from the
  # reference's ESS and the checked draws' kurtosis, and must match the sd of
  # the sd over repeated samples of ESS independent draws, computed here by
  # simulation, for a Gaussian (kurtosis 3) and a Laplace (kurtosis 6).
  rng = np.random.default_rng(0)
  n, reps = 1000, 4000
  for draw, sd_true in [(rng.standard_normal, 1.), (rng.laplace, np.sqrt(2.))]:
    spread = np.std([draw(size=n).std(ddof=1) for _ in range(reps)])  # sd of the sd over samples
    derived = pdb.reference_mcse_sd(sd_true, sd_true / np.sqrt(n), 0., draw(size=200_000))
    np.testing.assert_allclose(derived, spread, rtol=0.06)
  assert pdb.reference_mcse_sd(1., 0.01, 0.003, rng.standard_normal(100)) == 0.003  # its own
  assert pdb.reference_mcse_sd(1., 0., 0., rng.standard_normal(100)) == 0.  # an exact reference
