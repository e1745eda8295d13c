"""The memory a run's kept draws need, known before the run (issue 52).

With ``keep_draws=True`` ``ed.mcmc.sample`` keeps every kept draw on the
host, in arrays of the run's size that each sampling chunk's draws are
copied into (``kept_draws``).  ``check`` estimates the bytes this needs
from the model's traced structure (no compiled work) and refuses a run
that cannot fit in the memory available, or warns when it needs more than
``WARN_FRACTION`` of it.

The estimate.  ``K = ceil(draws / thin)`` kept draws of ``C`` chains; per
kept draw of one chain a row of

    row = sum_n |x_n| s_n  +  sum_d |d| s_d  +  sum_k s_k

bytes: the constrained latents ``x_n`` (``|x_n|`` scalars of ``s_n`` bytes),
the ``ed.Deterministic`` values and the summed-out discrete latents' draws
``d``, and the sample statistics ``k`` (``accept_prob``, ``energy``,
``log_prob`` in the model's float; ``num_gradients``, ``tree_depth`` int32;
``diverging`` one byte; no ``energy`` for a kernel without gradients, none
the kernel gives one value always: ``base.TransitionInfo.dtypes``).  A
chunk's compiled buffers hold ``P + 1`` rows of the latents and statistics
(``row_c``: ``row`` without the ``d``), ``P`` the chunk's capacity
(``kept_draws.capacity``: ``chunk_size``, or ``K`` when fewer and large).
Then

    kept    = K C row                     result.draws + result.sample_stats
    chunk   = (P + 1) C row_c             one chunk's buffers (with chain groups,
                                          their blocks' together)
    summary = s K C + 8 SUMMARY_TEMPORARIES min(K C, CHUNK_VALUES)
                                          summary(): one copy of one scalar's draws (s
                                          bytes each) and its chunks' float64 temporaries
    sampler = n C (8 D (NUM_BATCHES + 5) + 8 D s + 24)
                                          the sampler's state (positions, step sizes,
                                          moments, ``streaming``'s float64 batch sums
                                          of ``D`` latents a chain), as often as a
                                          compiled chunk holds it: n = SAMPLER_COPIES,
                                          and GROUP_COPIES more with chain groups (the
                                          state split into blocks and merged back)
    needed  = sampler + kept + max(chunk, summary)

(a chunk's buffers are freed before a summary runs).  Measured at 10^6
chains of a 2-D Gaussian, 100 random-walk draws kept (RESULTS section
63): the process grew by 6.94 GB at its peak, against an estimate of 6.82
GB; with two chain groups by 8.17 GB, against 8.18 GB.  Not
counted: the density's own temporaries, ``[C, N]`` arrays for ``N``
data points (large for a data-heavy model at many chains).

The memory available is the smallest of Linux's ``MemAvailable``
(``/proc/meminfo``) and the room left under the process's cgroup limits
(v2 ``memory.max``, v1 ``memory.limit_in_bytes``, less the usage that is not
reclaimable page cache), up the cgroup tree; elsewhere the available (else
total) physical pages of ``os.sysconf``; when none can be read, nothing is
checked.  ``ED_MEMORY_LIMIT`` (bytes, or ``"8GB"``, ``"512MiB"``; ``"off"``:
no check) replaces the measured figure.
"""

import os
import re
import sys
import warnings
from typing import NamedTuple

import tensorflow as tf

from edward_lite.analysis.column_summary import CHUNK_VALUES
from edward_lite.mcmc import kept_draws
from edward_lite.mcmc.settings import DEFAULT_CHUNK
from edward_lite.mcmc.streaming import NUM_BATCHES

__all__ = ["Estimate", "estimate", "available", "check", "parse_bytes", "human_bytes",
           "SUMMARY_TEMPORARIES", "SAMPLER_COPIES", "GROUP_COPIES", "WARN_FRACTION", "ENV"]

