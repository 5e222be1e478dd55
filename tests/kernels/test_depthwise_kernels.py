"""The depthwise kernels: each Numba product against its NumPy reference within a bound
that follows from the arithmetic, the references against the general tap-loop references
(an independent derivation), and the wrappers' refusals of what the kernels would index
out of bounds."""
import numpy as np
import pytest

from lezero.kernels import conv_direct as cd
from lezero.kernels import depthwise as dk
from lezero.kernels import numba_available

pytestmark = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")

# (N, C, multiplier, H, W, (kh, kw), (sh, sw), (ph, pw), (dh, dw)): a 3x3 window at
# stride 1 on rows narrower than NINE_CL_BELOW (channels-last), than NINE_WIDE_BELOW
# (nine taps on wide rows) and wider (nine taps row by row), stride 2 with three taps
# (the unrolled paths, with an odd and an even left padding, a row stride of 1 beside a
# column stride of 2), and the general loops (five taps dilated, two taps at stride 3,
# a 1-D problem as H = 1, a dilated 5x5 channels-last)
CASES = [
    (2, 3, 1, 7, 9, (3, 3), (1, 1), (1, 1), (1, 1)),
    (2, 2, 1, 20, 18, (3, 3), (1, 1), (1, 1), (1, 1)),
    (1, 3, 2, 17, 19, (3, 3), (1, 1), (0, 2), (1, 1)),
    (2, 4, 1, 9, 8, (3, 3), (2, 2), (1, 1), (1, 1)),
    (2, 3, 2, 10, 11, (3, 3), (1, 2), (2, 0), (2, 1)),
    (1, 2, 3, 8, 11, (5, 5), (1, 1), (2, 2), (2, 2)),
    (2, 3, 1, 10, 10, (2, 2), (3, 3), (1, 0), (1, 1)),
    (1, 2, 1, 22, 24, (5, 3), (2, 1), (2, 1), (1, 2)),
    (3, 2, 2, 1, 13, (1, 3), (1, 2), (0, 1), (1, 1)),
    (1, 3, 1, 9, 11, (5, 5), (1, 1), (1, 2), (2, 1)),
    (2, 3, 1, 6, 5, (3, 3), (1, 1), (1, 1), (1, 1)),
    (1, 2, 1, 5, 34, (3, 3), (1, 1), (1, 1), (1, 1)),
]


def test_a_3x3_stride_1_window_runs_channels_last_only_on_the_narrowest_rows():
    nine, five = (3, 3, 1, 1, 1, 1, 1, 1), (5, 5, 1, 1, 2, 2, 1, 1)
    assert dk.channels_last(1, dk.NINE_CL_BELOW - 1, nine)
    assert not dk.channels_last(1, dk.NINE_CL_BELOW, nine)
    assert dk.channels_last(1, dk.NINE_CL_BELOW, five)          # other windows: WIDE_MIN
    assert not dk.channels_last(1, dk.WIDE_MIN, five) and not dk.channels_last(2, 5, nine)


