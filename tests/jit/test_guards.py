"""Guards on every call (shapes, dtypes, arguments, mode), retracing, and verify=N."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import jit, nn
from lezero.jit import GuardError, VerifyError

X = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)


def test_shape_dtype_and_argument_mismatches_are_listed():
    g = jit.trace(lambda x, k: x * k, X, 2.0)
    with pytest.raises(GuardError) as e:
        g(X[:2].astype(np.float64), 3.0)
    text = str(e.value)
    assert "argument 0 has shape (2, 4), traced with (3, 4)" in text
    assert "argument 0 has dtype float64, traced with float32" in text
    assert "argument 1 is 3.0, traced with 2.0" in text
    assert "retrace=True" in text
    with pytest.raises(GuardError, match="takes 2 arguments, got 1"):
        g(X)


def test_training_and_test_mode_are_guarded():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).eval()
    g = jit.trace(model, X)
    model.train()
    with pytest.raises(GuardError,
                       match="module.training=True, traced with .*module.training=False"):
        g(X)
    model.eval()
    with lz.using_config("train", False):
        with pytest.raises(GuardError, match="Config.train=False"):
            g(X)


def test_retrace_compiles_a_graph_per_signature():
    calls = []

    def f(x):
        calls.append(x.shape)
        return F.relu(x) * 2
    g = jit.trace(f, X, retrace=True, check_trace=False)
    small = X[:1]
    np.testing.assert_allclose(g(small).data, np.maximum(small, 0) * 2)
    assert g.signature[0][1] == (1, 4)
    g(X)
    g(small)                                   # both graphs are cached now
    assert calls == [(3, 4), (1, 4)]


def test_verify_reports_the_largest_difference():
    g = jit.trace(nn.Linear(4, 3), X, verify=2)
    g(X)
    g(X * 3)
    g(X)                                        # past N: not verified
    assert len(g.verify_report) == 2 and max(g.verify_report) < 1e-5


def test_verify_catches_a_graph_that_no_longer_represents_the_function():
    scale = [2.0]

    def f(x):
        return x * scale[0]                     # a Python number: frozen into the graph
    g = jit.trace(f, X, verify=1)
    scale[0] = 3.0
    with pytest.raises(VerifyError, match=r"output 0: max abs difference"):
        g(X)
