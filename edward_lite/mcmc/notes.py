"""What the summary warns about: chains that did not sample the posterior
with the others, R-hat and what it can tell, bulk ESS, divergences, saturated
trees and E-BFMI -- read from an ``MCMCResult`` (its per-chain totals,
streamed moments, kept draws and statistics)."""

import math
import statistics

import numpy as np

from edward_lite.analysis import diagnostics
from edward_lite.analysis.chains import (FALSE_ALARM, MANY_CHAINS, chance_bound,
                                         stretches_far_below)

__all__ = ["stuck_chains", "notes", "convergence_notes", "beyond_autocorrelation", "r_hat_advice",
           "ebfmi_note", "divergence_note", "MAX_CHAIN_NOTES", "STUCK_ACCEPT",
           "FAR_OUT", "SHORT_CHAIN", "ADVICE_CHAINS"]

# Fewer draws a chain than this make a chain short for R-hat's 1.01 rule
# (Vehtari et al. 2021 checked it with chains of 1,000 draws).
SHORT_CHAIN = 500
# Chains whose own ESS the R-hat advice reads, at most (a stated subset),
# for at most this many scalars; below MIN_CHAIN_ESS one chain cannot tell.
ADVICE_CHAINS = 256
ADVICE_SCALARS = 10
MIN_CHAIN_ESS = 5.
# From MANY_CHAINS chains on, split R-hat^2 - 1 beyond this many times what
# one chain's autocorrelation gives says the chains sample different regions.
BEYOND = 4.
# A drift smaller than this many posterior sds between the halves is left
# unsaid (``convergence_notes``).
DRIFT_SD = 0.05
# Stuck or apart chains named one by one in the summary, up to this many.
MAX_CHAIN_NOTES = 5
STUCK_ACCEPT = 0.05  # a chain accepting less than this after warmup may be stuck
FAR_OUT = 5.  # a chain mean this many within-chain sds from the chains' median is far out
# A far chain with this many divergences, and this many times the mean chain's,
# diverged where the others did not (``_diverges_beyond_the_others``).
DIVERGING_MIN = 5
DIVERGING_SHARE = 10.


