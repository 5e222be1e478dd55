"""GridSample's cubic mode and 5-D (volumetric) inputs (lezero/onnx/import_extra.py):
one-node models imported by LeZero equal ONNX's reference evaluator for every padding
mode and both corner alignments; sampling is differentiable in x; a grid that needs a
gradient there, and unknown modes, are errors naming the operator."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from lezero.core import Variable  # noqa: E402
from lezero.onnx.importer import OnnxImportError  # noqa: E402
from lezero.testing import check_gradient  # noqa: E402
from tests.onnx.test_import_new_ops import _compare, _load, _model, _randn  # noqa: E402


def _grid(*shape, dtype=np.float32):
    """Normalized coordinates reaching past the borders (-1.3 .. 1.3)."""
    return (np.random.default_rng(5).uniform(-1.3, 1.3, shape)).astype(dtype)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_bicubic_matches_reference(padding, align, tmp_path):
    x, grid = _randn(2, 3, 4, 5), _grid(2, 3, 6, 2)
    attrs = {"mode": "cubic", "padding_mode": padding, "align_corners": align}
    _compare(_model("GridSample", {"x": x, "grid": grid}, attrs, opset=20),
             {"x": x, "grid": grid}, tmp_path, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_volumetric_matches_reference(mode, padding, tmp_path):
    x, grid = _randn(1, 2, 3, 4, 3), _grid(1, 2, 3, 2, 3)
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": int(mode == "linear")}
    _compare(_model("GridSample", {"x": x, "grid": grid}, attrs, opset=20),
             {"x": x, "grid": grid}, tmp_path, rtol=1e-5, atol=1e-5)


def test_bicubic_at_the_pixel_centres_returns_the_pixels(tmp_path):
    """With align_corners=1 the grid -1, 0, 1 hits pixels 0, 1, 2 exactly."""
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    g = np.stack(np.meshgrid([-1.0, 0.0, 1.0], [-1.0, 0.0, 1.0]), -1)[None].astype(
        np.float32)
    model = _model("GridSample", {"x": x, "grid": g}, {"mode": "cubic", "align_corners": 1},
                   opset=20)
    np.testing.assert_allclose(_load(model, tmp_path)(x, g).data, x, atol=1e-6)


@pytest.mark.parametrize("mode, shape, grid_shape", [
    ("cubic", (1, 2, 4, 4), (1, 3, 3, 2)), ("linear", (1, 1, 3, 3, 3), (1, 2, 2, 2, 3))])
def test_sampling_is_differentiable_in_x(mode, shape, grid_shape, tmp_path):
    x, grid = _randn(*shape, dtype=np.float64), _grid(*grid_shape, dtype=np.float64)
    model = _model("GridSample", {"x": x, "grid": grid},
                   {"mode": mode, "padding_mode": "border"}, opset=20)
    module = _load(model, tmp_path)
    check_gradient(lambda v: module(v, grid), x, rtol=1e-4, atol=1e-6)


def test_a_grid_needing_a_gradient_is_refused(tmp_path):
    x, grid = _randn(1, 1, 3, 3), _grid(1, 2, 2, 2)
    model = _model("GridSample", {"x": x, "grid": grid}, {"mode": "cubic"}, opset=20)
    with pytest.raises(OnnxImportError, match="GridSample cubic.*gradients with respect to "
                                              "the grid"):
        _load(model, tmp_path)(x, Variable(grid))


@pytest.mark.parametrize("attrs, x_shape, grid_shape, why", [
    ({"mode": "area"}, (1, 1, 3, 3), (1, 2, 2, 2), "mode 'area'"),
    ({}, (1, 3, 3), (1, 2, 2), "on a 3-D input"),
    ({}, (1, 1, 3, 3), (1, 2, 2, 3), "grid of shape"),
])
def test_unsupported_sampling_is_an_error(attrs, x_shape, grid_shape, why, tmp_path):
    x, grid = _randn(*x_shape), _grid(*grid_shape)
    model = _model("GridSample", {"x": x, "grid": grid}, attrs, opset=20)
    with pytest.raises(OnnxImportError, match=f"GridSample.*{why}"):
        _load(model, tmp_path)(x, grid)
