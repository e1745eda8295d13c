"""Which discrete latents are summed out, and how: the plan of ``enumeration``.

A latent with finite support (``support_values``: ``Bernoulli``,
``Categorical``, ``OneHotCategorical``, ``Binomial`` with a constant
``total_count``, ``FiniteDiscrete``) is described by an ``EnumeratedInfo``.
``plan`` groups the latents that share a term that changes with them and
tells each group *local* (element ``i`` of its latents changes only elements
``i`` of its terms: ``K`` configurations for ``K`` values) or *joint* (every
element a digit of the configuration: ``prod_j K_j^{|B_j|}`` of them, refused
above ``MAX_CONFIGURATIONS``).  Both are found when the target is built, by
eager runs at a prior draw of the continuous latents: a term depends on a
latent when its values change with it, and locality is probed by changing
one element at a time (the first, the last and ``_PROBES`` at random).  ``enumeration``'s
module docstring gives the sums a plan stands for.
"""

import dataclasses
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["EnumeratedInfo", "Group", "Plan", "support_values", "info", "plan", "describe",
           "MAX_CONFIGURATIONS", "UNROLL"]

tfd = tfp.distributions

# Joint configurations of one group above which enumeration is refused.
MAX_CONFIGURATIONS = 4096
# Configurations run unrolled in the traced program; more run in a loop.
UNROLL = 16
# Elements changed one at a time to check that a group is local.
_PROBES = 6


@dataclasses.dataclass(frozen=True)
class EnumeratedInfo:
  """A latent summed out: its value ``shape`` (``batch_shape + event``), the
  distribution's class name and its ``support`` (NumPy ``[K, *event]``)."""
  name: str
  shape: tf.TensorShape
  batch_shape: Tuple[int, ...]
  dtype: tf.DType
  distribution: str
  support: np.ndarray

  @property
  def size(self):
    return len(self.support)


@dataclasses.dataclass(frozen=True)
class Group:
  """Latents enumerated together (see ``enumeration``'s docstring). ``digits``:
  per latent, how many digits of the configuration it reads (1 local, the
  number of its elements joint); ``terms``: the terms that change with it."""
  names: Tuple[str, ...]
  batch_shape: Tuple[int, ...]
  joint: bool
  terms: Tuple[str, ...]
  count: int


@dataclasses.dataclass(frozen=True)
class Plan:
  """How a target's enumerated latents are summed out."""
  infos: Dict[str, EnumeratedInfo]
  groups: Tuple[Group, ...]
  independent: Tuple[str, ...]

  @property
  def count(self):
    """Configurations run per evaluation (the largest group's)."""
    return max(g.count for g in self.groups)

  @property
  def loops(self):
    """Whether the configurations run in a loop (``UNROLL``)."""
    return self.count > UNROLL


def support_values(dist):
  """The support of ``dist`` as NumPy ``[K, *event_shape]``, or None when it
  is not finite (or not known statically)."""
  kind = type(dist)
  dtype = dist.dtype.as_numpy_dtype
  if kind is tfd.Bernoulli:
    return np.array([0, 1], dtype)
  if kind in (tfd.Categorical, tfd.OneHotCategorical):
    param = dist.logits if dist.logits is not None else dist.probs
    size = tf.convert_to_tensor(param).shape[-1]
    if size is None:
      return None
    if kind is tfd.Categorical:
      return np.arange(size).astype(dtype)
    return np.eye(size, dtype=dtype)
  if kind is tfd.Binomial:
    count = tf.get_static_value(tf.convert_to_tensor(dist.total_count))
    if count is None or not np.all(np.isfinite(count)):
      return None
    return np.arange(int(np.max(count)) + 1).astype(dtype)
  if kind is tfd.FiniteDiscrete:
    outcomes = tf.get_static_value(tf.convert_to_tensor(dist.outcomes))
    return None if outcomes is None or outcomes.ndim != 1 else outcomes.astype(dtype)
  return None


def info(name, rv, support):
  """The ``EnumeratedInfo`` of random variable ``rv`` with ``support``."""
  event = support.ndim - 1
  shape = rv.value.shape
  batch = tuple(shape.as_list()[:shape.rank - event])
  return EnumeratedInfo(name, shape, batch, rv.dtype, type(rv.distribution).__name__, support)


# -- the plan -----------------------------------------------------------------------

