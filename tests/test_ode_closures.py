"""``ed.ode.solve`` with a right-hand side that closes over latents, and
``increments=True`` (issue 53, item 1)."""

import time

import numpy as np
import pytest
import tensorflow as tf

import edward_lite as ed

TIMES = np.linspace(0.5, 10., 20)
W = np.random.default_rng(0).normal(size=20)
N = 1000.


def _decay_loss_and_grad(k, y0, rtol=1e-9):
  """``sum_j w_j y(t_j)`` of ``y' = -k y`` with ``k`` read by closure, and its
  gradient in ``(k, y0)``."""
  with tf.GradientTape() as tape:
    tape.watch([k, y0])
    rate = 1. * k  # a value computed from the watched one, as a latent's
    ys = ed.ode.solve(lambda t, y: -rate * y, y0, TIMES, rtol=rtol, atol=1e-12)
    loss = tf.reduce_sum(W * ys[:, 0])
  return loss, tape.gradient(loss, [k, y0])


@pytest.mark.parametrize("mode", ["eager", "xla"])
def test_a_value_fn_closes_over_gets_its_gradient(mode):
  """Forward sensitivities reach a value ``fn`` reads by closure, eagerly and
  compiled, to the analytic derivative (they reached ``args`` only: the
  gradient was silently zero).  Eagerly at a coarser tolerance (fewer of
  the loop's Python steps)."""
  k, y0 = tf.constant(0.7, tf.float64), tf.constant([2.], tf.float64)
  if mode == "eager":
    _, (dk, dy0) = _decay_loss_and_grad(k, y0, rtol=1e-5)
  else:
    _, (dk, dy0) = tf.function(_decay_loss_and_grad, jit_compile=True)(k, y0)
  e = np.exp(-0.7 * TIMES)
  tolerance = 1e-4 if mode == "eager" else 1e-6
  np.testing.assert_allclose(float(dk), np.sum(W * -TIMES * 2. * e), rtol=tolerance)
  np.testing.assert_allclose(dy0.numpy(), [np.sum(W * e)], rtol=tolerance)


def test_a_variable_fn_reads_gets_its_gradient_in_reverse_mode():
  """A ``tf.Variable`` in ``fn`` (beyond forward sensitivities' reach) is
  differentiated in reverse mode through the loop."""
  k = tf.Variable(0.7, dtype=tf.float64)

  @tf.function(jit_compile=True)
  def gradient():
    with tf.GradientTape() as tape:
      ys = ed.ode.solve(lambda t, y: -k * y, tf.constant([2.], tf.float64), TIMES, rtol=1e-9,
                        atol=1e-12)
      loss = tf.reduce_sum(W * ys[:, 0])
    return tape.gradient(loss, k)

  dk = gradient()
  np.testing.assert_allclose(float(dk), np.sum(W * -TIMES * 2. * np.exp(-0.7 * TIMES)),
                             rtol=1e-6)


def sir_closure(days):
  """The SIR epidemic as TFP's and NumPyro's examples write it: ``f`` reads
  the latent rates by name.  Poisson new cases per day."""
  beta = ed.LogNormal(np.log(0.4), 0.5, name="beta")
  gamma = ed.LogNormal(np.log(0.2), 0.5, name="gamma")

  def f(t, y):
    del t
    new = beta * y[0] * y[1] / N
    return tf.stack([-new, new - gamma * y[1], gamma * y[1]])

  s = ed.ode.solve(f, tf.constant([N - 5., 5., 0.]), days)[:, 0]
  return ed.Poisson(tf.maximum(s[:-1] - s[1:], 1e-6), name="cases")


DAYS = np.arange(0., 31., dtype=np.float32)


def _sir_new_cases(beta, gamma, steps_per_day=20):
  """New cases on days 1..30 by a float64 NumPy RK4 (10 steps a day), for
  arrays of rates; the increments summed, not states subtracted."""
  beta, gamma = np.asarray(beta, np.float64)[..., None], np.asarray(gamma, np.float64)[..., None]
  y = np.broadcast_to(np.array([N - 5., 5., 0.]), beta.shape[:-1] + (3,)).copy()
  h = 1. / steps_per_day

  def f(y):
    new = beta[..., 0] * y[..., 0] * y[..., 1] / N
    return np.stack([-new, new - gamma[..., 0] * y[..., 1], gamma[..., 0] * y[..., 1]], -1)

  out = []
  for _ in range(30):
    day = 0.
    for _ in range(steps_per_day):
      k1 = f(y)
      k2 = f(y + h / 2 * k1)
      k3 = f(y + h / 2 * k2)
      k4 = f(y + h * k3)
      delta = h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
      y, day = y + delta, day - delta[..., 0]
    out.append(day)
  return np.stack(out, -1)


def _sir_log_density(u, cases):
  """The closure-form program's log density over ``u = (log beta, log
  gamma)`` by NumPy (float64 RK4): normal priors on ``u`` (log-normal rates
  with their Jacobians), Poisson new cases."""
  from scipy import stats  # pylint: disable=import-outside-toplevel
  rate = np.maximum(_sir_new_cases(np.exp(u[0]), np.exp(u[1]), steps_per_day=100), 1e-6)
  return (stats.norm.logpdf(u[0], np.log(0.4), 0.5) + stats.norm.logpdf(u[1], np.log(0.2), 0.5)
          + stats.poisson.logpmf(cases, rate).sum())


