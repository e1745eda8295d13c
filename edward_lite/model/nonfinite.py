"""Which term of a log density is not finite, and why.

Shared by ``ed.mcmc.sample`` (no initial point with a finite log density)
and ``ed.vi.fit`` (a step whose ELBO is not finite, or no finite starting
point).  ``explain(target, flat, points)`` evaluates each random variable's
log-probability term (``Target.log_prob_terms_flat``) at the points ``flat``
``[N, D]``, names the terms that are not finite and, for the first point
where each is not, runs the program once eagerly there to say why:

* an ``ed.Factor`` that adds ``-inf`` or NaN;
* a distribution parameter that is NaN (NaN data the input checks could not
  see, e.g. in a closure, or an expression undefined at these values), or
  outside its domain: a non-positive scale, rate or concentration, a
  probability outside [0, 1] -- naming the program argument it came from
  when it is one;
* an observed (or fixed) value outside the support of its distribution as
  built at that point, e.g. bounds computed from latents
  (``edward_lite.checks.support``'s check, run with that point's parameters);
* a latent's constraining transform whose Jacobian overflows;
* with discrete latents summed out, the term of a group of them (``"z
  (summed out)"``, ``Target.log_prob_terms_flat``): the group's term that is
  NaN, or not finite at every value of the latents, explained as above;
* otherwise the term itself, by element.

Everything here runs eagerly on the host, after the failure was seen: it
costs nothing on the normal path.
"""

import inspect

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from edward_lite.checks.constant_parameters import SKIP as _SKIP
from edward_lite.checks.constant_parameters import WRAPPERS as _WRAPPERS
from edward_lite.checks.constant_parameters import domain_failure as _domain_failure
from edward_lite.checks.constant_parameters import show_array as _show
from edward_lite.checks.support import check_observed_support
from edward_lite.model import enumeration
from edward_lite.model.interpreter import run

__all__ = ["explain", "nonfinite_terms", "terms_at"]

tfd, tfb = tfp.distributions, tfp.bijectors

MAX_POINTS = 1024  # points whose terms are evaluated (the first ones)
MAX_NAMED = 3  # terms explained in one message
_FACTOR = tfp.experimental.distributions.IncrementLogProb


def nonfinite_terms(target, flat):
  """Dict ``term name -> bool mask [N]`` of the points of ``flat`` ``[N, D]``
  where that log-probability term is not finite (only terms with any), in
  program order, the Jacobian terms last; ``"<latent> (Jacobian)"`` names a constraining transform's term."""
  flat = tf.convert_to_tensor(np.asarray(flat)[:MAX_POINTS], target.dtype)
  try:
    terms = {name: np.asarray(term) for name, term in target.log_prob_terms_flat(flat).items()}
  except Exception:  # pylint: disable=broad-except  (a program pfor cannot batch)
    terms = {}
    for row in range(min(int(flat.shape[0]), 8)):
      for name, term in _run_at(target, flat[row])[0].items():
        terms.setdefault(name, []).append(np.asarray(term))
    terms = {name: np.stack(values) for name, values in terms.items()}
  out = {}
  # The random variables' terms first, then the transforms' (a NaN point
  # makes both non-finite; the variable's term says more).
  for jacobian in (False, True):
    for name, term in terms.items():
      if name.endswith(" (Jacobian)") != jacobian:
        continue
      bad = ~np.isfinite(np.reshape(term, [term.shape[0], -1])).all(axis=1)
      if bad.any():
        out[name] = bad
  return out


def explain(target, flat, points="points"):
  """One sentence naming the log-density terms that are not finite at the
  points ``flat`` ``[N, D]`` (unconstrained) and the likely cause of each,
  or None when every term is finite there."""
  flat = np.asarray(flat)
  bad_terms = nonfinite_terms(target, flat)
  if not bad_terms:
    return None
  n = min(flat.shape[0], MAX_POINTS)
  parts = []
  for name, bad in list(bad_terms.items())[:MAX_NAMED]:
    row = int(np.argmax(bad))
    try:
      cause = _cause(target, name, flat[row])
    except Exception as e:  # pylint: disable=broad-except  (the diagnosis must not fail)
      cause = f"the program could not be rerun there ({type(e).__name__}: {e})"
    parts.append(f"{_term_text(name)} is not finite at {int(bad.sum())} of {n} {points}: {cause}")
  rest = len(bad_terms) - MAX_NAMED
  more = f" (and {rest} more term(s): {list(bad_terms)[MAX_NAMED:]})" if rest > 0 else ""
  return "; ".join(parts) + more + "."


