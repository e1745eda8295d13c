"""Discrete latents summed out of the log density (enumeration).

A latent with finite support -- ``Bernoulli``, ``Categorical``,
``OneHotCategorical``, ``Binomial`` with a constant ``total_count``,
``FiniteDiscrete`` -- is not part of the samplers' state. The log density
sums it out,

    log p(x, y) = log sum_z p(x, z, y),

and its draws are recovered afterwards from ``p(z | x, y)`` at each draw of
the continuous latents ``x`` (``draw``), as NumPyro's ``infer_discrete``.

*Configurations.* The program is run once per configuration ``c`` of the
enumerated latents, in parallel over a new batch axis (``tf.vectorized_map``
over ``c``; ``tf.map_fn`` for a program with loops), and each log-density
term is kept elementwise, ``l_t(c)`` of shape ``[*B_t]``.

*Groups.* Latents that share a term that changes with them form a group,
enumerated jointly (the product of their supports). A group is *local* when
its latents have one batch shape ``B`` (the value's shape without the
event) and element ``i`` of each changes only the elements ``i`` of the
group's terms (``B_t`` starts with ``B``): the sum then splits by element,

    log p = sum_{t indep.} l_t + sum_g sum_{i in B_g}
            logsumexp_c sum_{t in g} l_t(c)_i,

with configurations ``c`` giving every element the same value: ``K``
evaluations for ``N`` per-observation assignments of ``K`` values, not
``K^N``. A global switch or a change point is a local group with ``B = []``.
Otherwise the group is *joint*: every element is its own digit of ``c``,
``prod_j K_j^{|B_j|}`` configurations, refused above
``MAX_CONFIGURATIONS``. Dependence and locality are found when the target is
built, by runs at a prior draw (``plan``): a term depends on a latent when
its values change with it, and locality is probed by changing one element
at a time.
"""

import dataclasses
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["EnumeratedInfo", "Group", "Plan", "support_values", "plan", "log_density",
           "log_density_terms", "group_term_name", "draw", "pointwise_log_likelihood",
           "MAX_CONFIGURATIONS"]

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
  """Latents enumerated together (see the module docstring). ``digits``:
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


# -- configurations ---------------------------------------------------------------

def _digit_counts(group, infos):
  return [int(np.prod(infos[n].batch_shape, dtype=np.int64)) if group.joint else 1
          for n in group.names]


def configuration(group, infos, c):
  """The values of ``group``'s latents in configuration ``c`` (an int Tensor
  in ``[0, group.count)``): name -> value of the latent's shape."""
  values, stride = {}, 1
  for name, digits in zip(group.names, _digit_counts(group, infos)):
    info_ = infos[name]
    strides = tf.constant(stride * info_.size ** np.arange(digits), tf.int64)
    index = (tf.cast(c, tf.int64) // strides) % info_.size  # [digits]
    chosen = tf.gather(tf.constant(info_.support), index)  # [digits, *event]
    # A local group's value is one support value, broadcast by the run to
    # the variable's shape (a minibatch's too); a joint group's is whole.
    values[name] = tf.reshape(chosen, info_.shape) if group.joint else chosen[0]
    stride *= info_.size ** digits
  return values


def _all_configurations(plan_, c):
  values = {}
  for group in plan_.groups:
    values.update(configuration(group, plan_.infos, tf.minimum(c, group.count - 1)))
  return values


def _per_configuration(run_terms, plan_):
  """Each term's elementwise values ``[plan.count, *B_t]``: the program
  unrolled over up to ``UNROLL`` configurations, else a ``tf.map_fn`` (a
  loop).  Not ``tf.vectorized_map``: nested in the chains' vectorization it
  made XLA take the state as a compile-time constant, recompiling the
  sampler at every call (RESULTS section 30)."""
  fn = lambda c: run_terms(_all_configurations(plan_, c))  # pylint: disable=unnecessary-lambda-assignment
  if plan_.count <= UNROLL:
    runs = [fn(tf.constant(c)) for c in range(plan_.count)]
    return {name: tf.stack([r[name] for r in runs]) for name in runs[0]}
  signature = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype),
                                    fn(tf.constant(0)))
  return tf.map_fn(fn, tf.range(plan_.count), fn_output_signature=signature)


