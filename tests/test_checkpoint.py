"""lz.checkpoint / lz.checkpoint_sequential on LeZero's own engine."""
import inspect

import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero import amp, nn
from lezero.checkpoint import policies


def _mlp(dtype=np.float32, depth=6, width=5, dropout=0.0):
    lz.manual_seed(0)
    layers = []
    for _ in range(depth):
        lin = nn.Linear(width, width)
        lin.weight.data = lin.weight.data.astype(dtype)
        lin.bias.data = lin.bias.data.astype(dtype)
        layers += [lin, nn.Tanh()] + ([nn.Dropout(dropout)] if dropout else [])
    return nn.Sequential(*layers)


def _x(dtype=np.float32, shape=(4, 5), seed=0, grad=True):
    data = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return lz.Variable(data, requires_grad=grad)


def _grads(model, x, run, seed=1):
    model.zero_grad()
    x.cleargrad()
    lz.manual_seed(seed)
    y = run(x)
    (y * y).sum().backward()
    return [p.grad.data.copy() for p in model.parameters()] + [x.grad.data.copy()]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("segments", [1, 3, "sqrt"])
def test_gradients_are_bit_identical(dtype, segments):
    model, x = _mlp(dtype, dropout=0.3), _x(dtype)
    plain = _grads(model, x, model)
    ckpt = _grads(model, x, lz.checkpoint_sequential(model, segments))
    for a, b in zip(plain, ckpt):
        np.testing.assert_array_equal(a, b)


def test_function_forms_and_signature():
    model = _mlp()
    x = _x()

    @lz.checkpoint
    def block(v, scale=2.0):
        return model(v) * scale
    assert list(inspect.signature(block).parameters) == ["v", "scale"]
    wrapped = lz.checkpoint(model)
    assert inspect.signature(wrapped) == inspect.signature(model.forward)
    np.testing.assert_array_equal(block(x).data, model(x).data * 2)
    np.testing.assert_array_equal(lz.checkpoint(model, x).data, wrapped(x).data)
    deco = lz.checkpoint(policy="dots_saveable")(model)
    np.testing.assert_array_equal(deco(x).data, model(x).data)
    assert lz.checkpoint is lz.checkpoint and callable(lz.checkpoint)
    import lezero.checkpoint  # noqa: F401  (importing the module keeps lz.checkpoint)
    assert inspect.isfunction(lz.checkpoint)


def test_lz_grad_and_double_backward():
    x = lz.Variable(np.array([0.3, -0.7, 1.1]))
    w = lz.Variable(np.array([0.5, 2.0, -1.5]))
    f = lambda v: F.tanh(v * w) ** 3                         # noqa: E731
    outs = []
    for run in (f, lz.checkpoint(f)):
        y = run(x).sum()
        gx, gw = lz.grad(y, [x, w], create_graph=True)
        hx, hw = lz.grad((gx * gx).sum() + gw.sum(), [x, w])
        outs.append([gx.data, gw.data, hx.data, hw.data])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_hooks_fire_once_after_the_full_gradient():
    lin, other = nn.Linear(3, 3), nn.Linear(3, 3)
    x = _x(shape=(2, 3))
    calls, grads = [], []
    lin.weight.register_post_accumulate_grad_hook(lambda p: calls.append(p.grad.data.copy()))
    lin.bias.register_hook(lambda g: grads.append(g.data.copy()))
    xs = []
    x.register_hook(lambda g: xs.append(1))
    y = lz.checkpoint(lambda v: F.tanh(lin(v)), x)
    z = lin(other(y)).sum()                    # lin is used inside and outside the block
    z.backward()
    assert len(calls) == 1 and len(grads) == 1 and len(xs) == 1
    np.testing.assert_array_equal(calls[0], lin.weight.grad.data)
    want = lin.weight.grad.data.copy()
    lin.zero_grad(); other.zero_grad()
    lin(other(F.tanh(lin(x)))).sum().backward()
    np.testing.assert_allclose(want, lin.weight.grad.data, rtol=1e-6)


def test_inputs_without_gradient_several_outputs_and_plain_arguments():
    model = _mlp(depth=2)
    a, b = _x(grad=False), _x(seed=1, grad=False)

    def block(u, v, k, mode="sum", skip=None):
        h = model(u)
        return (h * k + v, F.tanh(h).sum(axis=1), mode, skip)

    out = lz.checkpoint(block, a, b, 3, mode="x", skip=None)
    assert out[2] == "x" and out[3] is None
    (out[0].sum() + out[1].sum()).backward()
    ckpt = [p.grad.data.copy() for p in model.parameters()]
    model.zero_grad()
    out = block(a, b, 3)
    (out[0].sum() + out[1].sum()).backward()
    for g, p in zip(ckpt, model.parameters()):
        np.testing.assert_array_equal(g, p.grad.data)
    assert a.grad is None and b.grad is None


def test_an_input_returned_unchanged_gets_its_gradient():
    x = _x()
    y, z = lz.checkpoint(lambda v: (v, F.tanh(v)), x)
    (2 * y + z).sum().backward()
    np.testing.assert_allclose(x.grad.data, 2 + (1 - np.tanh(x.data) ** 2), rtol=1e-6)


