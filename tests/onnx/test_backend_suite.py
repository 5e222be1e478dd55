"""ONNX's own backend test suite (every node case) run against ``lezero.onnx.backend``.

``onnx.backend.test.BackendTest`` builds one test per node case and device; the cases
``lezero/onnx/backend_exclusions.txt`` lists are skipped with their reason.  The checks
below keep that file honest: no entry is stale (an excluded case that now passes fails),
every excluded case fails with a clear ``OnnxImportError`` rather than an answer, and no
case is silently wrong.  ``python tools/onnx_suite.py`` prints the per-operator table.
"""
import unittest

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import onnx.backend.test  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import lezero.onnx.backend as backend  # noqa: E402
from lezero.onnx import OnnxImportError, suite_table  # noqa: E402

EXCLUSIONS = suite_table.read_exclusions()
CASES = suite_table.node_cases()


def _excluded():
    """{case name: the first exclusion entry that matches it}."""
    found = {}
    for case in CASES:
        entry = suite_table.find_exclusion(EXCLUSIONS, case.model, case.name)
        if entry is not None:
            found[case.name] = entry
    return found


EXCLUDED = _excluded()


def _node_suite():
    """BackendTest's node test class, the excluded cases skipped with their reason."""
    tests = onnx.backend.test.BackendTest(backend, __name__).test_cases[
        "OnnxBackendNodeModelTest"]
    for name, entry in EXCLUDED.items():
        for device in ("cpu", "cuda"):
            method = getattr(tests, f"{name}_{device}", None)
            if method is not None:
                skip = unittest.skip(f"excluded ({entry.category}): {entry.reason}")
                setattr(tests, f"{name}_{device}", skip(method))
    return tests


OnnxBackendNodeModelTest = _node_suite()


# ----- the exclusion file ------------------------------------------------------------------

@pytest.fixture(scope="module")
def excluded_rows():
    """The excluded cases, classified as LeZero computes them now (outputs unchecked)."""
    cases = [c for c in CASES if c.name in EXCLUDED]
    return suite_table.classify(cases, EXCLUSIONS, with_onnxruntime=False)


def test_the_suite_is_onnx_node_suite():
    assert len(CASES) > 1500
    names = [n for n in dir(OnnxBackendNodeModelTest) if n.startswith("test_")]
    assert "test_abs_cpu" in names and len(names) == 2 * len(CASES)


def test_no_exclusion_is_stale(excluded_rows):
    passing = [r["name"] for r in excluded_rows if r["status"] == "pass"]
    assert not passing, (f"{len(passing)} excluded cases pass now; run `python "
                         f"tools/onnx_suite.py --write-exclusions`: {passing[:20]}")
    unused = [e.key for e in EXCLUSIONS if not any(
        suite_table.find_exclusion([e], c.model, c.name) for c in CASES)]
    assert not unused, f"exclusion entries that match no case: {unused[:20]}"


def test_every_excluded_case_fails_with_a_clear_error(excluded_rows):
    unclear = [f"{r['name']}: {r['detail'][:120]}" for r in excluded_rows
               if r["status"] == "error" and not r["detail"].startswith("OnnxImportError")]
    assert not unclear, "errors that are not an OnnxImportError naming the node:\n" + \
        "\n".join(unclear)


def test_no_case_is_silently_wrong(excluded_rows):
    wrong = [f"{r['name']} ({r['op']}): {r['detail']}" for r in excluded_rows
             if r["status"] == "WRONG"]
    listed = [e.key for e in EXCLUSIONS if e.category == "wrong-answer"]
    assert not wrong and not listed, "silently wrong answers:\n" + "\n".join(wrong)


# ----- the backend API ---------------------------------------------------------------------

def _model(node, inputs, outputs, opset=17):
    graph = helper.make_graph([node], "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _relu_model():
    return _model(helper.make_node("Relu", ["x"], ["y"]),
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])


def test_prepare_runs_a_model_from_proto_bytes_and_path(tmp_path):
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    path = tmp_path / "relu.onnx"
    onnx.save(_relu_model(), str(path))
    for source in (_relu_model(), _relu_model().SerializeToString(), str(path)):
        (y,) = backend.prepare(source).run([x])
        assert y.dtype == np.float32 and isinstance(y, np.ndarray)
        np.testing.assert_array_equal(y, np.maximum(x, 0))
    (y,) = backend.prepare(_relu_model()).run({"x": x})
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    np.testing.assert_array_equal(backend.run_model(_relu_model(), x)[0], np.maximum(x, 0))


