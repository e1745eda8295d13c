"""The bulk's median chain during warmup: a sort against bisection (RESULTS §22).

Where the chains share a step size, every warmup transition finds the
chain of median acceptance deficit (``adaptation.bulk_chains``).  This
prints, per chain count, in one process:

* microseconds per call of ``tf.argsort(x)[(C - 1) // 2]`` and of
  ``adaptation.order_statistic_index`` (the same index), each inside one
  XLA-compiled ``tf.while_loop`` of ``--calls`` calls, and their ratio;
* random-walk Metropolis on a 2-d standard normal, ``--warmup`` +
  ``--warmup`` iterations, no kept draws: warmup and sampling seconds of a
  second (compiled) call.

    cd /work/main && .venv/bin/python benchmarks/warmup_median.py [--chains 1000 10000]
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import edward_lite as ed  # noqa: E402
from edward_lite.mcmc import adaptation  # noqa: E402

from machine import machine_line, version  # noqa: E402  pylint: disable=g-bad-import-order


def seconds_per_call(select, chains, calls):
  """Mean seconds of ``select(x, (C - 1) // 2)`` on a new ``x`` each call."""
  x = tf.random.stateless_normal([chains], seed=[0, 1])

  @tf.function(jit_compile=True)
  def loop(x):
    def body(i, total):
      shifted = x + tf.cast(i, x.dtype) * 1e-6
      return i + 1, total + tf.gather(shifted, select(shifted, (chains - 1) // 2))
    return tf.while_loop(lambda i, _: i < calls, body, (0, 0.))[1]

  loop(x).numpy()
  start = time.perf_counter()
  loop(x).numpy()
  return (time.perf_counter() - start) / calls


def argsort_index(x, rank):
  return tf.argsort(x)[rank]


def standard_normal():
  return ed.Normal(tf.zeros(2), 1., name="z")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--chains", type=int, nargs="+", default=[100, 1000, 10_000])
  parser.add_argument("--calls", type=int, default=2000)
  parser.add_argument("--warmup", type=int, default=2000)
  args = parser.parse_args()
  tf.get_logger().setLevel("ERROR")  # one compiled loop per chain count and method: retraces
  print(machine_line())
  print(f"# tensorflow {version('tensorflow')}, tensorflow-probability "
        f"{version('tensorflow-probability')}")
  print(f"{'chains':>8} {'argsort us':>11} {'bisection us':>13} {'ratio':>6} "
        f"{'RWMH warmup s':>14} {'sampling s':>11}")
  for chains in args.chains:
    sort = seconds_per_call(argsort_index, chains, args.calls) * 1e6
    bisect = seconds_per_call(adaptation.order_statistic_index, chains, args.calls) * 1e6
    run = dict(kernel="rwmh", chains=chains, warmup=args.warmup, draws=args.warmup,
               keep_draws=False, progress=False)
    ed.mcmc.sample(standard_normal, seed=0, **run)
    timings = ed.mcmc.sample(standard_normal, seed=1, **run).timings
    print(f"{chains:>8} {sort:>11.1f} {bisect:>13.1f} {sort / bisect:>6.1f} "
          f"{timings['warmup_s']:>14.3f} {timings['sampling_s']:>11.3f}")


if __name__ == "__main__":
  main()