def _out(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _operands(case, dtype, seed=0):
    n, c, m, h, w_, k, s, p, d = case
    rng = np.random.default_rng(seed)
    ho, wo = (_out(*a) for a in zip((h, w_), k, s, p, d))
    x = rng.standard_normal((n, c, h, w_)).astype(dtype)
    w = rng.standard_normal((c * m, 1) + k).astype(dtype)
    gy = rng.standard_normal((n, c * m, ho, wo)).astype(dtype)
    return x, w, gy, k + s + p + d


def _products(x, w, gy, geo, fns):
    """(forward, grad_input, grad_weight) by ``fns``, each into a NaN-filled output."""
    fwd, gin, gwt = fns
    return (fwd(x, w, np.full(gy.shape, np.nan, x.dtype), geo),
            gin(gy, w, np.full(x.shape, np.nan, x.dtype), geo),
            gwt(x, gy, np.full(w.shape, np.nan, x.dtype), geo))


REFS = (dk.depthwise_forward_ref, dk.depthwise_grad_input_ref, dk.depthwise_grad_weight_ref)
KERNELS = (dk.depthwise_forward_numba, dk.depthwise_grad_input_numba,
           dk.depthwise_grad_weight_numba)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernels_match_the_reference_within_the_rounding_bound(case, dtype):
    """|kernel - reference| <= (terms + 2) * eps * sum|terms| element by element: two
    summation orders of n terms differ by at most n eps sum|terms| (Higham 3.1), plus
    one rounding per product.  ``sum|terms|`` is the reference on absolute values in
    float64; the number of terms per element is the taps (times the multiplier for the
    input gradient, times the batch and output plane for the weight gradient)."""
    x, w, gy, geo = _operands(case, dtype)
    fast = _products(x, w, gy, geo, KERNELS)
    ref = _products(x, w, gy, geo, REFS)
    mag = _products(*(np.abs(a).astype(np.float64) for a in (x, w, gy)), geo, REFS)
    taps, mult = geo[0] * geo[1], w.shape[0] // x.shape[1]
    terms = (taps, taps * mult, x.shape[0] * gy.shape[2] * gy.shape[3])
    eps = np.finfo(dtype).eps
    for name, f, r, m, n in zip(("forward", "grad_input", "grad_weight"), fast, ref, mag,
                                terms):
        assert np.isfinite(f).all(), name
        bound = (n + 2) * eps * m
        assert (np.abs(f.astype(np.float64) - r) <= bound).all(), name


@pytest.mark.parametrize("case", CASES)
def test_references_agree_with_the_general_tap_loop(case):
    """The depthwise references against ``conv_direct``'s grouped references, float64."""
    x, w, gy, geo = _operands(case, np.float64, seed=1)
    c = x.shape[1]
    general = (cd.direct_forward_ref(x, w, np.zeros(gy.shape), geo, c),
               cd.direct_grad_input_ref(gy, w, np.zeros(x.shape), geo, c),
               cd.direct_grad_weight_ref(x, gy, np.zeros(w.shape), geo, c))
    for got, want in zip(_products(x, w, gy, geo, REFS), general):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_a_missing_tap_breaks_the_bound():
    """The bound above is tight enough to catch a kernel that drops one tap."""
    x, w, gy, geo = _operands(CASES[0], np.float32)
    w_drop = w.copy()
    w_drop[:, :, 1, 1] = 0
    fast = dk.depthwise_forward_numba(x, w_drop, np.empty(gy.shape, np.float32), geo)
    ref = dk.depthwise_forward_ref(x, w, np.empty(gy.shape, np.float32), geo)
    mag = dk.depthwise_forward_ref(np.abs(x).astype(float), np.abs(w).astype(float),
                                   np.empty(gy.shape), geo)
    assert (np.abs(fast - ref) > 11 * np.finfo(np.float32).eps * mag).any()


def test_dispatch_runs_the_reference_without_numba():
    x, w, gy, geo = _operands(CASES[3], np.float64)
    for fn, ref, args in ((dk.depthwise_forward, dk.depthwise_forward_ref, (x, w)),
                          (dk.depthwise_grad_input, dk.depthwise_grad_input_ref, (gy, w)),
                          (dk.depthwise_grad_weight, dk.depthwise_grad_weight_ref, (x, gy))):
        shape = {0: gy.shape, 1: x.shape, 2: w.shape}[REFS.index(ref)]
        slow = fn(*args, np.empty(shape), geo, use_numba=False)
        fast = fn(*args, np.empty(shape), geo, use_numba=True)
        np.testing.assert_array_equal(slow, ref(*args, np.empty(shape), geo))
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-12)


