"""Convolution algorithms: they agree with each other, with a float64 reference and with
PyTorch; each one's gradients and double backward are right; auto selection, autotuning
with its JSON cache, and conv_explain.

Stated tolerance (float32, error relative to the largest reference value): Winograd
F(4x4, 3x3) within 2e-5 (measured ~3e-6), every other algorithm within 2e-6.
"""
import json
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.functions.conv import autotune, select
from lezero.functions.conv.geometry import ConvProblem, conv_geometry
from lezero.testing import check_double_backward, check_gradient, check_torch, rand
from tests.runtime.conftest import threaded  # noqa: F401

TOL = {"winograd_4x4": 2e-5}
DEFAULT_TOL = 2e-6

# (x shape, w shape, kwargs): every algorithm gets at least two problems it supports
PROBLEMS = [
    ((2, 6, 9, 7), (5, 6, 3, 3), dict(padding=1)),                    # winograd, odd sizes
    ((1, 4, 8, 8), (3, 4, 3, 3), dict(padding=(0, 2))),               # winograd, uneven pad
    ((2, 4, 7, 6), (6, 2, 5, 3), dict(padding=2, stride=(2, 1), groups=2, dilation=(1, 2))),
    ((2, 4, 6, 7), (8, 4, 1, 1), dict(stride=2, padding=1)),          # pointwise
    ((1, 4, 7, 7), (8, 1, 3, 3), dict(groups=4, padding=1, stride=2)),  # depthwise x2
    ((1, 3, 12, 12), (2, 3, 7, 7), dict(padding=3)),                  # large kernel
]


def _problem(x_shape, w_shape, kw, dtype="float32"):
    geom = conv_geometry("t", x_shape, w_shape, 2, kw.get("stride", 1), kw.get("padding", 0),
                         kw.get("dilation", 1), kw.get("groups", 1))
    return ConvProblem(geom, x_shape[0], x_shape[1], w_shape[0], dtype, "numpy")


@pytest.mark.parametrize("x_shape,w_shape,kw", PROBLEMS)
@pytest.mark.parametrize("op", ["forward", "grad_input", "grad_weight"])
def test_all_algorithms_agree_with_the_float64_reference(x_shape, w_shape, kw, op):
    prob = _problem(x_shape, w_shape, kw)
    a, b = autotune.make_inputs(prob, op, seed=3)
    ref_prob = _problem(x_shape, w_shape, kw, "float64")
    ref = select.ALGORITHMS["im2col"].run(op, a.astype(np.float64), b.astype(np.float64),
                                          ref_prob, {})
    scale = np.abs(ref).max()
    ran = []
    for algo in select.candidates(prob):
        out = algo.run(op, a, b, prob, {})
        assert out.dtype == np.float32 and out.shape == ref.shape, algo.name
        err = np.abs(out - ref).max() / scale
        assert err <= TOL.get(algo.name, DEFAULT_TOL), f"{algo.name}: relative error {err:.2e}"
        ran.append(algo.name)
    assert len(ran) >= 2, f"only {ran} support {prob.geom.describe()}"


@pytest.mark.parametrize("x_shape,w_shape,kw", PROBLEMS)
@pytest.mark.parametrize("op", ["forward", "grad_input", "grad_weight"])
def test_im2col_per_sample_and_batch_wide_gemms_agree(x_shape, w_shape, kw, op, monkeypatch):
    # small problems take one GEMM per sample; forcing the threshold below them runs the
    # batch-wide GEMM with its transposed copies instead: both must give the same numbers
    from lezero.functions.conv import im2col
    prob = _problem(x_shape, w_shape, kw, "float64")
    a, b = autotune.make_inputs(prob, op, seed=5)
    algo = select.ALGORITHMS["im2col"]
    assert im2col.per_sample(prob)
    small = algo.run(op, a, b, prob, {}).copy()
    monkeypatch.setattr(im2col, "PER_SAMPLE_MACS", -1)
    assert not im2col.per_sample(prob)
    wide = algo.run(op, a, b, prob, {})
    np.testing.assert_allclose(small, wide, rtol=1e-12, atol=1e-12)
    assert algo.predict(prob, op) > 0


