"""The result of ``ed.vi.fit``: the fitted surrogate, draws, importance
resampling with PSIS diagnostics, summary."""

import collections
import warnings

import numpy as np
import tensorflow as tf

from edward_lite.checks import arguments
from edward_lite.analysis import psis
from edward_lite.model.transported import Transport
from edward_lite.runtime import console, content_hash, persistence, seeds
from edward_lite.runtime.deprecation import renamed_keywords
from edward_lite.analysis.predictive import posterior_predictive
from edward_lite.analysis.summary import Summary, present, select_names, show
from edward_lite.vi import fisher
from edward_lite.vi.families import FullRank, MeanField
from edward_lite.vi.surrogates import FlatSurrogate

__all__ = ["VIResult", "ImportanceSample"]

VI_COLUMNS = ("mean", "sd", "q5", "q50", "q95", "psis_mean", "psis_sd")
BATCH = 1024  # draws per compiled call

ImportanceSample = collections.namedtuple(
    "ImportanceSample", ["draws", "log_weights", "smoothed_log_weights", "k_hat", "ess"])
ImportanceSample.__doc__ = """Draws from the surrogate with their importance weights.

Fields: ``draws`` (dict name -> NumPy ``[S, *shape]``, constrained);
``log_weights`` (``[S]``, ``log p(x, y) - log q(x)``); ``smoothed_log_weights``
(PSIS-smoothed and normalized, ``[S]``); ``k_hat`` (Pareto k); ``ess``
(importance-sampling effective sample size of the smoothed weights).
"""


