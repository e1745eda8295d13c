"""What ``ed.vi.fit`` says at the end of a fit that cannot be trusted.

Two checks, each a ``RuntimeWarning`` naming what it saw and what to do:

* **Pareto k-hat** of the importance weights ``log p(x, y) - log q(x)`` at
  ``S = 4000`` surrogate draws (``VIResult.importance``, PSIS; Yao, Vehtari,
  Simpson and Gelman 2018): at or above ``psis.khat_threshold(S)`` the
  surrogate misses part of the posterior -- it may sit far from it (a fit
  started far from a mean of 243 ended at 38 with k-hat 15), or be too
  narrow.  The draws are kept, so ``summary``, ``resample`` and ``k_hat``
  reuse them.
* **The ELBO still rising**: the mean ELBO of the last tenth of the steps
  exceeds that of the tenth before by more than ``RISE_NATS`` and by more
  than ``RISE_SE`` standard errors of that difference -- the fit stopped
  before it converged.

Skipped for ``dataset=`` fits (k-hat would need a pass over the dataset per
4000 draws; ``fit.k_hat`` computes it on request).
"""

import warnings

import numpy as np

from edward_lite.analysis import psis

__all__ = ["warn_if_untrusted", "rising_note", "RISE_NATS", "RISE_SE"]

RISE_NATS = 1.  # a rise of the mean ELBO between the last two tenths this large ...
RISE_SE = 4.    # ... and this many standard errors: not converged


def warn_if_untrusted(result, stacklevel=4):
  """Warns (``RuntimeWarning``) when ``result``'s k-hat or ELBO trace says
  the fit cannot be trusted (module docstring); returns the sentences."""
  notes = [note for note in (_khat_note(result), rising_note(result.elbo)) if note]
  for note in notes:
    warnings.warn(note, RuntimeWarning, stacklevel=stacklevel)
  return notes


def _khat_note(result):
  name = getattr(result.family, "name", "variational program")
  try:
    sample = result.importance()
  except psis.ZeroWeightsError:
    return _zero_weights_note(result, name)
  draws = len(sample.log_weights)
  if sample.k_hat < psis.khat_threshold(draws):
    return ""
  return (f"The fitted {name} approximation cannot be trusted as the posterior: "
          f"{psis.khat_message(sample.k_hat, draws)} Compare with ed.mcmc.sample, run more "
          "steps, start elsewhere (init='prior' or init= values near the posterior), or "
          "use a richer family.")


def _zero_weights_note(result, name):
  """The note for a fit whose every importance weight is zero: the model's
  density is zero (or not finite) at every draw of the approximation."""
  nonfinite = result.nonfinite or {}
  skipped = nonfinite.get("skipped", 0)
  rate = (result.settings or {}).get("learning_rate")
  why = (f"{skipped} of {result.steps} steps were skipped for a non-finite ELBO or gradient, "
         "so the optimizer diverged" if skipped else "the fit diverged")
  lower = f" (learning_rate={rate:g})" if isinstance(rate, (int, float)) else ""
  return (f"The fitted {name} approximation is not a posterior: the model's density is zero "
          f"or not finite at every one of its importance draws (every weight is zero); "
          f"{why}: lower the learning rate{lower}, start elsewhere (init=), or check the "
          "model at the ELBO's first skipped step.")


def rising_note(elbo):
  """The note that an ELBO trace ``[steps]`` was still rising at its end
  (module docstring), or "" when it was not."""
  elbo = np.asarray(elbo, np.float64)
  elbo = elbo[np.isfinite(elbo)]
  tenth = len(elbo) // 10
  if tenth < 10:
    return ""
  last, before = elbo[-tenth:], elbo[-2 * tenth:-tenth]
  rise = last.mean() - before.mean()
  se = np.sqrt(last.var() / tenth + before.var() / tenth)
  if rise <= max(RISE_NATS, RISE_SE * se):
    return ""
  return (f"The ELBO was still rising when the fit ended: its mean over the last "
          f"{tenth} steps is {rise:.3g} above the {tenth} steps before, so the fit has not "
          "converged; run more steps (steps=) or raise the learning rate.")
