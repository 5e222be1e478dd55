"""The fast INT8 path (lezero.kernels.int8_gemm, quantization.nhwc) gives the integers
of the NumPy reference bit for bit: GEMM, the implicit-GEMM convolution on NHWC data,
NHWC max pooling, a whole converted model; on this CPU's product (VNNI here) and, in a
subprocess whose Numba target lacks AVX-512 and VNNI, on AVX2's vpmaddwd."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from lezero.kernels import int8_gemm as G
from lezero.quantization import nhwc
from lezero.quantization import reference as R
from lezero.quantization.fixed_point import quantize_multiplier

pytestmark = pytest.mark.skipif(G.ISA is None, reason="no AVX2/VNNI target")
RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def vnni_kernel():
    """These are the VNNI kernel's tests: MKL's path (test_int8_mkl.py) stays off."""
    from lezero.runtime import policy
    with policy.using(gemm="numpy"):
        yield


def _tables(o):
    bias = RNG.integers(-20000, 20000, o).astype(np.int32)
    m, shift = quantize_multiplier(RNG.uniform(1e-5, 3e-3, o))
    return bias, m, shift


def _want(acc, bias, m, shift, zp, lo, hi, dtype):
    return R.requantize_ref(acc, bias, m, shift, zp, lo, hi, 1, dtype)


@pytest.mark.parametrize("rows, k, o", [(1, 1, 1), (9, 7, 33), (37, 148, 70), (64, 576, 64)])
def test_gemm_matches_reference(rows, k, o):
    x = RNG.integers(0, 256, (rows, k)).astype(np.uint8)
    w = RNG.integers(-128, 128, (o, k)).astype(np.int8)
    packed = G.pack(w)
    a = np.zeros((rows, packed.cp), G.DTYPES[0])
    a[:, :k] = x
    bias, m, shift = _tables(o)
    acc = R.gemm_ref(x.astype(np.int16) - 91, w.astype(np.int16))
    for zp, lo, hi, dtype in ((5, 0, 255, np.uint8), (0, -128, 127, np.int8), (60, 60, 255,
                                                                               np.uint8)):
        got = G.gemm_requant(a, packed, G.bias_for(packed, bias, 91), m, shift, zp, lo, hi,
                             dtype)
        np.testing.assert_array_equal(got, _want(acc, bias, m, shift, zp, lo, hi, dtype))


def _conv_case(shape, kernel, stride, pad, dil, o, nhwc_input):
    x = RNG.integers(0, 256, shape).astype(np.uint8)
    if nhwc_input:                      # the layout the fast convolutions hand on
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    w = RNG.integers(-128, 128, (o, shape[1]) + kernel).astype(np.int8)
    geo = R.geometry(shape[2:], kernel, stride, pad, dil)
    bias, m, shift = _tables(o)
    got = nhwc.conv2d(x, 113, geo, nhwc.pack_conv(w), bias, m, shift, 7, 7, 255, np.uint8)
    acc = R.conv_acc_ref(R.im2col_ref(x, 113, geo), R.pack_weight(w, np.zeros(o, np.int32)))
    want = _want(acc, bias, m, shift, 7, 7, 255, np.uint8).reshape(got.shape)
    np.testing.assert_array_equal(got, want)
    assert nhwc.is_nhwc(got)
    return got


@pytest.mark.parametrize("shape, kernel, stride, pad, dil, o, nhwc_input", [
    ((2, 3, 13, 11), (7, 7), (2, 2), (3, 3), (1, 1), 64, False),     # a stem: C -> 4
    ((2, 8, 9, 9), (3, 3), (1, 1), (1, 1), (1, 1), 40, True),
    ((1, 16, 10, 7), (3, 2), (2, 1), (1, 0), (2, 2), 32, True),       # dilated columns
    ((2, 8, 6, 6), (1, 1), (1, 1), (0, 0), (1, 1), 17, True),         # read in place
    ((2, 8, 7, 7), (1, 1), (2, 2), (0, 0), (1, 1), 32, False),
    ((1, 5, 4, 4), (3, 3), (1, 1), (2, 2), (1, 1), 3, False),
])
def test_conv_matches_reference(shape, kernel, stride, pad, dil, o, nhwc_input):
    _conv_case(shape, kernel, stride, pad, dil, o, nhwc_input)


def test_max_pool_nhwc_matches_reference():
    x = RNG.integers(0, 256, (2, 6, 9, 8)).astype(np.uint8)
    x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    for geo in (R.geometry((9, 8), (3, 3), (2, 2), (1, 1)),
                R.geometry((9, 8), (2, 3), (1, 2), (0, 1), (2, 1), ceil_mode=True)):
        got = nhwc.max_pool(x, geo)
        np.testing.assert_array_equal(got, R.max_pool_ref(x, geo))
        assert nhwc.is_nhwc(got)


def test_max_pool_in_parts_matches_reference():
    """Rows of the output split over two threads (the runtime's parts)."""
    import lezero.runtime as runtime
    x = RNG.integers(0, 256, (3, 16, 11, 10)).astype(np.uint8)
    x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    geo = R.geometry((11, 10), (3, 3), (2, 2), (1, 1))
    profile = runtime.policy.profile
    runtime.use_profile("default")
    try:
        with runtime.policy.using(threads=2, pool_min_part_items=1):
            got = nhwc.max_pool(x, geo)
    finally:
        runtime.use_profile(profile)
    np.testing.assert_array_equal(got, R.max_pool_ref(x, geo))


def test_pick_isa_follows_the_target_features():
    assert G._pick_isa({"avx2", "avx512f", "avx512bw", "avx512vnni"}) == "vnni512"
    assert G._pick_isa({"avx2", "avxvnni"}) == "vnni256"
    assert G._pick_isa({"avx2", "avx512f", "avx512bw"}) == "avx512bw"
    assert G._pick_isa({"avx2", "fma"}) == "avx2"
    assert G._pick_isa({"sse4.2"}) is None


def test_wrong_inputs_are_refused():
    packed = G.pack(RNG.integers(-128, 128, (8, 8)).astype(np.int8))
    a = np.zeros((3, packed.cp), G.DTYPES[0])
    bias, m, shift = np.zeros(8, np.int64), np.full(8, 1 << 30), np.zeros(8, np.int32)
    with pytest.raises(TypeError, match="int8_gemm.pack: w must be int8"):
        G.pack(np.zeros((2, 2), np.int16))
    with pytest.raises(TypeError, match="gemm_requant: a must be"):
        G.gemm_requant(a.astype(np.float32), packed, bias, m, shift, 0, 0, 255, np.uint8)
    with pytest.raises(ValueError, match=f"a must have {packed.cp} columns"):
        G.gemm_requant(a[:, :4], packed, bias, m, shift, 0, 0, 255, np.uint8)
    with pytest.raises(ValueError, match="m must have shape"):
        G.gemm_requant(a, packed, bias, m[:3], shift, 0, 0, 255, np.uint8)
    with pytest.raises(ValueError, match="shifts must lie"):
        G.gemm_requant(a, packed, bias, m, shift + 40, 0, 0, 255, np.uint8)
    with pytest.raises(ValueError, match="clamp"):
        G.gemm_requant(a, packed, bias, m, shift, 0, 0, 300, np.uint8)
    with pytest.raises(ValueError, match="C-contiguous"):
        G.gemm_requant(np.zeros((3, 2 * packed.cp), G.DTYPES[0])[:, ::2], packed, bias, m,
                       shift, 0, 0, 255, np.uint8)
    conv = nhwc.pack_conv(RNG.integers(-128, 128, (8, 4, 3, 3)).astype(np.int8))
    x = np.zeros((1, 5, 6, 6), np.uint8)
    geo = R.geometry((6, 6), (3, 3), (1, 1), (1, 1))
    with pytest.raises(ValueError, match="nhwc.conv2d: the weights take 4 channels"):
        nhwc.conv2d(x, 0, geo, conv, bias, m, shift, 0, 0, 255, np.uint8)
    xp = np.zeros((1, 6, 6, conv.cp), G.DTYPES[0])
    with pytest.raises(ValueError, match="reach past xp"):
        G.conv_requant(xp, (3, 3, 1, 1, 0, 0, 1, 1, 5, 4), conv, bias, m, shift, 0, 0, 255,
                       np.uint8)
    with pytest.raises(TypeError, match="nhwc.max_pool: x must be uint8"):
        nhwc.max_pool(x.astype(np.int8), R.geometry((6, 6), (2, 2), (2, 2), (0, 0)))


def calibrated_small_resnet():
    """A ResNet-18 of width 8 prepared and calibrated for INT8 (two random batches; convert
    it with ``Q.convert``), and an input."""
    import lezero as lz
    from lezero import nn
    from lezero import quantization as Q
    from lezero.quantization.models import quantizable_resnet
    lz.manual_seed(0)
    model = nn.models.get_model("resnet18", num_classes=10, small_input=True,
                                base_width=8).eval()
    calib = [RNG.standard_normal((2, 3, 16, 16)).astype(np.float32) for _ in range(2)]
    prepared = Q.prepare(Q.fuse(quantizable_resnet(model).eval()))
    Q.calibrate(prepared, calib)
    return prepared, RNG.standard_normal((3, 3, 16, 16)).astype(np.float32)


def test_converted_model_equals_the_int16_kernels(monkeypatch):
    """A converted ResNet-style block: the fast path's outputs equal the int16 kernels'
    (ISA None), and its activations stay NHWC between the layers."""
    import lezero as lz
    from lezero import quantization as Q
    prepared, x = calibrated_small_resnet()
    fast = Q.convert(prepared)
    with lz.no_grad():
        y_fast = fast(x).data
        layer = fast.layer1[0].conv1(fast.maxpool(fast.conv1(fast.quant(x))))
    assert nhwc.is_nhwc(layer.data) and not layer.data.flags.c_contiguous
    monkeypatch.setattr(G, "ISA", None)
    slow = Q.convert(prepared)
    with lz.no_grad():
        y_slow = slow(x).data
    np.testing.assert_array_equal(y_fast, y_slow)


_SUBPROCESS = textwrap.dedent("""
    import numpy as np
    from lezero.kernels import int8_gemm as G
    assert G.ISA == "avx2" and G.ITEM == 2, G.ISA
    import test_int8_gemm as T
    T.test_gemm_matches_reference(9, 7, 33)
    T.test_conv_matches_reference((2, 3, 13, 11), (7, 7), (2, 2), (3, 3), (1, 1), 20, False)
    T.test_conv_matches_reference((1, 16, 10, 7), (3, 2), (2, 1), (1, 0), (2, 2), 32, True)
    from lezero.runtime import mkl, policy
    if mkl.library() is not None:       # MKL's path on this packing: channels to 2, not 4
        import test_int8_mkl as M
        from lezero.quantization import mkl_int8
        policy.gemm, mkl_int8.MIN_CHANNELS = "mkl", 1
        M.test_conv_matches_reference(None, (1, 5, 4, 5), (3, 3), (1, 1), (2, 2), (1, 1), 3,
                                      True)
        M.test_linear_matches_reference(None, 9, 7, 33)
    print("ok")
""")


def test_avx2_target_gives_the_same_integers(tmp_path):
    """The vpmaddwd path, compiled for a target without AVX-512 or VNNI (and MKL's path
    on the weights packed for it)."""
    import llvmlite.binding as ll
    features = ll.get_host_cpu_features()
    if not features.get("avx2"):
        pytest.skip("the host has no AVX2")
    flat = ",".join(("+" if v and not k.startswith(("avx512", "avxvnni", "amx")) else "-")
                    + k for k, v in features.items())
    env = dict(os.environ, NUMBA_CPU_FEATURES=flat, NUMBA_CACHE_DIR=str(tmp_path),
               LEZERO_GEMM="numpy",
               PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), os.getcwd()]))
    run = subprocess.run([sys.executable, "-c", _SUBPROCESS], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
