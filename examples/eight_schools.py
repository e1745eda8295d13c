"""Eight schools (Rubin 1981), non-centered, as an edward_lite program.

The main job of the README's quick start.  It builds the model, shows its
random variables and log joint, and turns it into the inference target that
the samplers consume: latent variables, constraining bijectors and the
chain-batched log density with its gradient, evaluated for many chains in one
XLA-compiled call.

    python examples/eight_schools.py
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import edward_lite as ed  # noqa: E402

# Treatment effects and their standard errors in eight schools.
Y = np.array([28., 8., -3., 7., -1., 1., 18., 12.], np.float32)
SIGMA = np.array([15., 10., 16., 11., 9., 11., 10., 18.], np.float32)


def eight_schools(sigma):
  """mu ~ N(0, 5); tau ~ HalfCauchy(0, 5); theta_tilde_j ~ N(0, 1);
  y_j ~ N(mu + tau * theta_tilde_j, sigma_j)."""
  mu = ed.Normal(0., 5., name="mu")
  tau = ed.HalfCauchy(0., 5., name="tau")
  theta_tilde = ed.Normal(tf.zeros(len(sigma)), 1., name="theta_tilde")
  theta = mu + tau * theta_tilde
  return ed.Normal(theta, sigma, name="y")


def _fmt(x):
  return np.array2string(np.asarray(x), precision=2, suppress_small=True)


def main():
  tf.random.set_seed(0)
  print("== A prior draw of the program's random variables (ed.tape)")
  with ed.tape() as rvs:
    eight_schools(SIGMA)
  for name, rv in rvs.items():
    print(f"  {name:12s} {type(rv.distribution).__name__:11s} shape={rv.shape.as_list()} "
          f"value={_fmt(rv.numpy())}")

  log_joint = ed.make_log_joint_fn(eight_schools)
  point = {"mu": 4.4, "tau": 3.6, "theta_tilde": np.zeros(8, np.float32)}
  lp = log_joint(SIGMA, y=Y, **point)
  print(f"\n== Log joint at mu=4.4, tau=3.6, theta_tilde=0: {lp.numpy():.4f}")

  target = ed.make_target(eight_schools, SIGMA, observed={"y": Y})
  print(f"\n== Inference target: {target.dim} unconstrained dimensions")
  for name, info in target.latents.items():
    print(f"  {name:12s} {info.distribution:11s} shape={info.shape.as_list()} "
          f"support bijector={type(info.bijector).__name__}")

  chains = 4096
  grad_fn = tf.function(target.value_and_gradient_flat, jit_compile=True)
  state = tf.random.stateless_uniform([chains, target.dim], seed=[0, 1],
                                      minval=-2., maxval=2.)
  start = time.perf_counter()
  lp, grad = grad_fn(state)
  compile_s = time.perf_counter() - start
  start = time.perf_counter()
  for _ in range(10):
    lp, grad = grad_fn(state)
  per_call = (time.perf_counter() - start) / 10
  print(f"\n== Log density and gradient of {chains} chains in one XLA call "
        f"(compile {compile_s:.1f} s, then {per_call * 1e3:.2f} ms per call)")
  print(f"  log density: mean {np.mean(lp):.2f}, max {np.max(lp):.2f}; "
        f"gradient norm: mean {np.mean(np.linalg.norm(grad, axis=-1)):.2f}")
  best = target.constrain(target.unflatten(state[int(np.argmax(lp))][None]))
  print("  highest-density chain, constrained: " +
        ", ".join(f"{k}={_fmt(v.numpy()[0])}" for k, v in best.items()))


if __name__ == "__main__":
  main()
