"""A convolution cut into batch parts (``functions.conv.parallel.run_product``): each
part writes its rows of the one output array itself (``algorithm.output``), so nothing
is copied after the parts, and the result is the whole batch's."""
import numpy as np
import pytest

import lezero as lz
from lezero.functions.conv import parallel
from lezero.functions.conv.geometry import ConvProblem, conv_geometry
from lezero.functions.conv.registry import ALGORITHMS
from lezero.runtime import policy
from tests.runtime.conftest import threaded  # noqa: F401

CASES = [  # algorithm, weight shape, groups, stride, padding, op, copied (no output())
    ("depthwise", (6, 1, 3, 3), 6, 1, 1, "forward", False),
    ("depthwise", (6, 1, 3, 3), 6, 2, 1, "grad_input", False),
    ("direct", (5, 6, 3, 3), 1, 1, 1, "forward", False),
    ("direct", (5, 6, 3, 3), 1, 1, 0, "grad_input", False),
    ("direct", (5, 6, 1, 1), 1, 1, 0, "forward", False),      # per sample (set below)
    ("direct", (5, 6, 1, 1), 1, 2, 0, "grad_input", True),    # a strided scatter
    ("im2col", (5, 6, 3, 3), 1, 2, 1, "forward", False),
    ("im2col", (6, 2, 3, 3), 3, 1, 1, "forward", False),
    ("winograd_2x2", (5, 6, 3, 3), 1, 1, 1, "forward", False),
    ("winograd_4x4", (5, 6, 3, 3), 1, 1, 1, "grad_input", False),
    ("fft", (5, 6, 3, 3), 1, 1, 1, "forward", True),
]


@pytest.mark.parametrize("name, w_shape, groups, stride, padding, op, copied", CASES)
def test_batch_parts_write_their_rows_of_the_output(threaded, monkeypatch, name,  # noqa: F811
                                                    w_shape, groups, stride, padding, op,
                                                    copied):
    rng = np.random.default_rng(0)
    x_shape = (4, 6, 9, 9)
    geom = conv_geometry("t", x_shape, w_shape, 2, stride, padding, 1, groups)
    prob = ConvProblem(geom, 4, 6, w_shape[0], "float32", "numpy")
    algo = ALGORITHMS[name]
    a = rng.standard_normal(x_shape if op == "forward" else prob.y_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    whole = algo.run(op, a, w, prob, {})
    copies = []
    monkeypatch.setattr(parallel, "copy_rows", lambda rows, y: copies.append(1) or
                        rows.__setitem__(Ellipsis, y))
    monkeypatch.setattr(parallel, "native_products", lambda flops: False)
    with lz.using_config("conv_threads", 2), policy.using(conv_min_part_flops=1,
                                                          pointwise_columns_below=0):
        assert parallel.parts_for(prob, algo) == 2
        cache = {}
        got = parallel.run_product(algo, op, a, w, prob, cache)
    np.testing.assert_allclose(got, whole, rtol=1e-5, atol=1e-5)
    assert len(copies) == (2 if copied else 0)
    assert not any("out" in sub for key, sub in cache.items()
                   if isinstance(key, tuple) and key[0] == "part")    # nothing kept


def test_output_hands_over_the_rows_once_and_only_when_they_fit():
    from lezero.functions.conv.algorithm import output
    rows = np.full((2, 3), 7.0, np.float32)
    cache = {"out": rows}
    assert output(cache, (2, 3), np.float64, np) is not rows            # another dtype
    cache = {"out": rows}
    assert output(cache, (3, 2), np.float32, np) is not rows            # another shape
    cache = {"out": rows}
    got = output(cache, (2, 3), np.float32, np, zeroed=True)
    assert got is rows and not rows.any() and "out" not in cache
    assert output(cache, (2, 3), np.float32, np) is not rows            # taken already
    assert not output(None, (2, 3), np.float32, np, zeroed=True).any()
