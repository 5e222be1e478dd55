"""A job whose rank DIE_RANK (default 1) fails on purpose, run by test_rank_failures.py
under ``mpiexec -n N``:

    python rank_failure_job.py MODE

MODE: ``exit0`` / ``exit3`` (``sys.exit``), ``os_exit`` (``os._exit(0)``), ``sigkill``,
``raise``, ``return`` (the script ends early), ``clean`` (nobody fails), ``hook`` (a
gradient hook raises inside DataParallel's backward), ``stage`` (a pipeline stage raises),
``checkpoint`` (rank 0 saves while the rank is killed), ``deadlock`` (two ranks receive
from each other), ``noinit`` (the rank never calls ``parallel.init``), ``mismatch``
(float32[4] against float32[8] in one all-reduce), ``linger`` (the rank computes for a
minute while the others end their script).  The other ranks go on communicating.

The failing rank prints ``MARK <time>`` just before it fails, so the test can time the
job's end; every rank prints ``FILES ...``: the MPICH files of this job (its mapped
shared-memory segments, the topology file its launcher holds), read here from /proc so
the test does not depend on the code under test to name them.
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402

import lezero.functions as F  # noqa: E402
from lezero import nn, optim, parallel  # noqa: E402

DIE = int(os.environ.get("DIE_RANK", "1"))


def mark():
    print(f"MARK {time.time():.3f}", flush=True)


def job_files():
    """This process's MPICH leftovers-to-be, found independently of lezero."""
    found = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split(None, 5)[-1].strip()
            if path.startswith("/dev/shm/mpich_shm_") and " " not in path:
                found.add(path)
    parent = os.getppid()
    for fd in os.listdir(f"/proc/{parent}/fd"):
        try:
            path = os.readlink(f"/proc/{parent}/fd/{fd}")
        except OSError:
            continue
        if os.path.basename(path).startswith("hydra_hwloc_xmlfile_"):
            found.add(path)
    return sorted(found)


def die(mode, world):
    mark()
    if mode == "exit0":
        sys.exit(0)
    if mode == "exit3":
        sys.exit(3)
    if mode in ("os_exit", "noinit"):
        os._exit(0)
    if mode in ("sigkill", "checkpoint"):
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "raise":
        raise ValueError(f"boom on rank {world.rank}")


class Boom(nn.Module):
    def forward(self, x):
        raise ValueError(f"stage failed on rank {parallel.get_rank()}")


def train_step(mode, world):
    """DataParallel (``hook``) or a two-stage pipeline (``stage``): rank DIE raises inside."""
    if mode == "hook":
        model = parallel.DataParallel(nn.Linear(4, 2), world)
        if world.rank == DIE:
            def boom(p):
                raise RuntimeError(f"gradient hook failed on rank {world.rank}")
            model.module.weight.register_post_accumulate_grad_hook(boom)
        mark()
        loss = F.sum(model(np.ones((2, 4), np.float32)))
        loss.backward()
        optim.SGD(model.parameters(), lr=0.1).step()
        return
    stages = [nn.Linear(4, 4), Boom()] if world.rank == DIE else [nn.Linear(4, 4), nn.Linear(4, 3)]
    pipe = parallel.Pipeline(stages, world, micro_batches=2, schedule="gpipe",
                             loss_fn=F.cross_entropy)
    mark()
    pipe.step(np.ones((4, 4), np.float32), np.zeros(4, np.int64))


def main(mode):
    if mode == "noinit" and int(os.environ.get("PMI_RANK", "0")) == DIE:
        die(mode, None)
    world = parallel.init(timeout=float(os.environ.get("JOB_TIMEOUT", "40")))
    x = np.ones(4, np.float32)
    world.allreduce(x)                               # collective #1: everyone is here
    print("FILES " + " ".join(job_files()), flush=True)
    if mode == "checkpoint":
        parallel.save_checkpoint(os.environ["CKPT"], {"step": 1, "w": np.full(4, 1.0)})
    if mode in ("hook", "stage"):
        train_step(mode, world)
    elif mode == "deadlock":
        mark()
        world.recv(np.empty(2), source=1 - world.rank, tag=5)
    elif mode == "linger":
        if world.rank == DIE:
            mark()
            time.sleep(60)
    elif mode == "mismatch":
        mark()
        world.allreduce(np.ones(4 if world.rank == 0 else 8, np.float32))
    elif world.rank == DIE and mode != "clean":
        die(mode, world)
        if mode == "return":
            return
    elif mode == "checkpoint":
        time.sleep(0.5)                              # the other rank is gone by now
        parallel.save_checkpoint(os.environ["CKPT"], {"step": 2, "w": np.full(2 ** 20, 2.0)})
    else:
        world.allreduce(x)                           # collective #2: needs rank DIE
    print(f"rank {world.rank} finished", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
