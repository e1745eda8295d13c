"""A ``VIResult`` as the arrays and header of a saved file, and back
(``runtime/persistence.py`` is the file format; ``fit.save(path)`` and
``ed.load(path, model, *args)``): the ELBO trace, steps, settings, the
family and the surrogate's trainable variables (every flat family, or a
variational program's variables), and the observed data."""

import numpy as np

from edward_lite.model.target import make_target
from edward_lite.runtime import persistence
from edward_lite.vi import families
from edward_lite.vi.fit import target_and_batches
from edward_lite.vi.results import VIResult
from edward_lite.vi.surrogates import FlatSurrogate, ProgramSurrogate, is_variational_program

__all__ = ["FORMAT", "contents", "read", "SavedFamily"]

FORMAT = "edward_lite.VIResult/1"

_NEEDS_MODEL = ("This VI fit was loaded without its model: pass it to ed.load(path, model, "
                "*args) to draw from the surrogate (sample, summary, importance weights, "
                "to_arviz, predictions).")


def contents(result):
  """``(arrays, header)`` of a ``VIResult``."""
  target, surrogate = result.target, result._surrogate  # pylint: disable=protected-access
  program = isinstance(surrogate, ProgramSurrogate) or getattr(surrogate, "kind", None) == \
      "program"
  variables = [np.asarray(v) for v in surrogate.variables]
  if program:
    shapes = [list(v.shape) for v in variables]
  else:
    shapes = [list(s) for s in surrogate._shapes]  # pylint: disable=protected-access
  arrays = {"elbo": np.asarray(result.elbo)}
  for i, value in enumerate(variables):
    arrays[f"variables/{i}"] = value
  for name, value in target.observed.items():
    arrays[f"observed/{name}"] = np.asarray(value)
  family = result.family
  if isinstance(family, SavedFamily):
    described = family.saved
  elif program:
    described = {"family": "program",
                 "program": getattr(family, "__qualname__", repr(family))}
  else:
    described = family.settings()
  header = dict(
      family=described, steps=int(result.steps),
      samples=int(result.samples), converged=bool(result.converged),
      nonfinite=result.nonfinite, timings=result.timings, seed=result._seed,  # pylint: disable=protected-access
      settings=result.settings,
      latents={n: {"shape": i.shape.as_list(),
                   "unconstrained_shape": i.unconstrained_shape.as_list(),
                   "dtype": i.dtype.name}
               for n, i in target.latents.items()},
      deterministic=list(target.deterministic_names),
      surrogate={"kind": "program" if program else "flat",
                 "parameters": [[n, s] for n, s in zip(surrogate.parameter_names, shapes)],
                 "variables": [[list(v.shape), v.dtype.name] for v in variables]})
  return arrays, header


def read(path, header, arrays, model, args, kwargs):
  """A ``VIResult`` from a file written by ``save``: the file's arrays are
  checked first, then the model's latents (one eager run of the program),
  and only then is the surrogate built."""
  family_arg = kwargs.pop("family", None)
  program_args = kwargs.pop("program_args", ())
  program_kwargs = kwargs.pop("program_kwargs", None)
  dataset = kwargs.pop("dataset", None)
  saved_surrogate = _saved_surrogate(path, header, arrays)
  observed = persistence.group(arrays, "observed/")
  saved_family = header["family"]
  program = saved_surrogate.kind == "program"
  family, needs = _vi_family(path, saved_family, family_arg, program)
  settings = header.get("settings") or {}
  latents = header["latents"]
  full_log_prob = None
  if model is not None and settings.get("dataset") and dataset is None:
    raise ValueError(f"{path} holds a fit that streamed its data from a tf.data dataset: "
                     "pass it again, ed.load(path, model, *args, dataset=dataset).")
  if dataset is not None and not settings.get("dataset"):
    raise ValueError(f"{path} holds a fit on arrays, not on a tf.data dataset: leave "
                     "dataset= out.")
  if model is None:
    target = persistence.SavedTarget({n: i["shape"] for n, i in latents.items()}, header["deterministic"],
                         observed, {n: i["unconstrained_shape"] for n, i in latents.items()},
                         next(iter(latents.values()))["dtype"] if latents else None)
    surrogate, needs = saved_surrogate, _NEEDS_MODEL
    if family is None:
      family = SavedFamily(saved_family)
  else:
    target, batches = _vi_target(path, header, observed, model, args, kwargs, dataset)
    if family is None:
      surrogate, family = saved_surrogate, SavedFamily(saved_family)
    else:
      surrogate = _vi_surrogate(path, saved_surrogate, family, target, program_args,
                                program_kwargs)
    if batches is not None and needs is None:  # importance weights: one pass over it
      full_log_prob = batches.full_log_prob_fn(surrogate.model_log_prob, target)
  return VIResult(
      target=target, surrogate=surrogate, family=family, elbo=arrays["elbo"],
      steps=header["steps"], samples=header["samples"], converged=header["converged"],
      nonfinite=header["nonfinite"], timings=header["timings"], seed=header["seed"],
      full_log_prob=full_log_prob, settings=settings, needs=needs)