ENV = "ED_MEMORY_LIMIT"
# summary() copies one scalar's draws [K, C] at a time, in their dtype
# (``analysis.column_summary``), and works on chunks of at most
# CHUNK_VALUES of them, two at a time, with about this many float64
# temporaries per value of a chunk (the rank bins' counts and tables
# included).
SUMMARY_TEMPORARIES = 16
# A compiled chunk holds the sampler's state about this many times (its
# input, its output and their temporaries; measured: RESULTS section 62),
# and chain groups twice more (RESULTS section 63).
SAMPLER_COPIES = 5
GROUP_COPIES = 2
WARN_FRACTION = 0.5  # a run needing more than this share of the memory available warns
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15}
_NO_LIMIT = 2**60  # cgroup v1 writes "no limit" as a number near 2^63


class Estimate(NamedTuple):
  """Bytes of a run's kept draws (module docstring): ``kept`` (the result's
  arrays), ``chunk`` (one chunk's buffers), ``summary`` (its working
  arrays), ``sampler`` (its state's copies), ``needed`` (the peak)."""
  kept: int
  chunk: int
  sampler: int
  summary: int
  needed: int


class _Rows(NamedTuple):
  """Bytes per kept draw of one chain: ``row`` (the result's), ``chunk_row``
  (a chunk buffer's), ``item`` (one scalar's); ``state``, the sampler's
  bytes a chain, held ``sampler_copies`` times; and the run's settings
  that size the chunk's buffers."""
  row: int
  chunk_row: int
  item: int
  state: int
  chains: int
  draws: int
  chunk_size: int
  sampler_copies: int

  def estimate(self, thin):
    """The ``Estimate`` of the run keeping every ``thin``-th draw."""
    cells = -(-self.draws // thin) * self.chains
    kept = cells * self.row
    rows = kept_draws.capacity(self.chains, self.draws, thin, self.chunk_size,
                               self.chunk_row) + 1
    chunk = rows * self.chains * self.chunk_row
    summary = cells * self.item + 8 * SUMMARY_TEMPORARIES * min(cells, CHUNK_VALUES)
    sampler = self.sampler_copies * self.chains * self.state
    return Estimate(kept=kept, chunk=chunk, summary=summary, sampler=sampler,
                    needed=sampler + kept + max(chunk, summary))


def estimate(target, kernel, chains, draws, thin, chunk_size=DEFAULT_CHUNK,
             chain_groups=False):
  """The ``Estimate`` of a run of ``target`` (its traced structure only)
  keeping ``ceil(draws / thin)`` draws of ``chains`` chains in chunks of
  ``chunk_size`` transitions (on ``chain_groups`` or not); None when a
  latent's or a value's size is not known statically or the latents have
  no common float type (the sampler's own checks then speak)."""
  rows = _rows(target, kernel, chains, draws, chunk_size, chain_groups)
  return rows.estimate(thin) if rows else None


def _rows(target, kernel, chains, draws, chunk_size, chain_groups):
  """The ``_Rows`` of a run (``estimate``), or None."""
  dtype = target.dtype
  if dtype is None or not dtype.is_floating:
    return None
  structure = target.structure
  latents = [(info.shape.num_elements(), info.dtype.size) for info in target.latents.values()]
  values = [(tf.TensorShape(shape).num_elements(), dtype.size)
            for shape in structure.deterministic.values()]
  values += [(info.shape.num_elements(), tf.as_dtype(info.dtype).size)
             for info in structure.enumerated.values()]
  if any(n is None for n, _ in latents + values):
    return None
  chunk_row = kept_draws.row_bytes(sum(n for n, _ in latents), dtype, kernel)
  row = chunk_row + sum(n * s for n, s in values)
  dim = target.dim
  state = 8 * dim * (NUM_BATCHES + 5) + 8 * dim * dtype.size + 24
  return _Rows(row=row, chunk_row=chunk_row, item=dtype.size, state=state, chains=chains,
               draws=draws, chunk_size=chunk_size,
               sampler_copies=SAMPLER_COPIES + GROUP_COPIES * bool(chain_groups))


def check(target, kernel, chains, draws, thin, keep_draws, chunk_size=DEFAULT_CHUNK,
          chain_groups=False):
  """Refuses (``MemoryError``) a run whose kept draws cannot fit in the
  memory available, and warns (``RuntimeWarning``) when they need more than
  ``WARN_FRACTION`` of it; nothing without kept draws, or when the memory
  cannot be measured.  Returns the ``Estimate`` (None if not checked).

  ``MemoryError``, not the ``ValueError`` of argument errors: no argument
  is wrong in itself -- the same call runs on a larger machine -- and a
  caller that handles running out of memory catches it."""
  if not keep_draws:
    return None
  rows = _rows(target, kernel, chains, draws, chunk_size, chain_groups)
  need = rows.estimate(thin) if rows else None
  room = available()
  if need is None or room is None:
    return need
  limit, source = room
  where = f" ({ENV})" if source == ENV else " to this process"
  kept = -(-draws // thin)
  if need.needed > limit:
    fits = _thin_that_fits(rows, WARN_FRACTION * limit) or _thin_that_fits(rows, limit)
    thin_way = f"thin={fits} (which fits), " if fits else ""
    raise MemoryError(
        f"Keeping this run's draws needs about {human_bytes(need.needed)} of memory "
        f"({kept:,} draws of {chains:,} chains: {human_bytes(need.kept)} kept, "
        f"{human_bytes(need.needed - need.kept)} for the sampler while they are "
        f"{'sampled' if need.chunk >= need.summary else 'summarized'}), more than the "
        f"{human_bytes(limit)} available{where}: pass keep_draws=False (constant memory: "
        f"moments, R-hat and ESS are streamed), {thin_way}or fewer draws= or chains=.")
  if need.needed > WARN_FRACTION * limit:
    fits = _thin_that_fits(rows, WARN_FRACTION * limit)
    warnings.warn(
        f"Keeping this run's draws needs about {human_bytes(need.needed)} of memory, more "
        f"than half of the {human_bytes(limit)} available{where}; keep_draws=False "
        f"(moments, R-hat and ESS streamed in constant memory)"
        f"{f' or thin={fits}' if fits else ''} would keep it under half.", RuntimeWarning,
        stacklevel=_caller_level())
  return need


def _thin_that_fits(rows, limit):
  """The smallest ``thin`` whose kept draws need at most ``limit`` bytes,
  or None when one kept draw per chain needs more (``needed`` falls as
  ``thin`` grows: a bisection)."""
  fits = lambda thin: rows.estimate(thin).needed <= limit  # pylint: disable=unnecessary-lambda-assignment
  if not fits(rows.draws):
    return None
  low, high = 1, rows.draws
  while low < high:
    middle = (low + high) // 2
    low, high = (low, middle) if fits(middle) else (middle + 1, high)
  return low


def _caller_level():
  """``warnings.warn``'s stacklevel of the first frame outside the library:
  the user's call of ``ed.mcmc.sample``."""
  package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  frame, level = sys._getframe(1), 1  # pylint: disable=protected-access
  while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
    frame, level = frame.f_back, level + 1
  return level


def available():
  """``(bytes, source)``: the memory this process may still use, ``source``
  ``ED_MEMORY_LIMIT`` when the variable sets it, else ``"measured"``; None
  when it is ``"off"`` or cannot be measured (module docstring).

  Raises:
    ValueError: ``ED_MEMORY_LIMIT`` is not a size.
  """
  setting = os.environ.get(ENV, "").strip()
  if setting:
    if setting.lower() in ("off", "none"):
      return None
    return parse_bytes(setting), ENV
  found = [n for n in (_meminfo_available(), _cgroup_available()) if n is not None]
  if not found:
    found = [n for n in (_sysconf_available(),) if n is not None]
  return (min(found), "measured") if found else None


def parse_bytes(text):
  """Bytes of ``"8000000000"``, ``"8GB"``, ``"8 G"`` (powers of 1000) or
  ``"8GiB"`` (powers of 1024); a ValueError naming ``ED_MEMORY_LIMIT``
  otherwise."""
  match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmgtp]?)(i?)b?\s*",
                       str(text), re.IGNORECASE)
  if match is None or (match.group(3) and not match.group(2)):
    raise ValueError(f"{ENV} must be a number of bytes (e.g. 8000000000, 8GB or 8GiB) or "
                     f"'off'; got {text!r}.")
  number, prefix, binary = match.groups()
  prefix = prefix.lower()
  unit = 1024 ** "kmgtp".index(prefix) * 1024 if binary else _UNITS[prefix]
  return int(float(number) * unit)


