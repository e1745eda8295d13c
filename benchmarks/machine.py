"""What every benchmark prints first: the machine, its load and package versions."""

import os
import platform
from importlib import metadata


def cpu_name():
  """The CPU model from /proc/cpuinfo (else what ``platform`` says)."""
  try:
    with open("/proc/cpuinfo") as f:
      return next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
  except (OSError, StopIteration):
    return platform.processor() or platform.machine()


def version(name):
  """Installed version of a distribution, or "not installed"."""
  try:
    return metadata.version(name)
  except metadata.PackageNotFoundError:
    return "not installed"


def machine_line():
  """``# machine: <cpu>; <n> CPUs; <platform>; load average <x>``."""
  load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
  return (f"# machine: {cpu_name()}; {os.cpu_count()} CPUs; {platform.platform()}; "
          f"load average {load:.2f}")
