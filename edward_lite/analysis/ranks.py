"""Ranks of MCMC draws, batched over parameters: the rank normalization of
Vehtari et al. (2021) that ``diagnostics``' bulk and tail statistics use.

Rows are parameters: ``flat [P, S]`` holds each parameter's ``S`` pooled
draws, ``x [P, M, n]`` its ``M`` (split) chains.  Every function is batched
TensorFlow (sorts, gathers, doubling steps; no Python loop over parameters or
draws) and compiles with XLA.
"""

import math

import tensorflow as tf

__all__ = ["scan_extreme", "inverse_permutations", "tie_runs", "doubled_ranks",
           "rank_normalize", "sorted_quantile", "pooled_sorted"]

F64 = tf.float64


def scan_extreme(x, op, fill, reverse=False):
  """Running ``op`` (tf.minimum / tf.maximum) along the last axis.

  Hillis-Steele doubling: ceil(log2 n) elementwise steps, no sequential loop,
  so it batches and compiles with XLA.
  """
  n = x.shape[-1]
  pad = [[0, 0]] * (x.shape.rank - 1)
  shift = 1
  while shift < n:
    if reverse:
      shifted = tf.pad(x[..., shift:], pad + [[0, shift]], constant_values=fill)
    else:
      shifted = tf.pad(x[..., :-shift], pad + [[shift, 0]], constant_values=fill)
    x = op(x, shifted)
    shift *= 2
  return x


def inverse_permutations(order):
  """Row-wise inverse of permutations ``order`` [P, S], in O(PS).

  Eagerly one ``tf.math.invert_permutation`` of the flattened rows; in a
  graph a scatter, because ``invert_permutation`` fails to compile with XLA
  when its input is computed from data (it tries to fold it to a constant).
  """
  p, s = order.shape
  dtype = tf.int64 if p * s >= 2 ** 31 else tf.int32
  offset = tf.range(p, dtype=dtype)[:, None] * s
  flat = tf.reshape(tf.cast(order, dtype) + offset, [-1])
  if tf.executing_eagerly():
    inverse = tf.math.invert_permutation(flat)
  else:
    inverse = tf.scatter_nd(flat[:, None], tf.range(p * s, dtype=dtype),
                            tf.constant([p * s], dtype))
  return tf.reshape(inverse, [p, s]) - offset


def tie_runs(differs):
  """First and last sorted position of each element's run of equal values.

  ``differs`` [P, S - 1] is ``sorted[:, 1:] != sorted[:, :-1]``.  Returns
  int32 ``(first, last)`` [P, S]: a running max of run-start positions and a
  reversed running min of run-end positions, by doubling (Hillis-Steele)
  steps that stop once a step changes nothing -- after about
  ``log2(longest run) + 2`` steps, two when ties are isolated pairs.  (A
  step changes nothing only when every run is shorter than its shift: the
  entries still wrong would move from 0 to their run's start, or from
  S - 1 to its end.)
  """
  s = differs.shape[-1] + 1
  position = tf.range(s, dtype=tf.int32)
  edge = tf.ones_like(differs[:, :1])
  first = tf.where(tf.concat([edge, differs], axis=-1), position, 0)
  last = tf.where(tf.concat([differs, edge], axis=-1), position, s - 1)

  def step(shift, first, last, unused_changed):
    new_first = tf.maximum(first, tf.gather(first, tf.maximum(position - shift, 0), axis=1))
    new_last = tf.minimum(last, tf.gather(last, tf.minimum(position + shift, s - 1), axis=1))
    changed = tf.reduce_any(new_first != first) | tf.reduce_any(new_last != last)
    return 2 * shift, new_first, new_last, changed

  _, first, last, _ = tf.while_loop(
      lambda shift, first, last, changed: changed & (shift < s), step,
      (tf.constant(1), first, last, tf.constant(True)))
  return first, last


def doubled_ranks(flat):
  """Twice the ranks 1..S along the last axis of ``flat`` [P, S], ties averaged.

  Returns ``(2 r [P, S] int32, sorted rows [P, S])``; doubling keeps the
  half-integer average ranks of ties exact in integers.

  Without ties the rank of a draw is one plus its position after sorting
  (the inverse of the sorting permutation).  With ties (checked at run time,
  ``tf.cond``), a run of equal values at sorted positions ``first..last``
  (0-based) gets rank ``(first + last) / 2 + 1`` -- scipy's
  ``rankdata(method="average")``; see ``tie_runs``.
  O(S log S) and XLA-friendly (``tf.searchsorted`` compiles to an O(S^2)
  comparison under XLA, so it is not used).
  """
  s = flat.shape[-1]
  negated, order = tf.math.top_k(-flat, k=s, sorted=True)  # values and argsort at once
  ordered = -negated
  inverse = tf.cast(inverse_permutations(order), tf.int32)
  differs = ordered[:, 1:] != ordered[:, :-1]

  def untied():
    return 2 * inverse + 2

  def tied():
    first, last = tie_runs(differs)
    return tf.gather(first + last + 2, inverse, batch_dims=1)

  return tf.cond(tf.reduce_all(differs), untied, tied), ordered


def rank_normalize(x):
  """Rank normalization of chains x [P, M, n].

  Returns ``(z [P, M, n], sorted pooled draws [P, S])`` with
  ``z = Phi^-1((r - 3/8) / (S + 1/4))``, ``r`` the rank among all S draws.
  The 2S + 1 possible values of ``z`` (r is a multiple of 1/2) are
  tabulated once and gathered, so Phi^-1 runs on 2S + 1 numbers, not P S.
  """
  p, m, n = x.shape
  s = m * n
  twice_rank, ordered = doubled_ranks(tf.reshape(x, [p, s]))
  half_ranks = tf.range(2 * s + 1, dtype=F64) / 2.
  table = tf.math.ndtri((half_ranks - 0.375) / (s + 0.25))
  z = tf.gather(table, twice_rank)
  return tf.reshape(z, [p, m, n]), ordered


def sorted_quantile(ordered, prob):
  """Quantile of sorted rows [P, S], linear interpolation (numpy/R type 7)."""
  s = ordered.shape[-1]
  h = (s - 1) * prob
  lo = int(math.floor(h))
  hi = min(lo + 1, s - 1)
  frac = h - lo
  return ordered[:, lo] + frac * (ordered[:, hi] - ordered[:, lo])


def pooled_sorted(x):
  """[P, C, N] -> [P, C N] sorted pooled draws."""
  return tf.sort(tf.reshape(x, [x.shape[0], -1]), axis=-1)
