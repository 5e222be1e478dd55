"""Shape and indexing operators: gradients (float64 central differences), double backward,
PyTorch parity (float32), the zero-filled gradients of unused split outputs, repeated
indices, one_hot, and the errors bad arguments raise."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.testing import check_double_backward, check_gradient, check_torch, rand

T = torch


def _squared(fn):
    """``fn`` followed by y * y, so the upstream gradient of ``fn`` depends on the inputs
    and double backward has to differentiate ``fn``'s own backward."""
    def wrapped(*xs):
        ys = fn(*xs)
        return [y * y for y in ys] if isinstance(ys, (list, tuple)) else ys * ys
    return wrapped


def check_op(fn, torch_fn, *arrays, double=True):
    """The operator checks: central differences, double backward, PyTorch forward/backward."""
    check_gradient(fn, *arrays)
    if double:
        check_double_backward(_squared(fn), *arrays)
    check_torch(fn, torch_fn, *[np.asarray(a, dtype=np.float32) for a in arrays])


IDX = np.array([[0, 0, 2, 1], [1, 2, 2, 0]])          # gather along axis 1 of a (2, 3)
SIDX = np.array([[2, 2], [0, 1]])                     # scatter into (2, 3) from src (2, 4)
MASK = np.array([[True, False, True], [False, False, True]])

