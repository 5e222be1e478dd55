"""The INT8 products on MKL's integer GEMM (quantization.mkl_int8 on
lezero.kernels.int8_blocks) give the integers of the NumPy reference bit for bit --
convolutions of every ResNet shape kind, a Linear, blocks split over threads, a whole
converted model -- and ``policy.gemm = "numpy"`` still runs the VNNI kernel."""
import ctypes

import numpy as np
import pytest

import lezero.runtime as runtime
from lezero.kernels import int8_blocks as B
from lezero.kernels import int8_gemm as G
from lezero.quantization import mkl_int8, nhwc
from lezero.quantization import reference as R
from lezero.runtime import mkl, policy
from tests.quantization.test_int8_gemm import _tables, calibrated_small_resnet

pytestmark = pytest.mark.skipif(G.ISA is None or mkl.library() is None,
                                reason="needs a VNNI/AVX2 target and the mkl wheel")
RNG = np.random.default_rng(5)


@pytest.fixture
def on_mkl(monkeypatch):
    """MKL for every layer, the few-channel ones (a stem) included."""
    monkeypatch.setattr(mkl_int8, "MIN_CHANNELS", 1)
    monkeypatch.setattr(mkl_int8, "ADAPTIVE", False)    # MKL on every call, not by timings
    with policy.using(gemm="mkl"):
        yield


def _nhwc_input(shape):
    x = RNG.integers(0, 256, shape).astype(np.uint8)
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def _conv_want(x, w, geo, x_zp, tables, zp, lo, hi, dtype):
    acc = R.conv_acc_ref(R.im2col_ref(x, x_zp, geo), R.pack_weight(w, np.zeros(len(w),
                                                                                np.int32)))
    return R.requantize_ref(acc, *tables, zp, lo, hi, 1, dtype)


@pytest.mark.parametrize("shape, kernel, stride, pad, dil, o, nhwc_input", [
    ((2, 8, 6, 6), (1, 1), (1, 1), (0, 0), (1, 1), 17, True),     # rows read in place
    ((2, 8, 6, 6), (1, 1), (1, 1), (0, 0), (1, 1), 17, False),    # NCHW: one copy first
    ((2, 8, 7, 7), (1, 1), (2, 2), (0, 0), (1, 1), 32, True),     # a downsample: gathered
    ((2, 16, 9, 9), (3, 3), (1, 1), (1, 1), (1, 1), 40, True),
    ((1, 12, 11, 10), (3, 3), (2, 2), (1, 1), (1, 1), 24, True),
    ((2, 3, 29, 27), (7, 7), (2, 2), (3, 3), (1, 1), 64, False),  # a stem: 3 -> 4 channels
    ((1, 5, 4, 5), (3, 3), (1, 1), (2, 2), (1, 1), 3, True),      # odd sizes, 5 channels
    ((1, 16, 10, 7), (3, 2), (2, 1), (1, 0), (2, 2), 32, True),   # dilated: a run per tap
    ((0, 16, 5, 5), (3, 3), (1, 1), (1, 1), (1, 1), 8, True),     # an empty batch
])
def test_conv_matches_reference(on_mkl, shape, kernel, stride, pad, dil, o, nhwc_input):
    x = _nhwc_input(shape) if nhwc_input else RNG.integers(0, 256, shape).astype(np.uint8)
    w = RNG.integers(-128, 128, (o, shape[1]) + kernel).astype(np.int8)
    geo = R.geometry(shape[2:], kernel, stride, pad, dil)
    tables = _tables(o)
    for zp, lo, hi, dtype in ((7, 7, 255, np.uint8), (0, -128, 127, np.int8)):
        got = nhwc.conv2d(x, 113, geo, nhwc.pack_conv(w), *tables, zp, lo, hi, dtype)
        want = _conv_want(x, w, geo, 113, tables, zp, lo, hi, dtype)
        np.testing.assert_array_equal(got, want.reshape(got.shape))
        assert nhwc.is_nhwc(got) and got.dtype == dtype


@pytest.mark.parametrize("rows, k, o", [(1, 1, 1), (9, 7, 33), (37, 148, 70), (64, 512, 10)])
def test_linear_matches_reference(on_mkl, rows, k, o):
    x = RNG.integers(0, 256, (rows, k)).astype(np.uint8)
    w = RNG.integers(-128, 128, (o, k)).astype(np.int8)
    tables = _tables(o)
    got = nhwc.linear(x, 91, nhwc.pack_conv(w), *tables, 5, 0, 255, np.uint8)
    acc = R.gemm_ref(x.astype(np.int16) - 91, w.astype(np.int16))
    np.testing.assert_array_equal(got, R.requantize_ref(acc, *tables, 5, 0, 255, 1,
                                                        np.uint8))


