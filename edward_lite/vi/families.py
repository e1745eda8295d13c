"""Variational families over the flat unconstrained space ``R^D``.

Each family is a density ``q_phi(u)`` on the unconstrained space of the model
target (``u[D]``, the latents flattened in program order); the fit composes
it with the model's constraining bijectors, so ``x = b(u)`` lives on the
support of the posterior and nobody writes a bijector.

A family is stateless: ``init(dim, dtype, loc)`` gives initial parameter
values (a dict of NumPy arrays, turned into ``tf.Variable`` by the fit) and
``distribution(params, dim)`` builds the TFP distribution from parameter
*Tensors*.  Building from Tensors lets the fit stop gradients through the
parameters (the sticking-the-landing estimator) and checkpoint them as plain
arrays.

* ``MeanField`` (ADVI): ``u = m + s * z``, ``z ~ N(0, I)``, ``s = softplus(r)``.
* ``FullRank``: ``u = m + L z``, ``L = diag(softplus(s)) T``, ``T`` unit lower
  triangular.
* ``RealNVP``, ``MAF``, ``IAF``: ``u = m + s * f(z)`` where ``f`` is a stack
  of ``layers`` coupling (RealNVP) or masked autoregressive (MAF/IAF)
  bijectors with fixed random permutations between them, each driven by a
  small MLP of ``hidden`` units per layer.  The last layer of every network
  starts at zero, so a flow starts as mean-field ADVI; the flow learns the
  shape of the posterior in standardized coordinates and the outer affine map
  (the mean-field part) its location and scale.  The MLPs are written as
  functions of their weight Tensors (dense layers; MADE masks for the
  autoregressive ones) and plugged into TFP's ``tfb.RealNVP`` and
  ``tfb.MaskedAutoregressiveFlow``.

Costs per draw, ``D`` dimensions: RealNVP samples and evaluates densities in
one pass; IAF samples (with the density of its own draws) in one pass but
needs ``D`` sequential passes for the density of other points; MAF the
reverse -- so MAF is for small ``D`` (its ELBO needs sampling).
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfd, tfb = tfp.distributions, tfp.bijectors

__all__ = ["Family", "MeanField", "FullRank", "RealNVP", "MAF", "IAF", "get_family"]


class Family:
  """Base class of the flat variational families."""

  name = None
  default_samples = 32
  default_learning_rate = 0.02
  # Whether the density of points the family did not just sample is cheap
  # (needed by the sticking-the-landing estimator).
  cheap_density = True

  def __init__(self, init_scale=0.1):
    if not (np.isfinite(init_scale) and init_scale > 0):
      raise ValueError(f"init_scale must be a positive number; got {init_scale!r}.")
    self.init_scale = float(init_scale)

  def settings(self):
    """A JSON-able description (checkpoint fingerprints, caches)."""
    return dict(family=self.name, **{k: v for k, v in vars(self).items()})

  def init(self, dim, dtype, loc, scale=None):
    """Initial parameter values: dict ``name -> np.ndarray``.

    Args:
      dim: ``D``.
      dtype: NumPy dtype.
      loc: initial location ``[D]``.
      scale: initial marginal scales ``[D]`` (default ``init_scale``).
    """
    del dim
    scale = np.full(np.shape(loc), self.init_scale) if scale is None else np.asarray(scale)
    return {"loc": np.asarray(loc, dtype),
            "scale": np.log(np.expm1(scale)).astype(dtype)}  # softplus inverse

  def distribution(self, params, dim):
    """``q(u)``: a TFP distribution with event shape ``[dim]``."""
    raise NotImplementedError

  def bijector(self, params, dim):
    """``T``: the map ``u = T(v)`` that pushes ``N(0, I_D)`` to ``q(u)``."""
    raise NotImplementedError

  def forward_and_log_det(self, params, dim, v):
    """``(T(v), log|det dT/dv|)`` for ``v [..., D]``: ``[..., D]`` and ``[...]``."""
    bijector = self.bijector(params, dim)
    return bijector.forward(v), bijector.forward_log_det_jacobian(v, event_ndims=1)

  @staticmethod
  def _affine(params):
    """Elementwise ``u = loc + softplus(scale) * v``."""
    return tfb.Chain([tfb.Shift(params["loc"]), tfb.Scale(tf.nn.softplus(params["scale"]))])

  @staticmethod
  def _base(dim, dtype):
    return tfd.Sample(tfd.Normal(tf.zeros([], dtype), tf.ones([], dtype)), [dim])

  def __repr__(self):
    args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
    return f"{type(self).__name__}({args})"


class MeanField(Family):
  """ADVI: independent normals on the unconstrained space.

  ``q(u) = prod_d N(u_d | m_d, s_d^2)``; parameters ``loc[D]`` and
  ``scale[D]`` (``s = softplus(scale)``).
  """

  name = "meanfield"
  default_samples = 32
  default_learning_rate = 0.05

  def distribution(self, params, dim):
    return tfd.MultivariateNormalDiag(params["loc"], tf.nn.softplus(params["scale"]))

  def bijector(self, params, dim):
    return self._affine(params)


class FullRank(Family):
  """Dense Gaussian: ``q(u) = N(u | m, L L^T)``.

  ``L = diag(softplus(scale)) T`` with ``T`` unit lower triangular, from the
  free strict lower triangle of ``scale_tril[D, D]`` (its diagonal and upper
  triangle are ignored).  Scaling each row of ``T`` by its marginal scale
  keeps Adam's steps (about the learning rate per parameter) in proportion
  to the posterior's scale; a free lower triangle diverges on models whose
  posterior scales are small (NumPyro's AutoMultivariateNormal uses the same
  form).
  """

  name = "fullrank"
  default_samples = 64
  default_learning_rate = 0.02

  def init(self, dim, dtype, loc, scale=None):
    params = super().init(dim, dtype, loc, scale)
    params["scale_tril"] = np.zeros([dim, dim], dtype)
    return params

  def distribution(self, params, dim):
    return tfd.MultivariateNormalTriL(params["loc"], self._tril(params, dim))

  @staticmethod
  def _tril(params, dim):
    unit = tf.linalg.set_diag(tf.linalg.band_part(params["scale_tril"], -1, 0),
                              tf.ones([dim], params["loc"].dtype))
    return tf.nn.softplus(params["scale"])[:, None] * unit

  def bijector(self, params, dim):
    return tfb.Chain([tfb.Shift(params["loc"]), tfb.ScaleMatvecTriL(self._tril(params, dim))])


class _Flow(Family):
  """Flow layers on a standard normal, then the mean-field affine map."""

  default_samples = 128
  default_learning_rate = 0.005
  one_pass = False  # _layer_forward: a layer's map and log-det in one network pass

  def __init__(self, layers=4, hidden=(64, 64), init_scale=0.1, seed=0,
               max_log_scale=3.):
    super().__init__(init_scale)
    hidden = (hidden,) if isinstance(hidden, (int, np.integer)) else tuple(hidden)
    if isinstance(layers, bool) or not isinstance(layers, (int, np.integer)) or layers < 1:
      raise ValueError(f"layers must be an integer >= 1; got {layers!r}.")
    if not hidden or any(int(h) < 1 for h in hidden):
      raise ValueError(f"hidden must be a positive width or a tuple of them; got {hidden!r}.")
    self.layers = int(layers)
    self.hidden = tuple(int(h) for h in hidden)
    self.seed = int(seed)
    self.max_log_scale = float(max_log_scale)

  def settings(self):
    out = super().settings()
    out["hidden"] = list(self.hidden)
    return out

  def _permutation(self, dim, layer):
    return np.random.RandomState([self.seed, layer]).permutation(dim).astype(np.int32)

  def _check_dim(self, dim):
    if dim < 2:
      raise ValueError(f"The '{self.name}' flow needs at least 2 unconstrained dimensions; "
                       f"this model has {dim}: use family='meanfield' or 'fullrank'.")

  def _layer_sizes(self, dim, layer):
    """(inputs, outputs) of layer ``layer``'s network."""
    raise NotImplementedError

  def init(self, dim, dtype, loc, scale=None):
    self._check_dim(dim)
    params = super().init(dim, dtype, loc, scale)
    rng = np.random.RandomState(self.seed)
    for layer in range(self.layers):
      n_in, n_out = self._layer_sizes(dim, layer)
      sizes = (n_in,) + self.hidden
      for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"l{layer}_w{i}"] = (rng.randn(a, b) * np.sqrt(1. / a)).astype(dtype)
        params[f"l{layer}_b{i}"] = np.zeros([b], dtype)
      # Zero output layer: the flow starts at the identity.
      params[f"l{layer}_w_out"] = np.zeros([sizes[-1], 2 * n_out], dtype)
      params[f"l{layer}_b_out"] = np.zeros([2 * n_out], dtype)
    return params

  def _network(self, params, layer, masks=None):
    """``x[..., n_in] -> (shift, log_scale)[..., n_out]``: an MLP with tanh
    hidden units; with ``masks`` a MADE (masked weights)."""
    n_hidden = len(self.hidden)
    bound = self.max_log_scale

    def net(x):
      h = x
      for i in range(n_hidden):
        w = params[f"l{layer}_w{i}"]
        if masks is not None:
          w = w * masks[i]
        h = tf.tanh(tf.linalg.matmul(h, w) + params[f"l{layer}_b{i}"])
      w = params[f"l{layer}_w_out"]
      if masks is not None:
        w = w * masks[-1]
      out = tf.linalg.matmul(h, w) + params[f"l{layer}_b_out"]
      shift, raw = tf.split(out, 2, axis=-1)
      return shift, bound * tf.tanh(raw / bound)  # log-scale softly clipped

    return net

  def _flow_layer(self, params, dim, layer):
    raise NotImplementedError

  def bijector(self, params, dim):
    self._check_dim(dim)
    inner = []  # applied first to last
    for layer in range(self.layers):
      if layer:
        inner.append(tfb.Permute(self._permutation(dim, layer)))
      inner.append(self._flow_layer(params, dim, layer))
    return tfb.Chain([self._affine(params)] + inner[::-1])

  def distribution(self, params, dim):
    return tfd.TransformedDistribution(self._base(dim, params["loc"].dtype),
                                       self.bijector(params, dim))

  def _layer_forward(self, params, dim, layer, v):
    """One layer's forward map and log-det-Jacobian in one network pass
    (families with ``one_pass``)."""
    raise NotImplementedError

  def forward_and_log_det(self, params, dim, v):
    """As ``Family``'s, evaluating each layer's network once (TFP's
    bijectors evaluate it once for the map and again for its Jacobian, an
    IAF's twice per draw: RESULTS section 4); MAF's map is sequential, so
    it takes TFP's."""
    if not self.one_pass:
      return super().forward_and_log_det(params, dim, v)
    log_det = tf.zeros(tf.shape(v)[:-1], v.dtype)
    x = v
    for layer in range(self.layers):
      if layer:
        x = tf.gather(x, self._permutation(dim, layer), axis=-1)
      x, layer_log_det = self._layer_forward(params, dim, layer, x)
      log_det += layer_log_det
    scale = tf.nn.softplus(params["scale"])
    return params["loc"] + scale * x, log_det + tf.reduce_sum(tf.math.log(scale))

  def sample_and_log_prob(self, params, dim, n, seed):
    """``n`` draws ``[n, D]`` and their log density, each network evaluated
    once per draw (``forward_and_log_det``); None when the family samples
    sequentially (MAF)."""
    if not self.one_pass:
      return None
    dtype = params["loc"].dtype
    z = tf.random.stateless_normal([n, dim], seed, dtype=dtype)
    u, log_det = self.forward_and_log_det(params, dim, z)
    return u, self._base(dim, dtype).log_prob(z) - log_det


