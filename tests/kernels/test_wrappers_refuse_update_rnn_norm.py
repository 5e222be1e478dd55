"""The Python wrappers of the Numba kernels that read without bounds checks (issue 32):
Adam, axpby, the LSTM step and chunked loop, layer norm.  Each wrapper checks every shape,
length, index range, dtype and contiguity its kernel relies on; here each is called
directly with one wrong and must raise a clear error naming the argument -- before any
kernel touches memory it does not own.

What each kernel relies on (and is checked):

* ``adam_step_numba`` / ``adam_step_``: grad and the moments of the parameter's shape; for
  the kernel, NumPy arrays of the parameter's floating dtype, C-contiguous, the parameter
  and moments writeable; ``beta1``/``beta2`` in [0, 1); ``step`` an int >= 1.
* ``axpby_numba``: x and y C-contiguous float32/float64 NumPy arrays of one shape and
  dtype, y writeable.
* ``lstm_cell_numba`` / ``lstm_cell_grad_numba``: float32 arrays, gates (B, 4H), states and
  saved rows (B, H) (the upstream gradient any float dtype).
* ``lstm_parts.forward`` / ``backward``: w_hh float32 (4H, H), gates (rows, 4H), saved rows
  (rows, H), states (B, H), every step inside the rows with 1 <= size <= B, 1 <= parts <=
  H; the arrays BLAS reads by pointer (w_hh, dh, d) C-contiguous.
* ``layer_norm_numba`` / ``layer_norm_grad_numba``: x float32/float64 of rows of
  ``weight.size`` (> 0) values, bias of that size, gy of x's shape, mean/rstd one per row.
"""
import numpy as np
import pytest

from lezero import kernels
from lezero.kernels import adam, axpy, layernorm, lstm, lstm_parts

pytestmark = pytest.mark.skipif(not kernels.numba_available(), reason="needs Numba")

F32 = np.float32
HYPER = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False,
             maximize=False, step=1)


# ----- Adam ---------------------------------------------------------------------------------
def adam_arrays(shape=(300, 300), dtype=F32):
    return [np.ones(shape, dtype), np.ones(shape, dtype), np.zeros(shape, dtype),
            np.zeros(shape, dtype), np.zeros(shape, dtype)]


@pytest.mark.parametrize("fn", [adam.adam_step_numba, adam.adam_step_],
                         ids=["adam_step_numba", "adam_step_"])
@pytest.mark.parametrize("slot,name", [(1, "grad"), (2, "exp_avg"), (3, "exp_avg_sq"),
                                       (4, "max_exp_avg_sq")])
def test_adam_refuses_an_array_of_another_shape(fn, slot, name):
    arrays = adam_arrays()
    arrays[slot] = np.zeros((1, 300), F32)                 # the (1, 300) buffer
    with pytest.raises(ValueError, match=rf"{fn.__name__}: {name} has shape \(1, 300\), the "
                                         rf"parameter \(300, 300\)"):
        fn(*arrays, **HYPER)
    assert (arrays[0] == 1).all()                          # nothing was written


@pytest.mark.parametrize("key,value,match", [
    ("step", 0, "step must be an int >= 1, got 0"),
    ("step", 1.5, "step must be an int >= 1, got 1.5"),
    ("beta1", 1.0, r"beta1 must be in \[0, 1\), got 1.0"),
    ("beta2", -0.1, r"beta2 must be in \[0, 1\), got -0.1"),
])
def test_adam_refuses_bad_hyperparameters(key, value, match):
    for fn in (adam.adam_step_numba, adam.adam_step_):
        with pytest.raises(ValueError, match=f"{fn.__name__}: {match}"):
            fn(*adam_arrays((4,)), **dict(HYPER, **{key: value}))


