"""Keep cores busy with another process, as a user's machine always is (a browser, a data
loader, a second job): the contention half of ``bench_workloads.py --busy``.

    with busy(1):               # one process spinning on one core until the block ends
        ...
    python benchmarks/busy.py [cores] [seconds]     # spin from the shell (Ctrl-C stops it)

Each busy process is a plain Python loop at normal priority, unpinned: the scheduler puts
it wherever it likes, exactly as another program would be.
"""
import contextlib
import signal
import subprocess
import sys
import time

_SPIN = "while True: pass"


def start(cores=1):
    """Start ``cores`` spinning processes; returns them (stop them with ``stop``)."""
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 0:
        raise ValueError(f"busy: cores must be an int >= 0, got {cores!r}")
    return [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(cores)]


def stop(processes):
    """End the processes ``start`` returned (and wait for each)."""
    for p in processes:
        p.terminate()
    for p in processes:
        p.wait()


@contextlib.contextmanager
def busy(cores=1):
    """``cores`` processes spinning for the length of the block."""
    processes = start(cores)
    try:
        time.sleep(0.2)             # let them reach their loop before any timing starts
        yield processes
    finally:
        stop(processes)


def main(argv):
    """``[cores] [seconds]``: spin until the time is up, Ctrl-C or SIGTERM."""
    cores = int(argv[0]) if argv else 1
    seconds = float(argv[1]) if len(argv) > 1 else float("inf")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))      # the block's finally runs
    with busy(cores):
        try:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                time.sleep(min(1.0, end - time.monotonic()))
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main(sys.argv[1:])
