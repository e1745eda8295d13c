"""The result of ``ed.mcmc.sample``: draws, sampler statistics, summary."""

import dataclasses
from typing import Any, Dict, Optional

import numpy as np
import tensorflow as tf

from edward_lite.analysis import column_summary, diagnostics
from edward_lite.analysis.diagnostics import superchain_ids
from edward_lite.analysis.rhat import nested_psrf_from_moments
from edward_lite.analysis.predictive import posterior_predictive as simulate_predictive
from edward_lite.analysis.summary import COLUMNS, Summary, hdi, present, select_names, show
from edward_lite.mcmc import base, metric, notes, streaming
from edward_lite.runtime import persistence, seeds
from edward_lite.runtime.deprecation import RenamedKeys, renamed_keywords
from edward_lite.language.reparameterize import NONCENTRED_SUFFIX

__all__ = ["MCMCResult", "Summary"]

# A summed-out discrete latent of at most this many scalars (a change point's
# switch, a regime) is in the default summary; larger ones (per-point
# assignments) only when asked for, and the header says so.
SHOWN_ENUMERATED = 10


@dataclasses.dataclass(eq=False, repr=False, kw_only=True)
class MCMCResult:
  """Draws and statistics of one sampling run.

  Attributes:
    target: the model's ``Target`` (a loaded result's ``SavedTarget``).
    kernel: the kernel that ran.
    chains, warmup, num_draws, thin, keep_draws, seed: the run's settings.
    draws: dict name -> NumPy ``[draws, chains, *shape]`` in the constrained
      space (None with ``keep_draws=False``).
    sample_stats: dict -> ``[draws, chains]``: ``accept_prob``,
      ``diverging``, ``num_gradients`` (gradient evaluations), ``tree_depth``,
      ``energy``, ``log_prob`` (empty without kept draws; no ``energy``
      for a kernel without momentum; a statistic the kernel gives one value
      always, ``Kernel.constant_statistics``, a read-only broadcast array).
      (``"n_grads"``, the key in 0.1, still reads ``num_gradients``, with a
      warning.)
    step_size: final step size (``[1]`` pooled or ``[chains]``).
    inverse_metric: final inverse metric ``A A^T``: diagonal ``[1 or chains,
      D]``, or ``[D, D]`` for a low-rank or dense metric.
    num_gradients: gradient evaluations per chain, warmup included.
    chain_accept, chain_divergent: per chain ``[chains]``, the mean
      acceptance statistic and the fraction of divergent transitions after
      warmup (kept even when draws are not).
    chain_max_depth: per chain ``[chains]``, the fraction of transitions
      after warmup whose tree reached ``max_tree_depth`` (NUTS; None for
      kernels without trees), kept even when draws are not.
    warmup_divergences: divergent transitions per chain during warmup
      (``divergences``: after warmup).
    mean, variance: per-chain running moments ``[chains, *shape]`` of each
      variable, kept even when draws are not.
    streamed: dict ``sd``, ``r_hat`` (split), ``ess``, ``mcse_mean``,
      ``drift``, ``drift_z`` -> dict name -> ``[*shape]``, from the
      constant-memory statistics (``ed.mcmc.streaming``), kept even when
      draws are not.
    draw_count: draws per chain in the streamed statistics.
    timings: ``compile_s`` (the call until its first compiled chunk
      returned: the compile and that chunk's run, with a new run's initial
      states and the first chunk run without XLA, both found while it
      compiles), ``warmup_s``, ``sampling_s`` (wall seconds).
    trajectory_length: ChEES' adapted trajectory length (None for other
      kernels).
    superchains: ``K`` when the chains formed ``K`` contiguous superchains
      whose chains shared their initial point (``ed.mcmc.sample``'s
      ``superchains``), else 0: the summary's ``r_hat`` is then nested
      R-hat.
    transport: with ``adapt_metric="flow"`` (or a fit), the flow the chains
      moved through (``ed.mcmc.flow_adaptation``): ``family``, ``steps``,
      ``num_gradients`` (the fit's, not in ``num_gradients`` above: the
      run's total is ``total_gradients``), ``elbo`` (the mean of its last
      tenth), ``fitted_here``, ``notes`` (the fit's own verdicts) and
      ``refit`` (the Fisher refit's ``pairs``, ``loss`` and ``steps``, or
      None); else None.
  """

  target: Any
  kernel: Any
  chains: int
  warmup: int
  num_draws: int
  thin: int
  keep_draws: bool
  draws: Optional[Dict[str, np.ndarray]]
  sample_stats: Dict[str, np.ndarray]
  step_size: np.ndarray
  inverse_metric: np.ndarray
  num_gradients: np.ndarray
  chain_accept: np.ndarray
  chain_divergent: np.ndarray
  warmup_divergences: np.ndarray
  mean: Dict[str, np.ndarray]
  variance: Dict[str, np.ndarray]
  streamed: Dict[str, Dict[str, np.ndarray]]
  draw_count: Any
  timings: Dict[str, float]
  trajectory_length: Optional[np.ndarray] = None
  chain_max_depth: Optional[np.ndarray] = None
  seed: int = 0
  superchains: int = 0
  transport: Optional[Dict[str, Any]] = None
  _log_likelihood: Optional[Dict[str, np.ndarray]] = dataclasses.field(default=None,
                                                                       init=False)
  _column_stats: Dict[str, Dict[str, np.ndarray]] = dataclasses.field(default_factory=dict,
                                                                      init=False)

  @classmethod
  def build(cls, target, kernel, kept, totals, state, chains, warmup, draws, thin,
            keep_draws, timings, seed=0, superchains=0):
    # The statistics the kernel records (a kernel without momentum has no
    # Hamiltonian: its "energy", -log p, would make E-BFMI say something false).
    stats = {k: kept[k] for k in base.STATISTICS if k in kept}
    flat = kept.get("draws") if keep_draws else None
    stream = streaming.stream_summary(state.stream)
    result = cls(
        target=target, kernel=kernel, chains=chains, warmup=warmup, num_draws=draws,
        thin=thin, keep_draws=keep_draws,
        draws=_with_deterministic(target, target.split_constrained(flat), seed)
        if flat is not None else None,
        sample_stats=sample_statistics(stats if keep_draws else {}, kernel),
        step_size=np.exp(state.dual_avg.log_step_bar.numpy()).reshape(-1),
        inverse_metric=metric.inverse_metric(state.metric),
        num_gradients=totals["warmup"]["n_grads"] + totals["sampling"]["n_grads"],
        chain_accept=totals["sampling"]["accept_prob"] / draws,
        chain_divergent=totals["sampling"]["diverging"] / draws,
        chain_max_depth=(totals["sampling"]["at_max_depth"] / draws
                         if "at_max_depth" in totals["sampling"] else None),
        warmup_divergences=totals["warmup"]["diverging"],
        mean=target.split_constrained(stream["chain_mean"]),
        variance=target.split_constrained(stream["variance"]),
        streamed={k: target.split_constrained(stream[k])
                  for k in ("sd", "r_hat", "ess", "mcse_mean", "drift", "drift_z")},
        draw_count=stream["count"], timings=timings,
        trajectory_length=kernel.trajectory_length(state.kernel_adapt), seed=seed,
        superchains=superchains)
    return result

  # -- diagnostics ------------------------------------------------------------

  @property
  def total_gradients(self):
    """Every gradient the run evaluated: the chains' (warmup included) and
    a flow fitted for it (``transport``)."""
    fitted = (self.transport or {}).get("num_gradients") or 0
    return int(np.sum(self.num_gradients, dtype=np.int64)) + int(fitted)

  @property
  def divergences(self):
    """Divergent transitions per chain after warmup (every transition, kept
    or not), ``[chains]`` int64."""
    return np.rint(np.asarray(self.chain_divergent, np.float64) * self.num_draws).astype(
        np.int64)

  def ebfmi(self):
    """E-BFMI per chain (None without kept draws)."""
    if "energy" not in self.sample_stats or len(self.sample_stats["energy"]) < 4:
      return None
    return np.asarray(diagnostics.ebfmi(self.sample_stats["energy"]))

  def summary(self, var_names=None, filter_vars=None, hdi_prob=None, round_to=None,
              print_table=None):
    """Posterior summary per scalar: mean, sd, mcse of the mean, 5/50/95%
    quantiles, bulk and tail ESS, rank-normalized split R-hat (Vehtari et al.
    2021).  Without kept draws, from the streaming statistics: mean, sd,
    split R-hat (not rank-normalized), and the batch-means ESS and MCSE of
    the mean in the ess_bulk and mcse_mean columns; no quantiles or tail
    ESS.

    Args:
      var_names, filter_vars: the variables shown, as ArviZ's: a name or a
        list (``"~name"`` excludes), matched exactly, ``"like"`` (substring)
        or by ``"regex"``.  By default the program's variables as written,
        latents first: ``ed.reparameterize``'s ``x_noncentred`` shown as
        ``x``, summed-out discrete latents left out; name them to see them.
        The warnings always cover every variable (but the summed-out
        discrete latents, drawn from their conditional posterior at each
        draw).
      hdi_prob: adds ``hdi_low`` / ``hdi_high`` columns, the highest-density
        interval of this probability (needs kept draws).
      round_to: decimals of every value.
      print_table: deprecated; ``print_summary()`` prints.

    The warnings (R-hat, ESS, divergences, stuck chains) are issued as
    ``RuntimeWarning``; ``print_summary()`` prints them under the table.

    Returns:
      A ``pandas.DataFrame`` indexed by label (``table.loc["mu", "mean"]``;
      the warnings in ``table.attrs["notes"]``), or without pandas a
      ``Summary`` that answers the same ``loc`` and ``index``.
    """
    return present(self._table(var_names, filter_vars, hdi_prob, round_to), print_table)

  def print_summary(self, var_names=None, filter_vars=None, hdi_prob=None, round_to=None):
    """Prints ``summary()``'s table and its warnings; returns None."""
    show(self._table(var_names, filter_vars, hdi_prob, round_to))

  def _table(self, var_names, filter_vars, hdi_prob, round_to):
    """The ``Summary`` of ``summary()``."""
    shown, checked, keys = [], [], []
    names = self.target.names + (self.target.deterministic_names if self.draws else ())
    # Summed-out discrete latents are drawn afresh at each draw from their
    # conditional posterior: their mixing is the continuous latents', and the
    # ESS of a nearly constant indicator says nothing about it.
    unchecked = set(getattr(self.target, "enumerated_names", ()))
    if var_names is None and filter_vars is None:
      order = self._user_order(names, unchecked)
    else:
      order = [n for n in names if n in set(select_names(names, var_names, filter_vars))]
    keep = set(order)
    rows = {}
    columns = COLUMNS + (("hdi_low", "hdi_high") if hdi_prob is not None else ())
    for name in names:
      if name in unchecked and name not in keep:
        continue  # neither shown nor warned about: its statistics are not needed
      if name not in self._column_stats:  # computed once: summary() and print_summary()
        self._column_stats[name] = self._stats(name)
      stats = dict(self._column_stats[name])
      stats["split_r_hat"] = stats["r_hat"]
      if self.superchains >= 2:
        stats["r_hat"] = stats["nested_r_hat"]
      if hdi_prob is not None:
        if self.draws is None:
          raise ValueError("hdi_prob needs the draws: sample with keep_draws=True.")
        x = self.draws[name]
        stats["hdi_low"], stats["hdi_high"] = hdi(x.reshape((-1,) + x.shape[2:]), hdi_prob)
      for index in np.ndindex(*stats["mean"].shape):
        label = name + (f"[{','.join(map(str, index))}]" if index else "")
        if name in keep:
          rows.setdefault(name, []).append((label, {c: float(stats[c][index]) for c in columns}))
        if name not in unchecked:
          checked.append((label, {k: float(v[index]) for k, v in stats.items()}))
          keys.append((name, index))
    shown = [row for name in order for row in rows.get(name, [])]
    return Summary(shown, notes.notes(self, checked, keys), columns=columns,
                   round_to=round_to,
                   header=self._methods(keep if var_names is None and filter_vars is None
                                        else None))

  def _user_order(self, names, enumerated):
    """The variables a summary shows by default, in this order: the
    program's latents as the user wrote them (``ed.reparameterize``'s
    ``x_noncentred`` replaced by ``x`` where its draws are kept), then its
    other deterministic values; not the summed-out discrete latents
    (``enumerated``) of more than ``SHOWN_ENUMERATED`` scalars (per-point
    assignments: ``summary(var_names=["z"])`` shows them; a change point's
    switch is shown) nor the auxiliaries whose original is shown."""
    try:
      originals = getattr(self.target.program, "original_names", None)
      originals = originals(self.target.names) if originals else {}
    except ValueError:  # a result loaded without its model: by the auxiliaries' names
      originals = {n[:-len(NONCENTRED_SUFFIX)]: n for n in self.target.names
                   if n.endswith(NONCENTRED_SUFFIX)}
    auxiliary = {v: k for k, v in originals.items()}
    order = []
    for name in self.target.names:
      if name in enumerated:
        continue
      original = auxiliary.get(name)
      order.append(original if original in names else name)
    return order + [n for n in names if n not in order and n not in auxiliary and
                    (n not in enumerated or self._scalars(n) <= SHOWN_ENUMERATED)]

  def _scalars(self, name):
    """Scalars of ``name`` per draw (its kept draws' trailing shape)."""
    return int(np.prod(self.draws[name].shape[2:])) if self.draws and name in self.draws else 0

  def _methods(self, shown=None):
    """The header lines that say how the columns were estimated, where not
    as Stan's and ArviZ's summary (``column_summary``), and which summed-out
    latents the default table leaves out."""
    lines = []
    hidden = [n for n in getattr(self.target, "enumerated_names", ())
              if shown is not None and n not in shown and self._scalars(n)]
    if hidden:
      lines.append(f"Summed-out discrete latents drawn at each draw, not shown: "
                   f"{', '.join(hidden)} (summary(var_names={hidden!r}) shows them).")
    if self.superchains >= 2:
      lines.append(f"r_hat: nested R-hat of {self.superchains} superchains of about "
                   f"{self.chains // self.superchains} chains that shared their initial "
                   "points (Margossian et al. 2024).")
    if self.draws is not None:
      per_scalar = next(iter(self.draws.values())).shape[:2]
      if per_scalar[0] * per_scalar[1] > column_summary.EXACT_LIMIT:
        lines.append(
            f"{per_scalar[0] * per_scalar[1]:,} draws a scalar: ess_bulk, ess_tail and mcse_mean "
            "from the variance of batch means (the chains' means), ranks from draws binned to "
            "3 significant digits.")
    return tuple(lines)

  def _stats(self, name):
    """The summary's columns of one variable, float64 ``[*shape]`` each
    (``column_summary.variable_statistics``; without kept draws, from the
    streamed statistics)."""
    if self.draws is not None:
      return column_summary.variable_statistics(self.draws[name], self.superchains)
    streamed = {k: v[name] for k, v in self.streamed.items()}
    nan = np.full_like(streamed["sd"], np.nan, dtype=np.float64)
    stats = dict(mean=np.mean(self.mean[name], axis=0, dtype=np.float64), sd=streamed["sd"],
                 mcse_mean=streamed["mcse_mean"], q5=nan, q50=nan, q95=nan,
                 ess_bulk=streamed["ess"], ess_tail=nan, r_hat=streamed["r_hat"],
                 nested_r_hat=nan, drift=streamed.get("drift", nan),
                 drift_z=streamed.get("drift_z", nan))
    if self.superchains >= 2 and self.draw_count >= 2:
      chains = self.mean[name].shape[0]
      moments = [np.reshape(v[name], (chains, -1)).T for v in (self.mean, self.variance)]
      stats["nested_r_hat"] = np.reshape(nested_psrf_from_moments(
          *moments, superchain_ids(chains, self.superchains), self.superchains), nan.shape)
    return stats

  def stuck_chains(self):
    """Chains that did not sample the posterior with the others:
    ``[(chain, kind, reason)]``, kind ``"stuck"``, ``"apart"`` or ``"diverging"`` (see
    ``mcmc.notes.stuck_chains``)."""
    return notes.stuck_chains(self)

  def flat_draws(self, draws=None, seed=None):  # pylint: disable=unused-argument
    """The kept latent draws ``name -> [draws * chains, *shape]`` and their
    leading shape ``(draws, chains)`` (``draws`` and ``seed`` are for a VI
    fit's fresh draws; ``ed.posterior_predictive`` passes them to either)."""
    if self.draws is None:
      raise ValueError("predictive needs the posterior draws: sample with keep_draws=True.")
    lead = next(iter(self.draws.values())).shape[:2]
    return {n: self.draws[n].reshape((-1,) + self.draws[n].shape[2:])
            for n in self.target.names}, lead

  def posterior_predictive(self, *args, seed=None, **kwargs):
    """Posterior predictive draws, at the data or at new program arguments:
    ``ed.posterior_predictive(program, self, *args, seed=seed, **kwargs)``;
    without ``seed``, the run's seed.

    Returns:
      dict name -> NumPy ``[draws, chains, *shape]`` for every random
      variable that is not a latent (observed ones redrawn) and every
      ``ed.Deterministic``.
    """
    return simulate_predictive(self.target.program, self, *args,
                               seed=self.seed if seed is None else seed, **kwargs)

  def log_likelihood(self):
    """Pointwise log-likelihood ``log p(y_i | x)`` at every kept draw: dict
    observed name -> NumPy ``[draws, chains, *obs_shape]`` (one compiled
    pass over the draws; the input of PSIS-LOO and WAIC)."""
    if self.draws is None:
      raise ValueError("log_likelihood() needs the draws: sample with keep_draws=True.")
    if self._log_likelihood is None:
      lead = next(iter(self.draws.values())).shape[:2]
      flat = {n: self.draws[n].reshape((-1,) + self.draws[n].shape[2:])
              for n in self.target.names}
      self._log_likelihood = {k: v.reshape(lead + v.shape[1:])
                              for k, v in self.target.log_likelihood(flat).items()}
    return self._log_likelihood

  # -- export -------------------------------------------------------------------

  @renamed_keywords(prior="prior_draws")
  def to_arviz(self, log_likelihood=True, posterior_predictive=True, prior_draws=None,
               seed=None):
    """The installed ArviZ's data (an ``arviz.InferenceData`` under ArviZ
    0.2x, an ``xarray.DataTree`` under 1.x) with ``posterior`` (latents and
    ``ed.Deterministic`` values), ``sample_stats``, ``log_likelihood``,
    ``posterior_predictive`` and ``observed_data`` groups, and ``prior`` /
    ``prior_predictive`` of ``prior_draws`` draws when it is an int, so
    ``az.summary``, ``az.loo``, ``az.compare`` and ArviZ's plots work.
    ``seed`` (default: the run's) seeds the predictive and prior draws.
    Needs the optional extra: ``pip install 'edward_lite[arviz]'``."""
    from edward_lite.analysis.arviz_export import to_inference_data  # pylint: disable=g-import-not-at-top
    if self.draws is None:
      raise ValueError("to_arviz() needs the draws: sample with keep_draws=True.")
    swap = lambda x: np.swapaxes(x, 0, 1)  # ArviZ wants [chain, draw, ...]  # pylint: disable=unnecessary-lambda-assignment
    names = {"accept_prob": "acceptance_rate", "num_gradients": "n_steps", "energy": "energy",
             "diverging": "diverging", "tree_depth": "tree_depth", "log_prob": "lp"}
    return to_inference_data(
        self.target, {k: swap(v) for k, v in self.draws.items()},
        sample_stats={names[k]: swap(v) for k, v in self.sample_stats.items()},
        log_likelihood=log_likelihood and {k: swap(v) for k, v in
                                           self.log_likelihood().items()},
        posterior_predictive=posterior_predictive, prior_draws=prior_draws,
        seed=self.seed if seed is None else seed)

  def save(self, path):
    """Writes the result to ``path`` (one ``.npz``: arrays and a JSON header,
    no pickle); ``ed.load(path)`` reads it back.  Returns the path."""
    return persistence.save(self, path)

  def __repr__(self):
    kept = (f"{self.num_draws // self.thin} draws kept" if self.keep_draws else
            "moments only")
    return (f"<ed.mcmc.MCMCResult {self.kernel.name} chains={self.chains} "
            f"warmup={self.warmup} draws={self.num_draws} ({kept}) "
            f"latents={list(self.target.names)}>")