# name, LeZero function, PyTorch function, input shapes
CASES = [
    ("reshape", lambda a: F.reshape(a, (3, -1)), lambda a: a.reshape(3, -1), [(2, 3, 2)]),
    ("transpose", lambda a: F.transpose(a, (1, 2, 0)), lambda a: a.permute(1, 2, 0),
     [(2, 3, 2)]),
    ("transpose_reverse", F.transpose, lambda a: a.permute(2, 1, 0), [(2, 3, 2)]),
    ("swapaxes", lambda a: F.swapaxes(a, 0, -1), lambda a: a.swapaxes(0, -1), [(2, 3, 2)]),
    ("moveaxis", lambda a: F.moveaxis(a, 0, -1), lambda a: T.movedim(a, 0, -1), [(2, 3, 2)]),
    ("moveaxis_pairs", lambda a: F.moveaxis(a, (0, 1), (2, 0)),
     lambda a: T.movedim(a, (0, 1), (2, 0)), [(2, 3, 2)]),
    ("squeeze_all", F.squeeze, T.squeeze, [(1, 3, 1, 2)]),
    ("squeeze_axis", lambda a: F.squeeze(a, -2), lambda a: a.squeeze(-2), [(1, 3, 1, 2)]),
    ("expand_dims", lambda a: F.expand_dims(a, -1), lambda a: a.unsqueeze(-1), [(2, 3)]),
    ("expand_dims_tuple", lambda a: F.expand_dims(a, (0, 3)), lambda a: a.reshape(1, 2, 3, 1),
     [(2, 3)]),
    ("flatten", F.flatten, T.flatten, [(2, 3, 2)]),
    ("flatten_range", lambda a: F.flatten(a, 1, -2), lambda a: T.flatten(a, 1, -2),
     [(2, 2, 3, 2)]),
    ("broadcast_to", lambda a: F.broadcast_to(a, (2, 3, 2)), lambda a: a.expand(2, 3, 2),
     [(3, 1)]),
    ("sum_to", lambda a: F.sum_to(a, (3, 1)), lambda a: a.sum(0).sum(-1, keepdim=True),
     [(2, 3, 2)]),
    # leading axes only (a bias gradient): the BLAS gemv path
    ("sum_to_leading", lambda a: F.sum_to(a, (2,)), lambda a: a.sum((0, 1)), [(3, 4, 2)]),
    ("concatenate", lambda a, b: F.concatenate([a, b], axis=1), lambda a, b: T.cat([a, b], 1),
     [(2, 1), (2, 3)]),
    ("stack", lambda a, b: F.stack([a, b], axis=-1), lambda a, b: T.stack([a, b], -1),
     [(2, 3), (2, 3)]),
    ("split_sections", lambda a: F.split(a, 2, axis=1), lambda a: T.tensor_split(a, 2, dim=1),
     [(2, 4)]),
    ("split_offsets", lambda a: F.split(a, [1, 3, 9], axis=-1),
     lambda a: T.tensor_split(a, [1, 3, 9], dim=-1), [(2, 4)]),
    ("chunk", lambda a: F.chunk(a, 3), lambda a: T.chunk(a, 3), [(5, 2)]),
    ("tile", lambda a: F.tile(a, (2, 1, 2)), lambda a: T.tile(a, (2, 1, 2)), [(2, 3)]),
    ("tile_int", lambda a: F.tile(a, 2), lambda a: T.tile(a, (2,)), [(2, 3)]),
    ("repeat", lambda a: F.repeat(a, 2, axis=1), lambda a: T.repeat_interleave(a, 2, dim=1),
     [(2, 3)]),
    ("repeat_flat", lambda a: F.repeat(a, 2), lambda a: T.repeat_interleave(a, 2), [(2, 3)]),
    ("repeat_counts", lambda a: F.repeat(a, [2, 0, 1], axis=-1),
     lambda a: T.repeat_interleave(a, T.tensor([2, 0, 1]), dim=-1), [(2, 3)]),
    ("flip", lambda a: F.flip(a, 1), lambda a: T.flip(a, (1,)), [(2, 3)]),
    ("flip_all", F.flip, lambda a: T.flip(a, (0, 1)), [(2, 3)]),
    ("roll", lambda a: F.roll(a, 1, axis=1), lambda a: T.roll(a, 1, 1), [(2, 3)]),
    ("roll_pairs", lambda a: F.roll(a, (1, -2), axis=(0, 1)), lambda a: T.roll(a, (1, -2), (0, 1)),
     [(2, 3)]),
    ("roll_flat", lambda a: F.roll(a, 4), lambda a: T.roll(a, 4), [(2, 3)]),
    ("pad_constant", lambda a: F.pad(a, ((1, 0), (0, 2)), constant_values=0.5),
     lambda a: TF.pad(a, (0, 2, 1, 0), value=0.5), [(2, 3)]),
    ("pad_reflect", lambda a: F.pad(a, ((0, 0), (1, 2), (2, 1)), "reflect"),
     lambda a: TF.pad(a, (2, 1, 1, 2), mode="reflect"), [(1, 3, 3)]),
    ("pad_replicate", lambda a: F.pad(a, ((0, 0), (2, 1)), "replicate"),
     lambda a: TF.pad(a, (2, 1), mode="replicate"), [(2, 3)]),
    ("pad_circular", lambda a: F.pad(a, ((0, 0), (2, 1)), "wrap"),
     lambda a: TF.pad(a, (2, 1), mode="circular"), [(2, 3)]),
    ("get_item_repeated", lambda a: a[[0, 0, 1], [2, 2, 0]],
     lambda a: a[[0, 0, 1], [2, 2, 0]], [(2, 3)]),
    ("get_item_mixed", lambda a: a[1:, None, [0, 0]], lambda a: a[1:, None, [0, 0]], [(2, 3)]),
    ("take_flat", lambda a: F.take(a, [[0, 5], [5, -1]]),
     lambda a: T.take(a, T.tensor([[0, 5], [5, 5]])), [(2, 3)]),
    ("take_axis", lambda a: F.take(a, [2, 0, 2], axis=1), lambda a: a[:, [2, 0, 2]], [(2, 3)]),
    ("index_select", lambda a: F.index_select(a, 0, [1, 1, 0]),
     lambda a: T.index_select(a, 0, T.tensor([1, 1, 0])), [(2, 3)]),
    ("gather", lambda a: F.gather(a, 1, IDX), lambda a: T.gather(a, 1, T.tensor(IDX)), [(2, 3)]),
    ("gather_smaller", lambda a: F.gather(a, 0, [[1], [0], [1]]),
     lambda a: T.gather(a, 0, T.tensor([[1], [0], [1]])), [(2, 3)]),
    ("scatter_add", lambda a, s: F.scatter_add(a, 1, SIDX, s),
     # (torch's own backward fails when src is larger than index, so hand it the used part)
     lambda a, s: T.scatter_add(a, 1, T.tensor(SIDX), s[:, :2]), [(2, 3), (2, 4)]),
    ("masked_fill", lambda a: F.masked_fill(a, MASK, -2.0),
     lambda a: a.masked_fill(T.tensor(MASK), -2.0), [(2, 3)]),
    ("masked_fill_broadcast", lambda a: F.masked_fill(a, MASK[0], 3),
     lambda a: a.masked_fill(T.tensor(MASK[0]), 3), [(2, 3)]),
    ("tril", F.tril, T.tril, [(3, 3)]),
    ("tril_batched", lambda a: F.tril(a, -1), lambda a: T.tril(a, -1), [(2, 3, 3)]),
    ("triu", lambda a: F.triu(a, 1), lambda a: T.triu(a, 1), [(3, 4)]),
    ("diagonal", F.diagonal, T.diagonal, [(3, 3)]),
    ("diagonal_offset", lambda a: F.diagonal(a, 1, 0, 2), lambda a: T.diagonal(a, 1, 0, 2),
     [(2, 3, 3)]),
    ("diagonal_negative", lambda a: F.diagonal(a, -1, -1, 0),
     lambda a: T.diagonal(a, -1, -1, 0), [(3, 2)]),
]


