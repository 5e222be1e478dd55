"""nn.MixtureOfExperts: top-k routing with the right gates, the load-balancing loss
against a hand computation, capacity and its priority, PyTorch parity of the output and
gradients (a dense torch reference from the same weights), argument errors."""
import math

import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from lezero.nn.layers import moe as moe_layers


def make(seed=0, **kw):
    lz.manual_seed(seed)
    kw = {"d_model": 6, "d_ff": 10, "num_experts": 4, "top_k": 2, **kw}
    return nn.MixtureOfExperts(**kw)


def tokens(n=12, seed=1):
    return np.random.default_rng(seed).standard_normal((n, 6)).astype(np.float32)


def probs_of(moe, x):
    logits = x @ moe.gate.weight.data.T
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def expert_out(moe, e, x):
    with lz.no_grad():
        return moe.experts[int(e)](x).data


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_each_token_goes_to_its_top_k_experts_with_the_right_gates(top_k):
    moe = make(top_k=top_k)
    x = tokens()
    with lz.no_grad():
        out = moe(x).data
    p = probs_of(moe, x)
    want = np.zeros_like(x)
    for t in range(len(x)):
        chosen = np.argsort(-p[t])[:top_k]
        np.testing.assert_array_equal(moe.last_routing["experts"][t], chosen)
        g = p[t, chosen] / (p[t, chosen].sum() if top_k > 1 else 1.0)   # Switch: raw prob
        want[t] = sum(g[i] * expert_out(moe, e, x[t:t + 1])[0] for i, e in enumerate(chosen))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_load_balancing_loss_matches_a_hand_computation():
    moe = make(top_k=2)
    x = tokens(20)
    moe(x)
    p = probs_of(moe, x)
    top2 = np.argsort(-p, axis=1)[:, :2]
    f = np.array([(top2 == e).sum() for e in range(4)]) / 40.0
    want = 4 * np.sum(f * p.mean(axis=0))
    np.testing.assert_allclose(moe.aux_loss.item(), want, rtol=1e-5)
    np.testing.assert_allclose(moe.last_routing["load"], f)
    # Uniform routing gives exactly 1: a router that sends everything one way scores E.
    moe.gate.weight.data[:] = 0
    moe(x)
    np.testing.assert_allclose(moe.aux_loss.item(), 1.0, rtol=1e-6)
    # The gradient reaches the router through P.
    moe = make(top_k=2)
    moe(x)
    moe.aux_loss.backward()
    assert np.abs(moe.gate.weight.grad.data).max() > 0


def test_capacity_drops_the_overflow_second_choices_first():
    moe = make(top_k=2, capacity_factor=0.5)
    x = tokens(16)
    moe.gate.weight.data[:] = 0
    moe.gate.weight.data[0] = 1.0            # most tokens prefer expert 0
    with lz.no_grad():
        out = moe(x).data
    capacity = math.ceil(0.5 * 16 * 2 / 4)
    experts = moe.last_routing["experts"]
    kept = np.zeros_like(experts, dtype=bool)
    used = np.zeros(4, int)
    for slot in range(2):                     # the documented priority, by hand
        for t in range(16):
            e = experts[t, slot]
            if used[e] < capacity:
                kept[t, slot], used[e] = True, used[e] + 1
    assert 0 < kept.sum() < 32
    np.testing.assert_allclose(moe.last_routing["dropped"], 1 - kept.mean())
    p = probs_of(moe, x)
    for t in range(16):
        g = p[t, experts[t]] / p[t, experts[t]].sum()
        want = sum(g[s] * expert_out(moe, experts[t, s], x[t:t + 1])[0]
                   for s in range(2) if kept[t, s])
        np.testing.assert_allclose(out[t], want, rtol=1e-5, atol=1e-6)


def torch_dense_moe(state, x, top_k):
    """The same layer computed densely in torch: every expert on every token, masked."""
    probs = torch.softmax(x @ state["gate.weight"].T, dim=-1)
    gates, chosen = probs.topk(top_k, dim=-1)
    gates = gates / gates.sum(-1, keepdim=True)
    out = torch.zeros_like(x)
    for e in range(probs.shape[1]):
        h = torch.nn.functional.gelu(x @ state[f"experts.{e}.fc1.weight"].T
                                     + state[f"experts.{e}.fc1.bias"])
        y = h @ state[f"experts.{e}.fc2.weight"].T + state[f"experts.{e}.fc2.bias"]
        weight = (gates * (chosen == e)).sum(-1, keepdim=True)
        out = out + weight * y
    return out


