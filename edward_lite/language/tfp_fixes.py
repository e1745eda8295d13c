"""TFP densities known to be wrong, corrected where a random variable is built.

Each entry of ``FIXES`` maps a distribution class's name to ``fix(args,
kwargs) -> (args, kwargs)``, applied by its ``ed.<Name>`` constructor before
TFP sees the arguments; each of ``REFUSALS`` to ``refuse(name,
distribution)``, which raises one sentence naming the variable before the
constructor draws from a distribution TFP gets wrong.  The README's "Known
TFP issues" lists them.

* ``Inflated(distribution, inflated_loc_logits=l)`` (TFP 0.25): the log
  density at the inflated location is not ``log(sigmoid(l) + (1 -
  sigmoid(l)) p(loc))``; with ``inflated_loc_probs=sigmoid(l)`` it is.  A
  zero-inflated Poisson regression fitted through the logits came out with
  its zero-inflation coefficients at half their maximum-likelihood values.
  The logits are passed on as those probabilities.
* ``TruncatedCauchy`` with an infinite ``low`` or ``high``: NaN density and
  draws; ``TruncatedNormal`` with both ends of an element infinite: its
  sampler fails ("Invalid parameters").  One infinite end of a
  ``TruncatedNormal`` is fine (``language.bounds`` maps such a latent).
"""

import tensorflow as tf

from edward_lite.language.bounds import infinite

__all__ = ["FIXES", "REFUSALS"]


def _inflated(args, kwargs):
  if kwargs.get("inflated_loc_logits") is not None:
    if kwargs.get("inflated_loc_probs") is not None:
      raise ValueError("Inflated takes inflated_loc_logits or inflated_loc_probs, not both.")
    kwargs = dict(kwargs)
    kwargs["inflated_loc_probs"] = tf.sigmoid(kwargs.pop("inflated_loc_logits"))
  return args, kwargs


FIXES = {"Inflated": _inflated}


def _truncated_cauchy(name, distribution):
  low, high = infinite(distribution.low), infinite(distribution.high)
  if any(end is not None and end.any() for end in (low, high)):
    raise ValueError(
        f"Random variable '{name}': TFP's TruncatedCauchy needs finite low and high (its "
        "density is NaN with an infinite end); for a Cauchy on [0, inf) use "
        "ed.HalfCauchy(loc=0., scale=...), or give a finite bound.")


def _truncated_normal(name, distribution):
  low, high = infinite(distribution.low), infinite(distribution.high)
  if low is not None and high is not None and (low & high).any():
    raise ValueError(
        f"Random variable '{name}': a TruncatedNormal with both ends infinite is not "
        "truncated, and TFP cannot draw from it; use ed.Normal there.")


REFUSALS = {"TruncatedCauchy": _truncated_cauchy, "TruncatedNormal": _truncated_normal}