class SavedFamily:
  """The family of a loaded fit that could not be rebuilt (no program, or a
  family class edward_lite does not know): its saved description."""

  def __init__(self, saved):
    self.saved = saved
    self.name = saved.get("family")

  def settings(self):
    return dict(self.saved)

  def __repr__(self):
    return f"SavedFamily({self.saved!r})"


class _SavedSurrogate:
  """A surrogate's saved variables, without the means to draw from it."""

  def __init__(self, kind, parameters, variables):
    self.kind = kind
    self.parameter_names = [name for name, _ in parameters]
    self._shapes = [tuple(shape) for _, shape in parameters]
    self.variables = variables

  def named(self, values):
    if self.kind == "program":
      return dict(zip(self.parameter_names, values))
    sizes = np.cumsum([int(np.prod(s, dtype=np.int64)) for s in self._shapes])[:-1]
    return {name: np.reshape(part, shape) for name, part, shape in
            zip(self.parameter_names, np.split(np.asarray(values[0]), sizes), self._shapes)}


def _corrupt(path, what):
  return ValueError(f"{path} is not a usable VI fit saved by edward_lite (fit.save): {what}.")


def _saved_surrogate(path, header, arrays):
  """The saved variables, checked against the header: a file whose arrays
  do not match its own description is refused."""
  try:
    saved = header["surrogate"]
    kind, parameters, specs = saved["kind"], saved["parameters"], saved["variables"]
    for key in ("steps", "samples", "converged", "nonfinite", "timings", "seed", "latents",
                "deterministic", "family"):
      header[key]  # pylint: disable=pointless-statement
  except (KeyError, TypeError) as e:
    raise _corrupt(path, f"its header is incomplete ({type(e).__name__}: {e})") from e
  if kind not in ("flat", "program"):
    raise _corrupt(path, f"unknown surrogate kind {kind!r}")
  variables = []
  for i, (shape, dtype) in enumerate(specs):
    value = arrays.get(f"variables/{i}")
    if value is None:
      raise _corrupt(path, f"variable {i} of the surrogate is missing")
    if list(value.shape) != list(shape) or value.dtype.name != dtype:
      raise _corrupt(path, f"variable {i} of the surrogate has shape {list(value.shape)} and "
                     f"dtype {value.dtype.name}; the header says {list(shape)} and {dtype}")
    if not np.all(np.isfinite(value)):
      raise _corrupt(path, f"variable {i} of the surrogate holds non-finite values")
    variables.append(value)
  sizes = [int(np.prod(s, dtype=np.int64)) for _, s in parameters]
  if kind == "flat":
    dim = sum(int(np.prod(i["unconstrained_shape"], dtype=np.int64))
              for i in header["latents"].values())
    if len(variables) != 1 or sum(sizes) != variables[0].size or \
        ["loc", [dim]] != parameters[0]:
      raise _corrupt(path, f"its flat surrogate's parameters {parameters} do not fit its "
                     f"variables or the latents' {dim} unconstrained dimensions")
  elif sizes != [v.size for v in variables]:
    raise _corrupt(path, "its variational program's parameters do not fit its variables")
  elbo = arrays.get("elbo")
  if elbo is None or elbo.shape != (header["steps"],):
    raise _corrupt(path, f"its ELBO trace has shape {None if elbo is None else elbo.shape}; "
                   f"the fit ran {header['steps']} steps")
  return _SavedSurrogate(kind, parameters, variables)


