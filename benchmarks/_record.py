"""A benchmark's printed report, recorded as the figures block of the docs that quote it.

    python benchmarks/bench_mlp.py --record            # block "bench_mlp"
    BENCH_THREADS=1 python benchmarks/bench_mlp.py --record bench_mlp_1thread

A script ends with ``run_main(main)``.  Without ``--record`` it only runs ``main()``.
With it, everything ``main()`` prints is also kept and saved, under a header naming the
command (with the ``BENCH_*`` settings it ran under) and the date, through
``tools/doc_figures.record``: docs/figures/NAME.md, copied into every
``<!-- figures:NAME:start -->`` block of the pages.
"""
import datetime
import io
import os
import platform
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class _Tee(io.TextIOBase):
    """Writes go to the terminal and into a buffer."""

    def __init__(self, stream):
        self.stream, self.kept = stream, io.StringIO()

    def write(self, text):
        self.kept.write(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


def pop_record_flag(argv):
    """(block name or None, argv without ``--record [NAME]``); the name defaults to the
    script's file name."""
    if "--record" not in argv[1:]:
        return None, argv
    i = argv.index("--record", 1)
    given = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-") else None
    name = given or os.path.splitext(os.path.basename(argv[0]))[0]
    return name, argv[:i] + argv[i + 1 + (given is not None):]


def command_line(argv, environ=os.environ):
    """The command that reproduces this run: its ``BENCH_*`` settings and arguments."""
    settings = [f"{k}={v}" for k, v in sorted(environ.items()) if k.startswith("BENCH_")]
    script = os.path.relpath(os.path.abspath(argv[0]), ROOT)
    return " ".join(settings + ["python", script] + argv[1:])


def cpu_name():
    """The CPU's model name (Linux's /proc/cpuinfo), else the platform's processor or
    machine: figures from an Intel and an AMD machine differ, MKL's most."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def header(argv, load, when=None):
    """The block's first line: the command, the date, the machine and its load."""
    when = when or datetime.date.today().isoformat()
    return (f"Last output of `{command_line(argv)}` ({when}, {cpu_name()}, "
            f"{os.cpu_count()} cores, load average {load:.1f} at the start; "
            f"`make figures` reruns it):")


def run_main(main):
    """Run ``main()``; with ``--record [NAME]`` save what it printed as block NAME."""
    name, sys.argv[:] = pop_record_flag(list(sys.argv))
    if name is None:
        return main()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    try:
        result = main()
    finally:
        sys.stdout = tee.stream
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from doc_figures import record
    body = tee.kept.getvalue().strip("\n")
    record(name, f"{header(sys.argv, load)}\n\n```text\n{body}\n```")
    print(f"recorded as docs/figures/{name}.md")
    return result