def _group_logits(group, terms):
  """``[count, *B]``: the sum of the group's terms per configuration and element."""
  return tf.add_n([_reduce_to(terms[name][:group.count], group.batch_shape)
                   for name in group.terms])


def log_density(run_terms, plan_):
  """``log sum_z p`` from ``run_terms(enumerated values) -> elementwise terms``
  (a scalar; one chain, unbatched)."""
  terms = _per_configuration(run_terms, plan_)
  total = [tf.reduce_sum(terms[name][0]) for name in plan_.independent]
  for group in plan_.groups:
    total.append(tf.reduce_sum(tf.reduce_logsumexp(_group_logits(group, terms), axis=0)))
  return tf.add_n(total)


def group_term_name(group):
  """The name of a group's summed-out term: ``"z (summed out)"``."""
  return f"{', '.join(group.names)} (summed out)"


def log_density_terms(run_terms, plan_):
  """``log_density``'s terms (scalars, one chain): each independent term
  (at any configuration: it does not change with them), then in place of
  each group's terms (the summed-out latents' own and those that change
  with them) one term ``group_term_name(group)``, ``sum_i logsumexp_c
  sum_{t in g} l_t(c)_i``; in program order (a group where its first term
  was).  They sum to ``log_density``."""
  terms = _per_configuration(run_terms, plan_)
  group_of = {t: g for g in plan_.groups for t in g.terms}
  out = {}
  for name in terms:
    group = group_of.get(name)
    if group is None:
      out[name] = tf.reduce_sum(terms[name][0])
    elif group_term_name(group) not in out:
      out[group_term_name(group)] = tf.reduce_sum(
          tf.reduce_logsumexp(_group_logits(group, terms), axis=0))
  return out


def draw(run_terms, plan_, seed):
  """The enumerated latents drawn from ``p(z | x, y)``: name -> value."""
  terms = _per_configuration(run_terms, plan_)
  out = {}
  for k, group in enumerate(plan_.groups):
    logits = _group_logits(group, terms)  # [count, *B]
    flat = tf.transpose(tf.reshape(logits, [group.count, -1]))  # [prod B, count]
    c = tf.random.stateless_categorical(flat, 1, tf.random.experimental.stateless_fold_in(
        seed, k))[:, 0]
    c = tf.reshape(c, group.batch_shape)
    out.update(_elementwise_configuration(group, plan_.infos, c))
  return out


def _elementwise_configuration(group, infos, c):
  """Values of a local group from a configuration per element ``c [*B]``
  (a joint group: ``c`` is a scalar)."""
  if group.joint:
    return configuration(group, infos, c)
  values, stride = {}, 1
  for name in group.names:
    info_ = infos[name]
    index = (tf.cast(c, tf.int64) // stride) % info_.size  # [*B]
    values[name] = tf.gather(tf.constant(info_.support), index)
    stride *= info_.size
  return values


def pointwise_log_likelihood(run_terms, plan_, observed):
  """Each observed variable's elementwise log-likelihood with the enumerated
  latents summed out, ``log p(y_i | x)``: name -> ``[*B_y]``. An observed
  variable in a local group whose elements are the group's is summed out
  element by element; in a joint group, or one whose elements are not the
  group's, it cannot be split by observation (ValueError)."""
  terms = _per_configuration(run_terms, plan_)
  out = {}
  for name in observed:
    group = next((g for g in plan_.groups if name in g.terms), None)
    if group is None:
      out[name] = terms[name][0]
      continue
    own = tuple(terms[name].shape[1:]) == group.batch_shape and not group.joint
    others = [t for t in group.terms if t in observed and t != name]
    if not own or others:
      raise ValueError(
          f"The pointwise log-likelihood of '{name}' with {list(group.names)} summed out "
          "does not split by observation (its elements are not the summed-out latents' "
          "own); LOO and WAIC need one term per observation.")
    prior = [_reduce_to(terms[t][:group.count], group.batch_shape) for t in group.terms
             if t not in observed]
    joint = tf.add_n(prior + [terms[name][:group.count]])
    out[name] = tf.reduce_logsumexp(joint, axis=0) - (
        tf.reduce_logsumexp(tf.add_n(prior), axis=0) if prior else 0.)
  return out


def _reduce_to(value, batch_shape):
  rank = len(batch_shape)
  return tf.reduce_sum(value, axis=list(range(1 + rank, value.shape.rank)))


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