@pytest.mark.parametrize("name,fn,torch_fn,shapes", CASES, ids=[c[0] for c in CASES])
def test_operator(name, fn, torch_fn, shapes):
    check_op(fn, torch_fn, *[rand(*s, seed=i) for i, s in enumerate(shapes)])


def test_every_shape_operator_is_registered():
    from lezero.functions.registry import REGISTRY, operators
    REGISTRY_INFO = REGISTRY.get
    names = {op.name for op in operators("shape")}
    expected = set("""reshape transpose swapaxes moveaxis squeeze expand_dims flatten
        broadcast_to sum_to concatenate stack split chunk tile repeat flip roll pad get_item
        take gather scatter_add index_select masked_fill tril triu diagonal one_hot""".split())
    assert expected <= names
    assert not REGISTRY_INFO("one_hot").differentiable
    assert REGISTRY_INFO("gather").double_differentiable


def test_split_outputs_that_get_no_gradient_are_zero_filled():
    x = lz.Variable(np.arange(6.0).reshape(2, 3))
    a, b, c = F.split(x, 3, axis=1)
    (b * 2.0).sum().backward()          # a and c are alive but receive nothing
    np.testing.assert_array_equal(x.grad.data, [[0, 2, 0], [0, 2, 0]])
    x.cleargrad()
    F.chunk(x, 2, axis=1)[1].sum().backward()   # the first chunk was never kept
    np.testing.assert_array_equal(x.grad.data, [[0, 0, 1], [0, 0, 1]])


def test_repeated_indices_accumulate():
    x = lz.Variable(np.zeros(4))
    for y in (F.take(x, [0, 0, -1, 0]), x[np.array([0, 0, 3, 0])],
              F.index_select(x, 0, [0, 0, 3, 0]), F.gather(x, 0, [0, 3, 0, 0])):
        x.cleargrad()
        y.sum().backward()
        np.testing.assert_array_equal(x.grad.data, [3, 0, 0, 1])


def test_scatter_add_values_and_gradient_of_unused_src():
    x = np.zeros((2, 3), np.float32)
    src = lz.Variable(np.arange(1, 9, dtype=np.float32).reshape(2, 4))
    y = F.scatter_add(x, 1, [[2, 2], [0, 1]], src)
    np.testing.assert_array_equal(y.data, [[0, 0, 3], [5, 6, 0]])
    y.sum().backward()     # src entries beyond index's shape were not scattered
    np.testing.assert_array_equal(src.grad.data, [[1, 1, 0, 0], [1, 1, 0, 0]])


