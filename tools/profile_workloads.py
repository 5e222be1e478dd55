"""Where LeZero's time goes in each of issue 22's workloads: prints the breakdown tables
and, with ``--record``, records them as the figures block ``workloads_breakdown`` of
docs/performance.md (``tools/doc_figures.py``).

    PYTHONPATH=. python tools/profile_workloads.py            # all workloads, all cores
    PYTHONPATH=. python tools/profile_workloads.py lenet      # only those whose name has it
    PYTHONPATH=. python tools/profile_workloads.py --record   # all, and save the block

Per workload: the warm step (best of a block, unprofiled), the NumPy floor (the step's
GEMMs alone on the same shapes), minor page faults per step (``resource.getrusage``: fresh
pages the allocator asked the kernel for), operator calls per step, and from cProfile the
share of the step spent in backward, in the optimizer step, in copies (``astype``,
``ascontiguousarray``, ``copy``) and the functions with the most own time.  cProfile
inflates Python-heavy code, so its shares are read as proportions, not as milliseconds.
"""
import cProfile
import datetime
import os
import pstats
import resource
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import bench_workloads as bw  # noqa: E402
from _common import set_threads  # noqa: E402
from doc_figures import record  # noqa: E402  (tools/, this script's folder)

STEPS = 10
COPY_NAMES = ("astype", "ascontiguousarray", "copy", "copyto", "pad", "concatenate")


def best_of(fn, n=STEPS):
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def minor_faults(fn, n=STEPS):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(n):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / n


def profile(fn, n=STEPS):
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    return pstats.Stats(prof).stats


def shares(stats):
    """(total, backward, optimizer, copies, operator calls, top own-time rows) per step."""
    total = sum(v[2] for v in stats.values())
    backward = optimizer = copies = calls = 0.0
    for (path, _, name), (_, nc, tt, ct, _) in stats.items():
        if path.endswith(os.path.join("core", "variable.py")) and name == "backward":
            backward = max(backward, ct)
        if os.sep + "optim" + os.sep in path and name == "step":
            optimizer = max(optimizer, ct)
        if path == "~" and any(c in name for c in COPY_NAMES):
            copies += ct
        if path.endswith(os.path.join("core", "function.py")) and name == "__call__":
            calls += nc
    top = sorted(stats.items(), key=lambda kv: -kv[1][2])[:6]
    rows = [(_label(k), v[2] / total) for k, v in top]
    return total, backward / total, optimizer / total, copies / total, calls / STEPS, rows


def _label(key):
    path, line, name = key
    if path == "~":
        return name.replace("<built-in method ", "").replace("<method ", "").rstrip(">")
    rel = os.path.relpath(path, ROOT) if path.startswith(ROOT) else os.path.basename(path)
    return f"{rel}:{line}({name})"


def breakdown(name, builder):
    ours, theirs, floor = builder()
    for _ in range(3):
        ours(), theirs()
    step, torch_step = best_of(ours), best_of(theirs)
    floor_t = best_of(floor) if floor else None
    faults = minor_faults(ours)
    total, bwd, opt, copies, calls, top = shares(profile(ours))
    fl = f"{floor_t * 1e3:.2f}" if floor_t else "-"
    head = (f"| {name} | {step * 1e3:.2f} | {torch_step * 1e3:.2f} | {fl} | {faults:.0f} | "
            f"{calls:.0f} | {bwd:.0%} | {opt:.0%} | {copies:.0%} |")
    tops = "; ".join(f"`{lbl}` {s:.0%}" for lbl, s in top)
    return head, f"| {name} | {tops} |"


def main(words):
    threads = set_threads(bw.THREADS)
    chosen = [w for w in bw.WORKLOADS if not words or any(s in w[0].lower() for s in words)]
    heads, tops = [], []
    for name, builder, *_ in chosen:
        head, top = breakdown(name, builder)
        heads.append(head)
        tops.append(top)
        print(head, flush=True)
    today = datetime.date.today().isoformat()
    text = "\n".join([
        f"Measured {today} with `PYTHONPATH=. python tools/profile_workloads.py --record` "
        f"({threads} "
        f"threads, load average {os.getloadavg()[0]:.1f} at the end; best of {STEPS} warm "
        "steps).",
        "",
        "| workload | LeZero ms | PyTorch ms | NumPy floor ms | minor faults/step | "
        "operator calls/step | backward | optimizer step | copies |",
        "|---|---|---|---|---|---|---|---|---|",
        *heads,
        "",
        "Own time (cProfile, share of the profiled step) of the six busiest functions:",
        "",
        "| workload | busiest functions |",
        "|---|---|",
        *tops,
    ])
    print(text)
    return text


def run(args):
    """The command line: words choose workloads; ``--record [NAME]`` saves the block."""
    if "--record" not in args:
        return main(args)
    i = args.index("--record")
    named = i + 1 < len(args) and not args[i + 1].startswith("-")
    name = args[i + 1] if named else "workloads_breakdown"
    words = args[:i] + args[i + 1 + named:]
    if words:
        raise SystemExit(f"profile_workloads: --record saves every workload; drop {words}")
    for problem in record(name, main([])):
        print(problem)


if __name__ == "__main__":
    run([w.lower() for w in sys.argv[1:]])
