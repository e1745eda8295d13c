"""Two worker processes on this machine run data- and chain-parallel NUTS
through MultiWorkerMirroredStrategy, and their draws equal the
single-process ones (up to round-off of the cross-worker sums).

The workers talk over gRPC.  Its servers listen on every interface, so where
this process may (root, ``unshare`` and ``ip`` present) both workers run in
a private network namespace with only loopback up; otherwise on 127.0.0.1.
A worker whose peer never comes up would block forever in the strategy's
constructor, so the pair runs under a bounded timeout and both processes
(their whole process group) are always killed.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest

import edward_lite as ed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "workers"))
import multiworker_nuts as worker  # pylint: disable=wrong-import-position

TIMEOUT_S = 300


def _free_ports(n):
  sockets = [socket.socket() for _ in range(n)]
  try:
    for s in sockets:
      s.bind(("127.0.0.1", 0))
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def _private_network():
  return (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("unshare")
          and shutil.which("ip") and
          subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False,
                         timeout=30).returncode == 0)


def _run_pair(out_dir):
  """Runs both workers; returns their combined output.  Always reaps them."""
  ports = _free_ports(2)
  cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
  script = os.path.join(HERE, "workers", "multiworker_nuts.py")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
  commands = []
  for index in range(2):
    config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
    commands.append(f"TF_CONFIG='{config}' {sys.executable} {script} {out_dir} "
                    f"> {out_dir}/log{index}.txt 2>&1 &")
  shell = "ip link set lo up; " if _private_network() else ""
  shell += " ".join(commands) + " wait"
  argv = ["unshare", "-n", "sh", "-c", shell] if _private_network() else ["sh", "-c", shell]
  process = subprocess.Popen(argv, env=env, start_new_session=True)
  try:
    process.wait(timeout=TIMEOUT_S)
  except subprocess.TimeoutExpired:
    pass
  finally:
    try:
      os.killpg(process.pid, signal.SIGKILL)  # the shell and both workers
    except ProcessLookupError:
      pass
    process.wait()
  return "\n".join(open(os.path.join(out_dir, f"log{i}.txt"), encoding="utf-8").read()[-3000:]
                   for i in range(2) if os.path.exists(os.path.join(out_dir, f"log{i}.txt")))


@pytest.mark.slow
def test_two_workers_equal_single_process(tmp_path):
  logs = _run_pair(str(tmp_path))
  results = []
  for index in range(2):
    path = tmp_path / f"worker{index}.npz"
    assert path.exists(), f"worker {index} did not finish within {TIMEOUT_S} s:\n{logs}"
    results.append(np.load(path))
  assert int(results[0]["replicas"]) == 2
  reference = ed.mcmc.sample(worker.logistic, worker.X, observed={"y": worker.Y},
                             jit_compile=False, **worker.SETTINGS).draws["w"]
  for index, result in enumerate(results):
    for parallel in ("data", "chains"):
      np.testing.assert_allclose(result[parallel], reference, rtol=1e-8, atol=1e-10,
                                 err_msg=f"worker {index}, {parallel}-parallel")