def _blocks_case(block, min_part, shape=(2, 8, 13, 11)):
    """A 3x3 convolution straight through ``int8_blocks.blocks``: (got, want)."""
    o = 64 if shape[1] > 16 else 24
    x = _nhwc_input(shape)
    w = RNG.integers(-128, 128, (o, shape[1], 3, 3)).astype(np.int8)
    geo = R.geometry(shape[2:], (3, 3), (1, 1), (1, 1))
    bias, m, shift = tables = _tables(o)
    packed = nhwc.pack_conv(w)
    xp = nhwc._padded(x, 50, geo, packed.cp, np.uint8)
    table = G._table(G.bias_for(packed, bias, 50), m, shift)
    out = np.empty((shape[0] * geo[8] * geo[9], o), np.uint8)
    B.blocks(mkl.library().cblas_gemm_s8u8s32, xp, geo[:4] + (0, 0) + geo[6:],
             packed.matrix, table, 4, 4, 255, out, min_part, block)
    want = _conv_want(x, w, geo, 50, tables, 4, 4, 255, np.uint8)     # (N, O, OH*OW)
    return out, want.transpose(0, 2, 1).reshape(out.shape)


@pytest.fixture
def two_threads():
    """The default profile and two threads (under LEZERO_PROFILE=serial nothing splits)."""
    profile = policy.profile
    runtime.use_profile("default")
    try:
        with policy.using(threads=2, gemm_min_part_rows=32):
            yield
    finally:
        runtime.use_profile(profile)


def test_many_blocks_over_threads_give_the_same_integers(monkeypatch, two_threads):
    """Blocks of 16 and 37 rows (a ragged last one) in two parts of rows; then a deep
    layer's few rows (25) in two parts of output channels."""
    parts = []
    real = B.run_parts
    monkeypatch.setattr(B, "run_parts", lambda fn, n: parts.append(n) or real(fn, n))
    for block, shape in ((16, (2, 8, 13, 11)), (37, (2, 8, 13, 11)), (None, (1, 40, 5, 5))):
        got, want = _blocks_case(block, min_part=1, shape=shape)
        np.testing.assert_array_equal(got, want)
    assert parts == [2, 2, 2]


def test_plan_shares_rows_or_channels(two_threads):
    assert B.plan(286, 24, 10 ** 9, 16, 1) == (16, [(0, 9, 0, 24), (9, 18, 0, 24)])
    assert B.plan(50, 512, 10 ** 9, 256, 1) == (50, [(0, 1, 0, 256), (0, 1, 256, 512)])
    assert B.plan(50, 72, 10 ** 9, 256, 1) == (50, [(0, 1, 0, 32), (0, 1, 32, 72)])
    assert B.plan(50, 512, 10 ** 3, 256, 1e6) == (50, [(0, 1, 0, 512)])    # too little work
    assert B.plan(8, 24, 10 ** 9, 256, 1) == (8, [(0, 1, 0, 24)])          # too narrow


def test_numpy_policy_runs_the_vnni_kernel(on_mkl, monkeypatch):
    calls = []
    for module, name in ((B, "blocks"), (G, "conv_requant"), (G, "gemm_requant")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _r=real, _n=name, **k:
                            calls.append(_n) or _r(*a, **k))
    x = _nhwc_input((1, 8, 5, 5))
    w = RNG.integers(-128, 128, (8, 8, 3, 3)).astype(np.int8)
    geo = R.geometry((5, 5), (3, 3), (1, 1), (1, 1))
    packed, tables = nhwc.pack_conv(w), _tables(8)
    results = {}
    for mode in ("numpy", "mkl"):
        with policy.using(gemm=mode):
            assert mkl_int8.usable(packed) == (mode == "mkl")
            results[mode] = nhwc.conv2d(x, 3, geo, packed, *tables, 0, 0, 255, np.uint8)
            nhwc.linear(x.reshape(-1, 8)[:, :8], 3, nhwc.pack_conv(w[:, :, 0, 0]), *tables,
                        0, 0, 255, np.uint8)
    assert calls == ["conv_requant", "gemm_requant", "blocks", "blocks"]
    np.testing.assert_array_equal(results["numpy"], results["mkl"])


@pytest.mark.parametrize("intel", [True, False])
def test_auto_runs_int8_products_on_mkl_only_on_an_intel_cpu(monkeypatch, intel):
    """On an AMD EPYC MKL's int8 GEMM took 2.5-8x the time of LeZero's kernel."""
    monkeypatch.setitem(mkl._found, "intel", intel)
    packed = nhwc.pack_conv(np.ones((64, 16, 3, 3), np.int8))
    with policy.using(gemm="auto"):
        assert mkl_int8.usable(packed) is intel
        assert mkl_int8.choose(packed)[0] == ("mkl" if intel else "vnni")


def test_few_channels_stay_on_the_vnni_kernel():
    with policy.using(gemm="mkl"):
        assert mkl_int8.MIN_CHANNELS == 16
        few = nhwc.pack_conv(np.ones((64, 3, 7, 7), np.int8))
        many = nhwc.pack_conv(np.ones((64, 16, 3, 3), np.int8))
        assert not mkl_int8.usable(few) and mkl_int8.usable(many)


