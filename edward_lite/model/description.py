"""The model's description: what a traced program is, apart from its density.

``ModelDescription`` is the half of ``target.Target`` that describes the
model; ``Target`` adds the chain-batched log density samplers and
optimizers evaluate (``target.Density``).  Made once from ``program(*args,
**kwargs)`` and its observed values (``structure.trace_model``), a
description holds:

* its pieces: the program, its ``model_data`` (``data.ModelData``), its
  ``structure`` (``structure.Structure``: latents, fixed and deterministic
  variables) and the ``layout`` (``layout.Layout``) of flat ``[C, D]``
  states;
* static facts: latent names, shapes and dtypes, the summed-out discrete
  latents (``enumeration``), whether a run holds loops;
* one chain's run (``interpreter.run``) and what is read from it: pointwise
  log-likelihoods, ``ed.Deterministic`` values, the summed-out latents'
  draws;
* the spaces: constrained ``{name: x[C, *shape_name]}``, unconstrained
  ``{name: u[C, *U_name]}`` and flat ``u[C, D]``, ``D = sum_n prod(U_n)``;
* draws by forward simulation: prior draws, predictive draws, and the
  log-likelihood and deterministic values at ``S`` given draws.
"""

import numpy as np
import tensorflow as tf

from edward_lite.language import dtypes
from edward_lite.model import enumeration, enumeration_plan, simulation
from edward_lite.model.interpreter import Mode, pointwise, run
from edward_lite.model.layout import Layout
from edward_lite.model.data import call_program
from edward_lite.model.structure import trace_model
from edward_lite.runtime import console, fingerprints

__all__ = ["ModelDescription", "ProgramChangedError"]


class ProgramChangedError(RuntimeError):
  """A program's code or module-level values changed after its target was made."""


