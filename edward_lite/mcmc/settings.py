"""The settings of one ``ed.mcmc.sample`` call, checked once.

``SampleSettings.from_call`` checks the call's arguments (in the order the
errors have always come in) and holds them in a frozen dataclass;
``for_target`` completes them with what depends on the model (its
dimension ``D`` chooses the metric, the target its float type).  The
completed settings are the single source of what the run computes: the
checkpoint's identity (``checkpoint_settings``) and the result's header
(``result_settings``).

``Pooling`` is the typed form of ``pooled=``: whether the step size and
the metric are one for all chains.
"""

import dataclasses
from typing import Any, NamedTuple, Optional, Union

import tensorflow as tf

from edward_lite.distribute.sharding import PARALLEL_MODES
from edward_lite.distribute.strategies import resolve
from edward_lite.checks import arguments
from edward_lite.model.init_values import describe_init
from edward_lite.mcmc import flow_adaptation, metric_update
from edward_lite.mcmc.groups import ChainGroups
from edward_lite.mcmc.kernels import get_kernel

__all__ = ["SampleSettings", "Pooling", "pooling", "DEFAULT_CHUNK", "CHECKPOINT_LAYOUT",
           "SUPERCHAINS", "SUPERCHAIN_MIN_CHAINS"]

DEFAULT_CHUNK = 200  # transitions per compiled call between host updates
# How a checkpoint holds its arrays: 3 keeps the state's streaming statistics
# in float64 (``streaming.STATISTICS_DTYPE``); 2 kept them in the draws' dtype
# and nests the chunk files' arrays by kind ("kept/<name>", "totals/<name>");
# 1 (no setting) marked totals with "_".
CHECKPOINT_LAYOUT = 3


# ``superchains=None``: runs of at least SUPERCHAIN_MIN_CHAINS chains drawn
# from init="uniform" or "prior" start in SUPERCHAINS superchains, the chains
# of each from one point, so that nested R-hat (Margossian et al. 2024) can
# tell many short chains that forgot their starts from ones that did not.
SUPERCHAINS = 16
SUPERCHAIN_MIN_CHAINS = 256


class Pooling(NamedTuple):
  """How warmup adaptation is shared between chains (``sample``'s ``pooled=``).

  A pair, so ``adaptation.pool_flags`` and the compiled program read it as
  ``(pool_step, pool_metric)``.

  Attributes:
    step: ``"bulk"`` (per-chain dual averaging whose bulk shares one step
      size after the first window; ``adaptation.step_size_update``), True
      (one step size ``[1, 1]``) or False (one per chain, ``[C, 1]``).
    metric: one metric for all chains (else, diagonal only, one per chain).
  """
  step: Union[str, bool]
  metric: bool

  @property
  def bulk(self):
    return self.step == "bulk"


def pooling(pooled, kernel):
  """The ``Pooling`` of ``sample``'s ``pooled=`` setting (before the
  metric's kind is known: a low-rank or dense metric is one for all chains
  whatever it says, ``SampleSettings.for_target``)."""
  if pooled is None:
    return Pooling("bulk", True)
  if isinstance(pooled, str) and pooled == "metric":
    return Pooling(False, True)
  if pooled is True or pooled is False:
    if not pooled and kernel.shared_metric:
      raise ValueError(f"the {kernel.name} kernel estimates one metric from all chains; it "
                       "needs pooled=True, 'metric' or None (the default).")
    return Pooling(pooled, pooled)
  raise ValueError(f"pooled must be None, False, 'metric' or True; got {pooled!r}.")


