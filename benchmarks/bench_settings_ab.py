"""Does a speed setting pay?  Each workload of ``bench_workloads.py`` with the setting at
its default, with it switched off, and PyTorch, all three in the same alternating rounds.

    python benchmarks/bench_settings_ab.py                           # small_gemm_one_thread
    python benchmarks/bench_settings_ab.py SETTING lenet lstm        # a setting, some workloads
    python benchmarks/bench_settings_ab.py conv_threads=1 lenet      # SETTING=VALUE: that value

Without ``=VALUE`` the other side of a boolean setting is measured.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_workloads as bw  # noqa: E402  (sets the thread variables before NumPy loads)
from _common import round_ratios, set_threads  # noqa: E402


def main(setting, words):
    import lezero as lz
    set_threads(bw.THREADS)
    setting, _, value = setting.partition("=")
    default = getattr(lz.Config, setting)
    if not value:
        other = not default
    elif isinstance(default, bool):
        other = value.lower() in ("1", "true", "on", "yes")
    else:
        other = type(default)(value)
    print(f"setting {setting}: default {default!r} vs {other!r}; LeZero / PyTorch, "
          f"{bw.THREADS} threads, median of warm alternating rounds")
    print(f"{'workload':<34}{'default':>9}{'other':>9}")
    for name, builder, rounds, block, *_ in bw.WORKLOADS:
        if words and not any(w in name.lower() for w in words):
            continue
        ours, theirs, _ = builder()

        def off(ours=ours):
            with lz.using_config(setting, other):
                ours()
        ratios, _ = round_ratios([ours, theirs, off], rounds=rounds, block=block)
        print(f"{name:<34}{ratios[0]:>9.2f}{ratios[2]:>9.2f}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    setting = args.pop(0) if args and "_" in args[0] else "small_gemm_one_thread"
    main(setting, [a.lower() for a in args])
