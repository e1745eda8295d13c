"""What a gradient of an ODE program costs: ``ed.ode.solve`` against a
hand-written RK4 ``tf.scan`` (RESULTS section 31).

The SIR program of ``examples/ode_sir.py`` (40 days, 3 states, float32),
its log density and gradient at 4 chains, XLA-compiled, timed after the
first call, for: Dormand-Prince 5(4) at rtol = atol = 1e-6 with forward
sensitivities and with reverse mode through the loop; a hand-written RK4
``tf.scan`` (n steps a day, unrolled inside the day's step); and
``ed.ode.solve(method="rk4")``.  Each method's error is the largest
absolute error of I(t) over the 40 days against a float64 solve at
rtol = 1e-12, at the data-generating parameters.

    PYTHONPATH=. python benchmarks/ode_gradient.py

``stiff`` as an argument runs instead the stiff comparison (RESULTS section
33): Robertson's problem (float64) to t = 40 at rtol = 1e-6, atol = 1e-10,
by rk45 and by Rodas3 (``method="rodas3"``): attempted steps, the largest
relative error at t = 40 against Hairer and Wanner's reference values, the
XLA compile-and-first-call and the per-call seconds of the solve and of its
gradient in the rate 0.04 (of y1(40)), at two ``max_steps``: the
reverse-mode gradient of a bounded loop keeps ``max_steps`` slots for each
intermediate, so its cost grows with the bound, not only with the steps
taken.

    PYTHONPATH=. python benchmarks/ode_gradient.py stiff
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import edward_lite as ed  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from ode_sir import POPULATION, Y0, sir, simulate  # noqa: E402

DAYS = np.arange(1., 41., dtype=np.float32)


def rk4_scan(beta, gamma, per_day):
  """A hand-written RK4 ``tf.scan``: one scan step a day, ``per_day`` RK4
  steps inside it."""
  h = 1. / per_day

  def day(y, _):
    for _ in range(per_day):
      k1 = sir(0., y, beta, gamma)
      k2 = sir(0., y + h / 2 * k1, beta, gamma)
      k3 = sir(0., y + h / 2 * k2, beta, gamma)
      k4 = sir(0., y + h * k3, beta, gamma)
      y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y

  return tf.scan(day, tf.zeros(len(DAYS)), initializer=tf.constant(Y0))


def program(path_fn):
  def model():
    beta = ed.LogNormal(np.log(0.5), 0.5, name="beta")
    gamma = ed.LogNormal(np.log(0.2), 0.5, name="gamma")
    phi = ed.Exponential(0.1, name="phi")
    path = path_fn(beta, gamma)
    mean = tf.maximum(POPULATION * path[:, 1], 1e-6)
    return ed.NegativeBinomial(total_count=phi, logits=tf.math.log(mean) - tf.math.log(phi),
                               name="cases")
  return model


def main():
  cases = simulate()
  exact = ed.ode.solve(sir, tf.constant(Y0, tf.float64), DAYS, args=(0.6, 0.2), rtol=1e-12,
                       atol=1e-14).numpy()
  methods = {
      "ed.ode.solve rk45, forward": lambda b, g: ed.ode.solve(sir, Y0, DAYS, args=(b, g)),
      "ed.ode.solve rk45, reverse": lambda b, g: ed.ode.solve(sir, Y0, DAYS, args=(b, g),
                                                               sensitivity="reverse"),
      "ed.ode.solve rk45, atol=1e-20": lambda b, g: ed.ode.solve(sir, Y0, DAYS, args=(b, g),
                                                                  atol=1e-20),
  }
  for n in (2, 4, 8):
    methods[f"hand-written RK4 tf.scan, {n}/day"] = (lambda n: lambda b, g: rk4_scan(b, g, n))(n)
  methods["ed.ode.solve rk4, 4/day"] = lambda b, g: ed.ode.solve(
      sir, Y0, DAYS, args=(b, g), method="rk4", steps_per_unit=4)
  u = tf.constant(np.log([[0.6, 0.2, 10.], [0.5, 0.25, 5.], [0.7, 0.15, 20.], [0.55, 0.2, 8.]]),
                  tf.float32)
  print(f"{'method':34s} {'max |I error|':>14s} {'first call s':>13s} {'ms/gradient':>12s}")
  for name, fn in methods.items():
    error = np.max(np.abs(fn(tf.constant(0.6), tf.constant(0.2)).numpy()[:, 1] - exact[:, 1]))
    target = ed.make_target(program(fn), observed={"cases": cases})
    f = tf.function(target.value_and_gradient_flat, jit_compile=True, autograph=False)
    start = time.time()
    f(u)
    first = time.time() - start
    reps = 200
    start = time.time()
    for _ in range(reps):
      f(u)
    print(f"{name:34s} {error:14.2e} {first:13.1f} {(time.time() - start) / reps * 1e3:12.2f}")


ROBERTSON_REF = np.array([0.7158270687, 9.185534764e-6, 0.2841637457])


def robertson(t, y, k1):
  del t
  return tf.stack([-k1 * y[0] + 1e4 * y[1] * y[2],
                   k1 * y[0] - 1e4 * y[1] * y[2] - 3e7 * tf.square(y[1]),
                   3e7 * tf.square(y[1])])


def _timed(f, *args, reps=5):
  start = time.time()
  out = f(*args)
  first = time.time() - start
  start = time.time()
  for _ in range(reps):
    f(*args)
  return out, first, (time.time() - start) / max(reps, 1)


def stiff_main():
  from edward_lite.ode import dormand_prince, rosenbrock  # pylint: disable=import-outside-toplevel
  d = tf.float64
  y0, times, k = tf.constant([1., 0., 0.], d), tf.constant([40.], d), tf.constant(0.04, d)
  print(f"{'method sens. max_steps':22s} {'steps':>7s} {'max rel err':>12s} {'compile s':>10s} "
        f"{'s/solve':>9s} {'grad compile s':>15s} {'s/gradient':>11s}")
  for name, module, sensitivity, limit in (("rk45", dormand_prince, "forward", 200000),
                                           ("rk45", dormand_prince, "reverse", 200000),
                                           ("rodas3", rosenbrock, "reverse", 200000),
                                           ("rodas3", rosenbrock, "reverse", 1000)):
    count = tf.function(lambda k, module=module, limit=limit: module.solve(
        lambda t, y: robertson(t, y, k), y0, times, tf.constant(0., d),
        tf.constant(1e-6, d), tf.constant(1e-10, d), limit)[1:], jit_compile=True)
    (ok, steps), _, _ = _timed(count, k, reps=0)
    solve = tf.function(lambda k, name=name, limit=limit: ed.ode.solve(
        robertson, y0, times, args=(k,), rtol=1e-6, atol=1e-10, max_steps=limit,
        method=name, sensitivity=sensitivity), jit_compile=True)
    ys, first, per = _timed(solve, k)

    def grad(k, name=name, sensitivity=sensitivity, limit=limit):
      with tf.GradientTape() as tape:
        tape.watch(k)
        ys = ed.ode.solve(robertson, y0, times, args=(k,), rtol=1e-6, atol=1e-10,
                          max_steps=limit, method=name, sensitivity=sensitivity)
        out = ys[0, 0]
      return tape.gradient(out, k)

    _, g_first, g_per = _timed(tf.function(grad, jit_compile=True), k)
    error = np.max(np.abs(ys.numpy()[0] / ROBERTSON_REF - 1.)) if ok else np.nan
    label = f"{name} {sensitivity} {limit}"
    print(f"{label:22s} {int(steps):7d} {error:12.2e} {first:10.1f} "
          f"{per:9.4f} {g_first:15.1f} {g_per:11.4f}")


if __name__ == "__main__":
  if sys.argv[1:] == ["stiff"]:
    stiff_main()
  else:
    main()