def plan(infos, run_terms, term_names, seed=0):
  """Groups and independent terms of a target's enumerated latents.

  Args:
    infos: name -> ``EnumeratedInfo``.
    run_terms: ``values -> elementwise terms`` (name -> NumPy-convertible),
      one eager run at a fixed draw of the continuous latents with the
      enumerated latents set to ``values``.
    term_names: every term's name.
    seed: NumPy seed of the locality probes.

  Raises:
    ValueError: a group that is not local has more than
      ``MAX_CONFIGURATIONS`` joint configurations.
  """
  rng = np.random.default_rng(seed)
  base = {n: _fill(i, 0) for n, i in infos.items()}
  base_terms = _numpy(run_terms(base))
  depends = {}
  for name, info_ in infos.items():
    changed = set()
    for k in sorted({1, info_.size - 1, int(rng.integers(info_.size))} - {0}):
      terms = _numpy(run_terms({**base, name: _fill(info_, k)}))
      changed |= {t for t in term_names if not _same(terms[t], base_terms[t])}
    depends[name] = changed | {name}
  groups, independent = [], set(term_names)
  for names in _connected(depends):
    terms = tuple(t for t in term_names if any(t in depends[n] for n in names))
    independent -= set(terms)
    groups.append(_group(names, terms, infos, run_terms, base, rng))
  return Plan(dict(infos), tuple(groups), tuple(t for t in term_names if t in independent))


def _group(names, terms, infos, run_terms, base, rng):
  shapes = {infos[n].batch_shape for n in names}
  if len(shapes) == 1:
    batch = shapes.pop()
    count = int(np.prod([infos[n].size for n in names]))
    local = Group(names, batch, False, terms, count)
    if _is_local(local, infos, run_terms, base, rng):
      return local
  count = 1
  for n in names:
    count *= infos[n].size ** int(np.prod(infos[n].batch_shape, dtype=np.int64))
    if count > MAX_CONFIGURATIONS:
      break
  if count > MAX_CONFIGURATIONS:
    sizes = ", ".join(f"'{n}' ({infos[n].distribution}, {infos[n].size} values, shape "
                      f"{list(infos[n].shape)})" for n in names)
    raise ValueError(
        f"The discrete latent(s) {sizes} cannot be summed out: their elements are coupled "
        f"through {[t for t in terms if t not in names] or list(terms)} (a term that does "
        f"not split element by element), and their joint values exceed "
        f"{MAX_CONFIGURATIONS} configurations; marginalize them by hand (e.g. "
        "ed.MixtureSameFamily) or observe them.")
  return Group(names, (), True, terms, count)


def _is_local(group, infos, run_terms, base, rng):
  """Whether element ``i`` of the group's latents changes only elements
  ``i`` of its terms (probed at a random configuration)."""
  rank = len(group.batch_shape)
  start = {n: _random_fill(infos[n], rng) for n in group.names}
  start_terms = _numpy(run_terms({**base, **start}))
  for t in group.terms:
    if start_terms[t].shape[:rank] != group.batch_shape:
      return False
  if not rank:
    return True
  elements = int(np.prod(group.batch_shape))
  for flat in {0, elements - 1, *rng.integers(elements, size=_PROBES).tolist()}:
    index = np.unravel_index(flat, group.batch_shape)
    for name in group.names:
      info_ = infos[name]
      value = start[name].copy()
      current = np.flatnonzero(np.all(
          info_.support.reshape(info_.size, -1) == value[index].reshape(1, -1), axis=1))[0]
      value[index] = info_.support[(current + 1) % info_.size]
      terms = _numpy(run_terms({**base, **start, name: value}))
      for t in group.terms:
        diff = ~_equal(terms[t], start_terms[t])
        diff[index] = False
        if diff.any():
          return False
  return True


def _connected(depends):
  """Names that share a dependent term, grouped (in program order)."""
  parent = {n: n for n in depends}

  def root(n):
    while parent[n] != n:
      n = parent[n]
    return n

  names = list(depends)
  for i, a in enumerate(names):
    for b in names[i + 1:]:
      if depends[a] & depends[b]:
        parent[root(b)] = root(a)
  groups = {}
  for n in names:
    groups.setdefault(root(n), []).append(n)
  return [tuple(g) for g in groups.values()]


def _fill(info_, k):
  return np.broadcast_to(info_.support[k], info_.shape).copy()


def _random_fill(info_, rng):
  index = rng.integers(info_.size, size=info_.batch_shape)
  return info_.support[index].reshape(info_.shape.as_list())


def _numpy(terms):
  return {k: np.asarray(v) for k, v in terms.items()}


def _equal(a, b):
  return (a == b) | (np.isnan(a) & np.isnan(b))


def _same(a, b):
  return a.shape == b.shape and bool(np.all(_equal(a, b)))


def describe(plan_: Optional[Plan]):
  """One line per group, for ``repr``."""
  if plan_ is None:
    return ""
  return "; ".join(f"{list(g.names)} {'joint' if g.joint else 'by element'} "
                   f"({g.count} configurations)" for g in plan_.groups)
