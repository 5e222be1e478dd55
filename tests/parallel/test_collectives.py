"""Differentiable collectives under mpiexec: forward and backward against the definitions,
central differences of the objective summed over ranks, and a Megatron tensor-parallel MLP
built from the conjugate operators equal to its dense single-process version."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import parallel

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def comm():
    return parallel.init(timeout=30)


def rank_data(r, shape, seed=0):
    return np.random.default_rng([seed, r]).standard_normal(shape)


def backward_with(y, w):
    y.backward(grad=w)


def test_all_reduce_forward_and_backward(comm):
    x = lz.Variable(rank_data(comm.rank, (2, 3)))
    y = parallel.all_reduce(x)
    np.testing.assert_allclose(y.data, sum(rank_data(r, (2, 3)) for r in range(comm.size)))
    backward_with(y, rank_data(comm.rank, (2, 3), seed=1))
    expect = sum(rank_data(r, (2, 3), seed=1) for r in range(comm.size))
    np.testing.assert_allclose(x.grad.data, expect)         # d(sum_q <w_q, y>)/dx_r


def test_all_reduce_mean(comm):
    x = lz.Variable(rank_data(comm.rank, (3,)))
    y = parallel.all_reduce(x, "mean")
    np.testing.assert_allclose(y.data, np.mean([rank_data(r, (3,)) for r in range(comm.size)],
                                               axis=0))
    backward_with(y, np.ones(3))
    np.testing.assert_allclose(x.grad.data, np.ones(3))


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_all_gather_backward_is_reduce_scatter(comm, axis):
    x = lz.Variable(rank_data(comm.rank, (2, 3)))
    y = parallel.all_gather(x, axis=axis)
    parts = [rank_data(r, (2, 3)) for r in range(comm.size)]
    expect = np.stack(parts) if axis is None else np.concatenate(parts, axis=axis)
    np.testing.assert_allclose(y.data, expect)
    backward_with(y, rank_data(comm.rank, y.shape, seed=2))
    total = sum(rank_data(r, y.shape, seed=2) for r in range(comm.size))
    mine = total[comm.rank] if axis is None else np.split(total, comm.size, axis)[comm.rank]
    np.testing.assert_allclose(x.grad.data, mine)


def test_reduce_scatter_backward_is_all_gather(comm):
    x = lz.Variable(rank_data(comm.rank, (2 * comm.size, 3)))
    y = parallel.reduce_scatter(x, axis=0)
    total = sum(rank_data(r, (2 * comm.size, 3)) for r in range(comm.size))
    np.testing.assert_allclose(y.data, total[2 * comm.rank:2 * comm.rank + 2])
    backward_with(y, rank_data(comm.rank, (2, 3), seed=3))
    np.testing.assert_allclose(x.grad.data, np.concatenate(
        [rank_data(r, (2, 3), seed=3) for r in range(comm.size)]))


def test_broadcast_gradient_sums_onto_root(comm):
    root = comm.size - 1
    x = lz.Variable(rank_data(comm.rank, (4,)))
    y = parallel.broadcast(x, root=root)
    np.testing.assert_allclose(y.data, rank_data(root, (4,)))
    np.testing.assert_allclose(x.data, rank_data(comm.rank, (4,)))    # input untouched
    backward_with(y, rank_data(comm.rank, (4,), seed=4))
    total = sum(rank_data(r, (4,), seed=4) for r in range(comm.size))
    np.testing.assert_allclose(x.grad.data, total if comm.rank == root else 0 * total)


def test_megatron_conjugates(comm):
    k, r = comm.size, comm.rank
    x = lz.Variable(rank_data(r, (2, 2 * k)))
    y = parallel.copy_to_parallel_region(x)
    np.testing.assert_array_equal(y.data, x.data)
    backward_with(y, rank_data(r, (2, 2 * k), seed=5))
    np.testing.assert_allclose(x.grad.data, sum(rank_data(q, (2, 2 * k), seed=5)
                                                for q in range(k)))
    x.cleargrad()
    y = parallel.reduce_from_parallel_region(x)
    np.testing.assert_allclose(y.data, sum(rank_data(q, (2, 2 * k)) for q in range(k)))
    backward_with(y, np.full((2, 2 * k), 3.0))
    np.testing.assert_array_equal(x.grad.data, 3.0)
    x.cleargrad()
    y = parallel.scatter_to_parallel_region(x, axis=-1)
    np.testing.assert_array_equal(y.data, x.data[:, 2 * r:2 * r + 2])
    backward_with(y, rank_data(r, (2, 2), seed=6))
    np.testing.assert_allclose(x.grad.data, np.concatenate(
        [rank_data(q, (2, 2), seed=6) for q in range(k)], axis=-1))
    x.cleargrad()
    y = parallel.gather_from_parallel_region(x, axis=0)
    np.testing.assert_allclose(y.data, np.concatenate([rank_data(q, (2, 2 * k))
                                                       for q in range(k)]))
    g = rank_data(0, y.shape, seed=7)                        # replicated gradient
    backward_with(y, g)
    np.testing.assert_array_equal(x.grad.data, g[2 * r:2 * r + 2])


def global_gradient_check(fn, shape, comm, eps=1e-6, double=False):
    """Backward equals central differences of J = sum over ranks of <w_r, fn(x_r)>
    (with ``double``: of the gradient's projection, i.e. double backward)."""
    w = rank_data(comm.rank, fn(lz.Variable(np.zeros(shape))).shape, seed=11)
    v = rank_data(comm.rank, shape, seed=12)

    def objective(x_arr):
        x = lz.Variable(x_arr)
        y = fn(x)
        if not double:
            return float(comm.allreduce(float(np.sum(y.data * w))))
        (gx,) = lz.grad([y], [x], grad_outputs=[w], create_graph=True)
        return float(comm.allreduce(float(np.sum(gx.data * v))))

    x0 = rank_data(comm.rank, shape, seed=13)
    x = lz.Variable(x0.copy())
    y = fn(x)
    if double:
        (gx,) = lz.grad([y], [x], grad_outputs=[w], create_graph=True)
        F.sum(gx * v).backward()
    else:
        y.backward(grad=w)
    analytic = x.grad.data
    worst = 0.0
    for owner in range(comm.size):
        for i in range(x0.size):
            numeric = []
            for sign in (1, -1):
                xs = x0.copy()
                if comm.rank == owner:
                    xs.flat[i] += sign * eps
                numeric.append(objective(xs))
            if comm.rank == owner:
                worst = max(worst, abs((numeric[0] - numeric[1]) / (2 * eps) - analytic.flat[i]))
    # every rank asserts the same thing, so a failure never leaves the ranks out of step
    assert comm.allreduce(worst, "max") < 1e-6


@pytest.mark.parametrize("name", ["all_reduce", "all_gather", "reduce_scatter", "broadcast"])
def test_summed_objective_central_differences(comm, name):
    fns = {"all_reduce": lambda x: parallel.all_reduce(x * x),
           "all_gather": lambda x: F.tanh(parallel.all_gather(x, axis=1)),
           "reduce_scatter": lambda x: parallel.reduce_scatter(x * x, axis=0),
           "broadcast": lambda x: parallel.broadcast(F.sin(x), root=0)}
    global_gradient_check(fns[name], (comm.size, 2), comm)


def test_double_backward_through_all_reduce(comm):
    global_gradient_check(lambda x: parallel.all_reduce(x * x * x), (2,), comm, double=True)


def test_tensor_parallel_mlp_equals_dense(comm):
    """Column-parallel then row-parallel linear (Megatron's MLP) from the conjugates."""
    k, r = comm.size, comm.rank
    rng = np.random.default_rng(0)                           # the same dense model everywhere
    D, H = 3, 2 * k
    W1, b1 = rng.standard_normal((H, D)), rng.standard_normal(H)
    W2, b2 = rng.standard_normal((D, H)), rng.standard_normal(D)
    x_arr, c = rng.standard_normal((4, D)), rng.standard_normal((4, D))

    dense = [lz.Variable(a.copy()) for a in (W1, b1, W2, b2, x_arr)]
    y = F.linear(F.tanh(F.linear(dense[4], dense[0], dense[1])), dense[2], dense[3])
    F.sum(y * c).backward()

    rows = slice(r * H // k, (r + 1) * H // k)
    mine = [lz.Variable(a.copy()) for a in (W1[rows], b1[rows], W2[:, rows], b2, x_arr)]
    h = F.tanh(F.linear(parallel.copy_to_parallel_region(mine[4]), mine[0], mine[1]))
    y_tp = parallel.reduce_from_parallel_region(F.linear(h, mine[2])) + mine[3]
    F.sum(y_tp * c).backward()

    np.testing.assert_allclose(y_tp.data, y.data, rtol=1e-12, atol=1e-12)
    for got, want, cut in zip(mine, dense, (rows, rows, (slice(None), rows), ..., ...)):
        np.testing.assert_allclose(got.grad.data, want.grad.data[cut], rtol=1e-12, atol=1e-12)
