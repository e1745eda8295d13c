"""A target whose log density and gradient are computed across replicas.

Two ways to split the work of ``log_prob([C, D]) -> [C]`` over the ``R``
replicas of a ``tf.distribute.Strategy``:

* **data-parallel** (``parallel="data"``): replica ``r`` holds rows
  ``n_r`` of the data (observed values and every argument with ``N`` rows,
  see ``edward_lite.rows``) and evaluates, for every chain,

      l_r(theta) = sum_{i in n_r} log p(y_i | theta) + (1 / R) log p(theta)
                   [+ (1 / R) log |det J|],

  so ``sum_r l_r`` counts the prior once.  Values and gradients are summed
  by an all-reduce (``strategy.reduce``).
* **chain-parallel** (``parallel="chains"``): replica ``r`` holds all the
  data and evaluates chains ``r C / R, ..., (r + 1) C / R - 1``; values and
  gradients are gathered (``strategy.gather``).

The sampler or optimizer itself stays one program on the host: it calls
``strategy.run`` once per log-density evaluation, each replica runs an
XLA-compiled function of its part, and every chain sees exactly the
numbers a single device would give (up to float round-off of the sum), so
a seed gives the same draws on 1, 2 or 4 replicas.

The gradient of the distributed value is the sum (or concatenation) of the
replicas' gradients, attached with ``tf.custom_gradient``: each replica
differentiates its own part inside ``strategy.run`` (a ``GradientTape``
outside it would not see the replica threads).
"""

import numpy as np
import tensorflow as tf

from edward_lite.model import per_chain_gradient
from edward_lite.model.data import RowData
from edward_lite.model.interpreter import Mode
from edward_lite.model.target import flat_value_and_gradient
from edward_lite.runtime import console

__all__ = ["ShardedTarget", "PARALLEL_MODES", "SHARDED_MODES"]

# How a ShardedTarget splits the work (VI's ``parallel=`` choices).
SHARDED_MODES = ("data", "chains")
# ``ed.mcmc.sample``'s ``parallel=`` choices: the sharded ones, and chain groups
# (the whole sampler once per device, ``ed.mcmc.groups``).
PARALLEL_MODES = SHARDED_MODES + ("chain_groups",)