def test_im2col_keeps_small_columns_for_grad_weight(monkeypatch):
    from lezero.functions.conv import im2col
    prob = _problem((2, 3, 8, 8), (4, 3, 3, 3), dict(padding=1))
    x, w = autotune.make_inputs(prob, "forward", seed=1)
    gy, _ = autotune.make_inputs(prob, "grad_input", seed=2)
    algo, gathers = select.ALGORITHMS["im2col"], []
    real = im2col.im2col
    monkeypatch.setattr(im2col, "im2col", lambda *a, **k: gathers.append(1) or real(*a, **k))
    expected = algo.grad_weight(x, gy, prob, {})
    assert len(gathers) == 1
    for keep, limit, calls in [(True, im2col.KEEP_COL_BYTES, 1), (True, 0, 2),
                               (False, im2col.KEEP_COL_BYTES, 2)]:
        monkeypatch.setattr(im2col, "KEEP_COL_BYTES", limit)
        gathers.clear()
        cache = {"keep_input": keep}
        algo.forward(x, w, prob, cache)
        algo.grad_input(gy, w, prob, cache)       # reuses the scratch buffer named "col"
        np.testing.assert_array_equal(algo.grad_weight(x, gy, prob, cache), expected)
        assert len(gathers) == calls, (keep, limit)
        assert ("im2col:col" in cache) == (calls == 1)
    # the cost model counts the kept columns as free
    monkeypatch.setattr(im2col, "KEEP_COL_BYTES", 16 << 20)
    assert algo.predict(prob, "grad_weight", reuse=True) < algo.predict(prob, "grad_weight")


@pytest.mark.parametrize("algo", ["im2col", "winograd_2x2", "winograd_4x4", "fft"])
def test_each_algorithm_matches_torch_and_central_differences(algo):
    kw = dict(padding=1) if algo.startswith("winograd") else dict(padding=1, stride=2, dilation=2)
    fn = lambda x, w, b: F.conv2d(x, w, b, algo=algo, **kw)        # noqa: E731
    tfn = lambda x, w, b: TF.conv2d(x, w, b, **{k: v for k, v in kw.items()})   # noqa: E731
    x, w, b = rand(2, 3, 6, 5, seed=1), rand(4, 3, 3, 3, seed=2), rand(4, seed=3)
    check_torch(fn, tfn, *[a.astype(np.float32) for a in (x, w, b)], rtol=1e-4, atol=2e-5)
    check_gradient(fn, x, w, b)
    check_double_backward(fn, rand(1, 2, 5, 4, seed=4), rand(2, 2, 3, 3, seed=5), rand(2, seed=6))


@pytest.mark.parametrize("w_shape,groups", [((6, 3, 1, 1), 1), ((6, 1, 3, 3), 3)])
def test_direct_algorithm_matches_torch_and_central_differences(w_shape, groups):
    kw = dict(groups=groups, padding=1, stride=2)
    fn = lambda x, w: F.conv2d(x, w, algo="direct", **kw)          # noqa: E731
    x, w = rand(2, 3, 5, 6, seed=7), rand(*w_shape, seed=8)
    check_torch(fn, lambda x, w: TF.conv2d(x, w, **kw), x.astype(np.float32), w.astype(np.float32))
    check_gradient(fn, x, w)
    check_double_backward(fn, x, w)


