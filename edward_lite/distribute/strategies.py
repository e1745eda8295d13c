"""Strategies: which devices run the replicas of a distributed computation.

edward_lite distributes through TensorFlow's own engine, ``tf.distribute``:
``strategy("mirrored")`` for the GPUs (or logical CPUs) of one host,
``strategy("multi_worker")`` for several hosts (read from ``TF_CONFIG``),
``strategy("tpu", tpu=...)`` for Cloud TPU cores.  ``logical_cpus(n)`` splits
the host CPU into ``n`` devices, so every strategy also runs on a laptop and
in tests.
"""

# pylint: disable=protected-access,import-outside-toplevel  (TF's collective key base)

import json
import os
import threading

import tensorflow as tf

from edward_lite.distribute.sharding import SHARDED_MODES

__all__ = ["strategy", "logical_cpus", "num_replicas", "resolve"]

KINDS = ("default", "mirrored", "multi_worker", "tpu")


def logical_cpus(n):
  """Splits the first physical CPU into ``n`` logical devices.

  Must run before TensorFlow initializes its devices (before the first op),
  unless the same split is already in place.

  Returns:
    The names of the ``n`` logical CPU devices.
  """
  if isinstance(n, bool) or not isinstance(n, int) or n < 1:
    raise ValueError(f"logical_cpus needs a positive integer number of devices; got {n!r}.")
  cpu = tf.config.list_physical_devices("CPU")[0]
  try:
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
  except RuntimeError as e:
    have = tf.config.list_logical_devices("CPU")
    if len(have) < n:
      raise RuntimeError(
          f"logical_cpus({n}) must run before TensorFlow initializes its devices (before any "
          f"op or tensor is created); this process already has {len(have)} CPU device(s)."
      ) from e
  return [d.name for d in tf.config.list_logical_devices("CPU")[:n]]


def strategy(kind="default", devices=None, tpu=None, timeout=60):
  """A ``tf.distribute.Strategy`` by name.

  Args:
    kind: ``"default"`` (one device, no distribution), ``"mirrored"``
      (replicas on the devices of this host: every GPU, or else every
      logical CPU), ``"multi_worker"`` (replicas on every worker of the
      cluster in ``TF_CONFIG``), ``"tpu"``; or a ``tf.distribute.Strategy``,
      returned as it is.
    devices: for ``"mirrored"``, the device names to use
      (e.g. ``logical_cpus(4)``).
    tpu: for ``"tpu"``: the TPU name or ``grpc://`` address, or ``"local"``
      on a TPU VM.
    timeout: for ``"tpu"``: seconds to wait for the TPU to answer (None:
      no limit); past it a RuntimeError names the address.

  Returns:
    The strategy; ``strategy.num_replicas_in_sync`` is its replica count.  A
    ``"mirrored"`` strategy is built once per set of devices and reused.
  """
  if isinstance(kind, tf.distribute.Strategy):
    return kind
  if kind not in KINDS:
    raise ValueError(f"Unknown strategy {kind!r}; expected one of {list(KINDS)} or a "
                     "tf.distribute.Strategy.")
  if devices is not None and kind != "mirrored":
    raise ValueError(f"devices= applies to the 'mirrored' strategy, not {kind!r}.")
  if tpu is not None and kind != "tpu":
    raise ValueError(f"tpu= applies to the 'tpu' strategy, not {kind!r}.")
  if timeout is not None and (isinstance(timeout, bool) or not isinstance(
      timeout, (int, float)) or not timeout > 0):
    raise ValueError(f"timeout must be a positive number of seconds or None; got {timeout!r}.")
  if kind == "default":
    return tf.distribute.get_strategy()
  if kind == "mirrored":
    if devices is None:
      gpus = tf.config.list_logical_devices("GPU")
      devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
    if isinstance(devices, str) or not devices:
      raise ValueError(f"devices= must be a non-empty list of device names, e.g. "
                       f"ed.distribute.logical_cpus(2); got {devices!r}.")
    _check_local_devices(devices)
    return _mirrored(tuple(tf.DeviceSpec.from_string(d).to_string() for d in devices))
  if kind == "multi_worker":
    config = os.environ.get("TF_CONFIG")
    if config is not None:
      try:
        json.loads(config)
      except ValueError as e:
        raise ValueError(f"TF_CONFIG is not valid JSON: {config[:200]!r}.") from e
    return tf.distribute.MultiWorkerMirroredStrategy()
  return _tpu_strategy(tpu, timeout)


