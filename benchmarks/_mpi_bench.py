"""What the MPI benchmarks share: relaunching themselves under mpiexec with one BLAS
thread per rank (rank 0's output passes through this process's ``sys.stdout``, so
``_record.run_main`` can record it as a figures block with ``--record``), and the
command line (measure on every rank, analyse and write the JSON on rank 0, or only
re-analyse a recorded run with ``--report``)."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "NUMBA_NUM_THREADS": "1"}


def relaunch(script, ranks):
    """Run ``script`` with this process's arguments (``--ranks N`` dropped) under
    ``mpiexec -n ranks``, its output copied line by line to ``sys.stdout``; its return
    code."""
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    env = dict(os.environ, PYTHONPATH=ROOT, **THREAD_ENV)
    args, skip = [], False
    for a in sys.argv[1:]:
        if skip or a == "--ranks":
            skip = not skip
            continue
        args.append(a)
    cmd = [mpiexec, "-n", str(ranks), sys.executable, os.path.abspath(script), *args]
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True) as child:
        for line in child.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
    return child.returncode


def run(script, doc, measure, analyse, name, default_ranks):
    """The benchmark's entry point: relaunch when started plainly, else measure."""
    from lezero.parallel._mpi import launched_size
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=None, help="ranks to relaunch with")
    ap.add_argument("--quick", action="store_true", help="fewer rounds and steps")
    ap.add_argument("--out", default=None, help="results JSON (default results/NAME_P.json)")
    ap.add_argument("--report", metavar="FILE", help="re-print a recorded run (no MPI)")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            analyse(json.load(f))
        return 0
    if launched_size() == 1:
        ranks = [args.ranks] if args.ranks else default_ranks
        return max(relaunch(script, r) for r in ranks)
    from lezero import parallel
    world = parallel.init(timeout=300)
    record = measure(world, args.quick)
    if world.rank != 0:
        return 0
    record = analyse(record) or record
    from lezero.utils.files import atomic_write
    out = args.out or os.path.join(HERE, "results", f"{name}_{world.size}.json")
    atomic_write(out, json.dumps(record, indent=1))
    print(f"wrote {os.path.relpath(out, ROOT)}\n")
    return 0