def test_output_and_gradients_match_a_dense_torch_reference():
    moe = make(top_k=2)
    x = tokens(10).reshape(2, 5, 6)
    xv = lz.Variable(x.copy())
    out = moe(xv)
    (out * out).sum().backward()
    state = {k: torch.tensor(v, requires_grad=True) for k, v in moe.state_dict().items()}
    xt = torch.tensor(x.reshape(10, 6), requires_grad=True)
    ref = torch_dense_moe(state, xt, 2)
    (ref * ref).sum().backward()
    np.testing.assert_allclose(out.data.reshape(10, 6), ref.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(xv.grad.data.reshape(10, 6), xt.grad.numpy(), rtol=1e-4,
                               atol=1e-5)
    for name, p in moe.named_parameters():
        np.testing.assert_allclose(p.grad.data, state[name].grad.numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=name)


def test_argument_errors():
    with pytest.raises(ValueError, match="top_k"):
        make(top_k=5)
    with pytest.raises(ValueError, match="capacity_factor"):
        make(capacity_factor=0)
    with pytest.raises(ValueError, match="activation"):
        make(activation="tanh")
    with pytest.raises(TypeError, match="num_experts"):
        make(num_experts=2.0)
    with pytest.raises(ValueError, match=r"\(\.\.\., 6\)"):
        make()(np.zeros((3, 5), np.float32))


def run(moe, x, path):
    """(output, routing record, aux loss) of one no-grad forward by ``path``."""
    with lz.no_grad():
        out = getattr(moe, path)(x.reshape(-1, moe.d_model)).data
    return out.reshape(x.shape), moe.last_routing, moe.aux_loss.item()


@pytest.mark.parametrize("top_k, capacity_factor", [(1, None), (2, None), (3, None),
                                                    (1, 0.5), (2, 0.5), (2, 1.25)])
def test_eval_dense_path_equals_the_sparse_training_path(top_k, capacity_factor):
    """The traced form (what jit.trace and onnx.export record) routes with LeZero
    operators, every expert on every token; it gives the sparse path's output, routing
    and loss."""
    moe = make(top_k=top_k, capacity_factor=capacity_factor)
    moe.gate.weight.data[:] *= 5.0                 # decisive routing: no near-ties
    x = tokens(24).reshape(4, 6, 6)
    sparse, routing, aux = run(moe, x, "sparse_forward")
    dense, dense_routing, dense_aux = run(moe, x, "dense_forward")
    np.testing.assert_allclose(dense, sparse, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(dense_routing["experts"], routing["experts"])
    np.testing.assert_allclose(dense_routing["load"], routing["load"], rtol=1e-6)
    assert dense_routing["dropped"] == routing["dropped"]
    assert (routing["dropped"] > 0) == (capacity_factor == 0.5)   # capacity acts at 0.5
    np.testing.assert_allclose(dense_aux, aux, rtol=1e-6)


def test_eval_dense_path_gives_the_sparse_path_gradients():
    moe = make(top_k=2)
    x = tokens(10)
    grads = []
    for path in (moe.sparse_forward, moe.dense_forward):
        moe.cleargrads()
        xv = lz.Variable(x.copy())
        out = path(xv)
        (out * out).sum().backward()
        grads.append((xv.grad.data, moe.gate.weight.grad.data,
                      moe.experts[0].fc1.weight.grad.data))
    for sparse, dense in zip(*grads):
        np.testing.assert_allclose(dense, sparse, rtol=1e-4, atol=1e-6)


def test_capacity_is_exact_integer_arithmetic_on_the_fraction():
    """c = 0.1 is 1/10: ten tokens, one expert, top-1 -> capacity 1 (a float product
    0.1 * 10 could round either way; the fraction cannot)."""
    moe = make(d_model=6, num_experts=1, top_k=1, capacity_factor=0.1)
    assert moe.capacity_ratio() == (1, 10)
    keep = moe.capacity_keep(np.zeros((10, 1), np.int64))
    np.testing.assert_array_equal(keep[:, 0], [True] + [False] * 9)
    assert make(top_k=2, capacity_factor=1.25).capacity_ratio() == (5, 8)   # 1.25 * 2 / 4
    assert moe_layers.capacity_of(21, 5, 8) == 14                           # ceil(13.125)
    assert make(top_k=2, capacity_factor=1e9).capacity_ratio() == (1, 1)    # capacity N
    with pytest.raises(ValueError, match="capacity_factor must be at least 1e-6"):
        make(capacity_factor=1e-7)


def test_a_trace_routes_with_operators_and_eager_runs_stay_sparse(monkeypatch, tmp_path):
    """jit.trace records the dense path (its trace check passes: nothing is computed from
    the input outside LeZero operators); the graph routes new tokens as eager does, and
    eager calls (eval included) never pay for every expert on every token."""
    from lezero import jit
    moe = make(top_k=2, capacity_factor=0.5).eval()
    moe.gate.weight.data[:] *= 5.0
    graph = jit.trace(moe, tokens(12))
    for seed in (2, 3):
        x = tokens(12, seed=seed)
        with lz.no_grad():
            np.testing.assert_allclose(graph(x).data, moe(x).data, rtol=1e-6, atol=1e-7)
    assert any(n.op == "RouteCapacity" for n in graph.graph.nodes)
    graph.save(str(tmp_path / "moe.lzg"))                # its operators load from a file
    x = tokens(12, seed=4)
    with lz.no_grad():
        np.testing.assert_allclose(jit.load(str(tmp_path / "moe.lzg"))(x).data, moe(x).data,
                                   rtol=1e-6, atol=1e-7)
    assert not jit.is_tracing()
    monkeypatch.setattr(moe, "dense_forward", None)      # an eager call must not use it
    with lz.no_grad():
        moe(tokens(12))