# -- one point ------------------------------------------------------------------------


def terms_at(target, flat_row):
  """Each log-probability term (``name -> Tensor``) at one unconstrained point
  ``[D]``: one eager run of the program (milliseconds, nothing compiled)."""
  return _run_at(target, flat_row)[0]


def _run_at(target, flat_row, enumerated=None):
  """``(terms, random variables)`` of one eager run at an unconstrained point
  ``[D]`` (the summed-out latents at ``enumerated``, by default their first
  values)."""
  state = {k: v[0] for k, v in target.unflatten(tf.reshape(flat_row, [1, -1])).items()}
  one = target.run(state) if enumerated is None else run(target, state, enumerated=enumerated)
  return one.terms, one.variables


def _term_text(name):
  if name.endswith(" (Jacobian)"):
    return f"the Jacobian term of latent '{name[:-len(' (Jacobian)')]}'"
  return f"the log-density term of '{name}'"


def _summed_group(target, name):
  """The ``enumeration_plan.Group`` whose summed-out term is ``name``, or None."""
  plan = getattr(target, "enumeration", None)
  return next((g for g in (plan.groups if plan else ())
               if enumeration.group_term_name(g) == name), None)


def _summed_cause(target, group, flat_row):
  """Why a group's summed-out term ``log sum_z exp(...)`` is not finite: a
  term of the group that is NaN at some configuration of its latents, or
  not finite at every one, explained at the first configuration where it is
  not finite."""
  plan = target.enumeration
  names = ", ".join(group.names)
  runs = [(c, _run_at(target, flat_row, enumeration.configuration(group, plan.infos, c)))
          for c in range(group.count)]
  for term in group.terms:
    finite = [bool(np.all(np.isfinite(np.asarray(r[0][term])))) for _, r in runs]
    nan = any(np.isnan(np.asarray(r[0][term])).any() for _, r in runs)
    if nan or not any(finite):
      c = finite.index(False)
      values = enumeration.configuration(group, plan.infos, c)
      at = ", ".join(f"{n} = {_show(np.asarray(v))}" for n, v in values.items())
      every = "" if nan else f" at every value of {names}"
      return (f"with {names} summed out, the term of '{term}' is not finite{every} (at {at}: "
              f"{_cause(target, term, flat_row, values)})")
  return (f"with {names} summed out, no single term is to blame: at some element every "
          f"configuration of {names} has probability 0")