def test_pad_modes_match_numpy_and_float32_is_kept():
    x = rand(2, 3, dtype=np.float32, seed=3)
    for mode, np_mode in [("reflect", "reflect"), ("edge", "edge"), ("replicate", "edge"),
                          ("wrap", "wrap"), ("circular", "wrap"), ("symmetric", "symmetric")]:
        y = F.pad(x, ((1, 2), (4, 0)), mode)
        np.testing.assert_array_equal(y.data, np.pad(x, ((1, 2), (4, 0)), np_mode))
        assert y.dtype == np.float32
    y = F.pad(x, 1, constant_values=7)
    np.testing.assert_array_equal(y.data, np.pad(x, 1, constant_values=7))
    assert y.dtype == np.float32
    check_gradient(lambda a: F.pad(a, ((0, 0), (3, 2)), "symmetric"), rand(2, 2, seed=4))


def test_split_and_concatenate_match_numpy():
    x = np.arange(10.0)
    for spec in (5, [2, 2, 7], [-3], [0, 11]):
        got = [y.data for y in F.split(x, spec)]
        want = np.split(x, spec)
        assert [g.tolist() for g in got] == [w.tolist() for w in want]
    assert len(F.chunk(x, 4)) == 4 and len(F.chunk(x, 6)) == 5     # torch: ceil sizes
    np.testing.assert_array_equal(F.concatenate(F.split(x, 5)).data, x)


def test_one_hot():
    idx = np.array([[0, 2], [1, 0]])
    y = F.one_hot(idx, 4)
    np.testing.assert_array_equal(y.data, TF.one_hot(T.tensor(idx), 4).numpy())
    assert y.dtype == np.int64 and not y.requires_grad and y.creator is None
    assert F.one_hot(lz.Variable(np.array([1, 3])).data).shape == (2, 4)   # -1: max + 1


def test_variable_methods():
    x = lz.Variable(rand(2, 3, seed=5))
    assert x.swapaxes(0, 1).shape == (3, 2) and x.mT.shape == (3, 2)
    assert x.flatten().shape == (6,) and x.expand_dims(0).shape == (1, 2, 3)
    assert [p.shape for p in x.split(3, axis=1)] == [(2, 1)] * 3
    assert x.tril().data[0, 1] == 0 and x.flip(0).data[0, 0] == x.data[1, 0]


@pytest.mark.parametrize("fn,torch_fn", [
    (lambda a: a[[1, 1, 0], 1:], lambda a: a[[1, 1, 0], 1:]),
    (lambda a: F.gather(a, 1, IDX), lambda a: T.gather(a, 1, T.tensor(IDX))),
    (lambda a: F.pad(a, ((1, 1), (2, 1)), "reflect"), lambda a: TF.pad(a[None], (2, 1, 1, 1),
                                                                        mode="reflect")[0]),
    (lambda a: F.repeat(a, [1, 0, 2], axis=1),
     lambda a: T.repeat_interleave(a, T.tensor([1, 0, 2]), dim=1)),
    (lambda a: F.masked_fill(a, MASK[0], 1.0), lambda a: a.masked_fill(T.tensor(MASK[0]), 1.0)),
    (lambda a: F.split(a, [1], axis=1), lambda a: T.tensor_split(a, [1], dim=1)),
    (lambda a: F.diagonal(a, 1), lambda a: T.diagonal(a, 1)),
], ids=["get_item", "gather", "pad", "repeat", "masked_fill", "split", "diagonal"])
def test_backends(fn, torch_fn, xp):
    check_torch(fn, torch_fn, rand(3, 3, dtype=np.float32, seed=6), xp=xp)


X = lz.Variable(np.ones((2, 3), np.float32))
BOOL3 = np.ones(3, bool)

