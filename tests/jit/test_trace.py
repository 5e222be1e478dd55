"""jit.trace: what is recorded, how leaves are classified, and what is refused."""
import warnings

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import jit, nn
from lezero.jit import TraceError, TracerWarning
from tests.jit.zoo import ZOO, build, leaves

X = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)


def test_records_the_operators_one_run_executes():
    def f(x, y):
        return F.tanh(x * y + 1.0)
    g = jit.trace(f, X, X, optimize=False)
    assert [n.op for n in g.graph.nodes] == ["Mul", "Add", "Tanh"]
    assert g.graph.inputs == ["x0", "x1"]
    np.testing.assert_allclose(g(X * 2, X).data, f(X * 2, X).data, rtol=1e-6)


@pytest.mark.parametrize("name", sorted(ZOO))
def test_every_zoo_model_replays_like_eager(name):
    model, xs = build(name)
    g = jit.trace(model, *xs, fuse=False)
    with lz.no_grad():
        for a, b in zip(leaves(g(*xs)), leaves(model(*xs))):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_parameters_are_live_and_named_like_the_module():
    model = nn.Linear(4, 2)
    g = jit.trace(model, X)
    assert sorted(g.graph.params) == ["bias", "weight"]
    model.weight.data[...] = 0.0                      # an optimizer step, say
    np.testing.assert_allclose(g(X).data, np.broadcast_to(model.bias.data, (3, 2)))


def test_freeze_makes_parameters_constants():
    model = nn.Linear(4, 2)
    g = jit.trace(model, X, freeze=True)
    assert not g.graph.params
    before = g(X).data.copy()
    model.weight.data[...] = 0.0
    np.testing.assert_array_equal(g(X).data, before)


def test_integer_inputs_bound_through_attributes_follow_new_values():
    emb = nn.Embedding(10, 3)
    g = jit.trace(emb, np.array([1, 2, 3]))
    node = g.graph.nodes[0]
    assert node.op == "Embedding" and node.refs() == ["x0"]
    ids = np.array([7, 0, 9])
    np.testing.assert_array_equal(g(ids).data, emb.weight.data[ids])


def test_nested_outputs_keep_their_structure():
    def f(x):
        return {"a": F.relu(x), "b": (x * 2, [F.exp(x)])}
    out = jit.trace(f, X)(X)
    assert set(out) == {"a", "b"} and isinstance(out["b"][1], list)
    np.testing.assert_allclose(out["b"][1][0].data, np.exp(X), rtol=1e-6)


def test_non_differentiable_operators_are_recorded_too():
    def f(x):
        return F.argmax(F.relu(x) * 2, axis=1)
    g = jit.trace(f, X)
    assert "Reduce" in g.graph.op_counts()
    other = X[::-1].copy()
    np.testing.assert_array_equal(g(other).data, f(other).data)


def test_no_variable_returned_is_a_clear_error():
    with pytest.raises(TraceError, match="returned int, which holds no Variable"):
        jit.trace(lambda x: 3, X)
    with pytest.raises(TraceError, match="returned ndarray"):
        jit.trace(lambda x: np.ones(3), X)


def test_bad_arguments():
    with pytest.raises(TypeError, match="fn_or_module must be callable"):
        jit.trace(42, X)
    with pytest.raises(ValueError, match="verify must be >= 0"):
        jit.trace(F.relu, X, verify=-1)
    with pytest.raises(TypeError, match="fuse must be a bool"):
        jit.trace(F.relu, X, fuse="yes")


def _branchy(x):
    if float(x.sum()) > 0:           # data-dependent control flow
        return x * 2
    return -x


def test_value_read_in_python_is_reported_with_its_location():
    positive = np.abs(X) + 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jit.trace(_branchy, positive, check_trace=False)
    texts = [str(w.message) for w in caught if issubclass(w.category, TracerWarning)]
    assert texts and "__float__() at" in texts[0] and "test_trace.py:" in texts[0]
    with pytest.raises(TraceError, match=r"__float__\(\) at .*test_trace.py"):
        jit.trace(_branchy, positive, strict=True)


def test_check_trace_finds_control_flow_that_follows_the_data():
    def f(x):                    # NumPy on .data: invisible to the value-read watch
        return F.relu(x) if x.data.max() > 1.9 else F.tanh(x)
    x = np.full((2, 2), 0.5, np.float32)
    x[0, 0] = 2.0                # the check's perturbed copy (x * 0.75 + 0.125) has max 1.625
    with pytest.raises(TraceError, match="ran different operators when the input values"):
        jit.trace(f, x)


def test_check_trace_finds_values_computed_outside_operators():
    def f(x):
        return x + x.data.max()          # a NumPy number frozen as a constant
    with pytest.raises(TraceError, match="input 1 of node 0 \\(Add\\).*would be frozen"):
        jit.trace(f, X)
    jit.trace(f, X, check_trace=False)   # the caller may take responsibility


def test_a_loss_target_preprocessed_in_python_is_refused():
    def step(x, t):
        return F.cross_entropy(x, t)
    with pytest.raises(TraceError, match="SoftmaxCrossEntropy.*'target'.*frozen"):
        jit.trace(step, X, np.array([0, 1, 3]))


def test_random_draws_outside_dropout_are_refused():
    model = build("vae")[0].train()           # reparameterize samples noise in training
    with pytest.raises(TraceError, match="drew random numbers"):
        jit.trace(model, np.ones((2, 16), np.float32))


def test_batch_norm_running_statistics_in_training_are_refused():
    bn = nn.BatchNorm1d(4)
    before = bn.running_mean.copy()
    with pytest.raises(TraceError, match="updated buffers in place.*running_mean"):
        jit.trace(bn, X)
    np.testing.assert_array_equal(bn.running_mean, before)     # restored
    jit.trace(bn.eval(), X)


def test_lookup_in_a_constant_table_with_traced_indices_is_recorded():
    """embedding / take on a NumPy table (no Parameter) with input indices: a node, not
    this run's rows folded into a constant, so the graph follows other indices."""
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    for fn in (lambda i: F.embedding(i, table), lambda i: F.take(table, i, axis=0)):
        g = jit.trace(fn, np.array([0, 1, 2]))
        assert [n.op for n in g.graph.nodes] in (["Embedding"], ["GetItem"])
        ids = np.array([5, 5, 3])
        np.testing.assert_array_equal(g(ids).data, table[ids])