@pytest.mark.slow
def test_the_closure_form_log_density_and_gradient_through_the_target():
  """Through the target (chains one after another inside the compiled
  program), the closure form's log density equals NumPy's and its gradient
  the central differences of NumPy's (it was zero in the rates: the
  sensitivities reached ``args`` only)."""
  cases = np.random.default_rng(0).poisson(_sir_new_cases(0.5, 0.2)).astype(np.float32)
  u = np.array([np.log(0.45), np.log(0.22)])
  target = ed.make_target(sir_closure, DAYS, observed={"cases": cases})
  value, grad = tf.function(target.value_and_gradient_flat)(
      tf.constant(u[None], tf.float32))
  np.testing.assert_allclose(float(value[0]), _sir_log_density(u, cases), rtol=1e-5)
  eps = 1e-5
  numeric = [(_sir_log_density(u + eps * e, cases) - _sir_log_density(u - eps * e, cases))
             / (2 * eps) for e in np.eye(2)]
  np.testing.assert_allclose(grad[0], numeric, rtol=2e-3)
  assert np.all(np.abs(numeric) > 10.)  # a point where the gradient says something


@pytest.mark.parametrize("method", ["rk45", "rodas3", "rk4"])
def test_increments_and_their_gradient_against_the_closed_form(method):
  """Row j is y(t_j) - y(t_{j-1}) (row 0 from t0), with repeated times and
  an output at t0; its gradient in k is the analytic one (compiled)."""
  times = np.array([0., 0.3, 0.3, 1.0, 2.5, 2.6, 7.])
  kwargs = {"rk45": dict(rtol=1e-10, atol=1e-12), "rodas3": dict(rtol=1e-7, atol=1e-9,
                                                                 max_steps=5000),
            "rk4": dict(steps_per_unit=50)}[method]

  @tf.function(jit_compile=True)
  def increments_and_gradient(k):
    with tf.GradientTape() as tape:
      tape.watch(k)
      inc = ed.ode.solve(lambda t, y, k: -k * y, tf.constant([2.], tf.float64), times,
                         args=(k,), method=method, increments=True, **kwargs)[:, 0]
      loss = tf.reduce_sum(inc * np.arange(1., 8.))
    return inc, tape.gradient(loss, k)

  inc, grad = increments_and_gradient(tf.constant(0.7, tf.float64))
  exact = 2. * np.exp(-0.7 * times)
  np.testing.assert_allclose(inc, np.diff(exact, prepend=2.), atol=1e-7)
  d_exact = -times * exact
  np.testing.assert_allclose(float(grad), np.sum(np.arange(1., 8.) * np.diff(d_exact,
                                                                             prepend=0.)),
                             rtol=1e-6)


def test_increments_keep_the_digits_float32_states_lose():
  """A dying epidemic in float32 (S near 989, a day's new cases down to
  1e-5): the increments match a float64 reference to 1e-3 relative, where
  differences of the float32 states are off by more than 10%."""
  beta, gamma = 0.2, 1.0

  def f(t, y):
    del t
    new = beta * y[0] * y[1] / N
    return tf.stack([-new, new - gamma * y[1], gamma * y[1]])

  y0 = tf.constant([N - 5., 5., 0.])
  reference = _sir_new_cases(beta, gamma, steps_per_day=200)[:12]
  solve = tf.function(lambda increments: ed.ode.solve(f, y0, DAYS, increments=increments),
                      jit_compile=True)
  new_cases = -solve(True)[1:13, 0].numpy()
  s = solve(False)[:13, 0].numpy()
  np.testing.assert_allclose(new_cases, reference, rtol=1e-3)
  assert np.max(np.abs((s[:-1] - s[1:]) / reference - 1.)) > 0.1


@pytest.mark.long
def test_the_closure_form_sir_at_the_defaults_matches_quadrature():
  """The issue's SIR (closure form, ``ed.ode.solve`` at its defaults, new
  cases as ``S[:-1] - S[1:]`` in float32), NUTS 4 x (500 + 500): the
  posterior means within 4 Monte Carlo errors and sds within 15% of grid
  quadrature, at a handful of gradients a draw (it ran at the maximum tree
  depth, 1023, with R-hat 3 before).  Measured: 31 s wall on the 2-core
  machine, compile included (RESULTS section 54)."""
  cases = np.random.default_rng(0).poisson(_sir_new_cases(0.5, 0.2)).astype(np.float32)
  start = time.time()
  fit = ed.mcmc.sample(sir_closure, DAYS, observed={"cases": cases}, chains=4, warmup=500,
                       draws=500, seed=0, progress=False)
  wall = time.time() - start
  lb, lg = np.meshgrid(np.linspace(np.log(0.3), np.log(0.8), 121),
                       np.linspace(np.log(0.08), np.log(0.5), 121), indexing="ij")
  rate = np.maximum(_sir_new_cases(np.exp(lb), np.exp(lg)), 1e-6)
  log_post = ((cases * np.log(rate) - rate).sum(-1) - 0.5 * ((lb - np.log(0.4)) / 0.5) ** 2
              - 0.5 * ((lg - np.log(0.2)) / 0.5) ** 2)  # log-normal priors in log space
  w = np.exp(log_post - log_post.max())
  w /= w.sum()
  summary = fit.summary()
  for name, grid in (("beta", np.exp(lb)), ("gamma", np.exp(lg))):
    mean = np.sum(w * grid)
    sd = np.sqrt(np.sum(w * (grid - mean) ** 2))
    draws = fit.draws[name]
    assert abs(draws.mean() - mean) < 4 * float(summary.loc[name, "mcse_mean"]), (
        name, draws.mean(), mean)
    assert abs(draws.std() / sd - 1.) < 0.15, (name, draws.std(), sd)
  assert fit.sample_stats["num_gradients"].mean() < 15, fit.sample_stats["num_gradients"].mean()
  print(f"closure-form SIR: {wall:.1f} s wall")
