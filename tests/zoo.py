"""Standard models and their data, written once for the tests and benchmarks.

``examples/eight_schools.py`` writes the same model out for the reader; the
tests' robustness battery (``tests/battery_models.py``) holds the models
translated from Stan with their reference posteriors.

Eight schools (Rubin 1981; BDA3 section 5.5): the estimated effects ``y_j``
of coaching programs in eight schools and their standard errors
``sigma_j``.
"""

import numpy as np
import tensorflow as tf

import edward_lite as ed

__all__ = ["EIGHT_SCHOOLS_Y", "EIGHT_SCHOOLS_SIGMA", "eight_schools"]

EIGHT_SCHOOLS_Y = np.array([28., 8., -3., 7., -1., 1., 18., 12.], np.float32)
EIGHT_SCHOOLS_SIGMA = np.array([15., 10., 16., 11., 9., 11., 10., 18.], np.float32)


def eight_schools(sigma):
  """Non-centred: ``mu ~ N(0, 5)``, ``tau ~ HalfCauchy(0, 5)``,
  ``theta_tilde_j ~ N(0, 1)``, ``y_j ~ N(mu + tau theta_tilde_j, sigma_j)``.
  ``sigma [J]`` sets the number of schools."""
  mu = ed.Normal(0., 5., name="mu")
  tau = ed.HalfCauchy(0., 5., name="tau")
  theta_tilde = ed.Normal(tf.zeros_like(sigma), 1., name="theta_tilde")
  return ed.Normal(mu + tau * theta_tilde, sigma, name="y")

