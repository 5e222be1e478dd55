"""Every Communicator operation against its definition (run under mpiexec; alone too).

Rank r's input is a known function of r, so each rank can compute what the operation must
return from the definition and compare.
"""
import numpy as np
import pytest

from lezero import parallel

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def comm():
    return parallel.init(timeout=30)


def local(r, shape=(2, 3), dtype=np.float64):
    """Rank r's input: distinct, exactly representable values."""
    return (np.arange(np.prod(shape)).reshape(shape) * (r + 1) + r).astype(dtype)


def all_inputs(comm, shape=(2, 3), dtype=np.float64):
    return [local(r, shape, dtype) for r in range(comm.size)]


@pytest.mark.parametrize("op,fn", [("sum", np.sum), ("max", np.max), ("min", np.min),
                                   ("prod", np.prod), ("mean", np.mean)])
def test_allreduce_ops_out_of_place(comm, op, fn):
    x = local(comm.rank)
    keep = x.copy()
    got = comm.allreduce(x, op)
    np.testing.assert_allclose(got, fn(np.stack(all_inputs(comm)), axis=0), rtol=1e-12)
    np.testing.assert_array_equal(x, keep)                 # the input is untouched


def test_allreduce_in_place_and_into_out(comm):
    x = local(comm.rank)
    expect = np.sum(all_inputs(comm), axis=0)
    assert comm.allreduce(x, out=x) is x
    np.testing.assert_array_equal(x, expect)
    out = np.empty_like(x)
    assert comm.allreduce(local(comm.rank), out=out) is out
    np.testing.assert_array_equal(out, expect)


def test_allreduce_non_contiguous_in_place(comm):
    base = np.zeros((4, 6))
    view = base[:, ::2]
    view[...] = local(comm.rank, (4, 3))
    comm.allreduce(view, out=view)
    np.testing.assert_array_equal(view, np.sum(all_inputs(comm, (4, 3)), axis=0))
    np.testing.assert_array_equal(base[:, 1::2], 0)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32, np.int64, np.uint8])
def test_allreduce_dtypes(comm, dtype):
    got = comm.allreduce(local(comm.rank, (3,), dtype) % 7)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.sum([local(r, (3,), dtype) % 7
                                               for r in range(comm.size)], axis=0).astype(dtype))


def test_bool_max_is_logical_or_and_bfloat16_reduces_in_float32(comm):
    flags = np.array([comm.rank == 0, False])
    np.testing.assert_array_equal(comm.allreduce(flags, "max"), [True, False])
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.full(4, comm.rank + 1, ml_dtypes.bfloat16)
    got = comm.allreduce(x)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.astype(np.float32), comm.size * (comm.size + 1) / 2)


def test_python_numbers(comm):
    assert comm.allreduce(comm.rank + 1) == comm.size * (comm.size + 1) // 2
    assert comm.allreduce(float(comm.rank), "mean") == pytest.approx((comm.size - 1) / 2)
    assert isinstance(comm.allreduce(2), int)


def test_iallreduce_request(comm):
    x = local(comm.rank)
    req = comm.iallreduce(x, "sum", label="check")
    np.testing.assert_array_equal(req.wait(), np.sum(all_inputs(comm), axis=0))
    assert req.test() and req.done and req.completed_at is not None
    np.testing.assert_array_equal(req.wait(), np.sum(all_inputs(comm), axis=0))


def test_reduce_to_root(comm):
    root = comm.size - 1
    got = comm.reduce(local(comm.rank), "max", root=root)
    if comm.rank == root:
        np.testing.assert_array_equal(got, np.max(all_inputs(comm), axis=0))
    else:
        assert got is None


def test_bcast_in_place_from_each_root(comm):
    for root in range(comm.size):
        x = local(comm.rank, dtype=np.int64)
        assert comm.bcast(x, root) is x
        np.testing.assert_array_equal(x, local(root, dtype=np.int64))


