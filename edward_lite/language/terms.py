"""Terms of the log joint that are not proper random draws.

* ``ed.Factor(log_density, name=...)`` adds ``log_density`` to the log joint:
  Stan's ``target +=``, NumPyro's ``factor``, PyMC's ``Potential``.  It is a
  random variable with a fixed, empty value whose log-probability is the
  term (TFP's ``IncrementLogProb``), so every tracer, ``make_log_joint_fn``,
  the targets, MCMC and VI count it; it is summed when not a scalar.
* ``ed.Flat(low=None, high=None, shape=(), name=...)`` is an improper flat
  prior over the real line, a half-line or an interval -- Stan's ``real x;``,
  ``real<lower=0> s;``, ``real<lower=a, upper=b> p;`` with no prior
  statement.  Its bounds may be other latents.  Its density is 1 on the
  support, so the posterior is proper only if the likelihood makes it so.
  It has no draws: inference starts it from ``init`` (``"uniform"`` works),
  and prior predictive sampling refuses it with an error naming it.
* ``ed.Flat(support=..., shape=..., name=...)`` is the same for Stan's
  constrained types: ``"ordered"``, ``"positive_ordered"``, ``"simplex"``,
  ``"cholesky_factor_corr"``, ``"corr_matrix"``, ``"cholesky_factor_cov"``,
  ``"cov_matrix"`` (see ``SUPPORTS``).  As in Stan, the density is 1 with
  respect to Lebesgue measure on the variable's free coordinates (all
  entries of an ordered vector; the first K - 1 of a simplex; the entries
  below the diagonal of a correlation matrix or its Cholesky factor; those
  on and below it of a covariance matrix or its Cholesky factor), and the
  constraining bijector's log-det-Jacobian, which every latent's transform
  adds to the target, is the one to those coordinates: a flat
  ``cov_matrix`` under a Gaussian likelihood has the Inverse-Wishart
  posterior Stan gives, a flat ``corr_matrix`` is LKJ(1).
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.language import dtypes
from edward_lite.language.random_variable import RandomVariable
from edward_lite.language.tracing import traceable

__all__ = ["Factor", "Flat", "ImproperUniform", "SUPPORTS"]

tfd, tfb = tfp.distributions, tfp.bijectors

# Stan's constrained types: support -> (event rank, what the shape must be).
SUPPORTS = {
    "real": (0, "any shape"),
    "ordered": (1, "a vector shape (..., K), e.g. shape=3"),
    "positive_ordered": (1, "a vector shape (..., K), e.g. shape=3"),
    "simplex": (1, "a vector shape (..., K), e.g. shape=3"),
    "cholesky_factor_corr": (2, "a square matrix shape (..., K, K), e.g. shape=(3, 3)"),
    "corr_matrix": (2, "a square matrix shape (..., K, K), e.g. shape=(3, 3)"),
    "cholesky_factor_cov": (2, "a square matrix shape (..., K, K), e.g. shape=(3, 3)"),
    "cov_matrix": (2, "a square matrix shape (..., K, K), e.g. shape=(3, 3)"),
}
_ALIASES = {"cholesky_corr": "cholesky_factor_corr", "corr": "corr_matrix",
            "cholesky_cov": "cholesky_factor_cov", "positive_definite": "cov_matrix"}


def _factor(log_density, value=None, name=None):
  dist = tfp.experimental.distributions.IncrementLogProb(log_density, name=name or "factor")
  return RandomVariable(dist, value=value, name=name)


_factor.__name__ = "ed.Factor"  # as messages name the constructor ("... with ed.Factor")
_traceable_factor = traceable(_factor)


def Factor(log_density, name=None):  # pylint: disable=invalid-name
  """Adds ``log_density`` (a Tensor, summed if not scalar) to the log joint.

  Args:
    log_density: the term, computed from the program's random variables.
    name: required when the program is used for inference (like every
      random variable's).

  Returns:
    A ``RandomVariable`` whose value is fixed and empty (shape
    ``log_density.shape + [0]``), so tracers see it as fixed, never as a
    latent; its ``distribution.log_prob`` is the term.
  """
  log_density = tf.convert_to_tensor(log_density,
                                     dtype_hint=dtypes.float_dtype() or tf.float32)
  if not log_density.dtype.is_floating:
    raise TypeError(f"ed.Factor '{name}': the log density must be a floating Tensor; got "
                    f"{log_density.dtype.name}.")
  if log_density.shape.is_fully_defined():
    value = tf.zeros(log_density.shape.as_list() + [0], log_density.dtype)
  else:  # a batch of unknown size, in a traced function
    value = tf.zeros(tf.concat([tf.shape(log_density), [0]], 0), log_density.dtype)
  return _traceable_factor(log_density, value=value, name=name)


class _JacobianCorrection(tfb.AutoCompositeTensorBijector):
  """The identity, with the log-det-Jacobian that turns a chain's into the
  one to Stan's free coordinates where TFP's differs.

  ``kind="simplex"``: ``-log(K) / 2`` (``SoftmaxCentered`` counts surface
  measure on the simplex, ``sqrt(K)`` times Lebesgue measure on its first
  K - 1 coordinates).  ``kind="corr_matrix"``, at a correlation matrix's
  Cholesky factor ``L``: ``-K log 2 - sum_j log L_jj``
  (``CholeskyOuterProduct`` counts ``L``'s diagonal as free, which a
  correlation matrix's factor does not have).  A bijector of its own in the
  chain keeps TFP's types there, which the support checks read.
  """

  def __init__(self, kind, k, name="jacobian_correction"):
    parameters = dict(locals())
    self._kind, self._k = kind, k
    super().__init__(forward_min_event_ndims=1 if kind == "simplex" else 2,
                     parameters=parameters, name=name)

  @classmethod
  def _parameter_properties(cls, dtype):
    return {}

  def _forward(self, x):
    return x

  def _inverse(self, y):
    return y

  def _forward_log_det_jacobian(self, x):
    if self._kind == "simplex":
      return tf.reduce_sum(tf.zeros_like(x), -1) - 0.5 * np.log(self._k)
    return -self._k * np.log(2.) - tf.reduce_sum(tf.math.log(tf.linalg.diag_part(x)), -1)

  def _inverse_log_det_jacobian(self, y):
    return -self._forward_log_det_jacobian(y)


def _stan_transform(support, k):
  """Unconstrained -> ``support`` (event size ``k``), with the log-det-Jacobian
  to the free coordinates of Stan's type (checked against autodiff in
  tests/test_constrained_types.py)."""
  if support == "ordered":  # x1 = u1, xi = x(i-1) + exp(ui)
    return tfb.Ascending()
  if support == "positive_ordered":  # xi = sum_(j<=i) exp(uj): |J| = prod exp(u)
    return tfb.Chain([tfb.Cumsum(), tfb.Exp()])
  if support == "simplex":  # to the first K - 1 entries
    return tfb.Chain([tfb.SoftmaxCentered(), _JacobianCorrection("simplex", k)])
  if support == "cholesky_factor_corr":  # to the entries below the diagonal
    return tfb.CorrelationCholesky()
  if support == "corr_matrix":
    # Omega = L L^T maps L's entries below the diagonal to Omega's with
    # log|J| = sum_j (K - j) log L_jj (1-based j); TFP's CholeskyOuterProduct
    # counts L's diagonal as free too: K log 2 + sum_j (K + 1 - j) log L_jj.
    return tfb.Chain([tfb.CholeskyOuterProduct(), _JacobianCorrection("corr_matrix", k),
                      tfb.CorrelationCholesky()])
  # Stan's: the diagonal through exp, the entries below it unchanged.
  cholesky = tfb.FillScaleTriL(diag_bijector=tfb.Exp(), diag_shift=None)
  if support == "cholesky_factor_cov":
    return cholesky
  return tfb.Chain([tfb.CholeskyOuterProduct(), cholesky])  # cov_matrix


class ImproperUniform(tfd.Distribution):
  """Improper uniform density on ``(low, high)`` or a Stan constrained type.

  With ``support="real"``: ``log_prob(x) = 0`` inside ``(low, high)`` (either
  end may be None), ``-inf`` outside; the default event-space bijector is
  Stan's transform of a bounded ``real``: identity; ``low + exp(u)``;
  ``high - exp(u)``; ``low + (high - low) sigmoid(u)``.

  With another ``support`` (a key of ``SUPPORTS``; no bounds): events are
  vectors or square matrices, the last one or two dimensions of ``shape``;
  ``log_prob`` is 0 (it does not test membership: latents are kept in the
  support by the transform, observed values are checked once by
  ``edward_lite.checks.support``); the default event-space bijector is Stan's
  transform, its log-det-Jacobian the one to the type's free coordinates.

  Sampling raises: an improper density has no draws.
  """

  def __init__(self, low=None, high=None, shape=(), dtype=tf.float32, support="real",
               validate_args=False, allow_nan_stats=True, name="ImproperUniform"):
    parameters = dict(locals())
    what = f"ed.Flat '{name}'"
    support = _ALIASES.get(support, support)
    if support not in SUPPORTS:
      names = ", ".join(repr(n) for n in list(SUPPORTS) + list(_ALIASES))
      raise ValueError(f"{what}: unknown support={support!r}; expected one of {names}.")
    rank, needs = SUPPORTS[support]
    try:
      shape = tf.TensorShape(shape)
      if shape.rank is not None and any(d is not None and d < 0 for d in shape.as_list()):
        raise ValueError("a negative dimension")
    except (TypeError, ValueError) as e:
      raise ValueError(f"{what}: shape= must be a shape (an int or a tuple of ints >= 0); got "
                       f"{shape!r}.") from e
    if rank:
      if low is not None or high is not None:
        raise ValueError(f"{what}: low= and high= bound support='real' only; "
                         f"support={support!r} takes neither.")
      if (not shape.is_fully_defined() or shape.rank < rank or shape[-1] < 1 or
          (rank == 2 and shape[-1] != shape[-2])):
        raise ValueError(f"{what}: support={support!r} needs {needs}; got shape "
                         f"{tuple(shape.as_list()) if shape.rank is not None else shape}.")
    self._support, self._rank = support, rank
    bounds = {}
    for key, bound in (("low", low), ("high", high)):
      try:
        bounds[key] = None if bound is None else tf.convert_to_tensor(bound, dtype)
      except (TypeError, ValueError) as e:
        raise TypeError(f"{what}: {key}= must be a number or a Tensor of {dtype.name}; got "
                        f"{bound!r}.") from e
    with tf.name_scope(name) as name:
      self._low, self._high = bounds["low"], bounds["high"]
      self._shape = shape
      super().__init__(dtype=dtype, reparameterization_type=tfd.FULLY_REPARAMETERIZED,
                       validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                       parameters=parameters, name=name)

  @classmethod
  def _parameter_properties(cls, dtype, num_classes=None):
    return {}

  @property
  def low(self):
    return self._low

  @property
  def high(self):
    return self._high

  @property
  def support(self):
    """Stan's name of the support (a key of ``SUPPORTS``)."""
    return self._support

  def _batch_shape(self):
    shape = self._shape[:-self._rank] if self._rank else self._shape
    for bound in (self._low, self._high):
      if bound is not None:
        shape = tf.broadcast_static_shape(shape, bound.shape)
    return shape

  def _event_shape(self):
    return self._shape[-self._rank:] if self._rank else tf.TensorShape([])

  def _batch_shape_tensor(self):
    return tf.constant(self._batch_shape().as_list(), tf.int32)

  def _event_shape_tensor(self):
    return tf.constant(self._event_shape().as_list(), tf.int32)

  def _log_prob(self, x):
    x = tf.convert_to_tensor(x, self.dtype)
    if self._rank:
      batch = tf.shape(x)[:tf.rank(x) - self._rank]
      return tf.zeros(tf.broadcast_dynamic_shape(batch, self._batch_shape_tensor()), self.dtype)
    inside = tf.ones_like(x, tf.bool)
    if self._low is not None:
      inside &= x > self._low
    if self._high is not None:
      inside &= x < self._high
    zero = tf.zeros_like(x)
    return tf.broadcast_to(tf.where(inside, zero, -np.inf * tf.ones_like(x)),
                           tf.broadcast_dynamic_shape(tf.shape(x), self._batch_shape_tensor()))

  def _sample_n(self, n, seed=None):
    raise NotImplementedError(
        f"'{self.name}' has an improper flat prior (ed.Flat), which has no draws: prior "
        "(predictive) sampling and init='prior' cannot use it; use init='uniform' or "
        "give init= values.")

  def _default_event_space_bijector(self):
    if self._rank:
      return _stan_transform(self._support, self._shape[-1])
    low, high = self._low, self._high
    if low is None and high is None:
      return tfb.Identity()
    if high is None:
      return tfb.Chain([tfb.Shift(low), tfb.Exp()])
    if low is None:
      return tfb.Chain([tfb.Shift(high), tfb.Scale(-tf.ones([], self.dtype)), tfb.Exp()])
    return tfb.Sigmoid(low=low, high=high)

  def placeholder(self, sample_shape=()):
    """A point inside the support (the value while a program is traced)."""
    shape = tf.TensorShape(sample_shape).concatenate(self.batch_shape)
    if self._rank:  # the image of u = 0: 0, 1, ...; 1, 2, ...; 1/K; the identity
      bijector = self._default_event_space_bijector()
      u = tf.zeros(bijector.inverse_event_shape(self.event_shape), self.dtype)
      return tf.broadcast_to(bijector.forward(u), shape.concatenate(self.event_shape))
    low, high = self._low, self._high
    zero = tf.zeros(shape, self.dtype)
    if low is None and high is None:
      return zero
    if high is None:
      return zero + low + 1.
    if low is None:
      return zero + high - 1.
    return zero + 0.5 * (low + high)


def _flat(low=None, high=None, shape=(), dtype=None, sample_shape=(), value=None, name=None,
          support="real"):
  dtype = dtype or dtypes.float_dtype() or tf.float32
  given = (int, float, np.ndarray, np.generic)
  if isinstance(low, given) and isinstance(high, given):  # bounds given as numbers
    with np.errstate(invalid="ignore"):
      empty = np.asarray(low) >= np.asarray(high)
    if np.any(empty):
      raise ValueError(f"ed.Flat '{name}': low={_bound(low)} is not below high={_bound(high)}, "
                       "so its support is empty.")
  low, high = (dtypes.cast_literal(b) if isinstance(b, float) else b for b in (low, high))
  dist = ImproperUniform(low, high, shape=shape, dtype=dtype, support=support,
                         name=name or "Flat")
  if value is None:
    value = dist.placeholder(sample_shape)
  return RandomVariable(dist, sample_shape=sample_shape, value=value, name=name)


def _bound(value):
  array = np.asarray(value)
  return f"{array.item():g}" if array.size == 1 else np.array2string(array, threshold=6)


_flat.__name__ = "ed.Flat"
_traceable_flat = traceable(_flat)


def Flat(low=None, high=None, shape=(), dtype=None, sample_shape=(), value=None, name=None,  # pylint: disable=invalid-name
         support="real"):
  """An improper flat prior: Stan's ``real`` (bounded or not) or constrained type.

  ``ed.Flat(name="x")``, ``ed.Flat(low=0., name="s")``: ``real x;``,
  ``real<lower=0> s;``.  ``ed.Flat(support="simplex", shape=4, name="p")``:
  ``simplex[4] p;``; ``ed.Flat(support="cov_matrix", shape=(3, 3),
  name="S")``: ``cov_matrix[3] S;`` -- each with no prior statement: density
  1 with respect to Lebesgue measure on the free coordinates, as in Stan.

  Args:
    low, high: bounds of ``support="real"`` (None: unbounded on that side);
      Tensors, which may be other random variables.
    shape: the variable's shape (broadcast with the bounds'); for a vector
      type it ends with the vector's length K, for a matrix type with
      ``(K, K)``, and leading dimensions are a batch of such (Stan's arrays).
    dtype: floating dtype (default: the model's).
    sample_shape, value, name: as for every random variable.
    support: ``"real"`` (default), ``"ordered"``, ``"positive_ordered"``,
      ``"simplex"``, ``"cholesky_factor_corr"`` (alias ``"cholesky_corr"``),
      ``"corr_matrix"`` (``"corr"``), ``"cholesky_factor_cov"``
      (``"cholesky_cov"``, square only), ``"cov_matrix"``
      (``"positive_definite"``).

  Raises:
    ValueError: naming the variable, for an unknown support, a shape that
      does not fit it, or bounds with a support other than ``"real"``.

  Returns:
    A ``RandomVariable`` of ``ImproperUniform``; its value, when not given,
    is a point inside the support (the variable has no draws).
  """
  return _traceable_flat(low=low, high=high, shape=shape, dtype=dtype,
                         sample_shape=sample_shape, value=value, name=name, support=support)
