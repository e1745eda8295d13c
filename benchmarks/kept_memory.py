"""Where a many-chain run's memory goes, and the memory guard's estimate of
it (issue 52; RESULTS section 62).

Issue 52's 2-D Gaussian (mean [1, -1], sds [1, 2], correlation 0.8) by
random-walk Metropolis, 300 warmup iterations, draws kept, in this process.
A thread reads the resident memory every 10 ms; printed, for each phase of
the run (the setup with its compile, each chunk's compiled call and the
host's work after it, the result's build), the resident memory at its end
and its peak, and the seconds; then the process's growth at its peak
against ``ed.mcmc.memory``'s estimate (its terms), and the draws' float64
means and sds.

    python benchmarks/kept_memory.py [--chains 1000000] [--draws 100] [--kernel rwmh]
"""

import argparse
import os
import resource
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import edward_lite as ed  # noqa: E402
from edward_lite.mcmc import compiled, memory, results, run  # noqa: E402
from edward_lite.mcmc.kernels import get_kernel  # noqa: E402

import machine  # noqa: E402

MEAN = np.array([1., -1.], np.float32)
COV = np.array([[1., 0.8 * 2.], [0.8 * 2., 4.]])


def gaussian():
  return ed.MultivariateNormalTriL(MEAN, np.linalg.cholesky(COV).astype(np.float32), name="x")


def resident():
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Tracker:
  """The resident memory's peak since the last phase's end, by phase."""

  def __init__(self):
    self.start, self.peak, self.rows, self.last = time.perf_counter(), 0, [], None
    self.last = self.start
    threading.Thread(target=self._poll, daemon=True).start()

  def _poll(self):
    while True:
      self.peak = max(self.peak, resident())
      time.sleep(0.01)

  def end(self, phase):
    now, rss = time.perf_counter(), resident()
    self.rows.append((phase, now - self.last, rss, max(self.peak, rss)))
    self.peak, self.last = 0, now

  def wrap(self, owner, name, phase):
    inner = getattr(owner, name)

    def traced(*args, **kwargs):
      out = inner(*args, **kwargs)
      self.end(phase)
      return out
    setattr(owner, name, traced)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--chains", type=int, default=1_000_000)
  parser.add_argument("--draws", type=int, default=100)
  parser.add_argument("--kernel", default="rwmh")
  args = parser.parse_args()
  print(machine.machine_line())
  tracker = Tracker()
  base = resident()
  tracker.wrap(run.Run, "setup", "setup (initial states, compile)")
  tracker.wrap(compiled.Program, "run_chunk", "  a chunk's compiled call")
  tracker.wrap(run.Run, "run_chunk", "  the host's work after it")
  build = results.MCMCResult.build.__func__

  def traced_build(cls, *a, **k):
    tracker.end("  (before the build)")
    out = build(cls, *a, **k)
    tracker.end("the result's build")
    return out
  results.MCMCResult.build = classmethod(traced_build)
  tracker.last = time.perf_counter()
  post = ed.mcmc.sample(gaussian, kernel=args.kernel, chains=args.chains, warmup=300,
                        draws=args.draws, seed=0, progress=False)
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
  print(f"{args.chains:,} chains x {args.draws} kept draws, {args.kernel}: process "
        f"{base / 1e9:.2f} GB before the call")
  print(f"{'phase':34s} {'seconds':>8s} {'GB at end':>10s} {'peak GB':>8s}")
  for phase, seconds, rss, top in tracker.rows:
    if phase.startswith("  (before"):
      continue
    print(f"{phase:34s} {seconds:8.2f} {rss / 1e9:10.2f} {top / 1e9:8.2f}")
  need = memory.estimate(ed.make_target(gaussian), get_kernel(args.kernel), args.chains,
                         args.draws, 1)
  print(f"grown at the peak {(peak - base) / 1e9:.2f} GB; estimated {need.needed / 1e9:.2f} GB "
        f"(kept {need.kept / 1e9:.2f}, chunk {need.chunk / 1e9:.2f}, sampler "
        f"{need.sampler / 1e9:.2f}, summary {need.summary / 1e9:.2f}): "
        f"{(peak - base) / need.needed:.2f}x")
  x = post.draws["x"].astype(np.float64)
  print(f"means {x.mean(axis=(0, 1))}, sds {x.std(axis=(0, 1))} (exact [1, -1], [1, 2])")


if __name__ == "__main__":
  main()