def stuck_chains(result):
  """Chains that did not sample the posterior with the others.

  A chain is *stuck* when, after warmup, its mean acceptance is below
  ``STUCK_ACCEPT`` (``_accepts_too_little``), most of its transitions
  diverge, or (with 3 or more chains) some parameter barely moves in it
  (variance below 1/100 of the median chain's) while its mean lies more
  than ``FAR_OUT`` median within-chain sds from the median of the chains'
  means.  It is *apart* when its mean lies that far out with a healthy
  variance (another mode, or not yet mixed), or when a stretch of its
  draws has a mean log density far below the other chains'
  (``analysis.chains.stretches_far_below``: a chain that began sampling in
  a minor mode and left it later moves the run's moments without moving
  its R-hat).  An apart chain that also carries many times the mean
  chain's divergences (``_diverges_beyond_the_others``) is *diverging*: it
  reached a region whose curvature the step size does not fit, which a
  unimodal posterior's tail can be, so its note does not say multimodal.

  Each test holds at any number of chains: from ``MANY_CHAINS`` on, a
  chain must also lie beyond what chance gives one of that many chains
  (``chance_bound`` of the distances of the chains' means from their
  median, over every chain and scalar), so a run of 10^5 chains that all
  sample well raises no warning, with probability ``1 - FALSE_ALARM``.

  The medians and quantiles are taken once per parameter, so the cost is
  linear in the number of chains (a million chains take about a second).

  Returns:
    list of ``(chain, kind, reason)`` with kind ``"stuck"``, ``"apart"`` or
    ``"diverging"``.
  """
  low_accept = _accepts_too_little(result.chain_accept, result.num_draws)
  divergent = result.chain_divergent > 0.5
  count, many_divergent = _diverges_beyond_the_others(result)
  # Per chain, the first parameter (in the target's order) whose mean is far
  # out, at its component farthest out: chain -> (words, frozen there).
  far = {}
  if result.chains >= 3:
    undecided = np.ones(result.chains, bool)
    tests = result.chains * sum(int(np.prod(result.mean[n].shape[1:])) for n in
                                result.target.names)
    for name in result.target.names:
      m = result.mean[name].reshape(result.chains, -1)
      v = result.variance[name].reshape(result.chains, -1)
      center, spread = np.median(m, axis=0), np.sqrt(np.median(v, axis=0))
      z = np.abs(m - center) / np.where(spread > 0, spread, np.inf)
      far_out = z > FAR_OUT
      if result.chains >= MANY_CHAINS:  # and farther out than chance takes a chain mean
        distance = np.abs(m - center)
        far_out &= distance > np.array([chance_bound(d, tests) for d in distance.T])
      hit = undecided & np.any(far_out, axis=1)
      undecided &= ~hit
      frozen_below = 0.01 * np.median(v, axis=0)
      for c in np.flatnonzero(hit):
        j = int(np.argmax(z[c]))
        label = name + (f"[{j}]" if m.shape[1] > 1 else "")
        far[c] = (f"{label} mean {m[c, j]:.3g} against {center[j]:.3g} in the other chains",
                  bool(v[c, j] < frozen_below[j]))
    for c, words in stretches_far_below(result.sample_stats.get("log_prob")).items():
      far.setdefault(c, (words, False))
  out = []
  for c in sorted(set(np.flatnonzero(low_accept | divergent).tolist()) | set(far)):
    reasons = []
    if low_accept[c]:
      reasons.append(f"acceptance {result.chain_accept[c]:.2f}")
    if divergent[c]:
      reasons.append(f"{100 * result.chain_divergent[c]:.0f}% of transitions divergent")
    where, frozen = far.get(c, (None, False))
    kind = "stuck" if reasons or frozen else "apart"
    if kind == "apart" and many_divergent[c]:
      kind = "diverging"
      reasons.append(f"{int(count[c])} of the run's {int(count.sum())} divergent transitions")
    out.append((int(c), kind, ", ".join(reasons + ([where] if where else []))))
  return out


def _diverges_beyond_the_others(result):
  """``([C] divergence counts after warmup, [C] bools)``: chains with at
  least ``DIVERGING_SHARE`` times the mean chain's divergences and at least
  ``DIVERGING_MIN`` of them.  A chain far out *and* diverging there reached a
  region whose curvature the run's step size does not fit (a heavy tail, a
  funnel's neck, another mode): ChEES's eight schools (non-centred) at 10^5
  chains had one chain at tau's mean 22 (the others' 3.6) with 31 of the run's
  2,050 divergences, 1,550 times the mean chain's."""
  count = np.rint(np.asarray(result.chain_divergent, np.float64) * result.num_draws)
  mean = count.mean() if count.size else 0.
  return count, (count >= DIVERGING_MIN) & (count >= DIVERGING_SHARE * mean)


def _accepts_too_little(accept, draws):
  """``[C]`` bools: chains whose mean acceptance after warmup is below
  ``STUCK_ACCEPT`` and, from ``MANY_CHAINS`` chains on, below what chance
  gives one of them: ``draws`` transitions accepting like the median chain
  fall to a chain's mean ``a`` with probability at most
  ``exp(-draws KL(a || median))`` (Chernoff), which must be below
  ``FALSE_ALARM / chains``.  (At 10^5 chains of 20 random-walk draws
  accepting 30%, about 760 accept at most one.)"""
  low = accept < STUCK_ACCEPT
  if len(accept) < MANY_CHAINS or not low.any():
    return low
  a, m = np.clip(accept, 1e-12, 1. - 1e-12), float(np.median(accept))
  if not 0. < m < 1.:
    return low
  kl = a * np.log(a / m) + (1. - a) * np.log((1. - a) / (1. - m))
  return low & (draws * kl > np.log(len(accept) / FALSE_ALARM))


# Over 1% of the chains with a final step size more than this factor from
# the median chain's adapted to regions of another curvature (geometry_hint).
STEP_SPREAD = 4.


