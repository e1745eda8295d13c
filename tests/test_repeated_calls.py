"""A notebook's repeated calls stay quiet.

TensorFlow warns "N out of the last N calls to <function ...> triggered
tf.function retracing" when one code location is traced again and again,
counting across every ``tf.function`` made from it.  A user who fits
several models in one session (or reruns a cell) calls the library's
functions that compile a closure per call, or ``tf.vectorized_map``
eagerly (which traces anew at each call): the warning would blame their
code for the library's design.  Five rounds of a typical session (the
warning's threshold), each on new data (a new program), must log none;
without XLA, since a trace is counted the same either way.
"""

import logging

import numpy as np
import pytest

import edward_lite as ed



def model(n):
  mu = ed.Normal(0., 1., name="mu")
  sigma = ed.HalfNormal(1., name="sigma")
  return ed.Normal(mu, sigma, sample_shape=n, name="y")


class _Retracing(logging.Handler):

  def __init__(self):
    super().__init__(logging.WARNING)
    self.messages = []

  def emit(self, record):
    if "triggered tf.function retracing" in record.getMessage():
      self.messages.append(record.getMessage()[:160])


@pytest.mark.slow  # five new programs: about 30-50 s
def test_five_rounds_of_a_session_log_no_retracing_warning():
  handler = _Retracing()
  logger = logging.getLogger("tensorflow")
  logger.addHandler(handler)
  try:
    for i in range(5):
      y = np.linspace(-1., 1., 5 + i).astype(np.float32)
      post = ed.mcmc.sample(model, len(y), observed={"y": y}, chains=4, warmup=60, draws=60,
                            seed=i, init="prior", progress=False, jit_compile=False)
      post.summary()
      assert post.log_likelihood()["y"].shape == (60, 4, len(y))
      assert post.posterior_predictive(len(y), seed=i)["y"].shape == (60, 4, len(y))
      fit = ed.vi.fit(model, len(y), observed={"y": y}, family="iaf", steps=30, seed=i,
                      progress=False, jit_compile=False)
      fit.sample(8, seed=i)
      target = ed.make_target(model, len(y), observed={"y": y})
      flat = np.zeros([3, target.dim], np.float32)
      target.log_prob_flat(flat)
      target.value_and_gradient_flat(flat)
      target.log_prob_terms_flat(flat)
      target.log_det_jacobian_flat(flat)
      target.sample_prior(3, seed=i)
  finally:
    logger.removeHandler(handler)
  assert not handler.messages, handler.messages
