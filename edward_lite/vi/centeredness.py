"""Learning how centred each latent should be (VIP).

Variationally inferred parameterisation (Gorinova, Moore and Hoffman 2020):
the program ``ed.reparameterize(model, centeredness=c)`` has the same
posterior for every ``c`` in ``[0, 1]`` (``language/reparameterize.py``),
but not the same *shape* of posterior in its coordinates ``x_tilde``: data
that pin ``x`` down make the centred coordinates (``c = 1``) nearly
independent of the scale above them, weak data make the non-centred ones
(``c = 0``) so.  A mean-field Gaussian can only fit a posterior well whose
coordinates are nearly independent, so maximizing its ELBO jointly over the
surrogate and ``c`` finds a good parameterisation:

    c = sigmoid(logit),   max_{m, s, logit} E_{u ~ N(m, s^2)} [log p_c(u, y)] + sum log s,

with ``log p_c`` the reparameterized program's log density over its
unconstrained latents (Jacobians included) and ``u = m + s eps``, ``eps``
standard normal (``samples`` draws per step, Adam with cosine decay).  One
``c`` per element of each transformed latent.  The ELBO has local optima
in ``c``, so a fit is run from each of ``starts`` (every ``c`` at 0.1, then
at 0.9) and the one with the larger final ELBO kept.  The learned
``c`` is then fixed: ``ed.reparameterize(model, centeredness=c)`` is run by
NUTS as any program.
"""

import numpy as np
import tensorflow as tf
import tf_keras

from edward_lite.language.reparameterize import NONCENTRED_SUFFIX, Reparameterized, reparameterize
from edward_lite.model.target import make_target
from edward_lite.runtime import console
from edward_lite.runtime.seeds import seed_pair
from edward_lite.vi.start import elbo_start

__all__ = ["learn_centeredness"]


def learn_centeredness(model, *args, observed=None, variables=None, steps=1000, samples=8,
                       learning_rate=0.05, starts=(0.1, 0.9), seed=0, dtype=None, **kwargs):
  """Per-element centredness of ``model``'s location-scale latents, by VIP.

  ``c = ed.vi.learn_centeredness(model, *args, observed={...})`` then
  ``ed.mcmc.sample(ed.reparameterize(model, centeredness=c), *args,
  observed={...})``.

  Args:
    model: the program (written centred or not).
    *args, **kwargs: its arguments.
    observed: dict name -> observed value.
    variables: the latents to learn ``c`` for (as ``ed.reparameterize``'s);
      None: every location-scale latent whose ``loc`` or ``scale`` is not a
      number.
    steps: Adam steps of the joint fit.
    samples: Monte Carlo draws of the ELBO per step.
    learning_rate: Adam's initial rate (cosine decay to a hundredth).
    starts: the centredness every fit starts from, one fit each (the same
      seed); the fit with the larger final ELBO (512 draws) wins.  The ELBO
      is not concave in ``c``: on eight schools with well-measured effects
      a fit started at 1/2 ends near 0.2 for most schools, below the ELBO
      of the centred program that a fit started at 0.9 finds.
    seed: int seed.
    dtype: the model's floating dtype (default float32).

  Returns:
    dict name -> NumPy array of ``c`` in ``(0, 1)``, shaped as the variable's
    value; pass it as ``centeredness=`` of ``ed.reparameterize``.

  Raises:
    ValueError: the program has no latent to reparameterize (or a name in
      ``variables`` is not one), before any compiled work.
  """
  probe = make_target(reparameterize(model, variables), *args, observed=observed, dtype=dtype,
                      **kwargs)
  names = [n[:-len(NONCENTRED_SUFFIX)] for n in probe.names
           if n.endswith(NONCENTRED_SUFFIX) and n[:-len(NONCENTRED_SUFFIX)] in
           probe.deterministic_names]
  if not names:
    raise ValueError("learn_centeredness: the program has no location-scale latent with a "
                     "loc or scale computed from other variables to reparameterize.")
  latents = probe.structure.latents
  logits = {n: tf.Variable(tf.zeros(latents[n + NONCENTRED_SUFFIX].shape,
                                    latents[n + NONCENTRED_SUFFIX].dtype), name=f"logit_{n}")
            for n in names}
  program = Reparameterized(model, tuple(names),
                            {n: (lambda n=n: tf.sigmoid(logits[n])) for n in names})
  target = make_target(program, *args, observed=observed, dtype=dtype, structure_checks=1,
                       **kwargs)
  fit = _JointFit(target, list(logits.values()), samples, learning_rate, steps, seed)
  best = None
  for c0 in starts:
    elbo = fit.run(c0, steps)
    if best is None or elbo > best[0]:
      best = elbo, {n: tf.sigmoid(logits[n]).numpy() for n in names}
  return best[1]


class _JointFit:
  """Mean-field ADVI over ``target``'s unconstrained latents jointly with the
  centredness ``logits`` (module docstring); compiled once, run per start."""

  def __init__(self, target, logits, samples, learning_rate, steps, seed):
    self.target, self.logits, self.seed = target, logits, seed
    dtype = target.dtype
    self.loc = tf.Variable(tf.zeros([target.dim], dtype), name="loc")
    self.log_scale = tf.Variable(tf.zeros([target.dim], dtype), name="log_scale")
    self.trainable = [self.loc, self.log_scale] + logits
    self.optimizer = tf_keras.optimizers.Adam(tf_keras.optimizers.schedules.CosineDecay(
        learning_rate, decay_steps=steps, alpha=0.01))
    self.optimizer.build(self.trainable)
    self.base = tf.constant(seed_pair(seed), tf.int32)
    self.density = target.density_fn()
    self.step = console.per_call_function(lambda t: self._step(t, samples))
    self.final = console.per_call_function(lambda: self.elbo(tf.constant(-1), 512))

  def elbo(self, t, draws):
    eps = tf.random.stateless_normal([draws, self.target.dim],
                                     tf.random.experimental.stateless_fold_in(self.base, t),
                                     dtype=self.target.dtype)
    u = self.loc + tf.exp(self.log_scale) * eps
    log_p = tf.vectorized_map(self.density, self.target.unflatten(u))
    return tf.reduce_mean(log_p) + tf.reduce_sum(self.log_scale)

  def _step(self, t, samples):
    with tf.GradientTape() as tape:
      loss = -self.elbo(t, samples)
    grads = tape.gradient(loss, self.trainable)
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
    grads = [tf.where(finite, g, tf.zeros_like(g)) for g in grads]  # skip a non-finite draw
    self.optimizer.apply_gradients(zip(grads, self.trainable))
    return loss

  def run(self, c0, steps):
    """One fit with every ``c`` started at ``c0``; returns its final ELBO (512
    draws) and leaves the learned logits in place."""
    for logit in self.logits:
      logit.assign(tf.fill(logit.shape, tf.cast(np.log(c0 / (1. - c0)), logit.dtype)))
    # Adam moves a location by about its rate per step: start where the
    # surrogate's ELBO at c0 is largest (vi/start.py), not at 0, or the fit
    # favours the coordinates whose posterior mean is nearest 0.
    self.loc.assign(elbo_start(self.target, radius=2., scale=0.1, seed=seed_pair(self.seed)))
    self.log_scale.assign(tf.fill(self.log_scale.shape,
                                  tf.constant(np.log(0.1), self.log_scale.dtype)))
    for v in self.optimizer.variables:  # Adam's step count and moments
      v.assign(tf.zeros_like(v))
    for t in range(steps):
      self.step(tf.constant(t))
    return float(self.final())