def _cause(target, name, flat_row, enumerated=None):
  """Why term ``name`` is not finite at one point: a clause."""
  group = _summed_group(target, name)
  if group is not None:
    return _summed_cause(target, group, flat_row)
  terms, record = _run_at(target, flat_row, enumerated)
  if name.endswith(" (Jacobian)"):
    latent = name[:-len(" (Jacobian)")]
    u = target.unflatten(tf.reshape(flat_row, [1, -1]))[latent]
    if not np.all(np.isfinite(np.asarray(u))):
      return (f"the point's unconstrained value of '{latent}' is itself {_show(np.asarray(u)[0])} "
              "(e.g. a prior draw from a distribution with invalid parameters)")
    return (f"its constraining transform overflows at the unconstrained value(s) "
            f"{_show(np.asarray(u)[0])} (start nearer the posterior: init= values or a "
            "smaller init_radius)")
  rv = record.get(name)
  if rv is None:
    return "the term could not be found again by rerunning the program"
  dist = rv.distribution
  if isinstance(dist, _FACTOR):
    return _factor_cause(dist)
  kind = type(dist).__name__
  role = ("observed value" if name in target.observed else
          "value fixed in the program" if name in target.fixed else "value")
  inner = dist
  while isinstance(inner, _WRAPPERS):
    inner = inner.distribution
  params = list(_parameters(inner))
  argument = _argument_names(target)
  for pname, array, tensor in params:
    nan = np.isnan(array)
    if nan.any():
      return (f"the {kind} distribution's parameter '{pname}'{argument(tensor, array)} has "
              f"{_count(nan)} NaN value(s){_where(nan)}: NaN in data the program reads, or an "
              "expression that is undefined at these values")
  for pname, array, tensor in params:
    failure = _domain_failure(inner, pname, array)
    if failure is not None:
      bad, adjective, requirement = failure
      return (f"the {kind} distribution's parameter '{pname}'{argument(tensor, array)} has "
              f"{_count(bad)} {adjective} value(s){_first(array, bad)} ({requirement})")
  if role != "value":
    try:
      check_observed_support(name, dist, rv.value)
    except ValueError as e:
      text = str(e).replace(f"Observed value of random variable '{name}' is", f"the {role} is",
                            1).rstrip(".")
      return text + (" (observed data outside the support given the other variables' values "
                     "here)" if role == "observed value" else "")
  for pname, array, tensor in params:
    infinite = np.isinf(array)
    if infinite.any():
      return (f"the {kind} distribution's parameter '{pname}'{argument(tensor, array)} has "
              f"{_count(infinite)} infinite value(s){_where(infinite)} (overflow)")
  try:
    elementwise = np.asarray(dist.log_prob(rv.value))
  except Exception:  # pylint: disable=broad-except
    elementwise = np.asarray(terms.get(name, np.nan))
  bad = ~np.isfinite(elementwise)
  what = "an overflow, or a value of zero probability"
  if role == "value":
    what = "an overflow, or a prior that is zero there"
  return (f"its {kind} log density is -inf or NaN at {_count(bad)} of {max(bad.size, 1)} "
          f"element(s){_where(bad)} ({what})")


def _factor_cause(dist):
  increment = np.asarray(dist.parameters.get("log_prob_increment", np.nan))
  if increment.dtype.kind not in "fc":
    return "the ed.Factor's log density is not finite"
  bad = ~np.isfinite(increment)
  values = sorted({"NaN" if np.isnan(v) else f"{v:+g}" for v in increment[bad].ravel()})
  if increment.ndim == 0:
    return f"the ed.Factor adds {values[0] if values else 'a non-finite value'} to the log density"
  return (f"the ed.Factor adds {'/'.join(values)} at {_count(bad)} of its {bad.size} "
          f"elements{_where(bad)}")


def _parameters(dist):
  """``(name, NumPy array, the value as given)`` of the floating Tensor parameters."""
  for pname, value in dist.parameters.items():
    if pname in _SKIP or value is None or isinstance(value, (str, bool, tfd.Distribution)):
      continue
    try:
      array = np.asarray(value)
    except Exception:  # pylint: disable=broad-except
      continue
    if array.dtype.kind == "f" and array.size:
      yield pname, array, value


def _argument_names(target):
  """``argument(tensor, array) -> text``: ' (the program's argument 'x')' when
  the parameter is one of the program's arguments as given, else ''."""
  args, kwargs, _ = target.data
  try:
    bound = dict(inspect.signature(target.program).bind_partial(*args, **kwargs).arguments)
  except (TypeError, ValueError):
    bound = {f"#{i}": a for i, a in enumerate(args)}
    bound.update(kwargs)

  def argument(tensor, array):
    for pname, value in bound.items():
      if value is tensor:
        return f" (the program's argument '{pname}')"
    for pname, value in bound.items():
      if tf.is_tensor(value) and hasattr(value, "numpy") and value.shape.num_elements() == array.size \
          and array.size > 1:
        given = np.asarray(value)
        if given.shape == array.shape and np.array_equal(given, array, equal_nan=True):
          return f" (the program's argument '{pname}')"
    return ""

  return argument


def _count(mask):
  return int(np.count_nonzero(mask))


def _where(mask):
  mask = np.asarray(mask)
  if mask.ndim == 0 or mask.size == 1:
    return ""
  return f", the first at index {[int(i) for i in np.argwhere(mask)[0]]}"


def _first(array, bad):
  """': -1' or ', the first at index [1] is -1'."""
  if array.ndim == 0 or array.size == 1:
    return f": {array.reshape(-1)[0]:g}"
  index = np.argwhere(bad)[0]
  return f", the first at index {[int(i) for i in index]} is {array[tuple(index)]:g}"