def f32(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


G3 = (3, 3, 1, 1, 1, 1, 1, 1)

# (call, error, message): one wrong argument each
REFUSALS = {
    "weight not (O, 1, kh, kw)": (
        lambda: dk.depthwise_forward_numba(f32(1, 4, 8, 8), f32(4, 2, 3, 3), f32(1, 4, 8, 8), G3),
        ValueError, r"depthwise_forward_numba: shapes do not agree: input \(1, 4, 8, 8\), "
                    r"weight \(4, 2, 3, 3\)"),
    "out channels not a multiple": (
        lambda: dk.depthwise_forward_numba(f32(1, 4, 8, 8), f32(6, 1, 3, 3), f32(1, 6, 8, 8), G3),
        ValueError, r"O a multiple of C"),
    "kernel size against geo": (
        lambda: dk.depthwise_forward_numba(f32(1, 4, 8, 8), f32(4, 1, 5, 5), f32(1, 4, 8, 8), G3),
        ValueError, r"with kernel \(3, 3\)"),
    "batch of the output": (
        lambda: dk.depthwise_grad_input_numba(f32(2, 4, 8, 8), f32(4, 1, 3, 3), f32(1, 4, 8, 8),
                                              G3),
        ValueError, r"depthwise_grad_input_numba: shapes do not agree"),
    "output larger than the input allows": (
        lambda: dk.depthwise_forward_numba(f32(1, 4, 8, 8), f32(4, 1, 3, 3), f32(1, 4, 30, 8), G3),
        ValueError, r"depthwise_forward_numba: output size \(30, 8\) does not fit input size "
                    r"\(8, 8\)"),
    "dtype mismatch": (
        lambda: dk.depthwise_grad_weight_numba(f32(1, 4, 8, 8), f32(1, 4, 8, 8),
                                               np.zeros((4, 1, 3, 3)), G3),
        TypeError, r"depthwise_grad_weight_numba: w must be float32, got dtype float64"),
    "integer arrays": (
        lambda: dk.depthwise_forward_numba(np.zeros((1, 4, 8, 8), np.int32),
                                           np.zeros((4, 1, 3, 3), np.int32),
                                           np.zeros((1, 4, 8, 8), np.int32), G3),
        TypeError, r"depthwise_forward_numba: x must hold floats, got dtype int32"),
    "not an array": (
        lambda: dk.depthwise_forward_numba([[1.0]], f32(4, 1, 3, 3), f32(1, 4, 8, 8), G3),
        TypeError, r"depthwise_forward_numba: x must be a NumPy array, got list"),
    "3-D input": (
        lambda: dk.depthwise_forward_numba(f32(4, 8, 8), f32(4, 1, 3, 3), f32(1, 4, 8, 8), G3),
        ValueError, r"depthwise_forward_numba: x must be 4-D, got shape \(4, 8, 8\)"),
    "geo length": (
        lambda: dk.depthwise_forward_numba(f32(1, 4, 8, 8), f32(4, 1, 3, 3), f32(1, 4, 8, 8),
                                           G3[:6]),
        ValueError, r"depthwise_forward_numba: geo must hold 8 ints, got 6"),
    "zero stride": (
        lambda: dk.depthwise_forward_numba(f32(1, 4, 8, 8), f32(4, 1, 3, 3), f32(1, 4, 8, 8),
                                           (3, 3, 0, 1, 1, 1, 1, 1)),
        ValueError, r"depthwise_forward_numba: stride must hold ints in \[1"),
}


@pytest.mark.parametrize("case", REFUSALS, ids=list(REFUSALS))
def test_wrappers_refuse_what_the_kernels_would_misread(case):
    call, error, message = REFUSALS[case]
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("case", [CASES[1], CASES[3]])
def test_parallel_launch_matches_the_serial_planes(case, threaded):
    """Above ``policy.serial_below`` the products run on Numba's pool in chunks of
    planes: the same numbers as one serial pass."""
    from lezero.runtime import policy
    x, w, gy, geo = _operands(case, np.float32)
    serial = _products(x, w, gy, geo, KERNELS)
    with policy.using(serial_below=0):
        parallel = _products(x, w, gy, geo, KERNELS)
    for a, b in zip(serial, parallel):
        np.testing.assert_array_equal(a, b)
