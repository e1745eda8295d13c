"""The headline example, examples/mixture_rwmh.py, run small: it samples
the mixture's exact moments and reports its own speed from its timings
(issue 53, item 12: a run of one sampling chunk printed "0 samples/s")."""

import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_mixture_example_reports_its_rate_and_the_exact_moments():
  cmd = [sys.executable, str(ROOT / "examples" / "mixture_rwmh.py"), "--chains", "2000",
         "--steps", "2000"]  # one sampling chunk (--chunk 10000)
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
  assert proc.returncode == 0, proc.stderr[-2000:]
  out = proc.stdout
  line = re.search(r"= ([\d.e+]+) samples in [\d.]+ s: compile and warmup [\d.]+ s, "
                   r"sampling ([\d.e+]+) s \(([\d.e+]+) samples/s\)", out)
  assert line, out
  samples, seconds, rate = (float(g) for g in line.groups())
  assert samples == 2000 * 2000
  assert abs(rate - samples / seconds) <= 0.02 * rate  # the rate is the printed run's
  moments = re.search(r"mean ([-\d.]+) \(exact 0.92, ([\d.]+) MCSE away\), variance ([\d.]+)",
                      out)
  assert moments, out
  assert float(moments.group(2)) < 4.  # seeded: within 4 MCSE of the exact mean
  assert abs(float(moments.group(3)) - 9.70) < 0.3  # exact variance 9.70