def _check_local_devices(devices):
  """A ValueError naming the devices of this host that do not exist (a
  MirroredStrategy would accept them and fail, or hang, at its first run)."""
  local = {}
  for d in tf.config.list_logical_devices():
    spec = tf.DeviceSpec.from_string(d.name)
    local[(spec.device_type.upper(), spec.device_index)] = d.name
  missing = []
  for name in devices:
    try:
      spec = tf.DeviceSpec.from_string(name)
    except (TypeError, ValueError) as e:
      raise ValueError(f"devices= holds {name!r}, which is not a device name: {e}") from e
    if spec.job not in (None, "localhost") or spec.device_type is None:
      continue  # another worker's, or not specific: TensorFlow resolves it
    if (spec.device_type.upper(), spec.device_index or 0) not in local:
      missing.append(name)
  if missing:
    raise ValueError(f"devices= names {missing}, which this host does not have; its devices "
                     f"are {sorted(local.values())} (ed.distribute.logical_cpus(n) makes n "
                     "CPU devices).")


_MIRRORED = {}


def _mirrored(devices):
  """One MirroredStrategy per device set, all-reducing with TensorFlow's
  public ``ReductionToOneDevice`` (CPUs) or ``NcclAllReduce`` (GPUs).

  The default, collective ops, keys its groups from a counter every
  MirroredStrategy starts at the same value: two strategies in one process
  then break each other's all-reduce ("Shape mismatch in the collective
  instance", or a group joined with another size).  These two need no keys.
  """
  if devices not in _MIRRORED:
    gpus = all(tf.DeviceSpec.from_string(d).device_type == "GPU" for d in devices)
    reduce_ops = tf.distribute.NcclAllReduce() if gpus else tf.distribute.ReductionToOneDevice()
    _MIRRORED[devices] = tf.distribute.MirroredStrategy(list(devices),
                                                        cross_device_ops=reduce_ops)
  return _MIRRORED[devices]


def _tpu_strategy(tpu, timeout=60):
  """Connects to the TPU at ``tpu``; a RuntimeError if it does not answer
  within ``timeout`` seconds.

  TensorFlow's connect call has no deadline of its own (against an address
  where nothing answers it waits for minutes), so it runs in a daemon thread
  that is abandoned at the timeout.
  """
  if not tpu:
    raise ValueError("strategy('tpu') needs tpu=: the TPU name, a grpc:// address, or "
                     "'local' on a TPU VM.")
  outcome = {}

  def connect():
    try:
      resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
      tf.config.experimental_connect_to_cluster(resolver)
      tf.tpu.experimental.initialize_tpu_system(resolver)
      outcome["resolver"] = resolver
    except BaseException as e:  # pylint: disable=broad-except  (re-raised below)
      outcome["error"] = e

  thread = threading.Thread(target=connect, name=f"edward_lite-connect-{tpu}", daemon=True)
  thread.start()
  thread.join(timeout)
  if thread.is_alive():
    raise RuntimeError(f"No TPU answered at tpu={tpu!r} within timeout={timeout} s; check "
                       "the address and that the TPU is up, or pass a larger timeout=.")
  e = outcome.get("error")
  if isinstance(e, OSError) and not str(tpu).startswith(("grpc://", "local")):
    # A TPU name is looked up through Google Cloud's metadata server and TPU
    # API: off a Cloud VM the lookup fails (urllib's URLError, an OSError).
    raise RuntimeError(f"No TPU could be reached at tpu={tpu!r}: a TPU name is looked up "
                       "through Google Cloud's metadata server, which this machine cannot "
                       f"reach ({type(e).__name__}: {e}); on a TPU VM pass tpu='local', "
                       "elsewhere the TPU's grpc:// address.") from e
  if isinstance(e, (ValueError, RuntimeError, OSError, tf.errors.OpError)):
    raise RuntimeError(f"No TPU could be reached at tpu={tpu!r}: {type(e).__name__}: "
                       f"{str(e).splitlines()[0] if str(e) else ''}") from e
  if e is not None:
    raise e
  return tf.distribute.TPUStrategy(outcome["resolver"])


def num_replicas(strategy_):
  """The number of replicas computing in sync."""
  return strategy_.num_replicas_in_sync


_BY_NAME = {}


def resolve(strategy_, parallel="data"):
  """The strategy an inference call should distribute over, or None.

  ``None``, ``"default"`` and TensorFlow's default (non-distributing)
  strategy mean no distribution; a name is built once per process and
  reused (so compiled programs are reused too).
  """
  if parallel not in SHARDED_MODES:
    raise ValueError(f"parallel must be one of {list(SHARDED_MODES)}; got {parallel!r}.")
  if strategy_ is None or strategy_ == "default":
    return None
  if isinstance(strategy_, str):
    if strategy_ not in _BY_NAME:
      _BY_NAME[strategy_] = strategy(strategy_)
    return _BY_NAME[strategy_]
  if not isinstance(strategy_, tf.distribute.Strategy):
    raise TypeError(f"strategy= must be a tf.distribute.Strategy or one of {list(KINDS)}; "
                    f"got {type(strategy_).__name__}.")
  if type(strategy_).__name__ == "_DefaultDistributionStrategy":
    return None
  return strategy_
