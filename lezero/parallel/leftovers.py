"""The files an MPICH job leaves behind when it does not finish, and how to remove them.

MPICH removes its shared-memory segments (``/dev/shm/mpich_shm_*``) at ``MPI_Finalize``
and its launcher's proxy removes the topology file it wrote
(``$TMPDIR/hydra_hwloc_xmlfile_*``) when the job ends normally; an aborted or killed job
reaches neither, and the files stay until the machine reboots.  So the abort paths
(``MPICommunicator.abort`` and a rank's guardian) remove them first.

Only this job's own files are ever named -- never a pattern matched over the folder, which
would hit other jobs' files: the segments this process has mapped (``/proc/self/maps``),
and the topology file that its own launcher (the parent process, ``hydra_pmi_proxy``)
holds open (``/proc/<parent>/fd``).  Linux only; elsewhere nothing is found.
"""
import os

_SHM_PREFIX = "mpich_shm_"
_HWLOC_PREFIX = "hydra_hwloc_xmlfile_"
_PROXY = "hydra_pmi_proxy"


def _mapped_segments():
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) < 6:
                    continue
                path = parts[5].strip()
                if path.startswith("/dev/shm/" + _SHM_PREFIX) and " " not in path:
                    found.add(path)
    except OSError:
        pass
    return found


def launcher_files(parent=None):
    """The topology file the launcher of this process holds open (a set of paths)."""
    parent = os.getppid() if parent is None else parent
    found = set()
    try:
        with open(f"/proc/{parent}/comm") as f:
            if f.read().strip() != _PROXY:
                return found
        for fd in os.listdir(f"/proc/{parent}/fd"):
            try:
                path = os.readlink(f"/proc/{parent}/fd/{fd}")
            except OSError:
                continue
            if os.path.basename(path).startswith(_HWLOC_PREFIX) and os.path.isabs(path):
                found.add(path)
    except OSError:
        pass
    return found


def own_files():
    """This job's files that an abort would leave: sorted paths."""
    return sorted(_mapped_segments() | launcher_files())


def remove(paths):
    """Remove ``paths`` (the job is ending); a file already gone is fine."""
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass
