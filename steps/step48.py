"""Step 48: processes that talk -- the communicator and its collectives.

Data parallelism runs one copy of the script per process (a *rank*), started together by
MPI's launcher:  ``mpiexec -n 4 python steps/step48.py``.  The ranks share no memory;
they exchange arrays through a ``Communicator``.  A *collective* is an operation every
rank calls in the same order: ``allreduce`` sums (or averages) an array over the ranks
and gives every rank the result -- the one operation data parallelism needs.

Run alone (``python steps/step48.py``) this is a world of one rank: every collective is
then a copy, and the script shows what each operation computes.  Under mpiexec each rank
prints its own lines and the sums span all ranks.  Backward through a collective is the
matching collective: the gradient of an all-reduce is an all-reduce.
Run: python steps/step48.py      (or: mpiexec -n 2 python steps/step48.py)
"""
import numpy as np

import lezero as lz
from lezero import parallel

try:
    world = parallel.init()
except ImportError as e:         # under mpiexec without mpi4py: the install hint, one line
    raise SystemExit(str(e)) from None
r, n = world.rank, world.size
print(f"[rank {r}] I am rank {r} of {n} ({world.backend}); run under `mpiexec -n 4` "
      "to get four of me")

x = np.array([1.0, 2.0, 3.0]) * (r + 1)           # every rank holds different data
print(f"[rank {r}] x = {x}")
print(f"[rank {r}] allreduce sum  = {world.allreduce(x)}   (the same on every rank)")
print(f"[rank {r}] allreduce mean = {world.allreduce(x, 'mean')}")
print(f"[rank {r}] allgather      = {world.allgather(x, axis=0)}   (rank order)")
chunks = world.reduce_scatter(np.arange(2.0 * n))
print(f"[rank {r}] reduce_scatter of [0..{2 * n - 1}] -> my chunk of the sum: {chunks}")

seed = np.zeros(1)
if r == 0:
    seed[0] = 42.0
world.bcast(seed, root=0)                          # rank 0's value everywhere, in place
print(f"[rank {r}] bcast from rank 0: {seed[0]:g}")

# Non-blocking: start the communication, do other work, then wait for the result.
request = world.iallreduce(np.full(4, float(r)), "sum")
busy = sum(i * i for i in range(10000))           # work that overlaps the transfer
print(f"[rank {r}] iallreduce overlapped with some work -> {request.wait()}")

# Point to point: pass a value around a ring (with one rank it goes to itself).
right, left = (r + 1) % n, (r - 1) % n
inbox = np.empty(1)
pending = world.irecv(inbox, source=left)
world.send(np.array([100.0 + r]), dest=right)
print(f"[rank {r}] received {pending.wait()[0]:g} from rank {left}")

# A differentiable all-reduce: y is the sum over ranks; the objective is the sum of every
# rank's sum(y * w); its gradient with respect to my x is the sum of every rank's w.
v = lz.Variable(x)
y = parallel.all_reduce(v)
w = np.full(3, r + 1.0)
y.backward(grad=w)
print(f"[rank {r}] d(sum of all ranks' <w, allreduce(x)>)/dx = {v.grad.data} "
      f"(= sum of w over {n} rank{'s' * (n != 1)})")
world.barrier()
if r == 0:
    print("A collective that one rank never calls makes the others wait: past the "
          f"communicator's timeout ({world.timeout:g} s here) they print a stall report "
          "naming the ranks that have not arrived.")
