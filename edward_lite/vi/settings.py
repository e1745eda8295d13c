"""The settings of one ``ed.vi.fit`` call, checked once.

``FitSettings.from_call`` checks the call's arguments (in the order the
errors have always come in) and holds them in a frozen dataclass;
``for_family`` completes them once the model's target and its batches are
built: the family object, the defaults that depend on it (samples, warm
start, learning rate) and the optimizer.  The completed settings are the
single source of what the fit computes: the checkpoint's identity
(``checkpoint_settings``) and the result's header (``result_settings``).
"""

import dataclasses
from typing import Any, Optional

import numpy as np
import tensorflow as tf
import tf_keras

from edward_lite.distribute.strategies import resolve
from edward_lite.checks import arguments
from edward_lite.model.init_values import describe_init
from edward_lite.vi import families
from edward_lite.vi.families import get_family
from edward_lite.vi.surrogates import is_variational_program

__all__ = ["FitSettings", "make_optimizer", "DEFAULT_CHUNK"]

DEFAULT_CHUNK = 100  # steps per compiled call between host updates


@dataclasses.dataclass(frozen=True)
class FitSettings:
  """The checked settings of an ``ed.vi.fit`` call (its docstring describes
  each).

  Built by ``from_call``; ``for_family`` completes ``samples``,
  ``warm_start``, ``optimizer``, ``init`` and ``num_examples`` and fills
  ``fam`` and ``program``.

  Attributes:
    family: as given (a name, a family object or a variational program).
    steps, seed, chunk_size: integers, checked (``chunk_size`` is
      ``DEFAULT_CHUNK`` if not given).
    samples, warm_start: as given until ``for_family`` (then integers).
    optimizer: as given until ``for_family`` (then the Keras optimizer).
    learning_rate, stl, batch_size, dataset, tol, init, init_radius,
      on_nonfinite, jit_compile, program_args, program_kwargs, parallel,
      dtype: as given (``init="auto"`` becomes ``"uniform"`` with a
      dataset in ``for_family``).
    num_examples: as given until ``for_family`` (then the batches' ``N``,
      or None without minibatches).
    strategy: the resolved ``tf.distribute.Strategy``, or None.
    progress, checkpoint_dir, callback: how the fit reports and saves
      itself; they do not change the fit.
    fam: the family object (``families.get_family``), None for a
      variational program.
    program: whether ``family`` is a variational program (None until
      ``for_family``).
  """
  family: Any
  steps: int
  samples: Any
  seed: int
  optimizer: Any
  learning_rate: Any
  stl: Any
  batch_size: Any
  dataset: Any
  num_examples: Any
  tol: Any
  init: Any
  init_radius: Any
  warm_start: Any
  on_nonfinite: str
  chunk_size: int
  progress: Any
  checkpoint_dir: Any
  jit_compile: Any
  callback: Any
  program_args: Any
  program_kwargs: Any
  strategy: Any
  parallel: str
  dtype: Any
  fam: Any = None
  program: Optional[bool] = None

  @classmethod
  def from_call(cls, *, family, steps, samples, seed, optimizer, learning_rate, stl,
                batch_size, dataset, num_examples, tol, init, init_radius, warm_start,
                on_nonfinite, chunk_size, progress, checkpoint_dir, jit_compile, callback,
                program_args, program_kwargs, strategy, parallel, dtype, observed):
    """Checks the arguments of ``fit`` that do not need the model.

    Raises:
      ValueError, TypeError: a setting out of its range or of the wrong
        type, naming it (``observed`` is checked here, not kept).
    """
    integer = arguments.check_integer
    steps, seed = integer("steps", steps, 1), integer("seed", seed, 0)
    chunk = integer("chunk_size", chunk_size, 1) if chunk_size is not None else DEFAULT_CHUNK
    if on_nonfinite not in ("skip", "stop"):
      raise ValueError(f"on_nonfinite must be 'skip' or 'stop'; got {on_nonfinite!r}.")
    arguments.check_call_settings(observed=observed, callback=callback, stl=stl,
                                  jit_compile=jit_compile)
    arguments.check_positive("init_radius", init_radius)
    if not isinstance(program_args, (tuple, list)):
      raise TypeError(f"program_args must be a tuple of the variational program's positional "
                      f"arguments; got {type(program_args).__name__}.")
    if program_kwargs is not None and not isinstance(program_kwargs, dict):
      raise TypeError(f"program_kwargs must be a dict or None; got "
                      f"{type(program_kwargs).__name__}.")
    if tol is not None:
      arguments.check_positive("tol", tol, "a positive number or None")
    strategy = resolve(strategy, parallel)
    if strategy is not None:
      replicas = strategy.num_replicas_in_sync
      if parallel == "data" and batch_size is not None and batch_size % replicas:
        raise ValueError(f"A data-parallel minibatch must split evenly across the {replicas} "
                         f"replicas; batch_size={batch_size} is not a multiple of {replicas}.")
    return cls(family=family, steps=steps, samples=samples, seed=seed, optimizer=optimizer,
               learning_rate=learning_rate, stl=stl, batch_size=batch_size, dataset=dataset,
               num_examples=num_examples, tol=tol, init=init, init_radius=init_radius,
               warm_start=warm_start, on_nonfinite=on_nonfinite, chunk_size=chunk,
               progress=progress, checkpoint_dir=checkpoint_dir, jit_compile=jit_compile,
               callback=callback, program_args=program_args, program_kwargs=program_kwargs,
               strategy=strategy, parallel=parallel, dtype=dtype)

  def for_family(self, batches):
    """The settings completed once the target and ``batches`` (a
    ``Minibatcher``, ``DatasetBatches`` or None) are built: the family
    object, its default samples, warm start and learning rate, the
    optimizer, and ``init="auto"`` as ``"uniform"`` with a dataset.

    Raises:
      ValueError, TypeError: an unknown family, a bad ``samples``,
        ``warm_start``, ``learning_rate`` or ``optimizer``, or ``stl`` with
        a family that cannot use it.
    """
    program = is_variational_program(self.family)
    fam = None if program else get_family(self.family)
    samples = self.samples
    if samples is None:
      samples = 32 if program else fam.default_samples
    samples = arguments.check_integer("samples", samples, 1)
    if self.strategy is not None and self.parallel == "chains":
      replicas = self.strategy.num_replicas_in_sync
      if samples % replicas:
        raise ValueError(f"parallel='chains' splits the samples of each step across the "
                         f"{replicas} replicas; samples={samples} is not a multiple of "
                         f"{replicas}.")
    if self.stl and program:
      raise ValueError("stl=True needs a flat family; a variational program cannot hold its "
                       "parameters fixed in its density.")
    if self.stl and not fam.cheap_density:
      raise ValueError(f"stl=True needs the density of the family at its own draws with the "
                       f"parameters held fixed, which '{fam.name}' computes in D sequential "
                       "passes; use 'realnvp' or stl=False.")
    warm_start = self.warm_start
    if warm_start is None:
      warm_start = (0 if program or isinstance(fam, families.MeanField)
                    else min(500, self.steps))
    warm_start = arguments.check_integer("warm_start", warm_start, 0)
    optimizer = make_optimizer(self.optimizer, self.learning_rate,
                               0.01 if program else fam.default_learning_rate, self.steps)
    init = self.init
    if isinstance(init, str) and init == "auto" and self.dataset is not None:
      init = "uniform"  # the full data is not at hand for the search
    return dataclasses.replace(
        self, fam=fam, program=program, samples=samples, warm_start=warm_start,
        optimizer=optimizer, init=init, num_examples=getattr(batches, "num_examples", None))

  def described_family(self):
    """The family as JSON-able settings (a variational program by name)."""
    if self.fam is not None:
      return self.fam.settings()
    return getattr(self.family, "__qualname__", repr(self.family))

  def checkpoint_settings(self):
    """The JSON-able settings a checkpoint is identified by (with the
    model's fingerprint): those that change the fit."""
    assert self.program is not None, "for_family first"
    return dict(
        family=self.described_family(), steps=self.steps, samples=self.samples,
        seed=self.seed, learning_rate=self.learning_rate, stl=self.stl,
        batch_size=self.batch_size, tol=self.tol,
        dataset=(None if self.dataset is None
                 else [repr(self.dataset.element_spec), self.num_examples]),
        init=describe_init(self.init), warm_start=self.warm_start,
        optimizer=describe_optimizer(self.optimizer), chunk_size=self.chunk_size,
        jit_compile=bool(self.jit_compile))

  def result_settings(self):
    """The settings a ``VIResult`` reports (``VIResult.settings``)."""
    assert self.program is not None, "for_family first"
    return dict(
        family=self.described_family(), steps=self.steps, samples=self.samples,
        seed=self.seed, learning_rate=self.learning_rate, stl=bool(self.stl),
        batch_size=self.batch_size, tol=self.tol,
        init=self.init if isinstance(self.init, str) else "dict",
        init_radius=float(self.init_radius), warm_start=self.warm_start,
        on_nonfinite=self.on_nonfinite, chunk_size=self.chunk_size,
        jit_compile=bool(self.jit_compile), optimizer=describe_optimizer(self.optimizer),
        dtype=None if self.dtype is None else tf.as_dtype(self.dtype).name,
        dataset=self.dataset is not None, num_examples=self.num_examples,
        strategy=None if self.strategy is None else type(self.strategy).__name__,
        parallel=self.parallel)


