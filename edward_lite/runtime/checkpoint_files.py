"""The files of a checkpoint directory: crash-safe writes and a lock.

``atomic_write`` writes to a temporary name, flushes to disk and renames, so
a kill at any moment leaves the old file or the new one.  ``DirectoryLock``
holds a directory for one run: an exclusive ``flock`` on ``directory/lock``
that the kernel drops if the process dies, recording the holder (pid, host,
start time) for the message that refuses a second run; a lock whose holder
is dead on this host is stale and taken over.
"""

import datetime
import json
import os
import socket
import tempfile
import weakref

try:
  import fcntl  # pylint: disable=g-import-not-at-top
except ImportError:  # Windows: an O_EXCL lock file instead
  fcntl = None

__all__ = ["atomic_write", "fsync_directory", "DirectoryLock", "LOCK",
           "CheckpointMismatchError", "CheckpointCorruptError", "CheckpointLockedError"]

LOCK = "lock"


class CheckpointMismatchError(ValueError):
  """The checkpoint was written by a different model or with other settings,
  or this run cannot be identified by content, so a checkpoint could not be
  checked against it."""


class CheckpointCorruptError(ValueError):
  """A checkpoint file is corrupt, truncated, empty or not one of ours."""


class CheckpointLockedError(RuntimeError):
  """Another run holds the checkpoint directory."""




def fsync_directory(directory):
  try:
    fd = os.open(directory, os.O_RDONLY)
  except OSError:
    return  # not supported here (Windows)
  try:
    os.fsync(fd)
  except OSError:
    pass
  finally:
    os.close(fd)


def atomic_write(path, write):
  """Calls ``write(file)`` on a temporary file next to ``path``, flushes it to
  disk and renames it to ``path``: readers see the old file or the new one.
  On failure (a full disk, ...) the temporary is removed and an OSError naming
  ``path`` is raised."""
  directory, name = os.path.split(path)
  try:
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=name + ".", suffix=".tmp")
  except OSError as e:
    raise OSError(e.errno, f"Could not write the checkpoint file {path}: "
                  f"{e.strerror or e}") from e
  try:
    with os.fdopen(fd, "wb") as f:
      write(f)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException as e:
    try:
      os.remove(tmp)
    except OSError:
      pass
    if isinstance(e, OSError):
      raise OSError(e.errno, f"Could not write the checkpoint file {path}: "
                    f"{e.strerror or e}") from e
    raise
  fsync_directory(directory)


def pid_alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except (PermissionError, OSError):
    return True  # exists, owned by someone else
  return True


class DirectoryLock:
  """An exclusive lock on ``directory/lock`` for one run.

  With ``fcntl`` it is a ``flock`` on the open file, which the kernel drops
  when the process dies; the file records the holder for messages.  A lock
  still held while its recorded holder is dead on this host (a descriptor
  inherited by a forked child) is stale and taken over, as is, without
  ``fcntl``, a lock file whose holder is dead.
  """

  def __init__(self, directory):
    self.directory = directory
    self.path = os.path.join(directory, LOCK)
    self.fd = None
    self.host = socket.gethostname()
    for _ in range(10):
      if self._try_acquire():
        break
    else:
      raise CheckpointLockedError(
          f"Could not lock the checkpoint directory {directory}: its lock file kept "
          "changing; is another run starting on it?")
    self._finalizer = weakref.finalize(self, os.close, self.fd)
    record = json.dumps({"pid": os.getpid(), "host": self.host,
                         "started": datetime.datetime.now().isoformat(timespec="seconds")})
    try:
      os.ftruncate(self.fd, 0)
      os.pwrite(self.fd, record.encode(), 0)
      os.fsync(self.fd)
    except OSError:
      pass  # the record only names the holder in messages; the lock holds without it

  def _holder(self):
    try:
      with open(self.path, encoding="utf-8") as f:
        holder = json.load(f)
      return holder if isinstance(holder, dict) else {}
    except (OSError, ValueError):
      return {}

  def _stale(self, holder):
    pid = holder.get("pid")
    return (holder.get("host") == self.host and isinstance(pid, int) and pid != os.getpid()
            and not pid_alive(pid))

  def _refuse(self, holder):
    who = (f"pid {holder['pid']} on {holder.get('host', 'an unknown host')}, since "
           f"{holder.get('started', 'an unknown time')}" if "pid" in holder
           else "a process that has not yet recorded its pid")
    raise CheckpointLockedError(
        f"The checkpoint directory {self.directory} is in use by another run ({who}); "
        "wait for it to finish, or use another checkpoint_dir.")

  def _try_acquire(self):
    """True when the lock is ours; False to try again; raises if held."""
    if fcntl is None:
      try:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        return True
      except FileExistsError:
        holder = self._holder()
        if not self._stale(holder):
          self._refuse(holder)
        os.remove(self.path)
        return False
    try:
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    except IsADirectoryError as e:
      raise CheckpointCorruptError(
          f"The checkpoint lock {self.path} is a directory, not a lock file; delete it (or "
          f"the whole directory {self.directory}) to start this run afresh.") from e
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      os.close(fd)
      holder = self._holder()
      if not self._stale(holder):
        self._refuse(holder)
      try:
        os.remove(self.path)  # a dead holder's: the next file is a fresh lock
      except FileNotFoundError:
        pass
      return False
    except BaseException:
      os.close(fd)
      raise
    # The holder may have removed the file between our open and flock.
    try:
      same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
      same = False
    if not same:
      os.close(fd)
      return False
    self.fd = fd
    return True

  def release(self):
    if self.fd is None:
      return
    try:
      if os.stat(self.path).st_ino == os.fstat(self.fd).st_ino:
        os.remove(self.path)
    except OSError:
      pass
    self._finalizer()  # closes the descriptor, which releases the flock
    self.fd = None