def test_numba_off_gives_the_same_results():
    x = lz.Variable(rand(2, 4, 7, 6, dtype=np.float32))
    w = lz.Variable(rand(5, 4, 3, 3, dtype=np.float32, seed=1))
    outs = []
    for use in (True, False):
        with lz.using_config("use_numba", use):
            for algo in ("im2col", "winograd_4x4"):
                x.cleargrad(), w.cleargrad()
                y = F.conv2d(x, w, padding=1, algo=algo)
                (y * y).sum().backward()
                outs.append((y.data, x.grad.data, w.grad.data))
    for got in outs[1:]:
        for a, b in zip(got, outs[0]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_scratch_buffers_do_not_leak_between_calls():
    """Two shapes alternating through the same reused buffers stay correct."""
    big_x, big_w = rand(2, 8, 10, 10, dtype=np.float32), rand(8, 8, 3, 3, dtype=np.float32, seed=1)
    small_x = rand(1, 2, 4, 4, dtype=np.float32)
    small_w = rand(3, 2, 3, 3, dtype=np.float32, seed=2)
    for _ in range(2):
        for x, w in ((big_x, big_w), (small_x, small_w)):
            for algo in ("im2col", "winograd_2x2"):
                y = F.conv2d(x, w, padding=1, algo=algo).data
                ref = TF.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy()
                np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_cost_model_picks_the_expected_algorithm_family():
    assert select.by_model(_problem((32, 64, 32, 32), (64, 64, 3, 3), dict(padding=1)),
                           "forward").name.startswith("winograd")
    assert select.by_model(_problem((8, 64, 16, 16), (128, 64, 1, 1), {}),
                           "forward").name == "direct"
    assert select.by_model(_problem((8, 32, 16, 16), (32, 1, 3, 3), dict(groups=32)),
                           "forward").name == "depthwise"
    assert select.by_model(_problem((8, 16, 32, 32), (32, 16, 3, 3), dict(stride=2)),
                           "forward").name == "im2col"
    # LeNet's first layer: few channels, the wide tap loop beats the patch matrix
    lenet1 = _problem((64, 1, 32, 32), (6, 1, 5, 5), {})
    assert select.by_model(lenet1, "forward").name == "direct"
    assert select.by_model(lenet1, "grad_weight", prefer="direct").name == "direct"
    # 16 channels, 3x3: the GEMMs are efficient and the wide loop loses
    assert select.by_model(_problem((32, 16, 12, 12), (32, 16, 3, 3), {}),
                           "forward").name == "im2col"
    assert select.by_model(_problem((4, 32, 64, 64), (32, 32, 15, 15), dict(padding=7)),
                           "forward").name == "fft"


# ----- autotuning ----------------------------------------------------------------------------

@pytest.fixture
def tune_file(tmp_path, monkeypatch):
    path = tmp_path / "tune" / "conv.json"
    monkeypatch.setenv(autotune.ENV_FILE, str(path))
    autotune.clear_memory()
    yield path
    autotune.clear_memory()


def test_autotune_measures_once_per_bucket_and_persists(tune_file, monkeypatch):
    calls = []
    real = autotune.measure

    def counting(algo, prob, op, inputs=None, repeat=3, cache=None):
        calls.append((algo.name, prob.batch, op))
        return real(algo, prob, op, inputs, repeat=1, cache=cache)

    monkeypatch.setattr(autotune, "measure", counting)
    w = lz.Variable(rand(4, 3, 3, 3, dtype=np.float32))
    with lz.using_config("conv_autotune", True):
        x = lz.Variable(rand(6, 3, 8, 8, dtype=np.float32))
        F.conv2d(x, w, padding=1).sum().backward()
        first = len(calls)
        assert {op for _, _, op in calls} == {"forward", "grad_input", "grad_weight"}
        x = lz.Variable(rand(5, 3, 8, 8, dtype=np.float32))       # batch 5: same bucket as 6
        F.conv2d(x, w, padding=1).sum().backward()
        assert len(calls) == first, "a shape in a tuned bucket is not measured again"
    data = json.loads(tune_file.read_text())
    assert data["version"] == autotune.VERSION and len(data["entries"]) == 3
    entry = data["entries"][autotune.bucket_key(
        _problem((6, 3, 8, 8), (4, 3, 3, 3), dict(padding=1)), "forward")]
    assert entry["algo"] in select.ALGORITHMS
    assert entry["algo"] == min(entry["ms"], key=entry["ms"].get)
    assert [p.name for p in tune_file.parent.iterdir()] == ["conv.json"], "no temp files left"
    # a new process (simulated) reads the file instead of measuring
    autotune.clear_memory()
    with lz.using_config("conv_autotune", True):
        F.conv2d(x, w, padding=1)
    assert len(calls) == first


def test_autotune_cache_location_and_bad_files(tmp_path, monkeypatch):
    monkeypatch.delenv(autotune.ENV_FILE, raising=False)
    monkeypatch.setenv(autotune.ENV_DIR, str(tmp_path))
    assert autotune.cache_path() == os.path.join(str(tmp_path), "conv_autotune.json")
    monkeypatch.delenv(autotune.ENV_DIR)
    assert autotune.cache_path().endswith(os.path.join(".cache", "lezero", "conv_autotune.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    monkeypatch.setenv(autotune.ENV_FILE, str(bad))
    autotune.clear_memory()
    with pytest.warns(UserWarning, match="ignoring unreadable cache"):
        with lz.using_config("conv_autotune", True):
            y = F.conv2d(rand(1, 2, 5, 5, dtype=np.float32), rand(2, 2, 3, 3, dtype=np.float32))
    assert y.shape == (1, 2, 3, 3)
    assert json.loads(bad.read_text())["version"] == autotune.VERSION   # rewritten whole
    autotune.clear_memory()


def test_buckets_are_half_octaves():
    assert [autotune.bucket(n) for n in (1, 2, 3, 5, 7, 13, 28, 33, 64)] == \
        [1, 2, 3, 6, 8, 16, 32, 48, 64]


# ----- conv_explain -------------------------------------------------------------------------

def test_conv_explain_reports_every_algorithm(capsys):
    ex = F.conv_explain((2, 8, 10, 10), (8, 8, 3, 3), padding=1, repeat=1)
    printed = capsys.readouterr().out
    assert "chosen:" in printed and "winograd_4x4" in printed and "<- chosen" in printed
    names = [r["algo"] for r in ex.rows]
    assert names == list(select.ALGORITHMS)
    assert "groups == in_channels" in ex["depthwise"]["unsupported"]
    for name in names:
        row = ex[name]
        if name == "depthwise":
            continue
        assert row["measured_ms"] > 0 and row["predicted_ms"] > 0 and row["workspace_bytes"] > 0
        assert row["rel_error"] <= TOL.get(name, DEFAULT_TOL)
    assert ex.chosen in names and "cost model" in ex.reason
    with lz.using_config("conv_autotune", True):
        ex = F.conv_explain((2, 8, 10, 10), (8, 8, 3, 3), padding=1, op="grad_weight",
                            repeat=1, show=False)
    best = min((r for r in ex.rows if not r["unsupported"]), key=lambda r: r["measured_ms"])
    assert ex.chosen == best["algo"] and "fastest measured" in ex.reason
    ex = F.conv_explain((2, 8, 10, 10), (8, 8, 3, 3), stride=2, op="grad_input",
                        after="im2col", repeat=1, show=False)
    assert "stride 1" in ex["winograd_4x4"]["unsupported"]
    assert ex["winograd_4x4"]["measured_ms"] is None and "reusing" in ex.reason


def test_conv_explain_bad_arguments():
    with pytest.raises(ValueError, match="conv_explain: op must be"):
        F.conv_explain((1, 2, 5, 5), (2, 2, 3, 3), op="backward", show=False)
    with pytest.raises(ValueError, match="conv_explain: x has 2 channels"):
        F.conv_explain((1, 2, 5, 5), (2, 3, 3, 3), show=False)
    with pytest.raises(ValueError, match="conv_explain: x_shape"):
        F.conv_explain((2, 5, 5), (2, 2, 3, 3, 3), show=False)
    with pytest.raises(ValueError, match="conv_explain: after must name"):
        F.conv_explain((1, 2, 5, 5), (2, 2, 3, 3), op="grad_input", after="cudnn", show=False)


def test_conv_explain_takes_arrays_for_their_shapes():
    # an array stands for its shape; a wrong one is refused by its shape, never printed whole
    x, w = np.zeros((2, 8, 6, 6), np.float32), np.zeros((4, 8, 1, 1), np.float32)
    ex = F.conv_explain(x, lz.Variable(w), measure=False, show=False)
    assert (ex.prob.x_shape, ex.prob.w_shape) == (x.shape, w.shape)
    with pytest.raises(ValueError, match=r"x_shape \(2, 6, 6\)") as err:
        F.conv_explain(np.zeros((2, 6, 6)), w, show=False)
    assert len(str(err.value)) < 200
    with pytest.raises(TypeError, match="conv_explain: w_shape must be a shape"):
        F.conv_explain(x, "4x8x1x1", show=False)


@pytest.mark.gpu
@pytest.mark.parametrize("algo", ["im2col", "winograd_4x4", "fft", "direct"])
def test_cupy_matches_numpy(algo):
    import cupy
    groups = 4 if algo == "direct" else 1
    x = rand(2, 4, 9, 8, dtype=np.float32)
    w = rand(4, 4 // groups, 3, 3, dtype=np.float32, seed=1)
    check_torch(lambda x, w: F.conv2d(x, w, padding=1, groups=groups, algo=algo),
                lambda x, w: TF.conv2d(x, w, padding=1, groups=groups), x, w, xp=cupy,
                rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("algo", list(select.ALGORITHMS))
def test_empty_batch_and_non_contiguous_inputs(algo):
    groups = 3 if algo == "depthwise" else 1
    w = lz.Variable(rand(4 * groups, 3 // groups, 3, 3, dtype=np.float32))
    x = lz.Variable(np.zeros((0, 3, 5, 5), np.float32))
    y = F.conv2d(x, w, padding=1, groups=groups, algo=algo)
    y.sum().backward()
    assert y.shape == (0, 4 * groups, 5, 5) and x.grad.shape == x.shape
    assert not w.grad.data.any()
    base = rand(3, 6, 2, 5, dtype=np.float32)                 # a transposed view as input
    xt = base.transpose(2, 0, 3, 1)                           # (2, 3, 5, 6), not contiguous
    check_torch(lambda a, k: F.conv2d(a, k, padding=1, groups=groups, algo=algo),
                lambda a, k: TF.conv2d(a, k, padding=1, groups=groups), xt, w.data,
                rtol=1e-4, atol=2e-5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_batch_split_works_in_a_forked_child():
    """A forked child inherits the parent's thread pool object but none of its threads."""
    import multiprocessing as mp
    x, w = rand(8, 16, 16, 16, dtype=np.float32), rand(16, 16, 3, 3, dtype=np.float32, seed=1)
    with lz.using_config("conv_threads", 2):
        y = F.conv2d(x, w, padding=1).data                    # the pool exists in the parent
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_conv_in_child, args=(queue, x, w))
        child.start()
        got = queue.get(timeout=60)
        child.join(timeout=60)
    np.testing.assert_allclose(got, y, rtol=1e-5, atol=1e-5)


def _conv_in_child(queue, x, w):
    with lz.using_config("conv_threads", 2):
        queue.put(F.conv2d(x, w, padding=1).data)


def test_a_batch_split_transforms_the_winograd_filter_once(monkeypatch, threaded):  # noqa: F811
    """Each batch part reads the same U = G w G^T: it is computed once per product, not
    once per part, and the parts' results equal an unsplit run's."""
    from lezero.functions.conv import winograd
    from lezero.runtime import policy
    calls = []
    real = winograd.filter_transform
    monkeypatch.setattr(winograd, "filter_transform",
                        lambda w, G: calls.append(w.shape) or real(w, G))
    x, w = rand(8, 16, 12, 12, dtype=np.float32), rand(16, 16, 3, 3, dtype=np.float32, seed=2)
    xv, wv = lz.Variable(x), lz.Parameter(w)
    with lz.using_config("conv_threads", 2), policy.using(conv_min_part_flops=1.0,
                                                          conv_product_min_part_flops=1.0):
        y = F.conv2d(xv, wv, padding=1, algo="winograd_2x2")
        y.backward(grad=lz.Variable(np.ones_like(y.data)))
    assert len(calls) == 1          # forward's; grad_input finds it kept (small: in budget)
    with lz.using_config("conv_threads", 1):
        xs, ws = lz.Variable(x), lz.Parameter(w)
        ys = F.conv2d(xs, ws, padding=1, algo="winograd_2x2")
        ys.backward(grad=lz.Variable(np.ones_like(ys.data)))
    np.testing.assert_allclose(y.data, ys.data, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xv.grad.data, xs.grad.data, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(wv.grad.data, ws.grad.data, rtol=1e-5, atol=1e-4)


def test_product_algorithms_split_the_batch_later(threaded, monkeypatch):  # noqa: F811
    """Where products split over native threads (the MKL team, OpenBLAS's own), an
    algorithm made of products splits the batch only from ``conv_product_min_part_flops``
    a part (its products split over those threads below that); depthwise and the direct
    tap loop keep ``conv_min_part_flops``.  The runtime is asked about each algorithm's
    own product size."""
    from lezero.functions.conv import parallel
    from lezero.functions.conv.registry import ALGORITHMS
    from lezero.runtime import policy
    x, w, dw = (8, 32, 14, 14), (32, 32, 3, 3), (32, 1, 3, 3)
    conv = ConvProblem(conv_geometry("t", x, w, 2, 1, 1, 1, 1), 8, 32, 32, "float32", "numpy")
    depth = ConvProblem(conv_geometry("t", x, dw, 2, 1, 1, 1, 32), 8, 32, 32, "float32",
                        "numpy")
    point = ConvProblem(conv_geometry("t", x, (32, 32, 1, 1), 2, 1, 0, 1, 1), 8, 32, 32,
                        "float32", "numpy")
    asked = []
    monkeypatch.setattr(parallel, "native_products", lambda flops: asked.append(flops) or True)
    with lz.using_config("conv_threads", 2), policy.using(conv_min_part_flops=1e5,
                                                          conv_product_min_part_flops=1e12):
        assert parallel.parts_for(conv) == 2                 # the cost model's question
        assert parallel.parts_for(conv, ALGORITHMS["im2col"]) == 1
        assert parallel.parts_for(conv, ALGORITHMS["winograd_2x2"]) == 1
        assert parallel.parts_for(point, ALGORITHMS["direct"]) == 1
        assert parallel.parts_for(conv, ALGORITHMS["direct"]) == 2      # the tap loop
        assert parallel.parts_for(depth, ALGORITHMS["depthwise"]) == 2
        # im2col: one (32, 288) @ (288, 196) product per sample; Winograd 2x2: one
        # (32, 32) @ (32, 8 * 7 * 7) product per tile point; 1x1: (32, 32) @ (32, 196)
        assert asked == [2.0 * 32 * 288 * 196, 2.0 * 32 * 32 * 8 * 49, 2.0 * 32 * 32 * 196]
        monkeypatch.setattr(parallel, "native_products", lambda flops: False)
        assert parallel.parts_for(conv, ALGORITHMS["im2col"]) == 2


def test_a_fixed_weight_keeps_its_winograd_filter_between_calls(monkeypatch):
    """A weight declared fixed (inference fusion's folded weights) has U = G w G^T made
    once and kept while it lives; any other weight has it made at every call; outside
    the memory budget nothing is kept; a freed weight's entry goes with it."""
    import gc

    from lezero.functions.conv import algorithm, winograd
    from lezero.runtime import policy
    calls = []
    real = winograd.filter_transform
    monkeypatch.setattr(winograd, "filter_transform",
                        lambda w, G: calls.append(w.shape) or real(w, G))
    x = lz.Variable(rand(2, 8, 9, 9, dtype=np.float32))
    fixed, plain = rand(8, 8, 3, 3, dtype=np.float32, seed=3), rand(8, 8, 3, 3, seed=3)
    plain = plain.astype(np.float32)
    algorithm.declare_fixed(fixed)
    with lz.no_grad():
        want = F.conv2d(x, plain, padding=1, algo="winograd_4x4").data
        for _ in range(3):
            got = F.conv2d(x, fixed, padding=1, algo="winograd_4x4").data
        assert len(calls) == 2          # plain's once, fixed's once for three calls
        F.conv2d(x, plain, padding=1, algo="winograd_4x4")
        assert len(calls) == 3
        np.testing.assert_array_equal(got, want)
        other = fixed.copy()
        algorithm.declare_fixed(other)
        with policy.using(transform_cache_bytes=0):
            for _ in range(2):
                F.conv2d(x, other, padding=1, algo="winograd_4x4")
        assert len(calls) == 5          # no room in the budget: made at each call
    key = id(fixed)
    del fixed
    gc.collect()
    assert key not in algorithm._FIXED
    other_type = np.ones(4, np.float32).view(type("Other", (np.ndarray,), {}))
    algorithm.declare_fixed(other_type)             # NumPy's own arrays only
    assert id(other_type) not in algorithm._FIXED


def test_fusion_declares_its_folded_weights_fixed():
    """ResNet-18's fused inference transforms each Winograd filter once over calls."""
    from lezero.functions.conv import algorithm
    from lezero.nn import inference_fusion as fusion
    from lezero.nn.models import resnet18
    model = resnet18(num_classes=10).eval()
    with lz.no_grad():
        model(rand(1, 3, 32, 32, dtype=np.float32))
    folded = [hit[2] for hit in fusion._CACHE.values()]
    assert folded and all(algorithm._FIXED[id(w)][0]() is w for w in folded)


def test_the_model_leaves_a_kept_filter_transform_out_of_a_fixed_weights_forward(monkeypatch):
    """Winograd's predicted forward counts the filter transform unless the weight is
    fixed and the budget has room to keep its transform (then only the first call makes
    it); the backward products count it as before.  ``Conv`` says which weights are."""
    import dataclasses

    from lezero.functions.conv import algorithm
    from lezero.runtime import policy
    plain = _problem((1, 256, 14, 14), (256, 256, 3, 3), dict(padding=1))
    fixed = dataclasses.replace(plain, fixed_weight=True)
    for name in ("winograd_2x2", "winograd_4x4"):
        wino = select.ALGORITHMS[name]
        assert wino.predict(fixed, "forward") < wino.predict(plain, "forward")
        with policy.using(transform_cache_bytes=0):
            assert wino.predict(fixed, "forward") == wino.predict(plain, "forward")
        assert wino.predict(fixed, "grad_input") == wino.predict(plain, "grad_input")
    im2col = select.ALGORITHMS["im2col"]
    assert im2col.predict(fixed, "forward") == im2col.predict(plain, "forward")
    seen = []
    real = select.choose
    monkeypatch.setattr(select, "choose",
                        lambda prob, *a: seen.append(prob.fixed_weight) or real(prob, *a))
    x = lz.Variable(rand(1, 4, 6, 6, dtype=np.float32))
    w = rand(4, 4, 3, 3, dtype=np.float32)
    with lz.no_grad():
        F.conv2d(x, w, padding=1)
        algorithm.declare_fixed(w)
        F.conv2d(x, w, padding=1)
        F.conv2d(x, w.copy(), padding=1)
    assert seen == [False, True, False]


def test_im2col_splits_the_batch_only_into_parts_wide_enough(threaded):  # noqa: F811
    """im2col's one product has L columns a sample: cut over the batch, each part's is
    narrower; below ``policy.conv_min_part_columns`` a part, the whole product runs
    (threaded by itself) instead.  Winograd's stacks are not narrowed that way."""
    from lezero.functions.conv.parallel import parts_for
    from lezero.runtime import policy
    im2col, wino = select.ALGORITHMS["im2col"], select.ALGORITHMS["winograd_2x2"]
    small_map = _problem((2, 512, 5, 5), (512, 512, 3, 3), dict(padding=1))   # 25 a sample
    wide_map = _problem((2, 64, 40, 40), (128, 64, 3, 3), dict(padding=1, stride=2))
    many = _problem((16, 512, 5, 5), (512, 512, 3, 3), dict(padding=1))
    with lz.using_config("conv_threads", 2), policy.using(gemm="numpy"):
        assert im2col.sample_columns(small_map) == 25
        assert parts_for(small_map, im2col) == 1
        assert parts_for(wide_map, im2col) == 2 and parts_for(many, im2col) == 2
        assert parts_for(small_map, wino) == 2
        with policy.using(conv_min_part_columns=1):
            assert parts_for(small_map, im2col) == 2
        with policy.using(conv_min_part_columns=401):     # 800 and 400 columns in all
            assert parts_for(wide_map, im2col) == 1 and parts_for(many, im2col) == 1
