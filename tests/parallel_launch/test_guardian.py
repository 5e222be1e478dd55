"""The guardian process alone (no MPI): a fake rank starts it with one end of a socket pair
standing in for the launcher's PMI socket; the test reads what the guardian sends there.
Also the leftover-file finder and the pipeline's message-header check."""
import os
import signal
import socket
import subprocess
import sys
import textwrap
import uuid

import numpy as np
import pytest

from lezero.parallel import guardian, leftovers

pytestmark = pytest.mark.timeout(60)

FAKE_RANK = textwrap.dedent("""
    import os, subprocess, sys, time
    pmi, mode, init_s, files = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    read, write = os.pipe()
    g = subprocess.Popen([sys.executable, "-I", {script!r}, "1", "2", str(os.getpid()),
                          str(pmi), str(read), init_s, *files], pass_fds=(pmi, read))
    os.close(read)
    print(g.pid, flush=True)
    if mode == "ok":
        os.write(write, b"init\\nok\\n")
        g.wait()
    elif mode == "hang":
        time.sleep(30)
    elif mode == "abort":
        os.write(write, b"init\\nabort\\n")
        g.wait()
    os._exit(0)
""").format(script=guardian.__file__)


def run_fake_rank(mode, init_s="0", files=(), wait_s=10):
    """(what the guardian sent on the PMI socket, its stderr, whether it is still there)."""
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen([sys.executable, "-c", FAKE_RANK, str(theirs.fileno()), mode,
                             init_s, *files], pass_fds=(theirs.fileno(),),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    theirs.close()
    pid = int(proc.stdout.readline())
    ours.settimeout(wait_s)
    try:
        sent = ours.recv(4096).decode()
    except socket.timeout:
        sent = ""
    finally:
        ours.close()
        os.killpg(proc.pid, signal.SIGKILL)       # the fake rank, its guardian
    _, err = proc.communicate()
    return sent, err, pid


def test_a_rank_gone_without_a_word_aborts_the_job_and_names_it(tmp_path):
    shm = f"/dev/shm/mpich_shm_lezero_test_{uuid.uuid4().hex}_0"
    hwloc = str(tmp_path / "hydra_hwloc_xmlfile_test")
    precious = str(tmp_path / "precious")
    for path in (shm, hwloc, precious):
        open(path, "w").close()
    try:
        sent, err, _ = run_fake_rank("die", files=(shm, hwloc, precious))
    finally:
        if os.path.exists(shm):
            os.unlink(shm)
    assert sent == "cmd=abort exitcode=1 message=rank_1_failed\n"
    assert "[lezero.parallel] rank 1 of 2 (pid" in err
    assert "ended without finishing the job: it was killed by a signal, called os._exit()" in err
    assert not os.path.exists(hwloc) and os.path.exists(precious)   # only MPICH's kinds


def test_a_finished_or_aborting_rank_leaves_its_guardian_quiet():
    for mode in ("ok", "abort"):
        sent, err, _ = run_fake_rank(mode, wait_s=2)
        assert sent == "" and err == "", (mode, sent, err)


def test_a_rank_stuck_in_initialisation_is_aborted_at_the_deadline():
    sent, err, _ = run_fake_rank("hang", init_s="0.5")
    assert sent.startswith("cmd=abort exitcode=1")
    assert "MPI initialisation did not finish within 0.5 s" in err


def test_leftovers_name_only_this_jobs_files(tmp_path):
    assert leftovers.launcher_files(parent=os.getpid()) == set()   # not hydra's proxy
    assert all(p.startswith("/dev/shm/mpich_shm_") for p in leftovers.own_files())
    gone = tmp_path / "gone"
    leftovers.remove([str(gone)])                 # a file already removed is fine
    assert guardian._allowed("/dev/shm/mpich_shm_1_0")
    assert not guardian._allowed("/etc/passwd") and not guardian._allowed("mpich_shm_x")


def test_a_bad_pipeline_message_header_is_a_clear_error():
    from lezero.parallel.pipeline.transport import _parse_header
    good = np.array([2, 0, 3, 4, 0, 0, 0, 0, 0, 0], np.int64)
    shape, dtype = _parse_header(good, 1, 7)
    assert shape == (3, 4) and dtype == np.float32
    for bad in ([9, 0] + [1] * 8, [1, 99] + [1] * 8, [1, 0, -5] + [0] * 7, [-1, 0] + [0] * 8):
        with pytest.raises(ValueError, match=r"header from rank 1 \(tag 7\) is not one a "
                                             r"stage sends"):
            _parse_header(np.array(bad, np.int64), 1, 7)
