"""The per-datapoint ELBO of a model and an amortized variational program
(a *guide*) on one batch, for ``ed.vi.train``.

A batch is a dict ``key -> [b, ...]`` from a ``tf.data`` pipeline.  A key
that is a parameter of the model (or of the guide) is passed to it as a
keyword argument; a key that names a random variable of the model is its
observed value (a key may be both, as ``x`` in ``model(x)`` drawing
``ed.Bernoulli(..., name="x")``).  Every other random variable of the model
is a *latent*, which the guide must draw under the same name (a fully
observed model, e.g. an autoregressive one, takes ``guide=None``: the terms
below without ``z`` are its log-likelihood, trained by maximum likelihood).
Every random variable is per-datapoint: its log density has the batch on its
first axis.

For example ``i`` of the batch the guide draws ``z_i = g_phi(eps_i; x_i)``
from standard-normal noise ``eps_i`` (``Normal``: ``loc + scale * eps``;
``MultivariateNormal*``: ``loc + scale @ eps``; ``Independent`` and
``TransformedDistribution`` -- ``LogNormal``, a flow -- of those), and

    ELBO_i = log p(x_i | z_i) + log p(z_i) - log q(z_i | x_i)
           = log_likelihood_i - kl_i,

``kl_i = log q(z_i | x_i) - log p(z_i)`` the one-draw estimate of
``KL(q(z | x_i) || p(z))``.  An ``ed.Factor`` of the model adds its term to
the joint: a per-datapoint one (``[b]``) to its example's, a scalar one (a
penalty on weights) once per batch, spread as ``s / b`` over its rows.  The
noise is an input (``noise_spec``), drawn per example by the pipeline, so
splitting a batch across replicas gives every example the draw it has on
one device.

``K`` draws per example (``sample_terms``; a K-sample ELBO, IWAE) run the
programs once on the batch tiled ``K`` times (``[K b, ...]``, draw-major),
so any Keras network takes them as a larger batch; noise is ``[b, K, ...]``
(batch first, drawn for the global batch, of which a replica takes its rows).
"""

import inspect

import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.language import dtypes
from edward_lite.language.random_variable import DeferredValue
from edward_lite.language.tracing import tape, trace
from edward_lite.language.transformations import condition

tfd = tfp.distributions

__all__ = ["BatchProgram", "sample_from_noise"]

TERMS = ("log_likelihood", "log_prior", "log_q", "factor")


def sample_from_noise(dist, eps, name):
  """The reparameterized draw of ``dist`` at standard-normal ``eps`` (same shape)."""
  if isinstance(dist, tfd.Independent):
    return sample_from_noise(dist.distribution, eps, name)
  if isinstance(dist, tfd.Normal):
    return dist.loc + dist.scale * eps
  if isinstance(dist, tfd.MultivariateNormalLinearOperator):
    x = dist.scale.matvec(eps)
    return x if dist.loc is None else x + dist.loc
  if isinstance(dist, tfd.TransformedDistribution):
    return dist.bijector.forward(sample_from_noise(dist.distribution, eps, name))
  raise ValueError(
      f"The guide draws '{name}' from {type(dist).__name__}, which ed.vi.train cannot draw "
      "from per-example noise; use Normal, MultivariateNormalDiag/TriL, or an Independent or "
      "TransformedDistribution (LogNormal, a flow) of one.")


def _is_factor(rv):
  return isinstance(rv.distribution, tfp.experimental.distributions.IncrementLogProb)


def stopped(dist):
  """``dist`` with its parameters' gradients stopped (the ``log q`` of the
  doubly reparameterized gradient, which reaches the guide through ``z``
  only); a parameter that is not a tensor (a bijector, a linear operator)
  is kept, and ``BatchProgram.check_stopped`` finds one that still carries
  the guide's gradient."""
  params = {}
  for key, value in dist.parameters.items():
    if isinstance(value, tfd.Distribution):
      value = stopped(value)
    elif tf.is_tensor(value):
      value = tf.stop_gradient(value)
    params[key] = value
  return dist.copy(**params)


def _parameters(fn):
  """(keyword parameter names, takes **kwargs) of ``fn``."""
  try:
    params = inspect.signature(fn).parameters.values()
  except (TypeError, ValueError):
    return set(), True
  return ({p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)},
          any(p.kind == p.VAR_KEYWORD for p in params))


