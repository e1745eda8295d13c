"""Chain groups: the whole compiled sampler on each device, for a block of chains.

``ed.mcmc.sample(..., strategy=..., parallel="chain_groups")`` splits the
``C`` chains into ``R`` blocks of ``C / R``, one per device of the strategy
(GPUs, or logical CPU devices, which puts each block on its own core), and
runs each chunk of transitions as ``R`` independent XLA programs at once, in
host threads: no communication inside a chunk, so the devices never wait for
each other between steps (NumPyro's ``chain_method="parallel"``).  Between
chunks the host merges the blocks' states into the state of all ``C``
chains -- the one the single-device sampler keeps, so metric updates,
checkpoints and results are shared code -- and splits it again:

* per-chain fields (states, Welford moments, streaming statistics, per-chain
  step sizes) are concatenated along the chain axis, and sums over the
  chains (a dense metric's moments) are added; the default's shared
  step size is shared by the bulk of each block;
* pooled step-size adaptation (``pooled=True``) and kernel adaptation
  (ChEES' trajectory length) run within each block during a chunk and are
  averaged over the blocks at its end; the metric, estimated at the end of a
  window, is pooled over all chains exactly.

Block ``g`` draws its random numbers from ``fold_in(seed, g)``: a seed gives
the same draws for a fixed number of blocks, and with one block the same as
the single-device sampler.
"""

import concurrent.futures

import numpy as np
import tensorflow as tf

from edward_lite.mcmc import adaptation, kept_draws

__all__ = ["ChainGroups"]


_POOLS = {}  # number of devices -> ThreadPoolExecutor


class ChainGroups:
  """``R`` blocks of chains, one per device."""

  def __init__(self, strategy, chains, pooled):
    devices = list(strategy.extended.worker_devices)
    if chains % len(devices):
      raise ValueError(f"parallel='chain_groups' needs chains to be a multiple of the "
                       f"{len(devices)} devices; got chains={chains}.")
    self.devices, self.size = devices, len(devices)
    self.pool_step, self.pool_metric = adaptation.pool_flags(pooled)
    if self.size not in _POOLS:  # one thread per device, shared by every call
      _POOLS[self.size] = concurrent.futures.ThreadPoolExecutor(self.size)
    self._pool = _POOLS[self.size]

  def run_chunk(self, run_chunk, state, inputs, capacity, kept_rows):
    """``run_chunk`` (one block's compiled ``Program.run_chunk``) on every
    block at once; returns the merged state and the outputs as NumPy: the
    totals of all chains, and the first ``kept_rows`` rows of each block's
    kept buffers, a list of the blocks' dicts in chain order
    (``kept_draws.chunk_outputs``; ``KeptDraws.append`` writes each into
    its columns)."""
    parts = self.split(state)
    # The step size of a sampling chunk: per chain unless pooled.
    pooled_step = self.pool_step is True
    finals = ([inputs.final_step] * self.size if pooled_step
              else tf.split(inputs.final_step, self.size))

    def run(g):
      seed = inputs.seed
      block_seed = tf.random.experimental.stateless_fold_in(seed, g) if self.size > 1 else seed
      with tf.device(self.devices[g]):
        new, out = run_chunk(parts[g], inputs._replace(final_step=finals[g], seed=block_seed),
                             capacity)
        return new, kept_draws.chunk_outputs(out, kept_rows)

    results = list(self._pool.map(run, range(self.size)))
    states, outs = zip(*results)
    out = {"kept": [o["kept"] for o in outs],
           "totals": {k: np.concatenate([o["totals"][k] for o in outs], axis=0)
                      for k in outs[0]["totals"]}}
    return self.merge(states), out

  def split(self, state):
    """The states of the ``R`` blocks."""
    axes = tf.nest.flatten(state.chain_axes(self.pool_step, self.pool_metric))
    blocks = [_split(x, a, self.size) for x, a in zip(tf.nest.flatten(state), axes)]
    return [tf.nest.pack_sequence_as(state, [b[g] for b in blocks]) for g in range(self.size)]

  def merge(self, states):
    """The state of all chains: per-chain fields concatenated, adaptation
    averaged over the blocks."""
    axes = tf.nest.flatten(states[0].chain_axes(self.pool_step, self.pool_metric))
    averaged = set(_paths(states[0], ("dual_avg", "kernel_adapt")))
    merged = []
    for i, (parts, a) in enumerate(zip(zip(*[tf.nest.flatten(s) for s in states]), axes)):
      if a == adaptation.SUMMED:
        merged.append(tf.add_n(list(parts)))
      elif a is not None:
        merged.append(tf.concat(parts, axis=a))
      elif i in averaged and parts[0].dtype.is_floating:
        merged.append(tf.add_n(list(parts)) / len(parts))
      else:
        merged.append(parts[0])
    return tf.nest.pack_sequence_as(states[0], merged)


def _split(x, axis, size):
  """``x`` for each of ``size`` blocks: split along the chain ``axis``; a sum
  over the chains to the first block (the others add theirs from zero); a
  field for all chains to every block."""
  if axis == adaptation.SUMMED:
    return [x] + [tf.zeros_like(x)] * (size - 1)
  return tf.split(x, size, axis=axis) if axis is not None else [x] * size


def _paths(state, fields):
  """Indices, in ``tf.nest.flatten(state)``, of the leaves under ``fields``."""
  index, out = 0, []
  for name, value in zip(state._fields, state):
    n = len(tf.nest.flatten(value))
    if name in fields:
      out.extend(range(index, index + n))
    index += n
  return out
