"""A target over many simulated data sets at once: ``SimulationTarget``.

Simulation-based calibration (``ed.sbc``) runs inference on ``S`` data sets
drawn from the prior.  Running them as ``S`` separate targets would compile
``S`` programs (a target's data are part of its compiled program) and run
them one after another.  Instead the observed values carry a leading
simulation axis, ``y[S, *Y]``, and the chain axis of one ``Target`` is
cut into ``S`` blocks of ``K`` chains: chain ``c`` (``c = 0 .. S K - 1``) of
the batch reads data set ``s(c) = c // K``.  Its log density is

    log p_c(u_c) = log p(x(u_c), y_{s(c)}) + log |det dx/du|(u_c),

evaluated as one ``tf.vectorized_map`` over the pairs ``(u_c, y_{s(c)})``
(``y`` gathered to ``[S K, *Y]``), with the per-chain gradient attached as
``per_chain_gradient.log_density`` does.  So the ``S`` posteriors are
sampled (or fitted) by one compiled sampler over ``S K`` chains: the
chains never interact through the density, only through whatever the
sampler shares between chains (its adaptation; see ``sbc/run``).

Shapes: every chain-batched call must hold exactly ``S K`` chains, in
simulation-major order.  Calls that do not read the data by chain
(``constrain``, ``unconstrain``) are the base target's; they use the first
data set, which is right whenever the supports of the latents do not depend
on observed values (the bijectors are built from the latents' own
distributions).  ``Deterministic`` values are not computed (``deterministic``
returns nothing): they would need the data of each draw.
"""

import tensorflow as tf

from edward_lite.model import per_chain_gradient
from edward_lite.model.interpreter import Mode
from edward_lite.model.target import Target

__all__ = ["SimulationTarget"]


class SimulationTarget(Target):
  """``base``'s log density with observed data per block of chains.

  Args:
    base: a ``Target`` (``ed.make_target``) of the model with the observed
      names set (to any one data set: it fixes names, shapes and dtypes).
    observed: dict name -> ``[S, *Y_name]`` simulated values, one per data
      set, for every observed name of ``base``.
    chains_per_simulation: ``K``.
  """

  def __init__(self, base, observed, chains_per_simulation):  # pylint: disable=super-init-not-called
    self.__dict__.update(base.__dict__)  # share program, data, structure, layout, plan
    names = set(base.observed)
    if set(observed) != names:
      raise ValueError(f"SimulationTarget needs simulated values for exactly the observed "
                       f"names {sorted(names)}; got {sorted(observed)}.")
    self._simulated = {n: tf.convert_to_tensor(v, base.observed[n].dtype)
                       for n, v in observed.items()}
    sizes = {int(v.shape[0]) for v in self._simulated.values()}
    if len(sizes) != 1:
      raise ValueError(f"Every simulated observed value needs the same number of data sets "
                       f"on its first axis; got {sizes}.")
    self.simulations = sizes.pop()
    self.chains_per_simulation = int(chains_per_simulation)

  @property
  def num_chains(self):
    """``S K``: the chain count every batched call must have."""
    return self.simulations * self.chains_per_simulation

  def _chain_data(self, chains):
    """The observed values of each chain, ``name -> [S K, *Y]``."""
    if chains is not None and chains != self.num_chains:
      raise ValueError(f"This simulation target evaluates {self.num_chains} chains "
                       f"({self.simulations} data sets x {self.chains_per_simulation}); "
                       f"got {chains}.")
    index = tf.range(self.num_chains) // self.chains_per_simulation
    return {n: tf.gather(v, index) for n, v in self._simulated.items()}

  def _one(self, mode):
    """``(values, observed) -> scalar``: one chain's density on its data."""
    def fn(values, observed):
      return Target.with_data(self, observed=observed).density_fn(mode)(values)
    return fn

  def _value_and_gradient(self, state, mode):
    """``(log density [S K], gradient dict)`` per chain on its own data."""
    chains = tf.compat.dimension_value(next(iter(state.values())).shape[0])
    data = self._chain_data(chains)
    fn = self._one(mode)
    rows = chains is not None and chains <= per_chain_gradient.ROW_FORM_MAX_CHAINS

    def one(args):
      values, observed = args
      return per_chain_gradient.value_and_gradient(lambda v: fn(v, observed), values,
                                                   rows=rows and not self.has_loops)

    if not self.has_loops:
      return tf.vectorized_map(one, (state, data))
    signature = (next(iter(state.values())).dtype,
                 {n: tf.TensorSpec(None, v.dtype) for n, v in state.items()})
    return tf.map_fn(one, (state, data), fn_output_signature=signature)

  def _density(self, state, mode):
    if not self._structure.latents:
      raise ValueError("The program has no latent variables: nothing to infer.")
    names = list(state)

    @tf.custom_gradient
    def value(*parts):
      lp, grads = self._value_and_gradient(dict(zip(names, parts)), mode)

      def grad_fn(upstream):
        return [tf.reshape(upstream, [-1] + [1] * (grads[n].shape.rank - 1)) * grads[n]
                for n in names]

      return lp, grad_fn

    return value(*[state[n] for n in names])

  def value_and_gradient(self, state):
    """``(log_prob [S K], gradient dict name -> [S K, *U_name])``."""
    return self._value_and_gradient(self._layout.as_dict(state), Mode.UNCONSTRAINED)

  def log_prob_terms_flat(self, flat):
    raise NotImplementedError("A simulation target does not split its density into terms.")

  def deterministic(self, values, seed=0):
    del values, seed
    return {}

  def log_likelihood(self, values):
    raise NotImplementedError("A simulation target has one data set per block of chains; "
                              "compute log-likelihoods on the base target.")

  def __repr__(self):
    return (f"<ed.SimulationTarget simulations={self.simulations} "
            f"chains_per_simulation={self.chains_per_simulation} "
            f"latents={list(self.names)} observed={list(self._simulated)}>")
