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
``enumeration_plan.MAX_CONFIGURATIONS``. Dependence and locality are found when the target is
built, by runs at a prior draw (``plan``, in ``enumeration_plan``): a term
depends on a latent when its values change with it, and locality is probed
by changing one element at a time.

This module sums the latents out (``log_density``, ``log_density_terms``,
``pointwise_log_likelihood``) and draws them (``draw``), given a plan.
"""

import numpy as np
import tensorflow as tf

from edward_lite.model import per_chain_gradient
from edward_lite.model.enumeration_plan import UNROLL

# Term elements of (chain, configuration) pairs evaluated at once
# (``pairs_value_and_gradient``): 10^4 chains of a change point over 112
# years (1.2 x 10^8 elements) peaked at 2.5 GB, so a block of 2^25 stays
# under 1 GB (RESULTS section 59).
PAIR_BLOCK_ELEMENTS = 2 ** 25

__all__ = ["log_density", "log_density_terms", "group_term_name", "draw", "conditional_logits",
           "draw_from_logits", "batched_conditional_logits", "pointwise_log_likelihood",
           "pairs_value_and_gradient", "pair_block", "PAIR_BLOCK_ELEMENTS"]


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


def pairs_value_and_gradient(terms_at, plan_, state):
  """``(log_density [C], gradients dict name -> [C, ...])`` over the chains
  of ``state`` (dict ``name -> [C, ...]``), vectorized over every pair of
  a chain and a configuration: for a plan whose configurations would run
  in a loop (``plan_.loops``), which forces the chains into one too
  (``per_chain_gradient``: 0.6 ms per chain and gradient for a change
  point over 112 years, where the pairs take a few microseconds).

  ``terms_at(values)`` is one chain's ``enumerated values -> elementwise
  terms``.  With ``K = plan_.count`` and ``L_g(u, c)_i`` the sum of group
  ``g``'s terms at configuration ``c``, element ``i``, the gradient is

      d log p / du = sum_{t indep.} d l_t / du
                     + sum_g sum_i sum_c w_g(c)_i d L_g(u, c)_i / du,

  ``w_g(.)_i`` the softmax over ``c`` of ``L_g(u, .)_i``.  A first pass
  (values only, over the ``[C K]`` pairs) gives the density and the
  weights; a second differentiates, per pair, ``sum_g sum_i w_g(c)_i
  L_g(u, c)_i`` plus the independent terms at ``c = 0``; the chain's
  gradient sums its ``K`` pairs.  Memory: every term for ``C K`` pairs,
  bounded by evaluating the chains in blocks of at most
  ``PAIR_BLOCK_ELEMENTS`` term elements (a loop over the blocks).
  """
  chains = tf.compat.dimension_value(next(iter(state.values())).shape[0])
  block = pair_block(terms_at, plan_, {n: v[0] for n, v in state.items()})
  if chains is None or chains <= block:
    return _pairs_value_and_gradient(terms_at, plan_, state)
  blocks = -(-chains // block)
  padded = {n: tf.reshape(tf.concat([v, v[:blocks * block - chains]], 0),
                          [blocks, block] + v.shape[1:].as_list()) for n, v in state.items()}
  dtype = next(iter(state.values())).dtype
  signature = (dtype, {n: tf.TensorSpec([block] + v.shape[1:].as_list(), v.dtype)
                       for n, v in state.items()})
  lp, grads = tf.map_fn(lambda s: _pairs_value_and_gradient(terms_at, plan_, s), padded,
                        fn_output_signature=signature)
  unblock = lambda t: tf.reshape(t, [blocks * block] + t.shape[2:].as_list())[:chains]  # pylint: disable=unnecessary-lambda-assignment
  return unblock(lp), {n: unblock(g) for n, g in grads.items()}


def pair_block(terms_at, plan_, values):
  """How many chains (or draws) ``pairs_value_and_gradient`` and
  ``batched_conditional_logits`` evaluate at once: ``PAIR_BLOCK_ELEMENTS``
  over the term elements of one chain's ``plan_.count`` configurations,
  found from the shapes of one run at one chain's ``values``."""
  per_run = sum(t.shape.num_elements() or 1 for t in tf.nest.flatten(
      terms_at(values)(_all_configurations(plan_, 0))))
  return max(1, PAIR_BLOCK_ELEMENTS // (plan_.count * per_run))


def _pairs_value_and_gradient(terms_at, plan_, state):
  """``pairs_value_and_gradient`` of one block of chains."""
  count = plan_.count
  chains, pairs, index, by_chain = _pair_terms(terms_at, plan_, state)
  total = [_sum_from(by_chain[n][:, 0], 1) for n in plan_.independent]
  weights = []
  for group, logits in zip(plan_.groups, _batched_group_logits(plan_, by_chain)):
    total.append(_sum_from(tf.reduce_logsumexp(logits, axis=1), 1))
    w = tf.stop_gradient(tf.nn.softmax(logits, axis=1))
    w = tf.pad(w, [[0, 0], [0, count - group.count]] + [[0, 0]] * len(group.batch_shape))
    weights.append(tf.reshape(w, tf.concat([[-1], tf.shape(w)[2:]], 0)))  # [C K, *B_g]

  def weighted(a):
    values, c, w = a

    def surrogate(v):
      t = terms_at(v)(_all_configurations(plan_, c))
      out = [tf.reduce_sum(w_g * tf.add_n([_sum_from(t[n], len(g.batch_shape)) for n in g.terms]))
             for g, w_g in zip(plan_.groups, w)]
      if plan_.independent:  # at one configuration: they do not change with it
        at_first = tf.cast(tf.equal(c, 0), out[0].dtype)
        out += [at_first * tf.reduce_sum(t[n]) for n in plan_.independent]
      return tf.add_n(out)

    return per_chain_gradient.value_and_gradient(surrogate, values)[1]

  grads = tf.vectorized_map(weighted, (pairs, index, weights))
  grads = {n: tf.reduce_sum(tf.reshape(g, tf.concat([[chains, count], tf.shape(g)[1:]], 0)),
                            axis=1) for n, g in grads.items()}
  return tf.add_n(total), grads


def _pair_terms(terms_at, plan_, state):
  """Every term for every (chain, configuration) pair, one vectorized batch:
  ``(C, pairs, index, by_chain)``, ``pairs`` the state repeated ``name ->
  [C K, ...]`` (chain-major), ``index [C K]`` the configurations and
  ``by_chain`` name -> ``[C, K, *B_t]``."""
  count = plan_.count
  chains = tf.shape(next(iter(state.values())))[0]
  pairs = {n: tf.repeat(v, count, axis=0) for n, v in state.items()}
  index = tf.tile(tf.range(count), [chains])
  terms = tf.vectorized_map(
      lambda a: terms_at(a[0])(_all_configurations(plan_, a[1])), (pairs, index))
  by_chain = {n: tf.reshape(t, tf.concat([[chains, count], tf.shape(t)[1:]], 0))
              for n, t in terms.items()}
  return chains, pairs, index, by_chain


def _batched_group_logits(plan_, by_chain):
  """Each group's ``[C, count_g, *B_g]`` logits from ``_pair_terms``'s."""
  return [tf.add_n([_sum_from(by_chain[n][:, :group.count], 2 + len(group.batch_shape))
                    for n in group.terms]) for group in plan_.groups]


def batched_conditional_logits(terms_at, plan_, values):
  """``conditional_logits`` of a batch of draws ``values`` (name ->
  ``[S, ...]``), over (draw, configuration) pairs: ``[S, count, *B]`` per
  group (``terms_at`` as in ``pairs_value_and_gradient``)."""
  return _batched_group_logits(plan_, _pair_terms(terms_at, plan_, values)[3])


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
  logits = conditional_logits(run_terms, plan_)
  drawn = draw_from_logits(plan_, [l[None] for l in logits], seed)
  return {name: value[0] for name, value in drawn.items()}


def conditional_logits(run_terms, plan_):
  """Each group's ``[count, *B]`` unnormalized ``log p(z = c | x, y)``,
  elementwise (one chain or draw)."""
  terms = _per_configuration(run_terms, plan_)
  return [_group_logits(group, terms) for group in plan_.groups]


def draw_from_logits(plan_, logits, seed):
  """The enumerated latents of ``S`` draws from each group's logits
  ``[S, count, *B]`` (``conditional_logits`` of each draw), one stateless
  categorical op per group with ``seed``: name -> ``[S, *shape]``."""
  out = {}
  for k, (group, group_logits) in enumerate(zip(plan_.groups, logits)):
    moved = tf.experimental.numpy.moveaxis(group_logits, 1, -1)  # [S, *B, count]
    c = tf.random.stateless_categorical(
        tf.reshape(moved, [-1, group.count]), 1,
        tf.random.experimental.stateless_fold_in(seed, k))[:, 0]
    c = tf.reshape(c, tf.shape(moved)[:-1])  # [S, *B]
    if group.joint:
      out.update(tf.vectorized_map(lambda ci, g=group: configuration(g, plan_.infos, ci), c))
    else:
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
  return _sum_from(value, 1 + len(batch_shape))


def _sum_from(value, axis):
  """``value`` summed over its axes from ``axis`` on."""
  return tf.reduce_sum(value, axis=list(range(axis, value.shape.rank)))