class VIResult:
  """A fitted variational approximation.

  Attributes:
    elbo: NumPy ``[steps]``, the ELBO estimate of every step (NaN at skipped
      steps).
    steps: optimization steps done; ``converged``: whether ``tol`` stopped
      the fit.
    samples: draws per step.
    family: the family object (or the variational program).
    nonfinite: None, or a dict (``skipped``, ``first_step``, ``reason``)
      about steps skipped for a non-finite ELBO or gradient.
    timings: ``compile_s`` (the first chunk, compile included), ``train_s``
      (the other chunks), ``steps_per_s`` (steady state: the other chunks).
    settings: the fit's settings (family, steps asked for, samples, seed,
      learning rate, ...), JSON-able.
    target: the model target (``ed.make_target``).
    num_gradients: model gradients this call of ``ed.vi.fit`` evaluated
      (its start's search, mean-field warm start and steps, each draw one
      gradient); None for a loaded fit.

  ``save(path)`` writes the fit to one ``.npz`` (no pickle) and
  ``ed.load(path, model, *args)`` reads it back (``edward_lite.runtime.persistence``).
  """

  def __init__(self, target, surrogate, family, elbo, steps, samples, converged, nonfinite,
               timings, seed, full_log_prob=None, settings=None, needs=None, num_gradients=None):
    self.target, self._surrogate, self.family = target, surrogate, family
    self.settings = dict(settings or {})
    # A loaded fit: None, or the sentence saying what to pass to ed.load to
    # draw from the surrogate (the surrogate then holds saved arrays only).
    self._needs = needs
    self.elbo, self.steps, self.samples = elbo, steps, samples
    self.converged, self.nonfinite, self.timings = converged, nonfinite, timings
    self.num_gradients = num_gradients
    self._seed = seed
    self._calls = 0  # unseeded sample() calls so far
    self._importance = None
    self._draw_fn = console.first_call_quiet(  # one per fit
        console.per_call_function(self._draw_batch, jit_compile=True))
    # The model's full-data log density of a batch of surrogate draws (one
    # pass over a dataset when the fit streamed one).
    self._full_log_prob = full_log_prob

  # -- the surrogate --------------------------------------------------------------

  @property
  def raw_params(self):
    """The surrogate's trainable variables as the optimizer sees them: dict
    name -> NumPy array.  Flat families: ``loc`` and ``scale`` (before the
    softplus) over the flat unconstrained vector, ``scale_tril`` (full-rank:
    the free strict lower triangle), the flows' network weights; a
    variational program: its variables by TensorFlow name."""
    return {name: np.asarray(v)
            for name, v in self._surrogate.named(self._surrogate.variables).items()}

  @property
  def params(self):
    """The fitted variational parameters by latent name: the surrogate's
    mean and (positive) standard deviation, not the raw variables.

    Mean-field and full-rank families: dict latent name -> ``{"loc": ...,
    "scale": ...}``, NumPy arrays in the latent's *unconstrained* shape, on
    the unconstrained space of that latent (where the surrogate is Gaussian;
    the latent's bijector maps it to the support: softplus for a Gamma or
    HalfNormal, for example).  ``loc`` is the mean there and ``scale`` the
    standard deviation (positive; full-rank: the marginal standard deviation
    ``sqrt(diag(L L^T))``).  Full-rank fits also give ``"scale_tril"``: the
    lower-triangular ``L[D, D]`` of the covariance over the flat
    unconstrained vector, latents in program order, each flattened row-major
    (the key gets a leading underscore if a latent is called
    ``scale_tril``).  For constrained draws use ``fit.sample(draws)``.

    Flows (RealNVP, MAF, IAF) and variational programs: the raw variables,
    as ``raw_params`` (a flow's location and scale act on the output of its
    layers, so they are not the surrogate's mean and sd).
    """
    raw = self.raw_params
    if not isinstance(self.family, (MeanField, FullRank)):
      return raw
    return gaussian_params(raw, {n: i.unconstrained_shape.as_list()
                                 for n, i in self.target.latents.items()},
                           full_rank=isinstance(self.family, FullRank))

  def save(self, path):
    """Writes the fit to ``path`` (one ``.npz``: arrays and a JSON header, no
    pickle): the ELBO trace, family, steps, settings, the surrogate's
    variables and the observed data.  ``ed.load(path, model, *args)`` reads
    it back.  Returns the path written."""
    return persistence.save(self, path)

  def transport(self):
    """The fitted flat family as a transport map ``u = T(v)`` pushing
    ``N(0, I_D)`` to ``q(u)`` (``model.transported.Transport``), its
    parameters fixed at their fitted values: what
    ``ed.mcmc.sample(..., adapt_metric=fit)`` samples through.

    Raises:
      ValueError: the fit is a variational program's, or loaded without
        its model (neither is a map of the flat unconstrained space).
    """
    self._check_surrogate()
    if not isinstance(self._surrogate, FlatSurrogate):
      raise ValueError("A variational program's fit is not a transport map of the flat "
                       "unconstrained space; fit a flat family (family='iaf', 'realnvp', ...) "
                       "to precondition MCMC with it.")
    family, dim = self.family, self._surrogate.dim
    params = {k: tf.constant(v) for k, v in self.raw_params.items()}
    key, _ = content_hash.digest([("family", family.settings())] +
                                 [(k, np.asarray(v)) for k, v in sorted(params.items())])
    return Transport(
        forward_and_log_det=lambda v: family.forward_and_log_det(params, dim, v),
        inverse=lambda u: family.bijector(params, dim).inverse(u),
        key=key, description=f"the fitted {family.name} ({dim} dimensions, {self.steps} steps)")

  def refit_by_fisher(self, draws, seed):
    """Refits this flat fit in place by the Fisher divergence (``vi.fisher``)
    on ``draws`` of its own flow and the model's gradients there; what
    ``adapt_metric="flow"`` does after the ELBO fit.  Adds the ``draws``
    gradients (the finite pairs') to ``num_gradients``.

    Returns:
      dict: ``pairs`` (finite pairs used), ``loss`` (the mean of the last
      tenth of the steps; 0 for a flow that carries ``N(0, I)`` to the
      posterior exactly), ``steps``.
    """
    transport = self.transport()  # checks the fit is a flat family's, with its model
    u, g = fisher.draws_and_gradients(self.target, transport, draws, seed)
    if len(u) < max(1, draws // 2):
      raise ValueError(f"Only {len(u)} of the fitted flow's {draws} draws have a finite "
                       "model gradient: too few to refit it by the Fisher divergence; "
                       "pass refit=0 to sample through the ELBO's fit as it is.")
    loss = fisher.fisher_refit(self._surrogate, u, g, seed)
    if self.num_gradients is not None:
      self.num_gradients += int(draws)
    return dict(pairs=int(len(u)), loss=loss, steps=fisher.STEPS)

  def _check_surrogate(self):
    if self._needs is not None:
      raise ValueError(self._needs)

  def _draw_batch(self, seed, weights):
    state, log_q = self._surrogate.draw(BATCH, seed)
    values = dict(self._surrogate.constrained(self.target, state))  # a program's is ``state``
    if self.target.deterministic_names:
      draw_seeds = tf.random.experimental.stateless_split(
          seeds.stream(seed, "enumerated_draws"), BATCH)
      values.update(tf.vectorized_map(lambda a: self.target.derived(*a), (values, draw_seeds)))
    if weights and self._full_log_prob is None:
      return values, self._surrogate.model_log_prob(self.target, state) - log_q, state
    return values, log_q, state

  def _draw(self, n, seed, weights, call=0):
    """``n`` draws (constrained dict) and their log weights (or log q); the
    ``call``-th unseeded call gets its own stream."""
    self._check_surrogate()
    n = arguments.check_integer("draws", n, 1)
    base = tf.constant(seeds.seed_pair(self._seed if seed is None else seed), tf.int32)
    stream = seeds.stream(base, "vi_weighted_draws" if weights else "vi_draws")
    if call:
      stream = tf.random.experimental.stateless_fold_in(stream, call)
    parts, log_w = collections.defaultdict(list), []
    for b in range(-(-n // BATCH)):
      values, lw, state = self._draw_fn(tf.random.experimental.stateless_fold_in(stream, b),
                                        weights)
      if weights and self._full_log_prob is not None:
        lw = self._full_log_prob(state) - tf.cast(lw, tf.float64)
      for name, value in values.items():
        parts[name].append(value.numpy())
      log_w.append(lw.numpy())
    draws = {name: np.concatenate(v)[:n] for name, v in parts.items()}
    return draws, np.concatenate(log_w)[:n].astype(np.float64)

  @renamed_keywords(n="draws")
  def sample(self, draws=1000, seed=None):
    """``draws`` draws from the surrogate: dict name -> NumPy ``[draws,
    *shape]`` (constrained).  Without ``seed`` every call gives fresh draws
    (the sequence of calls is reproducible from the fit's seed); with one,
    the same draws each time."""
    call = 0
    if seed is None:
      call, self._calls = self._calls, self._calls + 1
    return self._draw(draws, seed, weights=False, call=call)[0]

  def log_prob(self, values):
    """Log density of the surrogate at constrained values (dict name ->
    ``[n, *shape]``), on the constrained space: NumPy ``[n]``."""
    self._check_surrogate()
    values = {n: values[n] for n in self.target.names}
    return self._surrogate.log_prob(self.target, values).numpy()

  # -- importance sampling ----------------------------------------------------------

  def importance(self, draws=4000, seed=None):
    """Draws ``S = draws`` from the surrogate and weights them by
    ``p(x, y) / q(x)`` (full data), smoothed by PSIS; kept as the default for
    ``k_hat``, ``ess``, ``resample`` and ``summary``.  Returns an
    ``ImportanceSample``."""
    values, log_w = self._draw(draws, seed, weights=True)
    if np.isnan(log_w).any() or np.isposinf(log_w).any():
      bad = int(np.sum(np.isnan(log_w) | np.isposinf(log_w)))
      warnings.warn(f"{bad} of {draws} importance log weights are NaN or +inf (the model "
                    "density overflowed at surrogate draws); they get weight zero.",
                    RuntimeWarning, stacklevel=2)
      log_w = np.where(np.isnan(log_w) | np.isposinf(log_w), -np.inf, log_w)
    smoothed, k_hat = psis.psis(log_w)
    self._importance = ImportanceSample(values, log_w, smoothed, k_hat,
                                        psis.importance_ess(smoothed))
    return self._importance

  def _ensure_importance(self):
    return self._importance or self.importance()

  @property
  def k_hat(self):
    """Pareto k-hat of the importance weights (PSIS; Vehtari et al. 2024):
    below ``psis.khat_threshold(S)`` (0.7 for large S) the surrogate is good
    enough for importance-weighted estimates of the posterior."""
    return self._ensure_importance().k_hat

  @property
  def ess(self):
    """Importance-sampling effective sample size of the smoothed weights."""
    return self._ensure_importance().ess

  @renamed_keywords(n="draws", draws="proposals")
  def resample(self, draws=1000, proposals=None, seed=None):
    """Importance resampling: ``draws`` draws, with replacement, from the
    surrogate draws weighted by their PSIS-smoothed weights -- approximately
    posterior draws when ``k_hat`` is small.  ``proposals`` surrogate draws
    are made first (default: reuse the last ``importance()``, else 4000).

    (In 0.1 the count was ``n=`` and the proposals ``draws=``; a call
    with ``n=`` is still read that way, with a ``DeprecationWarning``.)

    Returns:
      dict name -> NumPy ``[draws, *shape]``.
    """
    n = arguments.check_integer("draws", draws, 1)
    sample = (self.importance(proposals, seed) if proposals is not None
              else self._ensure_importance())
    self._warn_khat(sample)
    rng = np.random.default_rng(self._seed if seed is None else seed)
    weights = np.exp(sample.smoothed_log_weights - np.max(sample.smoothed_log_weights))
    index = rng.choice(len(weights), size=n, replace=True, p=weights / weights.sum())
    return {name: value[index] for name, value in sample.draws.items()}

  def expectation(self, fn=None):
    """PSIS-smoothed importance-sampling estimate of ``E_p[fn(x)]``.

    Args:
      fn: maps the dict of draws (name -> ``[S, *shape]``) to an array
        ``[S, ...]``; default: the posterior mean of every latent (a dict).
    """
    sample = self._ensure_importance()
    weights = np.exp(sample.smoothed_log_weights)

    def mean(values):
      values = np.asarray(values, np.float64)
      return np.tensordot(weights, values, axes=([0], [0]))

    if fn is None:
      return {name: mean(value) for name, value in sample.draws.items()}
    return mean(fn(sample.draws))

  def _warn_khat(self, sample):
    threshold = psis.khat_threshold(len(sample.log_weights))
    if not sample.k_hat < threshold:
      warnings.warn(psis.khat_message(sample.k_hat, len(sample.log_weights)), RuntimeWarning,
                    stacklevel=4)  # the user's resample() call (through its keyword wrapper)

  # -- summary and export -------------------------------------------------------------

  def summary(self, var_names=None, filter_vars=None, round_to=None, print_table=None):
    """Per scalar: mean, sd and 5/50/95% quantiles of the surrogate, and the
    PSIS-weighted posterior mean and sd; notes on k-hat, skipped steps and
    convergence.  ``var_names``, ``filter_vars``, ``round_to`` and
    ``print_table`` as ``MCMCResult.summary``.  Returns a ``pandas.DataFrame``
    (without pandas a ``Summary``), as ``MCMCResult.summary``."""
    table, header = self._table(var_names, filter_vars, round_to)
    return present(table, print_table, header)

  def print_summary(self, var_names=None, filter_vars=None, round_to=None):
    """Prints a line on the fit (k-hat, importance ESS), ``summary()``'s
    table and its warnings; returns None."""
    table, header = self._table(var_names, filter_vars, round_to)
    show(table, header)

  def _table(self, var_names, filter_vars, round_to):
    """The ``Summary`` of ``summary()`` and its header line."""
    sample = self._ensure_importance()
    weights = np.exp(sample.smoothed_log_weights)
    rows = []
    for name in select_names(self.target.names + self.target.deterministic_names, var_names,
                             filter_vars):
      x = sample.draws[name].astype(np.float64)
      q5, q50, q95 = np.quantile(x, [0.05, 0.5, 0.95], axis=0)
      w_mean = np.tensordot(weights, x, axes=([0], [0]))
      # Centred: sum w x^2 - mean^2 loses the variance to cancellation when
      # the sd is below sqrt(eps) |mean| (1e-8 of it in float64).
      w_sd = np.sqrt(np.tensordot(weights, (x - w_mean) ** 2, axes=([0], [0])))
      stats = dict(mean=x.mean(0), sd=x.std(0, ddof=1), q5=q5, q50=q50, q95=q95,
                   psis_mean=w_mean, psis_sd=w_sd)
      for index in np.ndindex(*x.shape[1:]):
        label = name + (f"[{','.join(map(str, index))}]" if index else "")
        rows.append((label, {c: float(stats[c][index]) for c in VI_COLUMNS}))
    notes = []
    s = len(sample.log_weights)
    if not sample.k_hat < psis.khat_threshold(s):
      notes.append(psis.khat_message(sample.k_hat, s))
    if self.nonfinite:
      notes.append(f"{self.nonfinite['skipped']} steps were skipped for a non-finite ELBO "
                   f"(first at step {self.nonfinite['first_step']}: "
                   f"{self.nonfinite['reason']})")
    header = (f"{self._describe()}; Pareto k-hat {sample.k_hat:.2f} "
              f"(threshold {psis.khat_threshold(s):.2f}), importance ESS {sample.ess:.0f} "
              f"of {s}")
    return Summary(rows, notes, columns=VI_COLUMNS, round_to=round_to), header

  def flat_draws(self, draws=None, seed=None):
    """``draws`` (default 1000) fresh surrogate draws ``name -> [draws,
    *shape]`` of the latents and their leading shape ``(draws,)``."""
    n = arguments.check_integer("draws", 1000 if draws is None else draws, 1)
    sample = self.sample(n, seed=seed)
    return {k: sample[k] for k in self.target.names}, (n,)

  def posterior_predictive(self, *args, draws=1000, seed=None, **kwargs):
    """Posterior predictive draws from ``draws`` surrogate draws, at the data
    or at new program arguments: ``ed.posterior_predictive(program, self,
    *args, draws=draws, **kwargs)``; dict name -> NumPy ``[draws, ...]``.
    Without ``seed``, the simulation's seed is the fit's."""
    self._check_surrogate()
    return posterior_predictive(self.target.program, self, *args, draws=draws,
                      seed=self._seed if seed is None else seed, **kwargs)

  @renamed_keywords(n="draws", prior="prior_draws")
  def to_arviz(self, draws=1000, resample=True, seed=None, log_likelihood=True,
               posterior_predictive=True, prior_draws=None):
    """The installed ArviZ's data (``arviz.InferenceData`` or, under ArviZ
    1.x, ``xarray.DataTree``) whose ``posterior`` group holds ``draws`` draws
    (one chain): importance-resampled (``resample=True``) or straight from
    the surrogate (then ``sample_stats.log_weight`` holds the raw log
    importance weights); with ``log_likelihood``, ``posterior_predictive``,
    ``observed_data`` and (``prior_draws`` an int) ``prior`` groups as
    ``MCMCResult.to_arviz``.  Without ``seed``, the fit's seed.  Needs
    ``pip install 'edward_lite[arviz]'``."""
    from edward_lite.analysis.arviz_export import to_inference_data  # pylint: disable=g-import-not-at-top
    seed = self._seed if seed is None else seed
    if resample:
      values, stats = self.resample(draws, seed=seed), None
    else:
      sample = self.importance(draws, seed)
      values, stats = sample.draws, {"log_weight": sample.log_weights[None]}
    return to_inference_data(self.target, {k: v[None] for k, v in values.items()},
                             sample_stats=stats, log_likelihood=log_likelihood,
                             posterior_predictive=posterior_predictive, prior_draws=prior_draws,
                             seed=seed)

  def _describe(self):
    name = getattr(self.family, "name", None) or getattr(self.family, "__name__", "program")
    final = np.nanmean(self.elbo[-max(len(self.elbo) // 10, 1):]) if len(self.elbo) else np.nan
    return (f"ed.vi {name}: {self.steps} steps x {self.samples} draws, final ELBO "
            f"{final:.4g}")

  def __repr__(self):
    return f"<{self._describe()}>"


def gaussian_params(raw, latents, full_rank):
  """``VIResult.params`` of a Gaussian family from its raw parameters and
  the latents' unconstrained shapes (dict name -> shape, program order)."""
  loc = np.asarray(raw["loc"])
  dtype = loc.dtype
  scale = np.logaddexp(0., np.asarray(raw["scale"], np.float64))  # softplus
  tril = None
  if full_rank:
    unit = np.tril(np.asarray(raw["scale_tril"], np.float64), -1) + np.eye(len(loc))
    tril = scale[:, None] * unit
    scale = np.sqrt(np.sum(tril**2, axis=1))
  out, start = {}, 0
  for name, shape in latents.items():
    size = int(np.prod(shape, dtype=np.int64))
    part = slice(start, start + size)
    out[name] = {"loc": loc[part].reshape(shape),
                 "scale": scale[part].reshape(shape).astype(dtype)}
    start += size
  if tril is not None:
    key = "scale_tril"
    while key in out:
      key = "_" + key
    out[key] = tril.astype(dtype)
  return out
