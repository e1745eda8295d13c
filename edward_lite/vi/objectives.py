"""The objectives ``ed.vi.train`` maximizes, per example ``x_i`` of a batch.

With ``K`` reparameterized draws ``z_ik ~ q(z | x_i)`` and their log weights

    log w_ik = log p(x_i | z_ik) + log p(z_ik) + f_ik - log q(z_ik | x_i)

(``f`` the model's ``ed.Factor`` terms):

* ``ELBO(samples=K, kl_weight=beta)``: the K-sample average of the
  (beta-weighted) evidence lower bound,

      (1/K) sum_k [log p(x_i | z_ik) + f_ik - beta (log q(z_ik | x_i) - log p(z_ik))];

  ``beta`` = 1 is the ELBO; ``beta`` a function of the step gives KL
  annealing (Bowman et al. 2016), a constant ``beta`` > 1 the beta-VAE
  (Higgins et al. 2017).
* ``IWAE(samples=K)``: the importance-weighted bound (Burda et al. 2016),

      log (1/K) sum_k w_ik  <=  log p(x_i),

  tighter with ``K`` (``K`` = 1 is the ELBO).  Its gradient for the guide
  is by default the doubly reparameterized one (Tucker et al. 2019), the
  gradient of

      sum_k stopgrad(w~_ik^2) log w_ik,   w~_ik = w_ik / sum_j w_ij,

  with ``log q``'s parameters stopped, so the guide's gradient reaches it
  through ``z`` only (unbiased, and its variance does not grow with ``K``
  as the plain reparameterized one's signal-to-noise does); the model's
  gradient is the bound's own.
"""

import dataclasses
import math

import tensorflow as tf

from edward_lite.checks import arguments
from edward_lite.runtime import content_hash

__all__ = ["ELBO", "IWAE", "resolve"]


def log_weights(terms):
  """``log w [K, b]`` from ``sample_terms``' dict."""
  return terms["log_likelihood"] + terms["log_prior"] + terms["factor"] - terms["log_q"]


@dataclasses.dataclass(frozen=True)
class ELBO:
  """The K-sample, optionally KL-weighted, evidence lower bound.

  Attributes:
    samples: draws ``K`` per example (vectorized: the batch runs tiled ``K``
      times).
    kl_weight: ``beta``, a number or a function ``beta(step)`` of the
      optimizer step (0-based, a float32 ``Tensor``; use TensorFlow ops,
      e.g. ``lambda t: tf.minimum(1., t / 1000.)``).
  """
  samples: int = 1
  kl_weight: object = 1.0

  def __post_init__(self):
    arguments.check_integer("ELBO(samples=)", self.samples, 1)
    weight = self.kl_weight
    if not callable(weight) and not (isinstance(weight, (int, float)) and not isinstance(
        weight, bool) and math.isfinite(weight) and weight >= 0):
      raise ValueError(f"ELBO(kl_weight=) must be a number >= 0 or a function of the step; "
                       f"got {weight!r}.")

  doubly_reparameterized = False

  def total(self, terms, step):
    """The objective summed over the batch, from ``[K, b]`` terms at
    optimizer ``step`` (one reduction: its gradient costs few ops)."""
    beta = self.kl_weight(step) if callable(self.kl_weight) else self.kl_weight
    if isinstance(beta, (int, float)) and beta == 1:
      value = log_weights(terms)
    else:
      beta = tf.cast(beta, terms["log_q"].dtype)
      value = terms["log_likelihood"] + terms["factor"] - beta * (
          terms["log_q"] - terms["log_prior"])
    return tf.reduce_sum(value) / self.samples

  def describe(self):
    weight = self.kl_weight
    return {"objective": "elbo", "samples": self.samples,
            "kl_weight": weight if not callable(weight) else content_hash.code_summary(
                getattr(weight, "__code__", None) or type(weight).__call__.__code__)[0]}


@dataclasses.dataclass(frozen=True)
class IWAE:
  """The importance-weighted bound of ``K`` draws.

  Attributes:
    samples: draws ``K`` per example (vectorized).
    gradient: the guide's gradient, ``"doubly_reparameterized"`` (default)
      or ``"reparameterized"`` (the bound's own).  The doubly
      reparameterized one needs guide distributions with tensor parameters
      (``Normal``, ``MultivariateNormalDiag``/``TriL``, ``LogNormal``) and no
      variable read by both programs: checked before training.
  """
  samples: int = 5
  gradient: str = "doubly_reparameterized"

  def __post_init__(self):
    arguments.check_integer("IWAE(samples=)", self.samples, 1)
    if self.gradient not in ("doubly_reparameterized", "reparameterized"):
      raise ValueError(f"IWAE(gradient=) must be 'doubly_reparameterized' or "
                       f"'reparameterized'; got {self.gradient!r}.")

  @property
  def doubly_reparameterized(self):
    return self.gradient == "doubly_reparameterized"

  def total(self, terms, step):
    """The bound ``log (1/K) sum_k w_ik`` summed over the batch."""
    del step
    return tf.reduce_sum(tf.reduce_logsumexp(log_weights(terms), axis=0) - math.log(self.samples))

  def guide_surrogate(self, terms):
    """``sum_i sum_k stopgrad(w~_ik^2) log w_ik``: its gradient for the
    guide's variables is the doubly reparameterized one (``terms`` with
    ``log q``'s parameters stopped)."""
    log_w = log_weights(terms)
    weights = tf.stop_gradient(tf.nn.softmax(log_w, axis=0))
    return tf.reduce_sum(tf.square(weights) * log_w)

  def describe(self):
    return {"objective": "iwae", "samples": self.samples, "gradient": self.gradient}


def resolve(objective):
  """``objective=`` of ``ed.vi.train``: None is ``ELBO()``."""
  if objective is None:
    return ELBO()
  if not isinstance(objective, (ELBO, IWAE)):
    raise TypeError(f"objective= must be ed.vi.ELBO(...) or ed.vi.IWAE(...); got "
                    f"{type(objective).__name__}.")
  return objective