def human_bytes(n):
  """``n`` bytes in decimal units: ``"41.2 GB"``, ``"512 bytes"``."""
  if n < 1000:
    return f"{int(n)} bytes"
  for unit in ("kB", "MB", "GB", "TB"):
    n /= 1000.
    if n < 999.95:
      return f"{n:.1f} {unit}"
  return f"{n / 1000.:.1f} PB"


# -- measuring ----------------------------------------------------------------------------


def _read(path):
  try:
    with open(path) as f:
      return f.read()
  except (OSError, UnicodeDecodeError):
    return None


def _meminfo_available():
  """Linux's estimate of the memory a new allocation can get without swapping."""
  text = _read("/proc/meminfo")
  match = re.search(r"^MemAvailable:\s+(\d+)\s*kB", text or "", re.MULTILINE)
  return int(match.group(1)) * 1024 if match else None


def _sysconf_available():
  """Available (else total) physical memory from ``os.sysconf``, where it has them."""
  try:
    page = os.sysconf("SC_PAGE_SIZE")
    for name in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
      if name in os.sysconf_names:
        pages = os.sysconf(name)
        if pages > 0 and page > 0:
          return pages * page
  except (AttributeError, OSError, ValueError):
    pass
  return None


def _cgroup_available():
  """The least room left under a memory limit of this process's cgroups
  (v2 and v1, the process's cgroup and its ancestors); None without a limit."""
  rooms = []
  for version, directory in _cgroup_directories():
    if version == 2:
      limit, usage, stat_key = "memory.max", "memory.current", "inactive_file"
    else:
      limit, usage, stat_key = "memory.limit_in_bytes", "memory.usage_in_bytes", \
          "total_inactive_file"
    rooms.append(_room(directory, limit, usage, stat_key))
  rooms = [r for r in rooms if r is not None]
  return min(rooms) if rooms else None