def test_adam_kernel_refuses_dtypes_layouts_and_read_only_arrays():
    arrays = adam_arrays((4, 4))
    arrays[2] = arrays[2].astype(np.float64)
    with pytest.raises(TypeError, match="adam_step_numba: exp_avg has dtype float64"):
        adam.adam_step_numba(*arrays, **HYPER)
    arrays = adam_arrays((4, 4))
    arrays[3] = np.zeros((4, 8), F32)[:, ::2]
    with pytest.raises(ValueError, match="adam_step_numba: exp_avg_sq must be a C-contiguous"):
        adam.adam_step_numba(*arrays, **HYPER)
    arrays = adam_arrays((4, 4))
    arrays[0].flags.writeable = False
    with pytest.raises(ValueError, match="adam_step_numba: param must be a C-contiguous, "
                                         "writeable array"):
        adam.adam_step_numba(*arrays, **HYPER)
    with pytest.raises(TypeError, match="adam_step_numba: param must be a NumPy array"):
        adam.adam_step_numba([1.0], *adam_arrays((1,))[1:], **HYPER)


def test_adam_dispatcher_takes_strided_arrays_through_the_reference():
    arrays = adam_arrays((4, 4))
    strided = np.zeros((4, 8), F32)[:, ::2]
    arrays[2] = strided
    adam.adam_step_(*arrays, **HYPER)
    ref = adam_arrays((4, 4))
    adam.adam_step_ref(*ref, **HYPER)
    np.testing.assert_array_equal(arrays[0], ref[0])
    np.testing.assert_array_equal(strided, ref[2])       # updated in place, not in a copy


# ----- axpby -------------------------------------------------------------------------------
@pytest.mark.parametrize("y,x,match", [
    (np.ones(1000, F32), np.ones(10, F32), r"y \(1000,\) float32, x \(10,\) float32"),
    (np.ones((4, 4), F32), np.ones(16, F32), r"y \(4, 4\) float32, x \(16,\) float32"),
    (np.ones(8, F32), np.ones(8, np.float64), "x .8,. float64"),
    (np.ones(8, np.int32), np.ones(8, np.int32), "y .8,. int32"),
    (np.ones(16, F32)[::2], np.ones(8, F32), "C-contiguous"),
    (np.ones(8, F32), [1.0] * 8, "x list"),
])
def test_axpby_numba_refuses_what_the_kernel_cannot_walk(y, x, match):
    before = np.array(y, copy=True)
    with pytest.raises(ValueError, match="^axpby_numba: y and x must be .*" + match):
        axpy.axpby_numba(y, 1.0, x, 0.5)
    np.testing.assert_array_equal(y, before)


def test_axpby_numba_refuses_a_read_only_y_and_axpby_falls_back():
    y = np.ones(8, F32)
    y.flags.writeable = False
    with pytest.raises(ValueError, match="axpby_numba: .*y writeable"):
        axpy.axpby_numba(y, 1.0, np.ones(8, F32), 0.5)
    assert not axpy.fits(y, np.ones(8, F32))
    strided = np.ones(16, F32)[::2]
    axpy.axpby_(strided, 2.0, np.ones(8, F32), 0.5)       # the reference: in place
    np.testing.assert_array_equal(strided, 2.5)


# ----- LSTM step ---------------------------------------------------------------------------
B, H = 3, 8


def cell_arrays():
    wide = [np.zeros((B, 4 * H), F32) for _ in range(2)]
    return wide + [np.zeros((B, H), F32) for _ in range(6)]


CELL = ["g", "hw", "c", "c_prev", "tanh_c", "y", "h", "h_prev"]
GRAD = ["g", "tanh_c", "c_prev", "gy", "dh", "dc", "dg"]


def grad_arrays():
    return [np.zeros((B, 4 * H), F32)] + [np.zeros((B, H), F32) for _ in range(5)] + \
        [np.zeros((B, 4 * H), F32)]


@pytest.mark.parametrize("slot", range(len(CELL)), ids=CELL)
def test_lstm_cell_numba_refuses_each_wrong_shape(slot):
    arrays = cell_arrays()
    arrays[slot] = arrays[slot][:B - 1]
    # B and H are read from c: a wrong c shows as the arrays that disagree with it
    named = CELL[slot] if slot != 2 else r"g must have shape \(2, 32\) \(B = 2, H = 8 from c\)"
    with pytest.raises(ValueError, match=f"lstm_cell_numba: {named}"):
        lstm.lstm_cell_numba(*arrays)
    arrays = cell_arrays()
    arrays[slot] = arrays[slot].astype(np.float64)
    with pytest.raises(TypeError, match=f"lstm_cell_numba: {CELL[slot]} must be a float32"):
        lstm.lstm_cell_numba(*arrays)


