"""The constraining bijector of a distribution's support.

``support_bijector(dist)`` maps the unconstrained space onto the support of
``dist``: the latents' transform in ``ed.make_target`` and the observed
values' support test in ``edward_lite.checks.support`` both use it.
"""

import tensorflow_probability as tfp

from edward_lite.language.bounds import Bounds, infinite

__all__ = ["support_bijector"]

tfd, tfb = tfp.distributions, tfp.bijectors


def support_bijector(dist):
  """Bijector from unconstrained space onto the support of ``dist``, or None.

  TFP's default event-space bijector; for a ``TruncatedNormal`` with an
  infinite end, ``Bounds`` (TFP's ``Sigmoid(low, high)`` is NaN there); for
  mixtures, for which TFP defines none, the identity when every component
  lives on the whole real line.  None for discrete distributions.
  """
  if not dist.dtype.is_floating:
    return None
  if isinstance(dist, tfd.TruncatedNormal):
    bounds = _infinite_bounds(dist)
    if bounds is not None:
      return bounds
  try:
    bijector = dist.experimental_default_event_space_bijector()
  except NotImplementedError:
    bijector = None
  if bijector is not None:
    return bijector
  if isinstance(dist, tfd.MixtureSameFamily):
    components = [dist.components_distribution]
  elif isinstance(dist, tfd.Mixture):
    components = dist.components
  else:
    return None
  for component in components:
    if not isinstance(support_bijector(component), tfb.Identity):
      return None
  return tfb.Identity()


def _infinite_bounds(dist):
  """``Bounds`` for a distribution whose ``low`` or ``high`` holds an
  infinity known when the program is traced, else None."""
  if not any(mask is not None and mask.any() for mask in (infinite(dist.low),
                                                           infinite(dist.high))):
    return None
  return Bounds(dist.low, dist.high, dist.dtype)