def _room(directory, limit_file, usage_file, stat_key):
  """``limit - (usage - inactive page cache)`` of one cgroup directory, or None."""
  limit = (_read(os.path.join(directory, limit_file)) or "").strip()
  usage = (_read(os.path.join(directory, usage_file)) or "").strip()
  if not limit.isdigit() or not usage.isdigit() or int(limit) >= _NO_LIMIT:
    return None  # "max", unreadable, or no limit
  stat = _read(os.path.join(directory, "memory.stat")) or ""
  match = re.search(rf"^{stat_key} (\d+)$", stat, re.MULTILINE)
  reclaimable = int(match.group(1)) if match else 0
  return max(0, int(limit) - max(0, int(usage) - reclaimable))


def _cgroup_directories():
  """``(version, directory)`` of every memory cgroup from this process's up
  to its hierarchy's root, found from ``/proc/self/cgroup`` and the mounts."""
  own = {}  # version -> the process's cgroup path
  for line in (_read("/proc/self/cgroup") or "").splitlines():
    parts = line.split(":", 2)
    if len(parts) != 3:
      continue
    if parts[0] == "0" and parts[1] == "":
      own[2] = parts[2]
    elif "memory" in parts[1].split(","):
      own[1] = parts[2]
  out = []
  for version, mount, root in _cgroup_mounts():
    path = own.get(version)
    if path is None:
      continue
    relative = os.path.relpath(path, root) if path.startswith(root) else path.lstrip("/")
    directory = os.path.normpath(os.path.join(mount, relative))
    if not directory.startswith(mount) or not os.path.isdir(directory):
      directory = mount
    while True:
      out.append((version, directory))
      if directory == mount or len(directory) <= len(mount):
        break
      directory = os.path.dirname(directory)
  return out


def _cgroup_mounts():
  """``(version, mount point, mount root)`` of the cgroup v2 hierarchy and
  the v1 memory hierarchy, from ``/proc/self/mountinfo``."""
  found = []
  for line in (_read("/proc/self/mountinfo") or "").splitlines():
    fields = line.split()
    if " - " not in line or len(fields) < 5:
      continue
    after = line.split(" - ", 1)[1].split()
    if not after:
      continue
    fstype, options = after[0], after[2] if len(after) > 2 else ""
    if fstype == "cgroup2":
      found.append((2, fields[4], fields[3]))
    elif fstype == "cgroup" and "memory" in options.split(","):
      found.append((1, fields[4], fields[3]))
  return found