def _required(fn):
  """The parameters of ``fn`` a call must give: no default, passable by keyword."""
  try:
    params = inspect.signature(fn).parameters.values()
  except (TypeError, ValueError):
    return []
  return [p.name for p in params if p.default is p.empty
          and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _per_example(log_prob, rows, name):
  """``log_prob`` ``[b, ...]`` summed to ``[b]``."""
  if log_prob.shape.rank == 0 or (log_prob.shape[0] is not None and rows is not None
                                  and log_prob.shape[0] != rows):
    raise ValueError(
        f"Random variable '{name}' is not per-datapoint: its log density has shape "
        f"{log_prob.shape.as_list()}, not [{rows}, ...] (the batch first); ed.vi.train fits "
        "per-datapoint latents only (fit global latents with ed.vi.fit).")
  return tf.reduce_sum(log_prob, axis=list(range(1, log_prob.shape.rank)))


class BatchProgram:
  """A model and its guide on batches with keys ``element_spec``.

  Args:
    model, guide: edward_lite programs (see the module docstring).
    element_spec: the dataset's element spec, a dict ``key -> TensorSpec``.
  """

  def __init__(self, model, guide, element_spec):
    for what, fn in (("model", model), ("guide", guide)):
      if not callable(fn) and not (what == "guide" and fn is None):
        raise TypeError(f"{what}= must be a callable edward_lite program; got "
                        f"{type(fn).__name__}.")
    if not isinstance(element_spec, dict) or not element_spec or not all(
        isinstance(s, tf.TensorSpec) for s in element_spec.values()):
      raise ValueError("dataset= must yield dicts key -> batch tensor (keys: observed random "
                       "variables of the model and arguments of the model or guide); its "
                       f"elements are {element_spec}.")
    self.model, self.guide, self.spec = model, guide, element_spec
    for what, fn in (("model", model), ("guide", guide)):
      missing = [n for n in _required(fn) if n not in element_spec] if fn is not None else []
      if missing:
        raise ValueError(f"The {what}'s argument(s) {missing} have no dataset= key of that "
                         f"name; the dataset's keys are {list(element_spec)}: name each key "
                         f"after an argument or an observed random variable.")
    params, self._model_any = _parameters(model)
    self._model_keys = [k for k in element_spec if self._model_any or k in params]
    params, guide_any = _parameters(guide) if guide is not None else (set(), False)
    self._guide_keys = [k for k in element_spec if guide_any or k in params]
    self.observed, self.latents, self.noise_spec, self.factors = None, None, None, []

  def _run(self, program, batch, keys):
    """``program`` called with its keys of ``batch``, as a model run in the
    data's floating dtype (NumPy float64 constants in a float32 model
    follow the data, as in ``ed.mcmc.sample``)."""
    floats = [s.dtype for s in self.spec.values() if s.dtype.is_floating]
    with dtypes.float_scope(floats[0] if floats else None):
      return program(**{k: batch[k] for k in keys})

  def inspect(self, batch):
    """Runs model and guide once on ``batch`` (eagerly, building Keras layers)
    and checks them; returns the trainable variables they read."""
    with tf.GradientTape() as grad_tape:
      with tape() as rvs, tf.GradientTape() as model_tape:
        self._run(self.model, batch, self._model_keys)
      names = list(rvs)
      self.observed = [k for k in self.spec if k in names]
      stray = [k for k in self.spec if k not in names and k not in self._model_keys
               and k not in self._guide_keys]
      if stray:
        raise ValueError(f"dataset= key(s) {stray} name neither a random variable of the "
                         f"model (it has {names}) nor an argument of the model or guide.")
      if not self.observed:
        raise ValueError(f"No dataset= key names a random variable of the model (it has "
                         f"{names}; the keys are {list(self.spec)}); the data must be observed.")
      self.factors = [n for n in names if _is_factor(rvs[n])]
      latents = [n for n in names if n not in self.observed and n not in self.factors]
      if self.guide is None and latents:
        raise ValueError(f"The model has latent(s) {latents}; give a guide= that draws them "
                         "(guide=None is for a fully observed model, trained by maximum "
                         "likelihood).")
      if self.guide is not None and not latents:
        raise ValueError(f"The model has no latent random variable (all of {names} are "
                         "observed): there is nothing for a guide to infer; pass guide=None "
                         "to train it by maximum likelihood.")
      with tf.GradientTape() as guide_tape:
        drawn = self._guide_draws(batch)
      if None in drawn:
        raise ValueError("The guide draws a random variable without a name; name each draw "
                         f"after the model's latent it stands for (its latents are {latents}), "
                         "and build helper distributions with tfp.distributions, not ed.")
      extra = [n for n in drawn if n not in latents]
      if extra:
        raise ValueError(f"The guide draws {extra}, which {'is' if len(extra) == 1 else 'are'} "
                         f"not latent(s) of the model (its latents are {latents}).")
      missing = [n for n in latents if n not in drawn]
      if missing:
        raise ValueError(f"The guide draws no random variable named {missing}; it must draw "
                         f"every latent of the model {latents} under the same name.")
      for n in latents:
        want, got = rvs[n].value, drawn[n]
        if want.shape != got.shape or want.dtype != got.dtype:
          raise ValueError(f"The guide draws '{n}' with shape {got.shape.as_list()} and dtype "
                           f"{got.dtype.name}; the model's has shape {want.shape.as_list()} "
                           f"and dtype {want.dtype.name}.")
      self.latents = {n: drawn[n] for n in latents}
      self.noise_spec = {n: tf.TensorSpec([None] + v.shape[1:].as_list(), v.dtype)
                         for n, v in self.latents.items()}
      noise = {n: tf.zeros_like(v) for n, v in self.latents.items()}
      self.terms(batch, noise)
    variables = _trainable(grad_tape.watched_variables())
    guide_variables = _trainable(guide_tape.watched_variables())
    self._variables, self._model_variables = variables, _trainable(model_tape.watched_variables())
    self.in_guide = [any(v is u for u in guide_variables) for v in variables]
    if not variables:
      raise ValueError("Neither the model nor the guide reads a trainable variable (Keras "
                       "layers or tf.Variable): there is nothing to train.")
    return variables

  def check_stopped(self, batch):
    """Raises unless every ``log q`` term with stopped parameters
    (``stopped``) carries no gradient to the guide's variables but through
    ``z``: the doubly reparameterized gradient's condition."""
    noise = {n: tf.zeros_like(v) for n, v in self.latents.items()}
    shared = [v.name for v, g in zip(self._variables, self.in_guide)
              if g and any(v is u for u in self._model_variables)]
    if shared:
      raise ValueError(f"The model and the guide both read {shared[:3]}; the doubly "
                       "reparameterized gradient needs the guide's variables apart: use "
                       "IWAE(gradient='reparameterized').")
    for name in self.latents:
      with tf.GradientTape() as tape:
        log_q = []
        self._guide_draws(batch, noise, log_q, stop_q=True, stop_z=True, only=name)
      # (The tape's own variables: under a strategy, the replicas' local copies.)
      watched = [v for v in tape.watched_variables() if v.trainable]
      if any(g is not None for g in tape.gradient(log_q[0], watched)):
        raise ValueError(f"The guide's distribution of '{name}' keeps its gradient after its "
                         "parameters are stopped (a bijector or linear operator computed by a "
                         "network): the doubly reparameterized gradient needs tensor "
                         "parameters (Normal, MultivariateNormalDiag/TriL, LogNormal); use "
                         "IWAE(gradient='reparameterized').")

  def _guide_draws(self, batch, noise=None, log_q=None, stop_q=False, stop_z=False, only=None):
    """Runs the guide: ``name -> value`` of its draws (``noise``: from it;
    else TFP's own draw, for the first inspection).  ``log_q``: a list the
    per-example ``log q`` terms are appended to, with the distributions'
    parameters stopped if ``stop_q`` (at ``z`` stopped too if ``stop_z``,
    of latent ``only`` if given)."""
    out = {}
    if self.guide is None:
      return out

    def tracer(fn, *args, **kwargs):
      name = kwargs.get("name")
      if self.latents is not None and name not in self.latents:
        raise ValueError(f"The guide draws {name!r}, which is not a latent of the model "
                         f"({list(self.latents)}).")
      if kwargs.get("sample_shape", ()) not in ((), [], None):
        raise ValueError(f"The guide draws '{name}' with sample_shape=; give the batch shape "
                         "through the distribution's parameters instead.")
      if noise is not None:
        eps = noise[name]
        kwargs["value"] = DeferredValue(lambda d: sample_from_noise(d, eps, name))
      rv = fn(*args, **kwargs)
      if rv.distribution.reparameterization_type != tfd.FULLY_REPARAMETERIZED:
        raise ValueError(f"The guide draws '{name}' from {type(rv.distribution).__name__}, "
                         "which is not reparameterized; the ELBO gradient cannot reach the "
                         "guide through it.")
      out[name] = rv.value
      if log_q is not None and only in (None, name):
        dist = stopped(rv.distribution) if stop_q else rv.distribution
        value = tf.stop_gradient(rv.value) if stop_z else rv.value
        log_q.append(_per_example(dist.log_prob(value), _rows(batch), name))
      return rv

    with trace(tracer):
      self._run(self.guide, batch, self._guide_keys)
    return out

  def terms(self, batch, noise, copies=1, stop_q=False):
    """``{log_likelihood, log_prior, log_q, factor}``, each ``[b]``, on
    ``batch`` with the guide's draws at ``noise`` (``name -> [b, ...]``);
    ``copies``: the batch holds that many copies of ``b / copies`` examples
    (a scalar factor is spread over one copy's rows); ``stop_q``: ``log q``
    with the guide's parameters stopped."""
    q_terms = []
    drawn = self._guide_draws(batch, noise, q_terms, stop_q=stop_q)
    rows = _rows(batch)
    with tape() as rvs:
      with condition(**{k: batch[k] for k in self.observed}, **drawn):
        self._run(self.model, batch, self._model_keys)
    parts = {n: _per_example(rv.distribution.log_prob(rv.value), rows, n)
             for n, rv in rvs.items() if n not in self.factors}
    log_likelihood = tf.add_n([parts[k] for k in self.observed])
    zero = tf.zeros_like(log_likelihood)  # no latents (maximum likelihood), no factors
    factors = []
    for n in self.factors:
      term = rvs[n].distribution.log_prob(rvs[n].value)
      if term.shape.rank == 0:  # once per batch
        term = zero + term * copies / tf.cast(tf.shape(zero)[0], term.dtype)
      factors.append(_per_example(term, rows, n))

    def added(terms):
      return tf.add_n(terms) if terms else zero

    return dict(log_likelihood=log_likelihood,
                log_prior=added([parts[n] for n in self.latents]), log_q=added(q_terms),
                factor=added(factors))

  def sample_terms(self, batch, noise, samples, stop_q=False):
    """The terms (``terms``) of ``samples`` (``K``) draws per example, each
    ``[K, b]``; ``noise``: ``name -> [b, K, ...]`` (``[b, ...]`` if K = 1)."""
    if samples == 1:
      return {k: v[tf.newaxis] for k, v in self.terms(batch, noise, stop_q=stop_q).items()}
    tiled = {k: tf.tile(v, [samples] + [1] * (v.shape.rank - 1)) for k, v in batch.items()}
    flat = {}
    for n, eps in noise.items():
      eps = tf.transpose(eps, [1, 0] + list(range(2, eps.shape.rank)))  # [K, b, ...]
      flat[n] = tf.reshape(eps, tf.concat([[-1], tf.shape(eps)[2:]], 0))
    out = self.terms(tiled, flat, copies=samples, stop_q=stop_q)
    return {k: tf.reshape(v, [samples, -1]) for k, v in out.items()}


def _trainable(watched):
  """The trainable variables among a tape's, in order, once each.  Under a
  strategy the tape sees a mirrored variable's local copy: its container."""
  extended, variables = tf.distribute.get_strategy().extended, []
  for v in watched:
    v = extended.value_container(v)
    if v.trainable and not any(v is u for u in variables):
      variables.append(v)
  return variables


def _rows(batch):
  """The static batch size of ``batch``, or None."""
  return next(iter(batch.values())).shape[0]


def noise_for(noise_spec, seed, index, samples=1):
  """``name -> [b, ...]`` standard-normal noise of batch ``index`` with
  ``b`` rows (``[b, K, ...]`` for ``samples`` K > 1): stateless in ``(seed,
  index, latent)``.  Latent ``j`` of ``J`` draws from the seed ``seed + [0,
  index J + j]`` (int64): TensorFlow's stateless ops scramble a seed into
  their generator's key and counter, so neighbouring seeds give unrelated
  streams, at three ops per latent (a ``fold_in`` costs five more)."""
  def draw(rows):
    base = tf.cast(seed, tf.int64) + tf.stack(
        [tf.constant(0, tf.int64), tf.cast(index, tf.int64) * len(noise_spec)])
    lead = [rows] if samples == 1 else [rows, samples]
    return {name: tf.random.stateless_normal(
        tf.concat([lead, spec.shape[1:].as_list()], 0) if spec.shape.rank > 1 else lead,
        base + tf.constant([0, j], tf.int64), dtype=spec.dtype)
            for j, (name, spec) in enumerate(sorted(noise_spec.items()))}
  return draw
