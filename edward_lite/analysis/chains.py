"""Draws ``[draws, chains, *param_shape]`` as per-parameter chains ``[P, C, N]``.

The input side that every diagnostic in ``diagnostics`` shares: the checks
and the float64 cast of the draws, the layout ``x [P, C, N]`` (``P`` scalar
parameters, ``C`` chains of ``N`` draws), the split into ``M = 2C`` half
chains of ``n = N // 2`` draws, the blocks of ``PARAMETER_BLOCK`` parameters
that keep memory bounded, and the convention that a parameter with any
non-finite draw gets NaN.
"""

import functools

import numpy as np
import tensorflow as tf

__all__ = ["F64", "MIN_DRAWS", "PARAMETER_BLOCK", "by_parameter_blocks", "to_float64",
           "stretches_far_below", "FAR_BELOW", "chance_bound", "FALSE_ALARM", "MANY_CHAINS",
           "draws_to_pcn", "finish", "split_chains"]

F64 = tf.float64
MIN_DRAWS = 4

# Parameters per block: each diagnostic holds several float64 copies of its
# draws (ranks, FFTs), so 10^5 parameters x thousands of draws at once would
# need tens of GB; blocks keep memory bounded and time linear in P.
PARAMETER_BLOCK = 4096


def by_parameter_blocks(fn):
  """Applies a per-parameter diagnostic ``fn(draws [N, C, *shape], ...)`` to
  blocks of at most ``PARAMETER_BLOCK`` parameters and reassembles ``shape``.
  Exact: every statistic here treats each parameter separately."""

  @functools.wraps(fn)
  def wrapper(draws, *args, **kwargs):
    try:
      shape = tuple(np.shape(draws))
    except ValueError:  # ragged input: let fn raise its own error
      return fn(draws, *args, **kwargs)
    size = int(np.prod(shape[2:])) if len(shape) > 2 else 0
    if size <= PARAMETER_BLOCK:
      return fn(draws, *args, **kwargs)
    flat = (tf.reshape if tf.is_tensor(draws) else np.reshape)(draws, shape[:2] + (size,))
    blocks = [fn(flat[:, :, i:i + PARAMETER_BLOCK], *args, **kwargs)
              for i in range(0, size, PARAMETER_BLOCK)]
    join = lambda *parts: tf.reshape(tf.concat(parts, axis=0), shape[2:])
    return tf.nest.map_structure(join, *blocks)

  return wrapper


# -- input ----------------------------------------------------------------------

def to_float64(value, name):
  """``value`` as a float64 Tensor; TypeError for non-real dtypes."""
  if tf.is_tensor(value) or isinstance(value, tf.Variable):
    dtype = tf.as_dtype(value.dtype)
    if dtype.is_complex or not (dtype.is_floating or dtype.is_integer or dtype.is_bool):
      raise TypeError(f"`{name}` must hold real numbers, got dtype {dtype.name}.")
    return tf.cast(value, F64)
  try:
    array = np.asarray(value)
  except ValueError as e:  # ragged nested lists
    raise ValueError(f"`{name}` must be a rectangular array of numbers: {e}") from None
  if array.dtype.kind not in "biuf":
    raise TypeError(f"`{name}` must hold real numbers, got dtype {array.dtype}.")
  return tf.constant(array.astype(np.float64))


def draws_to_pcn(draws, name="draws", min_draws=MIN_DRAWS):
  """Checks ``draws`` [N, C, *param_shape] and returns ``([P, C, N], param_shape)``."""
  x = to_float64(draws, name)
  shape = x.shape
  if shape.rank is None or not shape.is_fully_defined():
    raise ValueError(f"`{name}` needs a static shape, got {shape}.")
  if shape.rank < 2:
    raise ValueError(f"`{name}` must have shape [draws, chains, *param_shape], "
                     f"got shape {shape.as_list()}.")
  n, c = shape[0], shape[1]
  if n < min_draws:
    raise ValueError(f"`{name}` needs at least {min_draws} draws per chain, got {n}.")
  if c < 1:
    raise ValueError(f"`{name}` needs at least one chain, got shape {shape.as_list()}.")
  param_shape = shape[2:]
  p = param_shape.num_elements()
  return tf.transpose(tf.reshape(x, [n, c, p]), [2, 1, 0]), param_shape


def finish(result, x, param_shape):
  """NaN where a parameter has a non-finite draw; reshape [P] -> param_shape."""
  finite = tf.reduce_all(tf.math.is_finite(x), axis=[-2, -1])
  result = tf.where(finite, result, tf.constant(np.nan, F64))
  return tf.reshape(result, param_shape)


def split_chains(x):
  """[P, C, N] -> [P, 2C, N // 2]: each chain's halves as two chains.

  Chain c becomes chains 2c and 2c + 1 (every statistic here is symmetric in
  the chains); for even N this is a reshape, for odd N the middle draw is
  dropped first.
  """
  p, c, n = x.shape
  half = n // 2
  if n % 2:
    x = tf.concat([x[..., :half], x[..., half + 1:]], axis=-1)
  return tf.reshape(x, [p, 2 * c, half])