def notes(result, rows, keys):
  """The summary's warnings: stuck and apart chains, R-hat, bulk ESS,
  divergences, saturated trees, E-BFMI.  ``rows``: ``(label, statistics)``
  of the checked scalars; ``keys``: their ``(name, index)``."""
  said = []
  found = stuck_chains(result)
  for kind, one, many, advice in (
      ("stuck", "is stuck", "are stuck",
       "it never left a region where the density is very steep, so its draws are not from "
       "the posterior; sample with per-chain adaptation (pooled=None, the default), longer "
       "warmup, or init= values inside the posterior's bulk."),
      ("apart", "sampled apart from the others", "sampled apart from the others",
       "the posterior may be multimodal or the chains have not mixed; run longer or "
       "reparameterize."),
      ("diverging", "diverged where the others did not", "diverged where the others did not",
       "it reached a region whose curvature the step size does not fit (a heavy tail, a "
       "funnel's neck or another mode), so its draws there are biased: raise "
       "target_accept, reparameterize, or sample through a flow (adapt_metric='flow', "
       "docs/guide/flow.md).")):
    chains = [(c, reason) for c, k, reason in found if k == kind]
    if len(chains) <= MAX_CHAIN_NOTES:
      said += [f"Chain {c} {one} ({reason}): {advice}" for c, reason in chains]
    else:  # one note, not one per chain: a million chains may hold thousands
      first = ", ".join(str(c) for c, _ in chains[:MAX_CHAIN_NOTES])
      said.append(f"{len(chains)} of {result.chains} chains ({first}, ...) {many} "
                   f"(chain {chains[0][0]}: {chains[0][1]}): {advice}")
  said += convergence_notes(result, rows, keys)
  ess = np.array([r["ess_bulk"] for _, r in rows])
  if np.any(ess < 100 * min(result.chains, 4)):
    worst = rows[int(np.nanargmin(ess))][0]
    said.append(f"{int(np.sum(ess < 100 * min(result.chains, 4)))} parameter(s) have bulk "
                 f"ESS below {100 * min(result.chains, 4)} (worst: {worst}, "
                 f"{np.nanmin(ess):.0f}); estimates are noisy: draw more.")
  signs = []  # of curvature that changes with position (geometry_hint)
  div = result.divergences
  if div.sum() > 0:
    signs.append("divergences")
    said.append(divergence_note(result.kernel, div, result.num_draws))
  at_max = None if result.chain_max_depth is None else np.mean(result.chain_max_depth)
  if at_max is not None and at_max > 0.01:
    signs.append("trees at the maximum depth")
    said.append(f"{100 * at_max:.1f}% of transitions hit the maximum tree depth "
                 f"{result.kernel.max_tree_depth}; raise max_tree_depth.")
  energy = result.sample_stats.get("energy")
  note = ebfmi_note(energy) if energy is not None and len(energy) >= 4 else None
  if note:
    signs.append("low E-BFMI")
  step = np.asarray(result.step_size, np.float64).reshape(-1)
  if step.size > 1 and np.all(step > 0):
    ratio = step / np.median(step)
    apart = (ratio > STEP_SPREAD) | (ratio < 1. / STEP_SPREAD)
    if np.mean(apart) > 0.01:
      signs.append(f"step sizes of {int(apart.sum())} chain(s) over {STEP_SPREAD:g}x from the "
                   "others'")
  hint = geometry_hint(result, signs)
  return said + ([note] if note else []) + ([hint] if hint else [])


