"""Each pass on its own: dead code, constant folding, CSE, fusion, memory plan."""
import numpy as np

import lezero.functions as F
from lezero import jit, nn
from lezero.jit import passes

X = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)


def _raw(fn, *xs):
    return jit.trace(fn, *xs, optimize=False).graph


def _run(graph, *xs):
    from lezero.jit.executor import Program
    return Program(graph).run_arrays(list(xs))


def test_dce_drops_dead_nodes_and_prints_the_difference():
    def f(x):
        F.exp(x) * 3                       # computed, never used
        return F.relu(x)
    g = _raw(f, X)
    before, after = str(g), str(passes.dce(g))
    assert "Exp" in before and "Exp" not in after and "ReLU" in after
    assert [n.op for n in g.nodes] == ["Exp", "Mul", "ReLU"]     # the input is unchanged


def test_dce_keeps_dropout_so_random_draws_match_eager():
    drop = nn.Dropout(0.5)

    def f(x):
        drop(x)                            # dead, but it draws from the generator
        return drop(x)
    g = passes.dce(_raw(f, np.ones((4, 4), np.float32)))
    assert [n.op for n in g.nodes] == ["ScaleShift", "ScaleShift"]


def test_constant_folding_computes_weight_only_subgraphs_once_frozen():
    bn = nn.BatchNorm1d(4).eval()
    bn.running_var[...] = 4.0
    g = _raw(bn, X)
    assert passes.fold_constants(g).nodes          # weights are live: nothing to fold
    frozen = passes.fold_constants(passes.freeze(g))
    assert len(frozen.nodes) < len(g.nodes) and frozen.meta["folded"] > 0
    np.testing.assert_allclose(_run(frozen, X)[0], bn(X).data, rtol=1e-6)


def test_cse_merges_repeated_work_but_not_dropout():
    def f(x):
        a = F.tanh(x * 2.0)
        b = F.tanh(x * 2.0)
        return a + b
    g = passes.cse(_raw(f, X))
    assert g.op_counts() == {"Mul": 1, "Tanh": 1, "Add": 1} and g.meta["cse_merged"] == 2
    np.testing.assert_allclose(_run(g, X)[0], 2 * np.tanh(X * 2), rtol=1e-6)
    drop = nn.Dropout(0.5)
    d = passes.cse(_raw(lambda x: drop(x) + drop(x), np.ones((4, 4), np.float32)))
    assert d.op_counts()["ScaleShift"] == 2


def test_fusion_groups_elementwise_chains_into_one_node():
    def f(x, b):
        return F.relu(x * 0.5 + b) - F.sigmoid(x)
    b = np.linspace(-1, 1, 4, dtype=np.float32)
    raw = _raw(f, X, b)
    fused = passes.fuse(raw)
    assert fused.op_counts() == {"Fused": 1}
    (node,) = fused.nodes
    assert [n.op for n in node.sub] == [n.op for n in raw.nodes]
    assert "Fused[Mul+Add+ReLU+Sigmoid+Sub]" in str(fused)
    np.testing.assert_allclose(_run(fused, X, b)[0], f(X, b).data, rtol=1e-5, atol=1e-6)


def test_fusion_stops_at_values_used_twice_and_at_graph_outputs():
    def f(x):
        t = F.exp(x)                  # read by two consumers: both groups need it
        return F.tanh(t) + 1, F.relu(t) * 2
    g = passes.fuse(_raw(f, X))
    assert g.op_counts() == {"Exp": 1, "Fused": 2}


def test_memory_plan_reuses_slots_and_buffers():
    def f(x):
        for _ in range(6):
            x = F.tanh(F.matmul(x, np.eye(4, dtype=np.float32)) + 1.0)
        return x
    g = passes.memory_pass(passes.fuse(_raw(f, X)))
    plan = g.meta["memory"]
    assert plan.n_slots < len(plan.slots)                      # slots are shared
    assert plan.peak_bytes < plan.naive_bytes
    assert plan.inplace                                        # fused outputs over dead inputs
    assert "memory plan:" in str(plan) and "in-place over" in str(plan)
    np.testing.assert_allclose(_run(g, X)[0], f(X).data, rtol=1e-5, atol=1e-6)


def test_in_place_output_never_overwrites_a_live_view():
    def f(x):
        t = F.exp(x)
        v = F.reshape(t, (4, 3))          # a view of t's buffer, alive after the fused node
        y = F.tanh(t * 2.0) + 1.0
        return y, v
    g = passes.memory_pass(passes.fuse(_raw(f, X)))
    y, v = _run(g, X)
    np.testing.assert_allclose(v, np.exp(X).reshape(4, 3), rtol=1e-6)
    np.testing.assert_allclose(y, np.tanh(np.exp(X) * 2) + 1, rtol=1e-5)


def test_optimize_runs_every_pass_and_rejects_unknown_names():
    g = passes.optimize(_raw(lambda x: F.relu(x * 2) + 0, X))
    assert "memory" in g.meta and g.meta["fused_groups"] == 1
    try:
        passes.optimize(g, passes=["dce", "unroll"])
    except ValueError as e:
        assert "unknown passes ['unroll']" in str(e)
    else:
        raise AssertionError("no error")