def sample_statistics(stats, kernel):
  """A result's ``sample_stats``: the run's kept statistics ``stats`` (name
  -> ``[draws, chains]``, under the kernel's or the public names) under
  their public names (``named_statistics``), with the statistics ``kernel``
  gives one value always (``Kernel.constant_statistics``, not kept by the
  run) as read-only broadcast arrays of that shape: no memory."""
  internal = {public: name for name, public in PUBLIC_STATISTICS.items()}
  out = {internal.get(k, k): v for k, v in stats.items()}
  if out:
    shape = next(iter(out.values())).shape
    dtypes = base.TransitionInfo.dtypes(tf.float32)
    for name, value in getattr(kernel, "constant_statistics", {}).items():
      if name not in out:
        out[name] = np.broadcast_to(np.asarray(value, dtypes[name].as_numpy_dtype), shape)
  return named_statistics(out)


# A kernel's statistic -> its public name, where they differ.
PUBLIC_STATISTICS = {"n_grads": "num_gradients"}


def named_statistics(stats):
  """The kernel's per-transition statistics under their public names
  (``PUBLIC_STATISTICS``; the old key still read, with a
  ``DeprecationWarning``)."""
  return RenamedKeys({PUBLIC_STATISTICS.get(k, k): v for k, v in stats.items()},
                     renamed=PUBLIC_STATISTICS)


def _with_deterministic(target, draws, seed=0):
  """Latent draws ``[draws, chains, *shape]`` and the ``ed.Deterministic``
  values computed from them (and the summed-out discrete latents, drawn
  from the run's ``seed``)."""
  if not target.deterministic_names:
    return draws
  lead = next(iter(draws.values())).shape[:2]
  flat = {n: v.reshape((-1,) + v.shape[2:]) for n, v in draws.items()}
  values = target.deterministic(flat, seeds.stream(
      tf.constant(seeds.seed_pair(seed), tf.int32), "enumerated_draws"))
  return {**draws, **{k: v.reshape(lead + v.shape[1:]) for k, v in values.items()}}