def divergence_note(kernel, div, draws):
  """The warning on divergent transitions after warmup, ``div`` ``[C]``
  counts per chain of ``draws`` transitions each: how many, in how many
  chains (and from ``MANY_CHAINS`` chains on their share of the
  transitions: 3,356 of 10^5 ChEES chains' 2 x 10^7 are 0.017%), and the
  way out for the kernel that ran: a ``target_accept`` above its own
  (NUTS 0.8 -> 0.95, ChEES 0.651 -> 0.8), or a reparameterization."""
  total, chains = int(div.sum()), int(np.count_nonzero(div))
  where = "" if len(div) == 1 else f" in {chains} of {len(div)} chains"
  if len(div) >= MANY_CHAINS:
    where += f" ({100. * total / (len(div) * max(draws, 1)):.2g}% of transitions)"
  way = "reparameterize (e.g. non-centered)"
  current = getattr(kernel, "target_accept", None)
  if isinstance(current, (int, float)) and current < 0.99:
    higher = next(t for t in (0.8, 0.95, 0.99) if t > current + 1e-9)
    module = "ed.mcmc." if type(kernel).__module__.startswith("edward_lite.") else ""
    stronger = (", or 0.99 for posteriors with strong curvature such as Gaussian-process "
                "length scales") if higher < 0.99 else ""
    way = (f"raise target_accept from {current:g} (e.g. kernel={module}"
           f"{type(kernel).__name__}(target_accept={higher:g}){stronger}) or " + way)
  return (f"{total} divergent transitions after warmup{where}; the posterior may be biased: "
          f"{way}.")


def geometry_hint(result, signs):
  """The one sentence suggesting ``adapt_metric="flow"`` when the run shows
  ``signs`` of a curvature that changes with position (which no metric,
  one linear map for the whole posterior, can fit), or None: for runs
  already through a flow, and kernels without gradients."""
  if not signs or result.transport is not None or not result.kernel.has_gradients:
    return None
  flow = ("adapt_metric='flow' samples through a normalizing flow fitted to it "
          "(docs/guide/flow.md).")
  if signs == ["divergences"]:  # alone, a few may be the step size's: target_accept first
    return ("If the divergences stay at a higher target_accept, the posterior's curvature "
            "likely changes with position, which no metric fits: " + flow)
  listed = signs[0] if len(signs) == 1 else f"{', '.join(signs[:-1])} and {signs[-1]}"
  return (f"The {listed} suggest the posterior's curvature changes with position, "
          "which no metric fits: " + flow)


def convergence_notes(result, rows, keys):
  """The warnings on convergence.

  Fewer than ``MANY_CHAINS`` chains (and no superchains): R-hat above
  1.01 (``r_hat_advice`` says what it means).  From ``MANY_CHAINS`` chains
  on, three questions, each with a threshold that holds at any number of
  chains:

  * the superchains' nested R-hat above 1.01: the chains still depend on
    where they started (``r_hat_advice``);
  * split R-hat beyond what one chain's autocorrelation gives
    (``beyond_autocorrelation``): the chains sample different regions;
  * a drift (``column_summary.drift``): over all chains the second half
    of the draws differs from the first by more than chance allows
    (``|z|`` above the normal quantile of ``1 - FALSE_ALARM / (2 P)``),
    by more than twice the mean's MCSE and by more than ``DRIFT_SD`` sds:
    the chains still move away from their starts.  (The last bound: at
    10^5 chains the test sees a shift of 0.004 sd, 2.8 standard errors,
    in one of five stationary random-walk runs of a Gaussian -- chance, or
    what the adaptation shared by all chains leaves at warmup's end; the
    split R-hat of 1.01 corresponds to halves about 0.1 sd apart.)
  """
  column = lambda key: np.array([r[key] for _, r in rows])  # pylint: disable=unnecessary-lambda-assignment
  r_hat = column("r_hat")
  said = []
  if np.any(r_hat > 1.01) and (result.superchains >= 2 or result.chains < MANY_CHAINS):
    at = int(np.nanargmax(r_hat))
    nested = "nested " if result.superchains >= 2 else ""
    said.append(f"{int(np.sum(r_hat > 1.01))} parameter(s) have {nested}R-hat > 1.01 "
                f"(worst: {rows[at][0]}, {r_hat[at]:.3f}); " + r_hat_advice(result,
                    r_hat[at], *keys[at]))
  if result.chains < MANY_CHAINS:
    return said
  split = column("split_r_hat")
  beyond = beyond_autocorrelation(result, split, keys)
  if beyond:
    at, n_eff = beyond[0]
    said.append(
        f"{len(beyond)} parameter(s) have split R-hat beyond what their chains' "
        f"autocorrelation gives (worst: {rows[at][0]}, {split[at]:.3f}, where one chain's ESS "
        f"of {n_eff:.0f} gives about {math.sqrt(1. + 2. / n_eff):.3f}): the chains sample "
        "different regions: the posterior may be multimodal, or the chains have not mixed; "
        "run longer or reparameterize" + gradient_advice(result) + ".")
  elif result.superchains < 2 and np.any(split > 1.01):
    at = int(np.nanargmax(split))
    said.append(f"{int(np.sum(split > 1.01))} parameter(s) have R-hat > 1.01 (worst: "
                f"{rows[at][0]}, {split[at]:.3f}); " + r_hat_advice(result, split[at], *keys[at]))
  z, shift, mcse, sd = column("drift_z"), column("drift"), column("mcse_mean"), column("sd")
  with np.errstate(invalid="ignore"):
    drifting = (np.abs(z) > statistics.NormalDist().inv_cdf(1. - FALSE_ALARM / (2. * len(z)))) & (
        np.abs(shift) > np.maximum(2. * mcse, DRIFT_SD * sd))
  if np.any(drifting):
    at = int(np.flatnonzero(drifting)[np.argmax(np.abs(z[drifting]))])
    said.append(
        f"{int(drifting.sum())} parameter(s) drift: over the {result.chains} chains the second "
        f"half of the draws differs from the first (worst: {rows[at][0]}, by {shift[at]:.3g}, "
        f"{abs(shift[at]) / mcse[at]:.0f} times the mean's MCSE): the chains still move away "
        "from where they started; run a longer warmup" + gradient_advice(result) + ".")
  return said