@pytest.mark.parametrize("slot", range(len(GRAD)), ids=GRAD)
def test_lstm_cell_grad_numba_refuses_each_wrong_shape(slot):
    arrays = grad_arrays()
    arrays[slot] = arrays[slot][:, :H - 1] if slot in (1, 2, 3, 5) else arrays[slot][:B - 1]
    named = GRAD[slot] if slot != 4 else r"g must have shape \(2, 32\) \(B = 2, H = 8 from dh\)"
    with pytest.raises(ValueError, match=f"lstm_cell_grad_numba: {named}"):
        lstm.lstm_cell_grad_numba(*arrays)


def test_lstm_cell_grad_numba_takes_a_float64_upstream_gradient():
    arrays = grad_arrays()
    arrays[3] = np.ones((B, H), np.float64)
    lstm.lstm_cell_grad_numba(*arrays)
    np.testing.assert_array_equal(arrays[4], 1.0)        # dh += gy


# ----- LSTM chunked loop -------------------------------------------------------------------
ROWS = 5          # batch sizes [3, 2]


def parts_forward(**change):
    a = dict(gates=np.zeros((ROWS, 4 * H), F32), w_hh=np.zeros((4 * H, H), F32),
             h=np.zeros((B, H), F32), c=np.zeros((B, H), F32), steps=[(0, 3), (3, 2)],
             parts=2, saved=tuple(np.zeros((ROWS, H), F32) for _ in range(4)))
    a.update(change)
    return lstm_parts.forward(**a)


def parts_backward(**change):
    a = dict(gates=np.zeros((ROWS, 4 * H), F32), tanh_c=np.zeros((ROWS, H), F32),
             c_prev=np.zeros((ROWS, H), F32), gy=np.zeros((ROWS, H), F32),
             w_hh=np.zeros((4 * H, H), F32), dh=np.zeros((B, H), F32),
             dc=np.zeros((B, H), F32), d=np.zeros((ROWS, 4 * H), F32),
             steps=[(3, 2), (0, 3)], parts=2)
    a.update(change)
    return lstm_parts.backward(**a)


@pytest.mark.parametrize("run", [parts_forward, parts_backward],
                         ids=["forward", "backward"])
@pytest.mark.parametrize("change,match", [
    (dict(steps=[(0, 3), (3, 3)]), r"step \(offset 3, size 3\) is outside the 5 rows"),
    (dict(steps=[(0, 4), (4, 1)]), r"step \(offset 0, size 4\) is outside .* batch of 3"),
    (dict(steps=[(0, 3), (3, 0)]), r"step \(offset 3, size 0\)"),
    (dict(steps=[(-1, 3)]), r"step \(offset -1, size 3\)"),
    (dict(parts=0), r"parts must be in \[1, 8\], got 0"),
    (dict(parts=9), r"parts must be in \[1, 8\], got 9"),
    (dict(w_hh=np.zeros((4 * H, H + 1), F32)), r"w_hh must be a float32 \(4H, H\) array"),
    (dict(gates=np.zeros((ROWS - 1, 4 * H), F32)), "gates must have shape"),
])
def test_lstm_parts_refuse_steps_and_shapes_outside_the_arrays(run, change, match):
    with pytest.raises(ValueError, match=f"lstm_parts.{run.__name__[6:]}: {match}"):
        run(**change)


