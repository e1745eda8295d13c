"""A run's kept draws on the host, written once into arrays of the run's size.

A sampling chunk's compiled program returns its kept draws and statistics
in buffers ``[capacity + 1, C, ...]`` (``chunk.run_chunk``; the last row is
the scratch row of transitions not kept).  ``chunk_outputs`` reads a
chunk's first ``n`` rows as NumPy views of those buffers (``np.asarray``
of a CPU tensor shares its memory; ``Tensor.numpy()`` would copy it), and
``KeptDraws.append`` copies them into the rows they fill of one array per
name, ``[K, C, ...]`` for the run's ``K = ceil(draws / thin)`` kept draws,
allocated at the first chunk; chain groups' blocks are each copied into
their columns.  The run's draws then need their own bytes and one chunk's
buffers, not twice their bytes while a list of chunks (or a chunk's
blocks) is joined (``memory``'s estimate; RESULTS sections 62 and 63).
"""

import numpy as np
import tensorflow as tf

from edward_lite.mcmc import base

__all__ = ["KeptDraws", "chunk_outputs", "capacity", "row_bytes", "KEPT_BUFFER_BYTES"]

# Kept-draw buffers above this size hold only the run's kept draws, not
# chunk_size rows (``capacity``).
KEPT_BUFFER_BYTES = 2**26


def capacity(chains, draws, thin, chunk_size, row):
  """Draws kept per sampling chunk (a Python int: it fixes the compiled
  buffers' shapes): ``chunk_size``, so that runs of any length share one
  program, or the run's ``ceil(draws / thin)`` kept draws when fewer and
  ``chunk_size`` rows of ``row`` bytes for every chain would exceed
  ``KEPT_BUFFER_BYTES`` (20 draws of 10^5 chains held 200 rows each:
  1.3 GB; RESULTS section 47)."""
  kept = -(-draws // thin)
  if kept < chunk_size and chunk_size * chains * row > KEPT_BUFFER_BYTES:
    return kept
  return chunk_size


def row_bytes(constrained_dim, dtype, kernel):
  """Bytes of one chain's row in a chunk's buffers: its ``constrained_dim``
  latents in ``dtype`` and the statistics ``kernel`` records."""
  stats = base.TransitionInfo.dtypes(dtype, kernel)
  return constrained_dim * dtype.size + sum(tf.as_dtype(d).size for d in stats.values())


def chunk_outputs(out, rows):
  """A compiled chunk's outputs ``{"kept": ..., "totals": ...}`` on the host:
  the totals as NumPy copies, and the first ``rows`` rows of each kept
  buffer as a read-only view of it (none when ``rows`` is 0: a warmup
  chunk's buffers are never read)."""
  kept = {key: np.asarray(value)[:rows] for key, value in out["kept"].items()} if rows else {}
  return {"kept": kept, "totals": {key: value.numpy() for key, value in out["totals"].items()}}


class KeptDraws:
  """The kept draws of a run, name -> ``[K, C, ...]`` (module docstring).

  Args:
    rows: ``K``, the run's kept draws per chain.
  """

  def __init__(self, rows):
    self.rows, self.filled, self._arrays = rows, 0, {}

  def append(self, blocks):
    """Copies a chunk's kept draws into the next ``n`` rows: ``blocks``, a
    dict name -> ``[n, C, ...]``, or a list of such dicts ``[n, C_g, ...]``
    for consecutive blocks of chains (chain groups: each written into its
    columns, never joined first).  Returns the rows written, name ->
    ``[n, C, ...]`` views (empty for a chunk that kept none).  Raises
    ValueError beyond ``K`` rows."""
    blocks = [b for b in (blocks if isinstance(blocks, list) else [blocks]) if b]
    if not blocks:
      return {}
    n = next(iter(blocks[0].values())).shape[0]
    if self.filled + n > self.rows:
      raise ValueError(f"A chunk of {n} kept draws does not fit after {self.filled} of the "
                       f"run's {self.rows}.")
    widths = [next(iter(b.values())).shape[1] for b in blocks]
    rows = slice(self.filled, self.filled + n)
    for block, start, width in zip(blocks, np.cumsum([0] + widths), widths):
      for key, value in block.items():
        if key not in self._arrays:
          self._arrays[key] = np.empty((self.rows, sum(widths)) + value.shape[2:], value.dtype)
        self._arrays[key][rows, start:start + width] = value
    self.filled += n
    return {key: value[rows] for key, value in self._arrays.items()}

  def arrays(self):
    """dict name -> ``[filled, C, ...]``: the rows written so far."""
    return {key: value[:self.filled] for key, value in self._arrays.items()}
