"""A small job that goes wrong on purpose, run by test_failures.py under ``mpiexec -n 2``.

    python failing_job.py raise     # rank 1 raises before a collective
    python failing_job.py skip      # rank 1 skips an all-reduce and computes instead
    python failing_job.py wait      # rank 1 skips an all-reduce and waits for a message
    python failing_job.py uneven    # DataParallel, rank 1 has one batch fewer, no join()

It prints ``MARK <time>`` just before the failure, so the test can time the job's end.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402

import lezero.functions as F  # noqa: E402
from lezero import nn, optim, parallel  # noqa: E402


def mark():
    print(f"MARK {time.time():.3f}", flush=True)


def main(mode):
    world = parallel.init(timeout=float(os.environ.get("JOB_TIMEOUT", "2")))
    x = np.ones(4, np.float32)
    world.allreduce(x)                           # collective #1: everyone is here
    if mode == "raise":
        if world.rank == 1:
            mark()
            raise ValueError("boom on rank 1")
        world.allreduce(x)
    elif mode in ("skip", "wait"):
        if world.rank == 0:
            mark()
            world.allreduce(x)                   # collective #2: rank 1 never comes
        elif mode == "skip":
            time.sleep(60)                       # "computing" outside any communication
        else:
            world.recv(np.empty(1), source=0, tag=9)
    elif mode == "uneven":
        model = parallel.DataParallel(nn.Linear(4, 2), world, bucket_mb=1e-5)
        opt = optim.SGD(model.parameters(), lr=0.1)
        for step in range(3 - world.rank):
            if step == 2:
                mark()
            loss = F.sum(model(np.ones((2, 4), np.float32)))
            opt.zero_grad()
            loss.backward()
            opt.step()
    print(f"rank {world.rank} finished", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