class ShardedTarget:
  """A ``Target`` evaluated across the replicas of ``strategy``.

  Implements ``target.Density`` and nothing more: ``log_prob``,
  ``log_prob_flat``, ``log_joint``, ``value_and_gradient_flat`` and
  ``with_data`` run distributed; ``names``, ``latents``, ``dim``, ``dtype``
  and ``layout`` are the full-data target's (``base``).  The model's
  description (``description.ModelDescription``: constrain, prior draws,
  log-likelihood) is asked of ``base``.

  Args:
    target: the full-data ``Target``.
    strategy: a ``tf.distribute.Strategy``.
    parallel: ``"data"`` or ``"chains"`` (see the module docstring).
    model: the program (data-parallel: checked once on a shard).
    jit_compile: compile each replica's part with XLA.
    place_shards: data-parallel, place the full data's shards on the
      replicas (False when every evaluation comes with its own rows from
      ``with_data``, e.g. minibatches).
  """

  def __init__(self, target, strategy, parallel="data", model=None, jit_compile=True,
               place_shards=True):
    if parallel not in SHARDED_MODES:
      raise ValueError(f"parallel must be one of {list(SHARDED_MODES)}; got {parallel!r}.")
    self.base, self.strategy, self.parallel = target, strategy, parallel
    # The static part of ``Density``: the full-data target's.
    self.names, self.latents, self.dim = target.names, target.latents, target.dim
    self.dtype, self.layout = target.dtype, target.layout
    self.replicas = r = strategy.num_replicas_in_sync
    self._likelihood_scale = None
    self._batch = None  # host-side rows split inside the replicas (minibatches)
    self._replica_ids = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(ctx.replica_id_in_sync_group, tf.int32))
    self._all_local = len(strategy.extended.worker_devices) == r
    self._rows = None
    if parallel == "data":
      self._rows = RowData(target, "data-parallel sharding (strategy=)")
      n = self._rows.num_rows
      if n < r:
        raise ValueError(f"Data-parallel sharding needs at least one observation per replica; "
                         f"the data has N={n} rows for {r} replicas.")
      bounds = np.linspace(0, n, r + 1).round().astype(int)  # shard sizes differ by <= 1
      if model is not None:
        self._rows.check_global_latents(target, tf.range(bounds[1]))
    self._shards = None
    if parallel == "data" and place_shards:
      tensors = self._row_tensors(self._rows.data)
      shards = [[t[bounds[i]:bounds[i + 1]] for t in tensors] for i in range(r)]
      self._shards = strategy.experimental_distribute_values_from_function(
          lambda ctx: shards[ctx.replica_id_in_sync_group])
    self._replica_fn = console.per_call_function(self._replica_value_and_gradient,
                                                 jit_compile=jit_compile)

  def __repr__(self):
    return (f"<ed.ShardedTarget {self.parallel}-parallel over {self.replicas} replicas of "
            f"{self.base!r}>")

  # -- the data of each replica ----------------------------------------------
  def _row_tensors(self, data):
    """The row-indexed inputs of ``data``, as a flat list."""
    args, kwargs, observed = data
    rows = self._rows
    return ([a for a, m in zip(args, rows.arg_mask) if m] +
            [kwargs[k] for k in sorted(kwargs) if rows.kwarg_mask[k]] +
            [observed[k] for k in sorted(observed)])

  def _rebuild(self, tensors):
    """Inverse of ``_row_tensors`` on the base target's data."""
    args, kwargs, observed = self.base.data
    rows, it = self._rows, iter(tensors)
    args = [next(it) if m else a for a, m in zip(args, rows.arg_mask)]
    kwargs = dict(kwargs)
    for k in sorted(kwargs):
      if rows.kwarg_mask[k]:
        kwargs[k] = next(it)
    observed = {k: next(it) for k in sorted(observed)}
    return args, kwargs, observed

  def with_data(self, args=None, kwargs=None, observed=None, likelihood_scale=None):
    """This target on other rows (a minibatch held on the host).  Data-parallel,
    replica ``r`` of ``R`` takes rows ``r B / R, ..., (r + 1) B / R - 1`` of
    the ``B`` rows (``B`` divisible by ``R``); chain-parallel, every replica
    takes them all."""
    if self._rows is None:
      self._rows = RowData(self.base, "with_data on a distributed target")
    base_args, base_kwargs, base_observed = self._rows.data
    data = (list(args) if args is not None else base_args,
            dict(kwargs) if kwargs is not None else base_kwargs,
            {**base_observed, **(observed or {})})
    other = ShardedTarget.__new__(ShardedTarget)
    other.__dict__.update(self.__dict__)
    other._batch = self._row_tensors(data)
    other._likelihood_scale = likelihood_scale
    return other

  # -- one replica's part ----------------------------------------------------
  def _replica_value_and_gradient(self, kind, parts, replica_id, shard, batch,
                                  likelihood_scale):
    """``(value [C_r], gradients)`` of this replica's part of ``kind`` (a
    ``Mode`` value: ``"unconstrained"`` for ``log_prob``, ``"constrained"``
    for ``log_joint``)."""
    r = self.replicas
    target = self.base
    if batch is not None and self.parallel == "data":
      rows = tf.shape(batch[0])[0] // r
      index = replica_id * rows + tf.range(rows)
      shard = [tf.gather(t, index) for t in batch]
    elif batch is not None:
      shard = batch
    if shard is not None:
      args, kwargs, observed = self._rebuild(shard)
      target = target.with_data(args, kwargs, observed, likelihood_scale=likelihood_scale,
                                prior_scale=1. / r if self.parallel == "data" else None)
    state = dict(zip(target.names, parts))
    if self.parallel == "chains":
      chains = parts[0].shape[0] // r
      index = replica_id * chains + tf.range(chains)
      state = {n: tf.gather(v, index) for n, v in state.items()}
    lp, grads = target.batched_value_and_gradient(Mode(kind), state)
    return lp, [grads[n] for n in target.names]

  # -- the distributed value ---------------------------------------------------
  def _distributed(self, kind, state):
    names = list(self.base.names)
    chains = state[names[0]].shape[0]
    if self.parallel == "chains" and (chains is None or chains % self.replicas):
      raise ValueError(f"Chain-parallel sampling needs the number of chains to be a multiple "
                       f"of the {self.replicas} replicas; got {chains}.")
    if self.parallel == "data" and self._shards is None and self._batch is None:
      raise ValueError("This data-parallel target was built without its shards "
                       "(place_shards=False); evaluate it on rows from with_data.")
    checks = []
    if self._batch is not None and self.parallel == "data":
      rows = self._batch[0].shape[0]
      message = (f"A data-parallel minibatch must split evenly across the {self.replicas} "
                 "replicas; its size is ")
      if rows is not None and rows % self.replicas:
        raise ValueError(f"{message}{rows}.")
      if rows is None:  # known only when the step runs
        size = tf.shape(self._batch[0])[0]
        checks.append(tf.debugging.Assert(tf.equal(size % self.replicas, 0), [message, size]))

    @tf.custom_gradient
    def value(*parts):
      with tf.control_dependencies(checks):
        parts = [tf.identity(p) for p in parts]
      out = self.strategy.run(self._replica_fn, args=(
          kind, [tf.stop_gradient(p) for p in parts], self._replica_ids, self._shards, self._batch,
          self._likelihood_scale))
      # One collective per tensor: a nested structure passed to
      # strategy.gather inside a tf.function returns one replica's part
      # (TF 2.21).
      if self.parallel == "data":
        join = lambda t: self.strategy.reduce(tf.distribute.ReduceOp.SUM, t, axis=None)
      elif self._all_local:
        # No collective: two strategies in one process would share group keys.
        join = lambda t: tf.concat(self.strategy.experimental_local_results(t), axis=0)
      else:
        join = lambda t: self.strategy.gather(t, axis=0)
      lp, grads = tf.nest.map_structure(join, out)

      def grad_fn(upstream, variables=None):
        if variables:
          raise NotImplementedError(
              "A distributed target cannot differentiate tf.Variables read by the model "
              f"({[v.name for v in variables]}); train them in the replicas instead.")
        return [tf.reshape(upstream, [-1] + [1] * (g.shape.rank - 1)) * g for g in grads]

      return lp, grad_fn

    return value(*[state[n] for n in names])

  def log_prob(self, state):
    """``[C]`` log density at unconstrained state (see ``Target.log_prob``)."""
    return self._distributed(Mode.UNCONSTRAINED.value, self.base.layout.as_dict(state))

  def log_prob_flat(self, flat):
    """``log_prob`` of a flat ``[C, D]`` state; returns ``[C]``."""
    return self.log_prob(self.base.unflatten(flat))

  def log_joint(self, values):
    """``[C]`` log p(x, data) at constrained values (see ``Target.log_joint``)."""
    return self._distributed(Mode.CONSTRAINED.value,
                             self.base.layout.as_dict(values, constrained=True))

  def value_and_gradient_flat(self, flat):
    """``(log_prob [C], gradient [C, D])`` of a flat state."""
    return flat_value_and_gradient(self, flat)