def _vi_family(path, saved, given, program):
  """``(family, needs)``: the family to rebuild the surrogate with (None when
  it cannot be), and the sentence saying what to pass when it cannot."""
  name = saved.get("family")
  if program:
    if given is None:
      return None, (f"This fit's surrogate is the variational program "
                    f"{saved.get('program')!r}, which is code and not saved: pass it, "
                    "ed.load(path, model, *args, family=program) (with program_args= / "
                    "program_kwargs= as for the fit), to draw from it.")
    if not is_variational_program(given):
      raise ValueError(f"{path} holds a fit of the variational program "
                       f"{saved.get('program')!r}; family= must be that program, not "
                       f"{given!r}.")
    return given, None
  if given is not None:
    if is_variational_program(given):
      raise ValueError(f"{path} holds a fit of the family {name!r}, not of a variational "
                       "program; leave family= out.")
    family = families.get_family(given)
    if name is not None and family.name is not None and family.name != name:
      raise ValueError(f"{path} holds a fit of the family {name!r}; family= gives "
                       f"{family.name!r}.")
    return family, None
  settings = {k: v for k, v in saved.items() if k != "family"}
  if name in ("maf", "iaf"):
    settings.setdefault("hidden_degrees", "cycle")  # saved before the setting existed
  try:
    return families.FAMILIES[name](**settings), None
  except (KeyError, TypeError, ValueError):
    return None, (f"This fit's family {name!r} ({saved}) is not one edward_lite can rebuild "
                  "from the file: pass the family object, ed.load(path, model, *args, "
                  "family=...), to draw from it.")


def _vi_target(path, header, observed, model, args, kwargs, dataset):
  """``(target, batches)`` of ``model`` on the saved data (or ``dataset``),
  its latents checked against the saved ones."""
  settings = header.get("settings") or {}
  dtype = settings.get("dtype")
  if dataset is not None:
    target, batches = target_and_batches(model, args, kwargs, observed, None, dataset,
                                          settings.get("num_examples"), dtype)
  else:
    target, batches = make_target(model, *args, observed=observed, dtype=dtype, **kwargs), None
  found = {n: {"shape": i.shape.as_list(),
               "unconstrained_shape": i.unconstrained_shape.as_list(),
               "dtype": i.dtype.name} for n, i in target.latents.items()}
  if list(found.items()) != list(header["latents"].items()) or \
      list(target.deterministic_names) != header["deterministic"]:
    describe = lambda latents: {n: (i["shape"], i["dtype"]) for n, i in latents.items()}  # pylint: disable=unnecessary-lambda-assignment
    raise ValueError(f"The model given to ed.load does not fit {path}: its latents are "
                     f"{describe(found)}, the saved fit's {describe(header['latents'])}.")
  return target, batches


def _vi_surrogate(path, saved, family, target, program_args, program_kwargs):
  """The surrogate rebuilt for ``target`` with the saved variables."""
  if saved.kind == "program":
    surrogate = ProgramSurrogate(family, target, program_args, program_kwargs)
    found = [(list(v.shape), v.dtype.name) for v in surrogate.variables]
    expected = [(list(v.shape), v.dtype.name) for v in saved.variables]
    if found != expected:
      raise ValueError(f"The variational program given to ed.load does not fit {path}: it "
                       f"reads variables of shapes and dtypes {found}, the saved fit's "
                       f"{expected}.")
  else:
    surrogate = FlatSurrogate(family, target, np.zeros([target.dim],
                                                       target.dtype.as_numpy_dtype))
    found = list(zip(surrogate.parameter_names, surrogate._shapes))  # pylint: disable=protected-access
    expected = list(zip(saved.parameter_names, saved._shapes))  # pylint: disable=protected-access
    if found != expected or surrogate.variables[0].dtype.name != saved.variables[0].dtype.name:
      raise ValueError(f"The family {family!r} given to ed.load does not fit {path}: its "
                       f"parameters are {found}, the saved fit's {expected}.")
  for variable, value in zip(surrogate.variables, saved.variables):
    variable.assign(value)
  return surrogate


persistence.register(persistence.Kind(FORMAT, VIResult, contents, read))