def test_allgather_stack_and_concatenate(comm):
    x = local(comm.rank)
    np.testing.assert_array_equal(comm.allgather(x), np.stack(all_inputs(comm)))
    for axis in (0, 1, -1):
        np.testing.assert_array_equal(comm.allgather(x, axis=axis),
                                      np.concatenate(all_inputs(comm), axis=axis))


@pytest.mark.parametrize("axis", [0, 1])
def test_reduce_scatter(comm, axis):
    shape = (2 * comm.size, 3) if axis == 0 else (2, 3 * comm.size)
    total = np.sum(all_inputs(comm, shape), axis=0)
    got = comm.reduce_scatter(local(comm.rank, shape), "sum", axis=axis)
    np.testing.assert_array_equal(got, np.split(total, comm.size, axis=axis)[comm.rank])
    got = comm.reduce_scatter(local(comm.rank, shape), "mean", axis=axis)
    np.testing.assert_allclose(got, np.split(total / comm.size, comm.size, axis=axis)[comm.rank])


@pytest.mark.parametrize("axis", [0, 1])
def test_alltoall(comm, axis):
    shape = (comm.size, 2) if axis == 0 else (2, 2 * comm.size)
    got = comm.alltoall(local(comm.rank, shape), axis=axis)
    pieces = [np.split(local(r, shape), comm.size, axis=axis)[comm.rank]
              for r in range(comm.size)]
    np.testing.assert_array_equal(got, np.concatenate(pieces, axis=axis))


def test_send_recv_ring_and_nonblocking(comm):
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    out = np.empty((2, 3))
    recv = comm.irecv(out, left, tag=3)
    send = comm.isend(local(comm.rank), right, tag=3)
    assert recv.wait() is out
    send.wait()
    np.testing.assert_array_equal(out, local(left))


def test_objects(comm):
    assert comm.bcast_object({"step": 7, "rank": comm.rank}, root=0) == {"step": 7, "rank": 0}
    got = comm.allgather_object("x" * comm.rank)
    assert got == ["x" * r for r in range(comm.size)]


def test_barrier_and_split(comm):
    comm.barrier()
    sub = comm.split(comm.rank % 2, key=-comm.rank)
    members = [r for r in range(comm.size) if r % 2 == comm.rank % 2]
    assert sub.size == len(members)
    assert sub.rank == sorted(members, reverse=True).index(comm.rank)
    np.testing.assert_array_equal(sub.allreduce(np.array([comm.rank])), [sum(members)])
    none = comm.split(None if comm.rank == 0 else 1)
    assert (none is None) == (comm.rank == 0)


def test_bad_arguments_raise_before_communicating(comm):
    with pytest.raises(ValueError, match="op must be one of"):
        comm.allreduce(np.ones(2), op="average")
    with pytest.raises(TypeError, match="x must be"):
        comm.allreduce("1.0")
    with pytest.raises(TypeError, match="floating-point"):
        comm.allreduce(np.ones(2, np.int32), op="mean")
    if comm.size > 1:               # every length divides into one chunk
        with pytest.raises(ValueError, match="does not divide"):
            comm.reduce_scatter(np.ones((2, comm.size + 1)), axis=1)
    with pytest.raises(ValueError, match="axis must be <="):
        comm.allgather(np.ones((2, 2)), axis=2)
    with pytest.raises(ValueError, match="root must be <="):
        comm.bcast(np.ones(2), root=comm.size)
    with pytest.raises(ValueError, match="out must have shape"):
        comm.allreduce(np.ones(3), out=np.ones(2))
    with pytest.raises(TypeError, match="color must be an int"):
        comm.split("red")


@pytest.mark.gpu
def test_cupy_arrays_round_trip(comm):
    import cupy
    x = cupy.asarray(local(comm.rank))
    got = comm.allreduce(x)
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(got), np.sum(all_inputs(comm), axis=0))
    comm.bcast(x, 0)
    np.testing.assert_array_equal(cupy.asnumpy(x), local(0))
    np.testing.assert_array_equal(cupy.asnumpy(comm.allgather(x, axis=0)),
                                  np.concatenate(all_inputs(comm)))