@dataclasses.dataclass(frozen=True)
class SampleSettings:
  """The checked settings of an ``ed.mcmc.sample`` call (its docstring
  describes each).

  Built by ``from_call``; the last four fields are None until
  ``for_target`` fills them from the model.

  Attributes:
    kernel: the kernel object (``kernels.get_kernel``).
    chains, warmup, draws, seed, thin, max_init_tries: integers, checked.
    chunk_size: transitions per compiled call (``DEFAULT_CHUNK`` if not given).
    keep_draws, adaptive_warmup, jit_compile: bools.
    init, init_radius, step_size, adapt_metric, dtype: as given.
    pooling: a ``Pooling``.
    parallel, strategy: how the work is spread (``strategy`` as given).
    progress, checkpoint_dir, callback: how the run reports and saves
      itself; they do not change the draws.
    metric: the ``metric_update.MetricSettings`` warmup starts with (the run
      may go on with a diagonal metric, ``run.Run``).
    float_dtype: the target's NumPy float type.
    target_accept: the kernel's target acceptance for ``D`` dimensions.
    chain_groups: the number of blocks of chains (``parallel="chain_groups"``),
      else None.
    superchains: as given (None: by the number of chains and ``init``) until
      ``for_target`` resolves it to ``K >= 2`` or 0 (none).
  """
  kernel: Any
  chains: int
  warmup: int
  draws: int
  seed: int
  thin: int
  keep_draws: bool
  init: Any
  init_radius: Any
  step_size: Any
  adapt_metric: Any
  adaptive_warmup: bool
  pooling: Pooling
  chunk_size: int
  max_init_tries: int
  parallel: str
  strategy: Any
  jit_compile: bool
  dtype: Any
  progress: Any
  checkpoint_dir: Any
  callback: Any
  metric: Optional[metric_update.MetricSettings] = None
  float_dtype: Any = None
  target_accept: Optional[float] = None
  chain_groups: Optional[int] = None
  superchains: Optional[int] = None
  flow: Any = None  # a FlowAdaptation, a VIResult to sample through, or None

  @classmethod
  def from_call(cls, *, kernel, chains, warmup, draws, seed, thin, keep_draws, init,
                init_radius, step_size, adapt_metric, adaptive_warmup, pooled, chunk_size,
                progress, checkpoint_dir, max_init_tries, callback, strategy, parallel,
                jit_compile, dtype, observed, superchains=None):
    """Checks ``sample``'s arguments.

    Raises:
      ValueError, TypeError: a setting out of its range or of the wrong
        type, naming it (``observed`` is checked here, not kept).
    """
    integer = arguments.check_integer
    checked = dict(chains=integer("chains", chains, 1), warmup=integer("warmup", warmup, 0),
                   draws=integer("draws", draws, 1), seed=integer("seed", seed, 0),
                   thin=integer("thin", thin, 1),
                   max_init_tries=integer("max_init_tries", max_init_tries, 1),
                   chunk_size=DEFAULT_CHUNK if chunk_size is None else integer(
                       "chunk_size", chunk_size, 1))
    arguments.check_positive("init_radius", init_radius)
    if step_size is not None:
      arguments.check_positive("step_size", step_size)
    arguments.check_call_settings(observed=observed, keep_draws=keep_draws, callback=callback,
                                  jit_compile=jit_compile)
    flow, adapt_metric = flow_adaptation.resolve(adapt_metric)
    if adapt_metric is not True and adapt_metric is not False and \
        adapt_metric not in metric_update.KINDS:
      raise ValueError(f"adapt_metric must be True, False, 'diag', 'low_rank', 'dense', 'flow', "
                       f"an ed.mcmc.FlowAdaptation or a fit of ed.vi.fit; got {adapt_metric!r}.")
    if not isinstance(adaptive_warmup, bool):
      raise ValueError(f"adaptive_warmup must be True or False; got {adaptive_warmup!r}.")
    if flow is not None and strategy is not None and parallel != "chain_groups":
      raise ValueError("adapt_metric='flow' runs the chains on one device, or with "
                       "parallel='chain_groups' on each; give no strategy= for "
                       f"parallel={parallel!r}.")
    if flow is not None and isinstance(kernel, str) and kernel.lower() == "nuts":
      kernel = flow_adaptation.flow_nuts()
    kernel = get_kernel(kernel)
    pooled = pooling(pooled, kernel)
    if parallel not in PARALLEL_MODES:
      raise ValueError(f"parallel must be 'data', 'chains' or 'chain_groups'; got {parallel!r}.")
    if superchains is not None:
      superchains = integer("superchains", superchains, 0)
      if superchains == 1 or superchains > checked["chains"] // 2:
        raise ValueError(f"superchains must be 0 (none) or from 2 to chains // 2 = "
                         f"{checked['chains'] // 2} (two chains or more in each); got "
                         f"{superchains}.")
    return cls(kernel=kernel, keep_draws=bool(keep_draws), init=init, init_radius=init_radius,
               step_size=step_size, adapt_metric=adapt_metric,
               adaptive_warmup=adaptive_warmup, pooling=pooled, parallel=parallel,
               strategy=strategy, jit_compile=bool(jit_compile), dtype=dtype,
               progress=progress, checkpoint_dir=checkpoint_dir, callback=callback,
               superchains=superchains, flow=flow, **checked)

  def make_chain_groups(self):
    """The checked ``ChainGroups`` over the devices of ``strategy`` for
    ``parallel="chain_groups"``, else None."""
    if self.parallel != "chain_groups":
      return None
    resolved = resolve(self.strategy, "chains")
    if resolved is None:
      raise ValueError("parallel='chain_groups' needs a strategy with the devices to use, "
                       "e.g. strategy='mirrored' or ed.distribute.strategy('mirrored', "
                       "devices=ed.distribute.logical_cpus(2)).")
    if isinstance(resolved, tf.distribute.TPUStrategy) or resolved.extended.worker_devices[
        0].split("/")[-1].upper().startswith("DEVICE:TPU"):
      raise ValueError("parallel='chain_groups' runs one program per GPU or CPU device; on "
                       "TPUs use parallel='chains' or 'data'.")
    if isinstance(resolved, tf.distribute.MultiWorkerMirroredStrategy):
      raise ValueError("parallel='chain_groups' runs on the devices of this host; across "
                       "workers use parallel='chains' or 'data'.")
    return ChainGroups(resolved, self.chains, self.pooling)

  def for_target(self, target, groups=None):
    """The settings completed for ``target`` (a ``Target`` of ``D``
    dimensions) and ``groups`` (``ChainGroups`` or None): the metric, the
    metric's pooling, the float type and the target acceptance.

    Raises:
      ValueError: ``adapt_metric`` does not fit ``D`` or the kernel
        (``metric_update.metric_settings``).
    """
    dim = target.dim
    metric = metric_update.metric_settings(self.adapt_metric, self.kernel, dim,
                                           self.pooling.metric)
    return dataclasses.replace(
        self, metric=metric, pooling=self.pooling._replace(metric=metric.pooled),
        float_dtype=target.dtype.as_numpy_dtype,
        target_accept=self.kernel.default_target_accept(dim),
        chain_groups=groups.size if groups else None,
        superchains=self._superchains(target))

  def _superchains(self, target):
    """``superchains`` resolved: as given, or ``SUPERCHAINS`` for a run of
    ``SUPERCHAIN_MIN_CHAINS`` chains or more whose starts are drawn (an
    ``init`` mode, or a dict that leaves latents to draw), else 0."""
    if self.superchains is not None:
      return self.superchains
    drawn = isinstance(self.init, str) or (isinstance(self.init, dict) and
                                           not set(target.names) <= set(self.init))
    return SUPERCHAINS if drawn and self.chains >= SUPERCHAIN_MIN_CHAINS else 0

  def checkpoint_settings(self):
    """The JSON-able settings a checkpoint is identified by (with the
    model's fingerprint): those that change the draws, and the layout of
    its files."""
    assert self.metric is not None, "for_target first"
    return dict(
        kernel=self.kernel.settings(), chains=self.chains, warmup=self.warmup,
        draws=self.draws, seed=self.seed, thin=self.thin, keep_draws=self.keep_draws,
        adapt_metric=self.adapt_metric, adaptive_warmup=self.adaptive_warmup,
        pooled=self.pooling, dtype=str(self.float_dtype), init=describe_init(self.init),
        step_size=self.step_size, chunk_size=self.chunk_size, jit_compile=self.jit_compile,
        checkpoint_layout=CHECKPOINT_LAYOUT,
        **({"chain_groups": self.chain_groups} if self.chain_groups else {}),
        **({"superchains": self.superchains} if self.superchains else {}),
        **({"flow": self.flow.settings() if isinstance(self.flow, flow_adaptation.FlowAdaptation)
            else "a given fit"} if self.flow is not None else {}))

  def result_settings(self):
    """The keywords of ``MCMCResult.build`` that are settings (the warmup
    run is the run's)."""
    return dict(chains=self.chains, draws=self.draws, thin=self.thin,
                keep_draws=self.keep_draws, seed=self.seed, superchains=self.superchains)
