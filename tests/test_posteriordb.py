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
