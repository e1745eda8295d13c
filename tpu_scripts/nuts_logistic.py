"""Launch: data-parallel (or chain-parallel) NUTS on a covertype-sized
Bayesian logistic regression across the replicas of a TPU, a multi-GPU host
or a multi-worker cluster.

    # Cloud TPU VM
    python tpu_scripts/nuts_logistic.py --strategy tpu --tpu local
    # every GPU of this host
    python tpu_scripts/nuts_logistic.py --strategy mirrored
    # each worker of a cluster (TF_CONFIG set on every host)
    python tpu_scripts/nuts_logistic.py --strategy multi_worker
    # CPU fallback: 2 logical CPU devices, small data (what the tests run)
    python tpu_scripts/nuts_logistic.py --strategy cpu --replicas 2 --n 2000 --warmup 20 --draws 20
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import launch  # noqa: E402  (tpu_scripts/launch.py)
import distributed_logistic  # noqa: E402


def main(argv=None):
  parser = launch.parser(__doc__.split("\n\n")[0])
  parser.add_argument("--n", type=int, default=581_012)
  parser.add_argument("--d", type=int, default=54)
  parser.add_argument("--chains", type=int, default=4)
  parser.add_argument("--warmup", type=int, default=1000)
  parser.add_argument("--draws", type=int, default=1000)
  parser.add_argument("--parallel", default="data", choices=["data", "chains"])
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  strategy = launch.make_strategy(args)
  out = distributed_logistic.run(strategy, args.n, args.d, args.chains, args.warmup,
                                 args.draws, args.parallel, args.seed,
                                 progress=sys.stderr.isatty())
  out["posterior"].summary()
  print(f"{out['replicas']} replicas: wall {out['wall_s']:.1f} s, "
        f"{out['grads_per_s']:.0f} gradient evaluations/s")
  return out


if __name__ == "__main__":
  main()