class ModelDescription:
  """A traced program with its data: names, layout, spaces and simulation.

  The base class of ``Target`` (build one with ``ed.make_target``).  Shapes:
  ``C`` is the chain (batch) dimension, ``S`` the number of draws, ``U_n``
  the unconstrained shape of latent ``n``, ``D`` the total unconstrained
  dimension ``sum_n prod(U_n)``.
  """

  def __init__(self, program, args=(), kwargs=None, observed=None,
               structure_checks=2, dtype=None):
    # dtype None: data keep their dtypes unless they conflict with the
    # program's (then floating NumPy data become float32); else the model's.
    self._float = None if dtype is None else dtypes.check_float_dtype(dtype)
    self._program = program
    self._code = fingerprints.code_digest(program)
    self._data, self._structure = trace_model(program, args, kwargs or {}, observed,
                                              structure_checks, self._float)
    self._layout = Layout(self._structure.latents)
    self._loops = None  # loop_facts(), found on first use
    self._plan = self._enumeration_plan() if self._structure.enumerated else None
    self._forget_compiled()

  def _forget_compiled(self):
    """Drops the functions traced on this target's data (a copy on other
    data, ``Target.with_data``, traces its own)."""
    self._derived = None  # (compiled _derived_batch, its batch), made on first use
    self._eager = {}  # key -> tf.function (_eager_function)

  def _eager_function(self, key, fn):
    """``fn`` (of Tensors), through one ``tf.function`` per target and
    ``key`` when called eagerly: ``tf.vectorized_map`` called eagerly traces
    anew at each call (0.1 s for a small model, and TensorFlow's retracing
    warning from the fifth).  In a graph, ``fn`` itself."""
    if not tf.executing_eagerly():
      return fn
    if key not in self._eager:
      self._eager[key] = console.per_call_function(fn)
    return self._eager[key]

  # -- the pieces -------------------------------------------------------------

  @property
  def program(self):
    """The model program."""
    return self._program

  @property
  def model_data(self):
    """The ``ModelData`` each run reads."""
    return self._data

  @property
  def structure(self):
    """The ``Structure``: latents, fixed and deterministic variables."""
    return self._structure

  @property
  def layout(self):
    """The ``Layout`` of the latents (flat and dict views)."""
    return self._layout

  def call_program(self):
    """Runs the program on this target's data in the model's floating dtype
    (inside a tracer, to intercept its random variables).

    A trace (a ``tf.function`` built now, perhaps long after this target was
    made, for a result's ``log_likelihood()``) reads the module-level values
    the program uses as they are now; if they changed since, it would
    compute with other data than the run's, so it raises instead."""
    if self._code is not None and not tf.executing_eagerly() and (
        fingerprints.code_digest(self._program) != self._code):
      raise ProgramChangedError(
          f"The program '{fingerprints.model_name(self._program)}' or a module-level value "
          "it reads (an array edited in place, a helper redefined) changed after inference "
          "on it ran, so a function compiled now would compute with other data than the "
          "run's; run inference again on the program as it is now.")
    return call_program(self._program, self._data, self._float)

  # -- static description -----------------------------------------------------

  @property
  def names(self):
    """Latent variable names, in program order."""
    return self._layout.names

  @property
  def deterministic_names(self):
    """Names of the values computed from the latents' draws, kept with
    them: the ``ed.Deterministic`` variables, then the discrete latents
    summed out of the log density (drawn from their conditional)."""
    return tuple(self._structure.deterministic) + self.enumerated_names

  @property
  def enumerated_names(self):
    """Discrete latents summed out of the log density (``enumeration.py``)."""
    return tuple(self._structure.enumerated)

  @property
  def enumeration(self):
    """The ``enumeration_plan.Plan`` of the summed-out latents (None without)."""
    return self._plan

  @property
  def latents(self):
    """OrderedDict name -> ``LatentInfo``."""
    return self._structure.latents.copy()

  @property
  def observed(self):
    """Observed values (Tensors), by name."""
    return dict(self._data.observed)

  @property
  def data(self):
    """``(args, kwargs, observed)``: the program's arguments (converted) and
    the observed values."""
    return tuple(self._data.args), dict(self._data.kwargs), dict(self._data.observed)

  @property
  def fixed(self):
    """Values fixed inside the program (``value=``, ``ed.condition``)."""
    return dict(self._structure.fixed)

  @property
  def dtype(self):
    """The common dtype of the latents (None if they differ)."""
    return self._layout.dtype

  @property
  def dim(self):
    """Total unconstrained dimension ``D``."""
    return self._layout.dim

  @property
  def constrained_dim(self):
    """Total constrained dimension ``sum_n prod(shape_n)``."""
    return self._layout.constrained_dim

  @property
  def has_loops(self):
    """Whether one run of the program holds a loop (a ``While`` op, e.g.
    from ``tf.scan``, ``tf.while_loop`` or a TFP distribution that loops in
    ``log_prob``); decides how gradients are batched over chains."""
    return self.loop_facts()[0]

  @property
  def sums_out_in_pairs(self):
    """Whether the summed-out latents' configurations, too many to unroll,
    are evaluated with the chains in one vectorized batch of (chain,
    configuration) pairs (``enumeration.pairs_value_and_gradient``) rather
    than in a loop per chain: when the program has no loop of its own."""
    return self._plan is not None and self._plan.loops and not self.loop_facts()[2]

  @property
  def has_unbounded_loops(self):
    """Whether the program holds a ``tf.while_loop`` without
    ``maximum_iterations``: XLA cannot compile its gradient, so such a
    program runs without XLA."""
    return self.loop_facts()[1]

  def loop_facts(self, known=None):
    """``(has_loops, has_unbounded_loops, program_loops)``, found by tracing
    one run of the program into a graph (0.15-0.2 s for a small model), or
    ``known``: the facts found for the same program before (``mcmc.compiled``
    keeps them in the program cache; a pair kept by an older version reads
    as ``program_loops = has_loops``).  ``program_loops``: the program's own
    loops, not counting the summed-out configurations' (``has_loops`` does)."""
    if known is not None:
      known = list(known) + [known[0]] * (3 - len(known))
      self._loops = (bool(known[0]), bool(known[0] and known[1]), bool(known[0] and known[2]))
    if self._loops is None:
      spec = {n: tf.TensorSpec(i.unconstrained_shape, i.dtype)
              for n, i in self._structure.latents.items()}
      plain = lambda values: run(self, values).log_prob  # enumerated latents at one value
      graph = tf.function(plain, autograph=False).get_concrete_function(spec).graph
      graph_def = graph.as_graph_def()
      ops = {n.op for n in graph_def.node}
      ops.update(n.op for f in graph_def.library.function for n in f.node_def)
      program = bool(ops & {"While", "StatelessWhile"})
      loops = program or (self._plan is not None and self._plan.loops)
      self._loops = (loops, loops and any(
          op.type in ("While", "StatelessWhile") and _is_minus_one(op.inputs[1])
          for op in graph.get_operations()), program)
    return self._loops

  # -- one chain ----------------------------------------------------------------

  def run(self, values, mode=Mode.UNCONSTRAINED):
    """One run at one chain's latent ``values`` (``interpreter.run``)."""
    return run(self, values, mode)

  def _terms_fn(self, values, mode):
    """``enumerated values -> elementwise terms`` at one chain's ``values``."""
    return lambda enumerated: run(self, values, mode, enumerated, elementwise=True).terms

  def pointwise(self, values, seed=None):
    """One chain's ``(log-likelihood dict, deterministic dict)`` at
    constrained ``values`` (``interpreter.pointwise``).  With discrete
    latents summed out, the log-likelihood is the marginal one, ``log p(y_i
    | x)`` with them summed out (whether or not ``values`` holds them); the
    ``ed.Deterministic`` values are computed at their values in ``values``
    or, when absent, at a draw from ``p(z | x, y)`` with stateless ``seed``
    (``derived``).  ValueError when they are absent, the program has
    ``ed.Deterministic`` variables and ``seed`` is None."""
    if self._plan is None:
      return pointwise(self, values)
    log_lik = self._summed_log_likelihood(values)
    if not self._structure.deterministic:
      return log_lik, {}
    missing = [n for n in self.enumerated_names if n not in values]
    if not missing:
      return log_lik, pointwise(self, values)[1]
    if seed is None:
      raise ValueError(
          f"The ed.Deterministic values {list(self._structure.deterministic)} may depend on "
          f"the summed-out latents {missing}, which values does not hold: pass their values, "
          "or seed= to draw them from p(z | x, y).")
    derived = self.derived(values, simulation.seed_tensor(seed))
    return log_lik, {n: derived[n] for n in self._structure.deterministic}

  def _summed_log_likelihood(self, values):
    """``log p(y_i | x)`` with the enumerated latents summed out (one draw)."""
    return enumeration.pointwise_log_likelihood(
        self._terms_fn({n: values[n] for n in self.names}, Mode.CONSTRAINED), self._plan,
        self._data.observed)

  def derived(self, values, seed):
    """One draw's summed-out latents, drawn from ``p(z | x, y)`` with
    stateless ``seed``, and ``ed.Deterministic`` values at constrained latent
    ``values``: name -> value (``deterministic_names``)."""
    values = {n: values[n] for n in self.names}
    if self._plan is not None:
      values.update(enumeration.draw(self._terms_fn(values, Mode.CONSTRAINED), self._plan,
                                     seed))
    out = pointwise(self, values)[1] if self._structure.deterministic else {}
    out.update({n: values[n] for n in self.enumerated_names})
    return out

  def _enumeration_plan(self):
    """Groups of the summed-out latents, from eager runs at a random point."""
    rng = np.random.default_rng(0)
    point = {n: tf.constant(rng.normal(size=i.unconstrained_shape.as_list()), i.dtype)
             for n, i in self._structure.latents.items()}
    terms_fn = self._terms_fn(point, Mode.UNCONSTRAINED)
    names = list(run(self, point).terms)
    return enumeration_plan.plan(self._structure.enumerated, terms_fn, names)

  def simulate(self, values, seed):
    """Runs the program once with ``values`` (constrained, unbatched) for the
    latents they name; every other random variable that the program does not
    fix is drawn (``simulation.simulate``).  Returns name -> value."""
    return simulation.simulate(self.call_program, values, seed)

  # -- spaces and layouts -------------------------------------------------------

  def constrain(self, state):
    """Unconstrained state ``{name: u[C, *U]}`` -> constrained ``{name: x[C, *shape]}``."""
    return tf.vectorized_map(lambda s: run(self, s, densities=False).constrained,
                             self._layout.as_dict(state))

  def unconstrain(self, values):
    """Constrained values ``{name: x[C, *shape]}`` -> unconstrained ``{name: u[C, *U]}``."""
    values = self._layout.as_dict(values, constrained=True)
    return tf.vectorized_map(
        lambda v: run(self, v, Mode.CONSTRAINED, densities=False).unconstrained, values)

  def flatten(self, state):
    """Unconstrained state dict -> ``[C, D]`` (latents in ``names`` order)."""
    return self._layout.flatten(state)

  def unflatten(self, flat):
    """``[C, D]`` -> unconstrained state dict ``{name: [C, *U_name]}``."""
    return self._layout.unflatten(flat)

  def constrain_flat(self, flat):
    """``[C, D]`` unconstrained -> ``[C, D_c]`` constrained, latents in ``names`` order."""
    return self._layout.flatten_constrained(self.constrain(self.unflatten(flat)),
                                            tf.shape(flat)[0])

  def split_constrained(self, flat):
    """NumPy ``[..., D_c]`` -> dict ``name -> [..., *shape_name]``."""
    return self._layout.split_constrained(flat)

  # -- draws ------------------------------------------------------------------------

  def log_likelihood(self, values):
    """Pointwise log-likelihood of every observed variable at draws.

    Args:
      values: dict ``name -> [S, *shape]`` of constrained latent draws.

    Returns:
      dict ``observed name -> NumPy [S, *obs_shape]``: ``log p(y_i | x_s)``
      per draw ``s`` and observation ``i`` (the observation axes are the
      variable's sample and batch axes; an event is one observation),
      computed in one compiled pass (``simulation.map_draws``).
    """
    values = {n: values[n] for n in self.names}
    if self._plan is None:
      return simulation.map_draws(lambda v: pointwise(self, v)[0], values)
    return simulation.map_draws(self._summed_log_likelihood, values)

  def deterministic(self, values, seed=0):
    """The ``deterministic_names`` at draws: dict ``name -> NumPy [S, *shape]``
    from latent draws ``name -> [S, *shape]`` (constrained); ``seed`` draws
    the summed-out latents (``derived``)."""
    if not self.deterministic_names:
      return {}
    values = {n: values[n] for n in self.names}
    if self._plan is None:
      return simulation.map_draws(lambda v: pointwise(self, v)[1], values)
    if self._derived is None:  # traced once per target, not once per run
      one = {n: tf.constant(v[0]) for n, v in values.items()}
      batch = min(simulation.BATCH, enumeration.pair_block(
          lambda v: self._terms_fn(v, Mode.CONSTRAINED), self._plan, one))
      self._derived = (console.per_call_function(self._derived_batch), batch)
    compiled, batch = self._derived
    return simulation.map_batches(compiled, values, seed, batch=batch)

  def _derived_batch(self, values, seed):
    """``derived`` for a batch of draws ``name -> [S, *shape]`` at once:
    each draw's conditional logits over (draw, configuration) pairs, the
    summed-out latents drawn by one op per group with stateless ``seed``
    (``enumeration.draw_from_logits``; ``map_draws`` would loop over a seed
    per draw, and the configurations with it: 1.6 ms per draw for a change
    point over 112 years), then the ``ed.Deterministic`` values."""
    logits = enumeration.batched_conditional_logits(
        lambda v: self._terms_fn(v, Mode.CONSTRAINED), self._plan, values)
    drawn = enumeration.draw_from_logits(self._plan, logits, seed)
    out = {}
    if self._structure.deterministic:
      out.update(tf.vectorized_map(lambda v: pointwise(self, v)[1], {**values, **drawn}))
    out.update(drawn)
    return out

  def sample_prior(self, chains, seed):
    """Prior draws of the latents: dict ``name -> [chains, *shape]`` (constrained).

    Args:
      chains: number of draws.
      seed: stateless seed, a shape-[2] int Tensor or an int.
    """
    seeds = tf.random.experimental.stateless_split(simulation.seed_tensor(seed), chains)
    draws = self._eager_function("prior", lambda s: tf.vectorized_map(
        lambda one: self.simulate({}, one), s))(seeds)
    return {n: draws[n] for n in self.names}

  def predict(self, values, seed):
    """Simulates the program at given latent values (e.g. posterior draws).

    Args:
      values: dict ``name -> [N, *shape]`` of constrained values for the
        latents (all of them).
      seed: stateless seed.

    Returns:
      dict ``name -> [N, ...]`` for every random variable of the program,
      observed ones redrawn: the (posterior) predictive distribution.
    """
    values = self._layout.as_dict(values, constrained=True)
    count = tf.shape(next(iter(values.values())))[0]
    seeds = tf.random.experimental.stateless_split(simulation.seed_tensor(seed), count)
    return tf.vectorized_map(lambda args: self.simulate(args[0], args[1]), (values, seeds))


def _is_minus_one(tensor):
  """True if ``tensor`` is the constant -1 (a while loop's absent maximum)."""
  value = tf.get_static_value(tensor)
  return value is not None and int(value) == -1
