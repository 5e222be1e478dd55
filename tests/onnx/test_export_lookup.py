"""A lookup in a constant table with indices that are an input (``F.embedding``,
``F.take``, ``F.gather`` on a NumPy array) exports as Gather: the trace records it
instead of folding this run's rows into a constant, so other indices fed to the file
give other rows."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import lezero.functions as F  # noqa: E402
from lezero import onnx as lonnx  # noqa: E402
from lezero.onnx.validate import ort_session  # noqa: E402

TABLE = np.arange(24, dtype=np.float32).reshape(6, 4) * 0.5 - 3.0   # a constant, no Parameter

LOOKUPS = {
    "embedding": (lambda i: F.embedding(i, TABLE), np.array([[1, 4], [0, 0]]),
                  np.array([[5, 2], [3, 1], [2, 2]]), lambda i: TABLE[i], "Gather"),
    "take": (lambda i: F.take(TABLE, i, axis=0), np.array([2, 0, 5]),
             np.array([4, 4, 1, 3, 0]), lambda i: TABLE[i], "Gather"),
    "gather": (lambda i: F.gather(TABLE, 0, i), np.array([[1, 2, 3, 4], [0, 5, 5, 0]]),
               np.array([[5, 0, 1, 2], [3, 3, 2, 1], [4, 1, 0, 5]]),
               lambda i: np.take_along_axis(TABLE, i, axis=0), "GatherElements"),
}


@pytest.mark.parametrize("name", sorted(LOOKUPS))
def test_lookup_in_a_constant_table_follows_the_indices(tmp_path, name):
    fn, example, other, want, op = LOOKUPS[name]
    path = str(tmp_path / f"{name}.onnx")
    report = lonnx.export(fn, example, path, dynamic_axes={"input_0": {0: "n"}})
    assert op in report.ops
    with open(path, "rb") as f:
        got = ort_session(f.read()).run(None, {"input_0": other})[0]
    np.testing.assert_array_equal(got, want(other))
    np.testing.assert_array_equal(fn(other).data, want(other))