def gradient_advice(result):
  """After a run without gradients (random-walk Metropolis), the way out a
  longer run is not: a random walk needs about ``D`` times the transitions
  of a gradient kernel for an effective draw in ``D`` dimensions (a
  24-dimensional varying-intercepts regression, 10^4 chains x (500 + 500):
  one chain's ESS 5, split R-hat 1.96, a drift of 179 MCSE and a group
  scale's sd 0.13 against 0.16, where ChEES's table matched NUTS's)."""
  if result.kernel.has_gradients:
    return ""
  return (f", or sample with gradients (kernel=\"chees\" or \"nuts\"), whose chains mix "
          f"far faster than a random walk's in {result.target.dim} dimensions")


def beyond_autocorrelation(result, split, keys):
  """The scalars whose split R-hat ``split`` lies beyond what their chains'
  autocorrelation gives: ``[(row, n_eff)]``, worst first.  Stationary
  chains with ``n_eff`` effective draws each give split R-hat about
  ``sqrt(1 + 2 / n_eff)`` (``r_hat_advice``); beyond a factor ``BEYOND``
  on ``R-hat^2 - 1`` the chains' means differ more than their own
  autocorrelation explains.  (The factor covers ``n_eff``'s error from
  one short chain: 1,000 random-walk chains of eight schools' heavy-tailed
  ``tau``, 500 draws each, gave twice the ``R-hat^2 - 1`` their ESS of 20
  predicts; chains in two modes 16 sds apart, 40 times.)  ``n_eff`` is
  read on at most ``ADVICE_CHAINS`` chains, for the ``ADVICE_SCALARS``
  scalars of largest split R-hat above 1.01, and only where it is at least
  ``MIN_CHAIN_ESS`` (below it, one chain's draws cannot tell); needs the
  kept draws."""
  if result.draws is None or result.num_draws < 8:
    return []
  candidates = [int(i) for i in np.argsort(-np.nan_to_num(split, nan=0.))[:ADVICE_SCALARS]
                if split[i] > 1.01]
  if not candidates:
    return []
  n_eff = _chain_ess(result, [keys[at] for at in candidates])
  return [(at, e) for at, e in zip(candidates, n_eff)
          if e >= MIN_CHAIN_ESS and split[at] ** 2 - 1 > BEYOND * (2 / e)]