def test_converted_model_is_the_same_on_mkl_and_vnni(on_mkl):
    import lezero as lz
    from lezero import quantization as Q
    prepared, x = calibrated_small_resnet()
    q = Q.convert(prepared)
    outs = []
    for mode in ("mkl", "numpy"):
        with policy.using(gemm=mode), lz.no_grad():
            outs.append(q(x).data)
    np.testing.assert_array_equal(outs[0], outs[1])


def _args(**change):
    """Valid ``blocks`` arguments for a 3x3 convolution, with some replaced."""
    packed = nhwc.pack_conv(np.ones((8, 4, 3, 3), np.int8))
    args = dict(gemm=mkl.library().cblas_gemm_s8u8s32, xp=np.zeros((1, 6, 6, 4), np.uint8),
                geo=(3, 3, 1, 1, 0, 0, 1, 1, 4, 4), w=packed.matrix,
                table=G._table(np.zeros(8, np.int64), np.full(8, 1 << 30), np.zeros(8)),
                zp=0, lo=0, hi=255, out=np.empty((16, 8), np.uint8), min_part=1)
    args.update(change)
    return args


@pytest.mark.parametrize("change, error, message", [
    (dict(xp=np.zeros((1, 6, 6, 4), np.int16)), TypeError, "xp must be uint8"),
    (dict(xp=np.zeros((1, 6, 6, 8), np.uint8)[..., ::2]), ValueError, "xp must be C-cont"),
    (dict(xp=np.zeros((1, 6, 6, 5), np.uint8)), ValueError, "w must have KH.KW.CP = 45 > 0"),
    (dict(xp=np.zeros((1, 5, 6, 4), np.uint8)), ValueError, "the windows of geo .* past xp"),
    (dict(geo=(3, 3, 1, 1, 1, 1, 1, 1, 4, 4)), ValueError, "w must have .* geo padding 0"),
    (dict(w=np.ones((8, 36), np.int16)), TypeError, "w must be int8"),
    (dict(table=np.zeros((4, 7), np.int64)), ValueError, "table must have shape"),
    (dict(out=np.empty((15, 8), np.uint8)), ValueError, "out must have shape"),
    (dict(out=np.empty((16, 8), np.int32)), TypeError, "out must be uint8 or int8"),
    (dict(gemm=ctypes.CDLL(None).abs), TypeError, "gemm must be a ctypes"),
    (dict(zp=0.5), TypeError, "zp must be an int"),
    (dict(block=0), ValueError, "block must be a positive"),
])
def test_blocks_refuses_what_the_kernels_would_misread(change, error, message):
    with pytest.raises(error, match=f"int8_blocks.blocks: {message}"):
        B.blocks(**_args(**change))


def test_valid_arguments_run():
    """The baseline of the refusal cases runs (all-ones weights: sum of 36 zeros)."""
    out = B.blocks(**_args())
    np.testing.assert_array_equal(out, np.zeros((16, 8), np.uint8))


def test_block_rows_stay_within_bounds():
    assert B.block_rows(576, 64) == 1248            # a ResNet layer1 convolution
    assert B.block_rows(4608, 512) == 256           # floor: fewer calls into MKL
    assert B.block_rows(4, 1) == 4096               # ceiling
    assert B.block_rows(300, 7) % 16 == 0


def test_each_layer_takes_the_way_its_timings_say(monkeypatch):
    """Adaptive: a layer tries MKL and the VNNI kernel once each, then runs the faster
    (by the median of its recent timings), exploring the other now and then; the
    integers are the same either way."""
    monkeypatch.setattr(mkl_int8, "MIN_CHANNELS", 1)
    packed = nhwc.pack_conv(RNG.integers(-128, 128, (32, 16, 3, 3)).astype(np.int8))
    seen = []
    real_choose = mkl_int8.choose
    chooser = None
    monkeypatch.setattr(mkl_int8, "choose",
                        lambda p: seen.append(real_choose(p)[0]) or (seen[-1], chooser))
    with policy.using(gemm="mkl"):
        chooser = real_choose(packed)[1]             # makes the layer's chooser
        chooser.timings["mkl"].extend([5.0, 5.0, 5.0])       # MKL measured slower
        chooser.timings["vnni"].extend([1.0, 1.0, 1.0])
        x = _nhwc_input((2, 16, 9, 9))
        bias, m, shift = _tables(32)
        geo = R.geometry((9, 9), (3, 3), (1, 1), (1, 1))
        outs = [nhwc.conv2d(x, 3, geo, packed, bias, m, shift, 5, 0, 255, np.uint8).copy()
                for _ in range(4)]
    assert seen[1:4] == ["vnni"] * 3
    assert all(np.array_equal(o, outs[0]) for o in outs)
