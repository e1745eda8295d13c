"""TFP densities known to be wrong, corrected where a random variable is built.

Each entry maps a distribution class's name to ``fix(args, kwargs) -> (args,
kwargs)``, applied by its ``ed.<Name>`` constructor before TFP sees the
arguments.  The README's "Known TFP issues" lists them.

* ``Inflated(distribution, inflated_loc_logits=l)`` (TFP 0.25): the log
  density at the inflated location is not ``log(sigmoid(l) + (1 -
  sigmoid(l)) p(loc))``; with ``inflated_loc_probs=sigmoid(l)`` it is.  A
  zero-inflated Poisson regression fitted through the logits came out with
  its zero-inflation coefficients at half their maximum-likelihood values.
  The logits are passed on as those probabilities.
"""

import tensorflow as tf

__all__ = ["FIXES"]


def _inflated(args, kwargs):
  if kwargs.get("inflated_loc_logits") is not None:
    if kwargs.get("inflated_loc_probs") is not None:
      raise ValueError("Inflated takes inflated_loc_logits or inflated_loc_probs, not both.")
    kwargs = dict(kwargs)
    kwargs["inflated_loc_probs"] = tf.sigmoid(kwargs.pop("inflated_loc_logits"))
  return args, kwargs


FIXES = {"Inflated": _inflated}
