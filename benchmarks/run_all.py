"""Run every benchmark in this folder, one process each, and print their reports.

    python benchmarks/run_all.py            # all
    python benchmarks/run_all.py mlp conv   # those whose file name contains a word

``bench_workloads.py`` (the targets table of issue 22) runs first.
"""
import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(words):
    scripts = sorted(glob.glob(os.path.join(HERE, "bench_*.py")),
                     key=lambda s: (not s.endswith("bench_workloads.py"), s))
    if words:
        scripts = [s for s in scripts if any(w in os.path.basename(s) for w in words)]
    failed = []
    for path in scripts:
        print(f"\n##### {os.path.basename(path)}", flush=True)
        if subprocess.run([sys.executable, path]).returncode != 0:
            failed.append(os.path.basename(path))
    if failed:
        print("\nfailed:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