def make_optimizer(optimizer, learning_rate, default_rate, steps):
  """``optimizer`` checked, or Adam at ``learning_rate`` (default
  ``default_rate``) with cosine decay to a hundredth over ``steps``."""
  if optimizer is None:
    rate = learning_rate if learning_rate is not None else default_rate
    if isinstance(rate, bool) or not isinstance(rate, (int, float, np.integer, np.floating)) \
        or not (np.isfinite(rate) and rate > 0):
      raise ValueError(f"learning_rate must be a positive number; got {rate!r}.")
    return tf_keras.optimizers.Adam(tf_keras.optimizers.schedules.CosineDecay(
        rate, decay_steps=steps, alpha=0.01))
  if not _is_keras_optimizer(optimizer):
    raise TypeError(f"optimizer must be a Keras optimizer (tf_keras.optimizers.Adam(...) or "
                    f"keras.optimizers.Adam(...)); got {type(optimizer).__name__}.")
  return optimizer


def describe_optimizer(optimizer):
  """The optimizer's config, JSON-able (other values by their repr)."""
  config = optimizer.get_config()
  return {k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v))
          for k, v in config.items()}


def _is_keras_optimizer(optimizer):
  if isinstance(optimizer, tf_keras.optimizers.Optimizer):
    return True
  try:
    import keras  # pylint: disable=g-import-not-at-top
  except ImportError:
    return False
  return isinstance(optimizer, keras.optimizers.Optimizer)
