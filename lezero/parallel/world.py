"""``init()`` / ``get_world()``: the world communicator of this job, made once.

    world = parallel.init()          # mpiexec -n 4 python train.py  -> rank 0..3 of 4
    world = parallel.get_world()     # the same object (initialises on first use)

The backend: MPI through mpi4py when it is installed (also for a single process started
without mpiexec: MPI's singleton mode), else the one-process world (``local.py``).  A job
launched with several ranks but without mpi4py is an ImportError naming the extra
(``pip install -e ".[mpi]"``).  ``LEZERO_PARALLEL_BACKEND=local|mpi`` forces a backend,
``LEZERO_COLLECTIVE_TIMEOUT`` sets the default timeout (seconds, default 600),
``LEZERO_INIT_TIMEOUT`` how long MPI initialisation may wait for the other ranks (default
600), ``LEZERO_CHECK_COLLECTIVES=0`` turns the agreement checks off (``agree.py``).
"""
import os

from lezero.parallel import _mpi, failure, lifecycle
from lezero.utils.checks import check_bool, check_choice, check_number

_world = None
DEFAULT_TIMEOUT = 600.0


def _env_seconds(name, default=DEFAULT_TIMEOUT):
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, got {text!r}") from None
    return check_number(name, "value", value, 0, low_open=True)


def _default_timeout():
    return _env_seconds("LEZERO_COLLECTIVE_TIMEOUT")


def _choose_backend(backend):
    size = _mpi.launched_size()
    if backend == "auto":
        if _mpi.have_mpi4py():
            return "mpi"
        if size > 1:
            _mpi.import_mpi()              # raises the ImportError that names the extra
        return "local"
    if backend == "local" and size > 1:
        raise RuntimeError(f"parallel.init: this process was launched as one of {size} "
                           "ranks, but backend='local' is the one-process world; use "
                           "backend='mpi' (or 'auto')")
    return backend


def init(backend=None, timeout=None, abort_on_exception=True, check_collectives=None,
         init_timeout=None):
    """Initialise (once) and return the world ``Communicator``.

    ``backend``: "auto" (default), "mpi" or "local".  ``timeout``: seconds a collective
    may wait before it prints a stall report and raises ``CollectiveTimeoutError``.
    ``abort_on_exception``: with several ranks, an uncaught exception on any rank prints
    its traceback and aborts the whole job (``failure.py``), and a rank that ends early
    or dies ends the job too (``lifecycle.py``).  ``check_collectives``: check that the
    ranks agree on each operation (``agree.py``; default on, ``LEZERO_CHECK_COLLECTIVES``).
    ``init_timeout``: seconds MPI initialisation may wait for the other ranks (default
    600, ``LEZERO_INIT_TIMEOUT``).  Later calls return the same communicator (a new
    ``timeout`` or ``check_collectives`` is applied to it).
    """
    global _world
    where = "parallel.init"
    if timeout is not None:
        timeout = check_number(where, "timeout", timeout, 0, low_open=True)
    abort_on_exception = check_bool(where, "abort_on_exception", abort_on_exception)
    if check_collectives is not None:
        check_collectives = check_bool(where, "check_collectives", check_collectives)
    init_timeout = (_env_seconds("LEZERO_INIT_TIMEOUT") if init_timeout is None else
                    check_number(where, "init_timeout", init_timeout, 0, low_open=True))
    if _world is not None:
        if timeout is not None:
            _world.timeout = timeout
        if check_collectives is not None:
            _world.check_collectives = check_collectives
        return _world
    backend = backend or os.environ.get("LEZERO_PARALLEL_BACKEND", "auto")
    backend = _choose_backend(check_choice(where, "backend", backend,
                                           ("auto", "mpi", "local")))
    timeout = _default_timeout() if timeout is None else timeout
    if backend == "mpi":
        from lezero.parallel.mpi_backend import MPICommunicator
        if abort_on_exception and _mpi.launched_size() > 1 and _mpi.have_mpi4py():
            lifecycle.start(_mpi.launched_size(), init_timeout)   # before MPI_Init
        world = MPICommunicator(_mpi.import_mpi().COMM_WORLD, "world", timeout)
    else:
        from lezero.parallel.local import LocalCommunicator
        world = LocalCommunicator("world", timeout)
    if check_collectives is not None:
        world.check_collectives = check_collectives
    if abort_on_exception and world.size > 1:
        failure.install_excepthook(world)
        lifecycle.attach(world)
    _world = world
    return world


def get_world():
    """The world communicator (``init()`` with the defaults on first use)."""
    return _world if _world is not None else init()


def is_initialized():
    """True once ``init()`` has run in this process."""
    return _world is not None


def get_rank():
    """This process's rank in the world (``torch.distributed.get_rank``)."""
    return get_world().rank


def get_world_size():
    """The number of ranks in the world (``torch.distributed.get_world_size``)."""
    return get_world().size


def _reset_for_tests():
    """Forget the world (tests of the one-process world start from scratch)."""
    global _world
    _world = None
    failure.uninstall_excepthook()
    lifecycle.reset()


def resolve(comm, where="lezero.parallel"):
    """``comm``, or the world when it is None; a TypeError for anything else."""
    if comm is None:
        return get_world()
    from lezero.parallel.comm import Communicator
    if not isinstance(comm, Communicator):
        raise TypeError(f"{where}: comm must be a lezero.parallel Communicator or None (the "
                        f"world), got {type(comm).__name__}")
    return comm
