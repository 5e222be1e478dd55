"""A save killed outright leaves its temporary file; the next save of the same target
removes the temporaries of dead processes, and keeps those a running save is writing
(issue 32: killed saves left 30 MB ``.tmp`` files that no later save removed)."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import lezero as lz
from lezero.utils import files


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _temporary(folder, target, pid, host=None):
    path = folder / f".{target}.{host or files._HOST}.{pid}.abcd1234.tmp"
    path.write_bytes(b"\0" * 1000)
    return path


def test_the_next_save_removes_a_dead_process_temporary_and_keeps_a_live_one(tmp_path):
    dead = _temporary(tmp_path, "ck.npz", _dead_pid())
    live_proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = _temporary(tmp_path, "ck.npz", live_proc.pid)
        own = _temporary(tmp_path, "ck.npz", os.getpid())      # a concurrent thread's
        other_target = _temporary(tmp_path, "ck.npz.bak", _dead_pid())
        lz.save({"w": np.ones(3)}, tmp_path / "ck.npz")
        assert not dead.exists()
        assert live.exists() and own.exists() and other_target.exists()
        assert lz.load(tmp_path / "ck.npz")["w"].tolist() == [1, 1, 1]
    finally:
        live_proc.kill()
        live_proc.wait()


def test_a_save_killed_mid_write_leaves_a_temporary_the_next_save_removes(tmp_path):
    """A real SIGKILL during the write (the writer blocks after its first bytes)."""
    code = ("import lezero.utils.files as f, sys, time\n"
            "def slow(fh):\n"
            "    fh.write(b'x' * 100000); fh.flush(); print('writing', flush=True)\n"
            "    time.sleep(60)\n"
            f"f.atomic_write({str(tmp_path / 'big.bin')!r}, slow)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        left = [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
        assert len(left) == 1 and f".{proc.pid}." in left[0]
        files.atomic_write(tmp_path / "big.bin", b"other")     # the writer is alive: kept
        assert (tmp_path / left[0]).exists()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    files.atomic_write(tmp_path / "big.bin", b"new")
    assert sorted(os.listdir(tmp_path)) == ["big.bin"]
    assert (tmp_path / "big.bin").read_bytes() == b"new"


@pytest.mark.parametrize("name", [".ck.npz.k3j4h5g6.tmp", ".ck.npz.otherhost.123.abcd1234.tmp"])
def test_temporaries_nobody_can_vouch_for_are_removed_once_old(name, tmp_path):
    """Names without a pid (older LeZero) or from another host: an age bound decides."""
    path = tmp_path / name
    path.write_bytes(b"old")
    lz.save({"a": 1}, tmp_path / "ck.npz")
    assert path.exists()                                   # fresh: maybe still written
    old = time.time() - files.STALE_SECONDS - 60
    os.utime(path, (old, old))
    lz.save({"a": 2}, tmp_path / "ck.npz")
    assert not path.exists()
    assert sorted(os.listdir(tmp_path)) == ["ck.npz"]


def test_a_long_file_name_still_saves(tmp_path):
    """The host and pid in the temporary's name must not push it past 255 bytes."""
    path = tmp_path / ("w" * 230 + ".npz")     # a mkstemp name fits; with host and pid not
    lz.save({"a": np.arange(3)}, path)
    lz.save({"a": np.arange(4)}, path)
    assert lz.load(path)["a"].tolist() == [0, 1, 2, 3]
    assert os.listdir(tmp_path) == [path.name]