def test_lstm_parts_refuse_wrong_saved_state_and_layouts():
    with pytest.raises(ValueError, match="lstm_parts.forward: c must have shape"):
        parts_forward(c=np.zeros((B - 1, H), F32))
    with pytest.raises(ValueError, match="lstm_parts.forward: y must have shape"):
        parts_forward(saved=tuple(np.zeros((ROWS, H), F32) for _ in range(2))
                      + (np.zeros((ROWS - 1, H), F32), np.zeros((ROWS, H), F32)))
    with pytest.raises(ValueError, match="lstm_parts.backward: dh must be C-contiguous"):
        parts_backward(dh=np.zeros((H, B), F32).T)
    with pytest.raises(ValueError, match="lstm_parts.backward: d must have shape"):
        parts_backward(d=np.zeros((ROWS, 4 * H - 1), F32))
    with pytest.raises(ValueError, match="lstm_parts.backward: d must be C-contiguous"):
        parts_backward(d=np.zeros((4 * H, ROWS), F32).T)
    with pytest.raises(ValueError, match="lstm_parts.backward: gy must have shape"):
        parts_backward(gy=np.zeros((ROWS - 2, H), F32))


# ----- layer norm --------------------------------------------------------------------------
def test_layer_norm_numba_refuses_what_its_rows_do_not_fit():
    x, w = np.ones((4, 6), F32), np.ones(6, F32)
    with pytest.raises(ValueError, match=r"layer_norm_numba: bias must have size 6 for x of "
                                         r"shape \(4, 6\) \(6 values per row\), got shape"):
        layernorm.layer_norm_numba(x, w, np.zeros(2, F32), 1e-5)
    with pytest.raises(ValueError, match="layer_norm_numba: x of shape .* must be rows of "
                                         "weight.size = 5"):
        layernorm.layer_norm_numba(x, np.ones(5, F32), np.zeros(5, F32), 1e-5)
    with pytest.raises(ValueError, match="weight.size = 0 values .weight non-empty"):
        layernorm.layer_norm_numba(np.ones((4, 0), F32), np.ones(0, F32), np.ones(0, F32), 0.)
    with pytest.raises(TypeError, match="layer_norm_numba: x must be a float32 or float64"):
        layernorm.layer_norm_numba(x.astype(np.int64), w, w, 1e-5)
    with pytest.raises(TypeError, match="layer_norm_numba: weight must be a floating NumPy"):
        layernorm.layer_norm_numba(x, [1.0] * 6, w, 1e-5)


@pytest.mark.parametrize("change,match", [
    (dict(gy=np.ones((4, 5), F32)), r"gy must have shape \(4, 6\)"),
    (dict(mean=np.zeros(3, F32)), r"mean must have shape \(4,\)"),
    (dict(rstd=np.zeros(40, F32)), r"rstd must have shape \(4,\)"),
    (dict(weight=np.ones(5, F32)), r"x of shape \(4, 6\) must be rows of weight.size = 5"),
    (dict(gy=np.ones((4, 6), np.int32)), "gy must be a floating NumPy array"),
])
def test_layer_norm_grad_numba_refuses_each_wrong_one(change, match):
    a = dict(x=np.ones((4, 6), F32), gy=np.ones((4, 6), F32), weight=np.ones(6, F32),
             mean=np.zeros(4, F32), rstd=np.ones(4, F32))
    a.update(change)
    with pytest.raises((TypeError, ValueError), match="layer_norm_grad_numba: " + match):
        layernorm.layer_norm_grad_numba(**a)


def test_adam_takes_a_transposed_gradient_on_the_kernel(monkeypatch):
    """A weight used transposed gets an F-ordered gradient: the dispatcher copies it once
    and runs the kernel (not the ~12-pass reference), with the reference's numbers."""
    rng = np.random.default_rng(0)
    p = rng.standard_normal((6, 5)).astype(np.float32)
    g = np.asfortranarray(rng.standard_normal((6, 5)).astype(np.float32))
    hyper = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=1,
                 decoupled=True, maximize=False)
    want = [p.copy(), np.zeros_like(p), np.zeros_like(p)]
    adam.adam_step_ref(want[0], g, want[1], want[2], None, **hyper)
    monkeypatch.setattr(adam, "adam_step_ref", lambda *a, **k: pytest.fail("reference ran"))
    got = [p.copy(), np.zeros_like(p), np.zeros_like(p)]
    adam.adam_step_(got[0], g, got[1], got[2], None, **hyper)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