BAD = [
    (lambda: F.reshape(X, (4, 2)), ValueError, "reshape: cannot reshape"),
    (lambda: F.transpose(X, (0, 0)), ValueError, "transpose: axes"),
    (lambda: F.swapaxes(X, 0, 2), ValueError, "swapaxes: axis2 2 is out of range"),
    (lambda: F.moveaxis(X, (0, 1), 0), ValueError, "moveaxis: source"),
    (lambda: F.squeeze(X, 0), ValueError, "squeeze: cannot squeeze axis 0 of length 2"),
    (lambda: F.expand_dims(X, 3), ValueError, "expand_dims: axis 3"),
    (lambda: F.flatten(X, 1, 0), ValueError, "flatten: start_axis"),
    (lambda: F.broadcast_to(X, (3, 3)), ValueError, "broadcast_to"),
    (lambda: F.sum_to(X, (2,)), ValueError, "sum_to"),
    (lambda: F.concatenate([X, np.ones((3, 2))]), ValueError, r"concatenate: xs\[1\]"),
    (lambda: F.concatenate([]), ValueError, "concatenate: need at least one"),
    (lambda: F.concatenate(X), TypeError, "concatenate: expected a list"),
    (lambda: F.concatenate([X, "a"]), TypeError, r"concatenate: xs\[1\]"),
    (lambda: F.stack([X, X.T]), ValueError, r"stack: xs\[1\] has shape \(3, 2\)"),
    (lambda: F.split(X, 2, axis=1), ValueError, "split: an axis of length 3"),
    (lambda: F.split(X, [2, 1], axis=1), ValueError, "split: offsets"),
    (lambda: F.split(X, 1.5), TypeError, "split: indices_or_sections"),
    (lambda: F.chunk(X, 0), ValueError, "chunk: chunks must be positive"),
    (lambda: F.tile(X, (-1,)), ValueError, "tile: reps"),
    (lambda: F.tile(X, 1.5), TypeError, "tile: reps"),
    (lambda: F.repeat(X, [1, 2], axis=1), ValueError, "repeat: got 2 repeat counts"),
    (lambda: F.repeat(X, 1.5), TypeError, "repeat: repeats"),
    (lambda: F.repeat(X, -1), ValueError, "repeat: repeats must be non-negative"),
    (lambda: F.flip(X, 2), ValueError, "flip: axis 2"),
    (lambda: F.roll(X, (1, 2)), ValueError, "roll: shift must be a single int"),
    (lambda: F.roll(X, 1, axis=5), ValueError, "roll: axis 5"),
    (lambda: F.roll(np.ones(()), 1, axis=0), ValueError, "roll: axis 0 .* 0-d input"),
    (lambda: F.pad(X, ((1, 1),) * 3), ValueError, "pad: pad_width"),
    (lambda: F.pad(X, -1), ValueError, "pad: pad_width must be non-negative"),
    (lambda: F.pad(X, 1.5), TypeError, "pad: pad_width must be ints"),
    (lambda: F.pad(X, 1, mode="mirror"), ValueError, "pad: unknown mode"),
    (lambda: F.pad(X, 1, constant_values="0"), TypeError, "pad: constant_values"),
    (lambda: F.pad(np.ones((0, 2)), 1, "edge"), ValueError, "pad: cannot pad an empty axis"),
    (lambda: F.get_item(X, (0, 5)), IndexError, "get_item"),
    (lambda: F.take(X, [6]), IndexError, "take: indices holds 6"),
    (lambda: F.take(X, [-7]), ValueError, "take: indices holds -7"),
    (lambda: F.take(X, [0.5]), TypeError, "take: indices must hold integers"),
    (lambda: F.take(X, "0"), TypeError, "take: indices must be"),
    (lambda: F.take(X, [0], axis=2), ValueError, "take: axis 2"),
    (lambda: F.take(np.ones(()), [0], axis=0), ValueError, "take: axis 0 .* 0-d input"),
    (lambda: F.index_select(X, 1, [3]), IndexError, "index_select: index holds 3"),
    (lambda: F.index_select(X, 1, [-1]), ValueError, "index_select: index holds -1"),
    (lambda: F.index_select(X, 1, [[0]]), ValueError, "index_select: index must be 1-D"),
    (lambda: F.gather(X, 1, [0, 1]), ValueError, "gather: index must have as many dims"),
    (lambda: F.gather(X, 1, [[3]]), IndexError, "gather: index holds 3"),
    (lambda: F.gather(X, 0, np.zeros((1, 4), int)), ValueError, "gather: index shape"),
    (lambda: F.gather(X, 1, np.zeros((2, 2))), TypeError, "gather: index must hold integers"),
    (lambda: F.gather(X, 2, [[0]]), ValueError, "gather: axis 2"),
    (lambda: F.scatter_add(X, 1, [[0]], np.ones((1, 1))), TypeError, "scatter_add: src dtype"),
    (lambda: F.scatter_add(X, 1, [[0, 1]], np.ones((1, 1), np.float32)), ValueError,
     "scatter_add: src shape"),
    (lambda: F.masked_fill(X, np.ones((2, 3)), 0.0), TypeError,
     "masked_fill: mask must be boolean"),
    (lambda: F.masked_fill(X, np.ones((3, 3), bool), 0.0), ValueError, "masked_fill: mask of"),
    (lambda: F.masked_fill(X, BOOL3, "a"), TypeError, "masked_fill: value must be a number"),
    (lambda: F.masked_fill(X, BOOL3, lz.Variable(np.float32(1))), TypeError,
     "masked_fill: value must be a number"),
    (lambda: F.tril(np.ones(3)), ValueError, "tril: x must have at least 2 dims"),
    (lambda: F.triu(X, 0.5), TypeError, "triu: k must be an int"),
    (lambda: F.diagonal(X, 0, 1, -1), ValueError, "diagonal: axis1 and axis2"),
    (lambda: F.diagonal(X, 0, 0, 2), ValueError, "diagonal: axis2 2 is out of range"),
    (lambda: F.one_hot(np.array([0, 3]), 3), ValueError, "one_hot: .* holds 3"),
    (lambda: F.one_hot(np.array([-1, 0])), ValueError, "one_hot: .* holds -1"),
    (lambda: F.one_hot(np.array([0.0])), TypeError, "one_hot: indices must hold integers"),
    (lambda: F.one_hot(np.array([], int)), ValueError, "one_hot: cannot infer"),
    # kinds: a TypeError naming the operator and the argument
    (lambda: F.get_item(X, 1.5), TypeError, "get_item: index items must be ints, .* got float"),
    (lambda: F.get_item(X, (0, np.array([0.5]))), TypeError, "get_item: index .* got float64"),
    (lambda: F.broadcast_to(X, (2, "3")), TypeError, "broadcast_to: shape entries must be ints"),
    (lambda: F.sum_to(X, object()), TypeError, "sum_to: shape entries must be ints"),
    (lambda: F.transpose(X, 1), TypeError, "transpose: axes must be a tuple or list"),
    (lambda: F.transpose(X, (0, "1")), TypeError, "transpose: axes must be an int, got str"),
    (lambda: F.pad(X, 1, mode=None), TypeError, "pad: mode must be a str, got NoneType"),
    (lambda: F.flatten(X, start_axis=0.0), TypeError, "flatten: start_axis must be an int"),
    (lambda: F.flatten(X, end_axis=2), ValueError, "flatten: end_axis 2 is out of range"),
    (lambda: F.moveaxis(X, 0, 5), ValueError, "moveaxis: destination 5 is out of range"),
    (lambda: F.swapaxes(X, None, 0), TypeError, "swapaxes: axis1 must be an int"),
    (lambda: F.tensordot(X, X, ((0,), (7,))), ValueError, "tensordot: axes 7 is out of range"),
]


@pytest.mark.parametrize("call,error,message", BAD, ids=[b[2].split(":")[0] + str(i)
                                                         for i, b in enumerate(BAD)])
def test_bad_arguments_raise_named_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_sum_to_leading_axes_gemv_path_matches_float64_sum():
    # (16, 64, 384) float32 as in a linear layer's bias gradient; transposed input takes
    # NumPy's reduction instead, and both agree with the float64 sum.
    g = rand(16, 64, 384, dtype=np.float32, seed=11)
    truth = g.astype(np.float64).sum(axis=(0, 1))
    np.testing.assert_allclose(F.sum_to(g, (384,)).data, truth, rtol=1e-5, atol=1e-4)
    gt = np.ascontiguousarray(g.transpose(1, 0, 2)).transpose(1, 0, 2)
    assert not gt.flags.c_contiguous
    np.testing.assert_allclose(F.sum_to(gt, (384,)).data, truth, rtol=1e-5, atol=1e-4)
    assert F.sum_to(np.zeros((0, 3), np.float32), (3,)).data.tolist() == [0, 0, 0]