def test_run_node_builds_a_model_from_the_inputs():
    node = helper.make_node("Add", ["a", "b"], ["c"])
    a, b = np.arange(6, dtype=np.int64).reshape(2, 3), np.array([10, 20, 30], np.int64)
    (c,) = backend.run_node(node, [a, b])
    assert c.dtype == np.int64
    np.testing.assert_array_equal(c, a + b)
    (c,) = backend.run_node(node, [a, b], outputs_info=[(np.int64, (2, 3))],
                            opset_version=13)
    np.testing.assert_array_equal(c, a + b)
    with pytest.raises(TypeError, match="names 2 inputs, got 1"):
        backend.run_node(node, [a])


def test_devices():
    assert backend.supports_device("CPU")
    assert not backend.supports_device("TPU")
    with pytest.raises(ValueError, match="device 'TPU' is not available"):
        backend.prepare(_relu_model(), "TPU")


def test_inputs_are_checked_against_the_declaration():
    rep = backend.prepare(_relu_model())
    with pytest.raises(TypeError, match="input 'x' is declared FLOAT, got .* float64"):
        rep.run([np.zeros((2, 3))])
    with pytest.raises(TypeError, match="takes 1 inputs"):
        rep.run([])
    with pytest.raises(TypeError, match="no value for input 'x'"):
        rep.run({"z": np.zeros((2, 3), np.float32)})


def test_an_output_unlike_its_declaration_is_an_error_not_an_answer():
    x = np.ones((2, 3), np.float32)
    as_int = _model(helper.make_node("Relu", ["x"], ["y"]),
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                    [helper.make_tensor_value_info("y", TensorProto.INT64, [2, 3])])
    with pytest.raises(OnnxImportError, match=r"output 'y' has dtype float32; .* INT64"):
        backend.prepare(as_int).run([x])
    wrong_shape = _model(helper.make_node("Relu", ["x"], ["y"]),
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, "n"])])
    with pytest.raises(OnnxImportError, match=r"shape \(2, 3\); the model declares \(3, \?\)"):
        backend.prepare(wrong_shape).run([x])
    (y,) = backend.prepare(as_int, check=False).run([x])       # what LeZero computed
    assert y.dtype == np.float32


@pytest.mark.parametrize("value_info,words", [
    (helper.make_tensor_value_info("x", TensorProto.FLOAT8E4M3FN, [2]),
     "has type FLOAT8E4M3FN, which LeZero does not support"),
    (helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, [2]),
     "is a sequence_type; LeZero runs tensors only"),
])
def test_types_lezero_has_no_arrays_for_are_refused(value_info, words):
    model = _model(helper.make_node("Identity", ["x"], ["y"]), [value_info],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(OnnxImportError, match=words):
        backend.prepare(model)


# ----- the classifier and the exclusion file -----------------------------------------------

def _case(name):
    return next(c for c in CASES if c.name == name)


def test_classify_and_regenerate(tmp_path):
    cases = [_case("test_abs"), _case("test_tfidfvectorizer_tf_batch_onlybigrams_skip0")]
    missing = suite_table.Exclusion("op:TfIdfVectorizer", "unsupported-op", "hand-written reason")
    rows = suite_table.classify(cases, [missing], with_onnxruntime=True)
    abs_row, topk = rows
    assert (abs_row["status"], abs_row["op"], abs_row["excluded"]) == ("pass", "Abs", None)
    assert abs_row["onnxruntime"] == "pass" and abs_row["supported"]
    assert topk["status"] == "error" and topk["excluded"] == "unsupported-op"
    assert suite_table.error_category(topk) == "unsupported-op"
    entries = suite_table.regenerate_exclusions(rows, [missing])
    assert entries == [missing]                    # the reason written by hand stays
    path = tmp_path / "exclusions.txt"
    suite_table.write_exclusions(entries, str(path))
    assert suite_table.read_exclusions(str(path)) == entries
    table = suite_table.markdown_table(rows)
    assert "| all node cases | 1 of 2 (50.0%) | onnxruntime passes 2 |" in table
    assert "| TfIdfVectorizer | 1 | 0 | 1 | 0 | 1 |" in table


def test_a_wrong_answer_is_told_apart_from_an_error():
    case = _case("test_abs")
    assert suite_table._differs([np.ones(2, np.float32)], [np.ones(2, np.float64)]) == \
        "output 0: dtype float64, expected float32"
    assert "shape (3,), expected (2,)" in suite_table._differs([np.ones(2)], [np.ones(3)])
    assert "values differ" in suite_table._differs([np.ones(2)], [np.zeros(2)])
    status, detail = suite_table._run(case, lambda m, xs: [-np.abs(xs[0])])
    assert status == "WRONG" and "values differ" in detail
    row = {"name": case.name, "status": status, "detail": detail}
    assert suite_table.error_category(row) == "wrong-answer"


def test_a_malformed_exclusion_line_is_refused(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("test_abs | not-a-category | why\n")
    with pytest.raises(ValueError, match="bad.txt:1: expected 'KEY | CATEGORY | REASON'"):
        suite_table.read_exclusions(str(path))