class RealNVP(_Flow):
  """RealNVP (Dinh et al. 2017): affine coupling layers.

  Each layer keeps the first ``d = D // 2`` coordinates ``v_{1:d}`` and maps
  the rest as ``v_{d+1:D} * exp(a(v_{1:d})) + b(v_{1:d})``; permutations
  between layers mix which coordinates condition which.
  """

  name = "realnvp"
  one_pass = True

  def _layer_sizes(self, dim, layer):
    return dim // 2, dim - dim // 2

  def _flow_layer(self, params, dim, layer):
    net = self._network(params, layer)
    return tfb.RealNVP(num_masked=dim // 2,
                       shift_and_log_scale_fn=lambda x, units: net(x))

  def _layer_forward(self, params, dim, layer, v):
    kept, moved = v[..., :dim // 2], v[..., dim // 2:]
    shift, log_scale = self._network(params, layer)(kept)
    return (tf.concat([kept, moved * tf.exp(log_scale) + shift], axis=-1),
            tf.reduce_sum(log_scale, axis=-1))


class MAF(_Flow):
  """Masked autoregressive flow (Papamakarios et al. 2017).

  Each layer maps ``v_i -> v_i * exp(a_i(y_{<i})) + b_i(y_{<i})`` with a MADE
  network (Germain et al. 2015) giving all ``a_i, b_i`` in one pass from the
  layer's *output* ``y``: densities take one pass, sampling ``D``.
  """

  name = "maf"
  default_samples = 32

  def __init__(self, *args, hidden_degrees="spread", **kwargs):
    """As ``_Flow``'s; ``hidden_degrees``: ``"spread"`` (see ``_masks``);
    ``"cycle"`` is the scheme of fits saved before 2026-11-30, kept so that
    they load as fitted."""
    super().__init__(*args, **kwargs)
    if hidden_degrees not in ("spread", "cycle"):
      raise ValueError(f"hidden_degrees must be 'spread' or 'cycle'; got {hidden_degrees!r}.")
    self.hidden_degrees = hidden_degrees

  def _layer_sizes(self, dim, layer):
    return dim, dim

  def _masks(self, dim):
    """MADE masks: input degree ``i`` (1..D), every hidden layer's degrees
    covering 1..D-1 (cycling when it is at least D - 1 wide, else spread
    evenly from 1 to D - 1), output ``i`` sees hidden units
    of degree ``< i``.  (Cycling a layer narrower than D - 1 gave degrees
    1..width only, so inputs past ``width`` conditioned nothing: a 100-D
    funnel's ``v``, permuted to position 92, set no scale in that layer;
    ``hidden_degrees="cycle"`` keeps that scheme for fits saved with it.)"""
    degrees = [np.arange(1, dim + 1)]
    span = max(dim - 1, 1)
    for width in self.hidden:
      cycle = width >= span or self.hidden_degrees == "cycle"
      degrees.append(np.arange(width) % span + 1 if cycle else
                     np.rint(np.linspace(1, span, width)).astype(int))
    masks = [(d_in[:, None] <= d_out[None, :]) for d_in, d_out in zip(degrees[:-1], degrees[1:])]
    out = degrees[-1][:, None] < np.arange(1, dim + 1)[None, :]
    masks.append(np.concatenate([out, out], axis=1))  # shift and log-scale
    return masks

  def _made(self, params, dim, layer):
    dtype = params["loc"].dtype
    masks = [tf.constant(m, dtype) for m in self._masks(dim)]
    return self._network(params, layer, masks)

  def _flow_layer(self, params, dim, layer):
    return tfb.MaskedAutoregressiveFlow(shift_and_log_scale_fn=self._made(params, dim, layer))


class IAF(MAF):
  """Inverse autoregressive flow (Kingma et al. 2016): a MAF layer inverted,
  ``v_i -> v_i * exp(a_i(v_{<i})) + b_i(v_{<i})`` from the layer's *input*,
  so sampling (and the density of its own draws) takes one pass."""

  name = "iaf"
  one_pass = True
  default_samples = 128
  cheap_density = False

  def _flow_layer(self, params, dim, layer):
    return tfb.Invert(super()._flow_layer(params, dim, layer))

  def _layer_forward(self, params, dim, layer, v):
    # The inverse of a MAF layer: (v - shift(v)) * exp(-log_scale(v)).
    shift, log_scale = self._made(params, dim, layer)(v)
    return (v - shift) * tf.exp(-log_scale), -tf.reduce_sum(log_scale, axis=-1)


FAMILIES = {cls.name: cls for cls in (MeanField, FullRank, RealNVP, MAF, IAF)}


def get_family(family):
  """A family object from a name or an instance."""
  if isinstance(family, Family):
    return family
  if isinstance(family, str):
    key = family.lower().replace("_", "").replace("-", "")  # "full_rank", "mean-field"
    if key in FAMILIES:
      return FAMILIES[key]()
  raise ValueError(f"Unknown variational family {family!r}; use one of {sorted(FAMILIES)}, "
                   "a family object (ed.vi.RealNVP(layers=8)) or a variational program.")