def _chain_ess(result, keys):
  """For each ``(name, index)`` of ``keys``, the mean ESS of one chain from
  its own draws, over at most ``ADVICE_CHAINS`` chains evenly spread: one
  ``diagnostics.ess`` call for all, each chain a parameter."""
  columns = []
  for name, index in keys:
    x = result.draws[name][(slice(None), slice(None)) + index]        # [draws, chains]
    columns.append(x[:, ::-(-x.shape[1] // ADVICE_CHAINS)])
  ess = np.asarray(diagnostics.ess(np.concatenate(columns, axis=1)[:, None, :]))
  return [float(np.mean(part)) for part in np.split(ess, len(keys))]


def ebfmi_note(energy):
  """The warning on E-BFMI below 0.3, or None; ``energy`` ``[draws,
  chains]``.  From long chains, per chain (Stan's rule).  From chains of
  fewer than ``SHORT_CHAIN`` draws one chain's E-BFMI is too noisy to
  read: at 20 draws, 152 of 10^5 chains of a posterior sampled well fell
  below 0.3 (RESULTS section 49).  How well the momentum explores the
  energy is the posterior's and the kernel's, shared by the chains, so
  short chains are read pooled (``diagnostics.ebfmi(pooled=True)``), and
  so are ``MANY_CHAINS`` chains or more, where some of many long chains
  fall below 0.3 by chance too."""
  advice = "the momentum resampling explores the energy poorly; reparameterize."
  if len(energy) < SHORT_CHAIN or energy.shape[1] >= MANY_CHAINS:
    pooled = float(diagnostics.ebfmi(energy, pooled=True))
    if pooled < 0.3:
      return (f"E-BFMI of the {energy.shape[1]} chains pooled is {pooled:.2f}, below 0.3 "
              f"(each has {len(energy)} draws): " + advice)
    return None
  bfmi = np.asarray(diagnostics.ebfmi(energy))
  if np.any(bfmi < 0.3):
    return (f"E-BFMI below 0.3 in {int(np.sum(bfmi < 0.3))} chain(s) "
            f"(min {np.min(bfmi):.2f}): " + advice)
  return None


def r_hat_advice(result, r_hat, name, index):
  """What an R-hat above 1.01 means.

  Nested R-hat (``result.superchains``): the superchains, each started from
  its own point, disagree, so the chains still depend on where they
  started, or on which mode they found.

  Split R-hat of chains that have mixed is about sqrt(1 + 2 / n_eff), with
  n_eff the ESS of one chain from its own autocorrelation (the
  half-chains' means vary as sd^2 / (n_eff / 2)): below 100 effective draws
  a chain, autocorrelation alone puts it above 1.01 -- the case of many
  short chains, whose ESS in all may be ample.  For such short chains
  (fewer than ``SHORT_CHAIN`` draws, or ``MANY_CHAINS`` chains or more,
  read on at most ``ADVICE_CHAINS`` of them) with R-hat within what
  autocorrelation gives (a factor 2 on R-hat^2 - 1; ``BEYOND`` from
  ``MANY_CHAINS`` chains on), the warning says R-hat cannot tell.  Chains
  apart (each mixing well on its own) give much more, and a few long
  chains this autocorrelated (a funnel's: ESS 12 a chain in 1,000 draws)
  mix badly: both keep the plain warning."""
  if result.superchains >= 2:
    return (f"the {result.superchains} superchains, each started from its own point, "
            "disagree: the chains still depend on where they started (run a longer warmup) "
            "or the posterior is multimodal.")
  short = result.num_draws < SHORT_CHAIN or result.chains >= MANY_CHAINS
  if result.draws is not None and 8 <= result.num_draws and short:
    n_eff = _chain_ess(result, [(name, index)])[0]
    if r_hat ** 2 - 1 <= (2 if result.chains < MANY_CHAINS else BEYOND) * (2 / n_eff):
      return (f"with {result.num_draws} draws per chain (ESS of one chain {n_eff:.0f}), "
              "autocorrelation alone gives such an R-hat in chains that have mixed, so it "
              "cannot tell whether they have: draw more per chain, or start the chains in "
              "superchains (superchains=16) for nested R-hat.")
  return "the chains have not mixed: run longer or reparameterize" + gradient_advice(result) + "."
