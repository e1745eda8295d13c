"""Flags and strategy shared by the launch scripts in ``tpu_scripts/``.

Every script takes ``--strategy`` (``tpu``, ``mirrored``, ``multi_worker``
or ``cpu``), ``--tpu`` (TPU name, ``grpc://`` address or ``local``),
``--replicas`` (logical CPU devices for the ``cpu`` fallback), and its own
size flags.  ``--strategy cpu`` splits the host CPU into ``--replicas``
logical devices and runs MirroredStrategy on them: the same code path as on
GPUs, small enough for the test suite.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import edward_lite as ed  # pylint: disable=wrong-import-position


def parser(description):
  """An ``argparse.ArgumentParser`` with the shared flags."""
  p = argparse.ArgumentParser(description=description)
  p.add_argument("--strategy", default="cpu", choices=["cpu", "mirrored", "multi_worker", "tpu"],
                 help="cpu: MirroredStrategy over --replicas logical CPU devices (fallback).")
  p.add_argument("--tpu", default=None, help="TPU name, grpc:// address or 'local' (TPU VM).")
  p.add_argument("--replicas", type=int, default=2, help="logical CPU devices for --strategy cpu")
  return p


def make_strategy(args):
  """The ``tf.distribute.Strategy`` the flags ask for."""
  if args.strategy == "cpu":
    return ed.distribute.strategy("mirrored", devices=ed.distribute.logical_cpus(args.replicas))
  return ed.distribute.strategy(args.strategy, tpu=args.tpu)
