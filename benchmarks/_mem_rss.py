"""The resident memory of a fresh process that runs one training step, and nothing else.

    python benchmarks/_mem_rss.py lezero resnet18 float32      # one JSON line

``fresh_rss(framework, workload, dtype)`` runs this file as a subprocess (with a timeout
and the caller's thread count) and returns its figures in bytes:

* ``before``: the resident set (``/proc/self/statm``) once the model and the batch exist;
* ``peak``: the resident high-water mark (``VmHWM`` in ``/proc/self/status``) over the
  step, forward and backward;
* ``increase``: ``peak - before``, what the step itself added;
* ``build_peak``: the high-water mark of building the model and the batch.

Why not ``getrusage(RUSAGE_SELF).ru_maxrss``: Linux folds the high-water mark of the
memory a process replaces at ``exec`` into it, so a child spawned by a benchmark holding
2 GiB reports at least 2 GiB whatever it does (measured on this kernel).  ``VmHWM`` is the
process's own; writing ``5`` to ``/proc/self/clear_refs`` resets it to the current
resident set, so the step's peak is told apart from the build's.  ``ru_maxrss`` is
reported too (``ru_maxrss``), for comparison.
"""
import gc
import json
import os
import resource
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def resident():
    """The resident set now, in bytes (``/proc/self/statm``'s second field)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def high_water():
    """The resident high-water mark, in bytes (``VmHWM`` of ``/proc/self/status``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmHWM in /proc/self/status")


def reset_high_water():
    """Reset VmHWM to the current resident set; False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def limit_threads(framework, n):
    """``n`` threads for the framework's pools, and LeZero's allocator setting, as
    ``_common.set_threads`` gives the in-process run (without importing the other
    framework, which would add its libraries to the resident set)."""
    import lezero
    from threadpoolctl import threadpool_limits
    lezero.utils.keep_freed_memory()
    if framework == "torch":
        import torch
        torch.set_num_threads(n)
    else:
        import numba
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    return threadpool_limits(limits=n)


def run_step(framework, workload, dtype, quick=False):
    """Build the workload, then run one step; the figures of the module doc, in bytes."""
    from _mem_workloads import build
    case = build(workload, framework, quick)
    gc.collect()
    build_peak = high_water()
    reset = reset_high_water()
    before = resident()
    loss = case.loss(None if dtype == "float32" else dtype)
    loss.backward()
    peak = high_water()
    return {"before": before, "peak": peak, "increase": peak - before,
            "build_peak": build_peak, "reset": reset,
            "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def fresh_rss(framework, workload, dtype, quick=False, threads=None, timeout=600):
    """``run_step`` in a fresh Python process; None and the reason when it fails."""
    env = dict(os.environ)
    if threads:
        env["BENCH_THREADS"] = str(threads)
    cmd = [sys.executable, os.path.join(HERE, "_mem_rss.py"), framework, workload, dtype]
    try:
        done = subprocess.run(cmd + (["--quick"] if quick else []), capture_output=True,
                              text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"exit {done.returncode}: {tail[:120]}"
    return json.loads(lines[-1]), None


def main(argv):
    import warnings
    warnings.filterwarnings("ignore")
    framework, workload, dtype = argv[:3]
    limits = limit_threads(framework, int(os.environ.get("BENCH_THREADS", os.cpu_count())))
    print(json.dumps(run_step(framework, workload, dtype, "--quick" in argv)))
    del limits


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main(sys.argv[1:])