# The chance that a per-chain test raises a warning somewhere in a run
# whose chains are all fine, at any number of chains (``chance_bound``).
FALSE_ALARM = 0.01
# From this many chains on, a per-chain test's threshold also accounts for
# how many chains it tests (``chance_bound``); below, the fixed thresholds
# measured on runs of 4 to 64 chains hold alone.
MANY_CHAINS = 100
TAIL_MARGIN = 1.5


def chance_bound(values, tests, upper=True):
  """How far ``tests`` values like ``values`` go by chance.

  The bulk's upper tail (lower, with ``upper=False``) is taken as
  exponential, its scale fitted to the median and the 90% quantile (10%)
  and widened by ``TAIL_MARGIN``, and extrapolated to the quantile
  ``1 - FALSE_ALARM / tests``:

      q50 + TAIL_MARGIN (q90 - q50) / log 5 * log(tests / (2 FALSE_ALARM)).

  The margin covers tails heavier than the bulk's fit: a chi-square of
  one degree of freedom (a 20-draw block's mean log density of a chain
  that barely moves), whose q50-q90 slope is 1.4 times its tail's.  A
  lighter tail (a normal's) makes the bound conservative; a few chains far
  out do not move it (the bulk's quantiles are robust).
  """
  q50, q90 = np.quantile(values, [0.5, 0.9 if upper else 0.1])
  return q50 + TAIL_MARGIN * (q90 - q50) / np.log(5.) * np.log(tests / (2. * FALSE_ALARM))


FAR_BELOW = 5.  # a stretch's mean log density this many typical sds below the chains' is far
TAIL_FACTOR = 3.  # ... and this many times as far below as the median chain's lowest stretch


def stretches_far_below(log_prob):
  """Chains with a stretch of draws far below the others' log density.

  ``log_prob``: ``[S, C]`` (None without kept draws).  The draws are cut into
  blocks of ``max(20, S // 50)``; a block is far below when its mean log
  density lies below the median of the chains' median log densities by
  more than both ``FAR_BELOW`` median within-chain sds and ``TAIL_FACTOR``
  times the median over chains of each chain's lowest block, in two blocks
  in a row (or one block twice as far).  The second
  bound is how low a block goes by chance in this run: with autocorrelated
  draws a block of 20 is worth a few draws, and the log density's left tail
  is long, so at 64 stationary chains (GARCH(1,1), an autocorrelated
  -chi^2 / 2) some block fell 5-7 sds below on its own; and a brief
  excursion into the tail makes one low block (GARCH, 64 chains: one block
  8.8 nats below, 5.5 sds, 4.2 times the median chain's lowest; the next
  blocks back with the others).  A chain that spent
  the stretch in a minor mode (Lotka-Volterra on the lynx and hare data: one
  of 8 chains began sampling 45 nats below, sd 2, for 69 draws, and the rate
  parameters' sds came out 15% too large with R-hat 1.003) or still
  arriving from a far start lies far beyond both.  From ``MANY_CHAINS``
  chains on, a chain's depth (its deepest pair of blocks in a row, or half
  its deepest block) must also exceed ``chance_bound`` of the chains'
  depths: at 10^5 chains of a 2-D Gaussian, 23 chains had a stationary
  stretch 6.8 typical sds below.  Needs 3 or more chains.

  Returns:
    dict chain -> reason.
  """
  if log_prob is None or log_prob.ndim != 2 or log_prob.shape[1] < 3:
    return {}
  draws, chains = log_prob.shape
  block = max(20, draws // 50)
  if draws < block:
    return {}
  with np.errstate(invalid="ignore"):
    center = np.median(np.median(log_prob, axis=0))
    spread = np.median(np.std(log_prob, axis=0))
  if not np.isfinite(center) or not spread > 0:
    return {}
  blocks = draws // block
  means = log_prob[:blocks * block].reshape(blocks, block, chains).mean(axis=1)  # [blocks, C]
  below = center - means
  # Each chain's lowest block: in stationary chains these are draws of one
  # extreme-value distribution, whose median says how low a block goes by
  # chance in this run (autocorrelation and a long left tail included).
  threshold = max(FAR_BELOW * spread, TAIL_FACTOR * np.median(below.max(axis=0)))
  far = below > threshold
  # A stretch lasts: two blocks in a row, or one block twice as far below (a
  # single block is also what one excursion into the tail makes).
  lasting = np.any(far[1:] & far[:-1], axis=0) | np.any(below > 2 * threshold, axis=0)
  if chains >= MANY_CHAINS:
    depth = below.max(axis=0) / 2.
    if blocks >= 2:
      depth = np.maximum(depth, np.max(np.minimum(below[1:], below[:-1]), axis=0))
    lasting &= depth > chance_bound(depth, chains)
  out = {}
  for c in np.flatnonzero(lasting):
    hits = np.flatnonzero(far[:, c])
    first, last = hits[0] * block, (hits[-1] + 1) * block - 1
    out[int(c)] = (f"draws {first}-{last} at a mean log density {below[hits, c].max():.3g} "
                   f"below the chains' median (typical sd {spread:.2g})")
  return out
