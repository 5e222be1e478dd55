"""A runtime setting tried on bench_real's workloads: LeZero with and without it, beside the
reference, in one process (the rounds alternate, so the load each met cancels).

    python benchmarks/ab_policy.py resnet50_infer "cheap_min_part_items=1<<20"
    python benchmarks/ab_policy.py resnet18 onnx "pool_min_part_items=1<<18" --shape second
    python benchmarks/ab_policy.py mobilenet "lezero.functions.conv.im2col:_single_taps=lambda *a: None"

Each ``name=value`` is a ``lezero.runtime.policy`` entry (the value a Python expression);
each ``module:name=value`` replaces a module's attribute for the "with" rounds (a code
path tried without a setting for it: the old way back, a function that refuses).  The
rows are bench_real's (a word picks the rows whose key contains it), at both shapes
unless ``--shape`` names one.  Printed per row: LeZero's time as it is and with the
settings, the reference's, and the ratios "as is / reference", "with / reference" and
"with / as is" (the median of the per-round ratios).  docs/performance.md quotes it for
the thresholds it changed.
"""
import contextlib
import importlib
import sys

import bench_real
import numpy as np

from _common import interleaved_times, limit_threads
from _record import run_main


def parse(argv):
    """(settings dict, patches dict, bench_real's argument list) from the command line."""
    settings, patches = {}, {}
    rest = []
    for arg in argv:
        if "=" in arg and not arg.startswith("--"):
            name, text = arg.split("=", 1)
            value = eval(text, {"np": np})       # a number written as code: 1<<20
            (patches if ":" in name else settings)[name.strip()] = value
        else:
            rest.append(arg)
    if not settings and not patches:
        raise SystemExit("ab_policy: name at least one policy setting, e.g. "
                         "cheap_min_part_items=1<<20, or a module:attribute=value")
    return settings, patches, rest


@contextlib.contextmanager
def patched(patches):
    """Each ``module:attribute`` of ``patches`` set to its value inside the block."""
    saved = []
    try:
        for target, value in patches.items():
            module, attribute = target.split(":", 1)
            owner = importlib.import_module(module)
            saved.append((owner, attribute, getattr(owner, attribute)))
            setattr(owner, attribute, value)
        yield
    finally:
        for owner, attribute, before in reversed(saved):
            setattr(owner, attribute, before)


def main(argv=None):
    settings, patches, rest = parse(sys.argv[1:] if argv is None else argv)
    words, shapes, quick, _ = bench_real.parse(rest)
    import lezero
    from lezero.runtime import policy
    for name in settings:
        getattr(policy, name)                   # an unknown name fails here, by name
    with patched(patches):                      # ... and an unknown attribute here
        pass
    bench_real._LIMITS.append(limit_threads(bench_real.THREADS))   # held for the run
    print(f"settings tried: {settings}; patched: {sorted(patches)}; "
          f"{bench_real.THREADS} threads, lezero {getattr(lezero, '__version__', '')}")
    for row in bench_real.choose(words):
        for name in shapes:
            shape = row.shapes[bench_real.SHAPE_NAMES.index(name)]
            ours, ref = row.builder(shape)

            def tried(ours=ours):
                with policy.using(**settings), patched(patches):
                    ours()
            # whole cycles of the three contenders' six orders (_common.round_orders)
            rounds, block = (2, 1) if quick else (-(-row.rounds // 6) * 6, row.block)
            t = np.array(interleaved_times([ours, tried, ref], rounds, 2, pause=0.01,
                                           block=block))
            secs = np.median(t, axis=1) * 1e3
            print(f"{row.key:<20}{bench_real.shape_text(shape):<15}as is {secs[0]:8.1f} ms"
                  f"  with {secs[1]:8.1f} ms  ref {secs[2]:8.1f} ms  as is/ref "
                  f"{np.median(t[0] / t[2]):.2f}  with/ref {np.median(t[1] / t[2]):.2f}  "
                  f"with/as is {np.median(t[1] / t[0]):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    run_main(main)