def test_batch_norm_statistics_are_updated_once():
    lz.manual_seed(0)
    block = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU())
    x = _x(shape=(6, 4))
    block(x).sum().backward()
    want = {k: v.copy() for k, v in block.state_dict().items()}
    lz.manual_seed(0)
    block = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU())
    lz.checkpoint(block, x).sum().backward()
    for k, v in block.state_dict().items():
        np.testing.assert_array_equal(v, want[k], err_msg=k)
    assert int(block[1].num_batches_tracked) == 1


def test_no_grad_runs_the_block_once_and_records_nothing():
    model, x = _mlp(), _x()
    calls = []

    def block(v):
        calls.append(1)
        return model(v)
    with lz.no_grad():
        y = lz.checkpoint(block, x)
    assert calls == [1] and y.creator is None and not y.requires_grad
    y = lz.checkpoint(block, x)
    assert calls == [1, 1] and type(y.creator).__name__ == "Checkpoint"
    y.sum().backward()
    assert calls == [1, 1, 1]                               # one recomputation


def test_composes_with_autocast_in_both_orders():
    model, x = _mlp(dropout=0.2), _x()
    ref = _grads(model, x, amp.autocast()(model))
    inner = _grads(model, x, lambda v: lz.checkpoint(amp.autocast()(model), v))
    outer = _grads(model, x, amp.autocast()(lz.checkpoint(model)))
    for a, b, c in zip(ref, inner, outer):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    with amp.autocast():
        y = lz.checkpoint(model, x)
    assert y.dtype == np.float16


class Counted(lz.Function):
    calls = 0

    def forward(self, a, b):
        Counted.calls += 1
        return a @ b

    def backward(self, gy):
        a, b = self.inputs
        return F.matmul(gy, b.T), F.matmul(a.T, gy)


def test_a_policy_keeps_chosen_outputs_instead_of_recomputing():
    w = _x(shape=(5, 5), seed=2)
    x = _x()
    block = lambda v: F.tanh(Counted()(F.tanh(v), w))       # noqa: E731
    results = []
    for policy in (None, policies.save_only("Counted"), "everything_saveable"):
        Counted.calls = 0
        w.cleargrad(); x.cleargrad()
        lz.checkpoint(block, x, policy=policy).sum().backward()
        results.append((Counted.calls, w.grad.data.copy(), x.grad.data.copy()))
    assert [r[0] for r in results] == [2, 1, 1]
    for r in results[1:]:
        np.testing.assert_array_equal(r[1], results[0][1])
        np.testing.assert_array_equal(r[2], results[0][2])
    assert policies.dots_saveable(F.matmul(x, w).creator)


def test_matches_torch_utils_checkpoint():
    model = _mlp(depth=4)
    tm = torch.nn.Sequential(*[m for i in range(4) for m in
                               (torch.nn.Linear(5, 5), torch.nn.Tanh())])
    tm.load_state_dict({k: torch.tensor(v) for k, v in model.state_dict().items()})
    x = _x()
    xt = torch.tensor(x.data, requires_grad=True)
    out = torch.utils.checkpoint.checkpoint_sequential(tm, 2, xt, use_reentrant=False)
    (out * out).sum().backward()
    ours = _grads(model, x, lz.checkpoint_sequential(model, 2), seed=0)
    for g, (_, p) in zip(ours, tm.named_parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[-1], xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_checkpointing_lowers_the_saved_memory():
    model, x = _mlp(depth=16, width=32), _x(shape=(8, 32), grad=False)
    peaks = []
    for run in (model, lz.checkpoint_sequential(model, "sqrt")):
        with lz.memory.profile() as prof:
            (run(x) ** 2).sum().backward()
        peaks.append(prof.peak_activation_bytes)
    assert peaks[1] < 0.5 * peaks[0]


def test_bad_input_is_a_clear_error():
    x = _x()
    with pytest.raises(TypeError, match=r"checkpoint: fn \(<lambda>\) returned 3; it must "
                                        "return a Variable"):
        lz.checkpoint(lambda v: 3, x)
    with pytest.raises(TypeError, match="checkpoint: fn must be callable"):
        lz.checkpoint(5, x)
    with pytest.raises(ValueError, match="checkpoint: policy must be None"):
        lz.checkpoint(F.tanh, x, policy="all")
    with pytest.raises(TypeError, match="preserve_rng_state must be a bool"):
        lz.checkpoint(F.tanh, x, preserve_rng_state="no")
    with pytest.raises(ValueError, match="segments must be <= 12"):
        lz.checkpoint_sequential(_mlp(), 13)
    with pytest.raises(ValueError, match="segments must be 'sqrt' or an int"):
        lz.checkpoint_sequential(_mlp(), "log")
    with pytest.raises(TypeError, match="modules must be a Sequential"):
        lz.checkpoint_sequential([], 1)


def test_checkpoint_sequential_splits_evenly_and_runs_directly():
    model, x = _mlp(depth=8), _x()            # 16 modules
    assert lz.checkpoint_sequential(model, "sqrt").segments == [4, 4, 4, 4]
    assert lz.checkpoint_sequential(list(model.children()), 3).segments == [5, 6, 5]
    np.testing.assert_array_equal(lz.checkpoint_sequential(model, 2, x).data, model(x).data)
