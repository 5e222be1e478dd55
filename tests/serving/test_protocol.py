"""KServe v2 wire format: JSON and binary tensors in, JSON and binary tensors out, and the
error for each malformed request."""
import json

import numpy as np
import pytest

from lezero.serving.protocol import (ProtocolError, datatype_of, deserialize_bytes,
                                     encode_infer_response, numpy_dtype,
                                     parse_infer_request, serialize_bytes)

pytestmark = pytest.mark.timeout(30)


def body(inputs, **extra):
    return json.dumps({"inputs": inputs, **extra}).encode()


def test_json_tensors_flat_or_nested():
    req = parse_infer_request(body([
        {"name": "a", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "b", "shape": [2, 2], "datatype": "INT64", "data": [[1, 2], [3, 4]]},
        {"name": "c", "shape": [2], "datatype": "BOOL", "data": [True, False]}],
        id="r1", outputs=[{"name": "y", "parameters": {"binary_data": True}}]))
    assert req.id == "r1" and list(req.inputs) == ["a", "b", "c"]
    assert req.inputs["a"].dtype == np.float32 and req.inputs["a"].shape == (2, 2)
    np.testing.assert_array_equal(req.inputs["b"], [[1, 2], [3, 4]])
    assert req.inputs["b"].dtype == np.int64 and req.inputs["c"].dtype == bool
    assert req.outputs == [("y", True)] and req.binary_output is False


def test_binary_tensors_follow_the_json_header():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = np.array([7, 8], dtype=np.int32)
    head = json.dumps({"inputs": [
        {"name": "x", "shape": [2, 3], "datatype": "FP32",
         "parameters": {"binary_data_size": x.nbytes}},
        {"name": "t", "shape": [2], "datatype": "INT32",
         "parameters": {"binary_data_size": t.nbytes}}],
        "parameters": {"binary_data_output": True}}).encode()
    req = parse_infer_request(head + x.tobytes() + t.tobytes(), str(len(head)))
    np.testing.assert_array_equal(req.inputs["x"], x)
    np.testing.assert_array_equal(req.inputs["t"], t)
    assert req.binary_output is True


def test_bytes_tensors_round_trip():
    raw = serialize_bytes(np.array([b"ab", "c\u00e9", b""], dtype=object))
    assert raw[:4] == (2).to_bytes(4, "little")
    assert list(deserialize_bytes(raw)) == [b"ab", "c\u00e9".encode(), b""]
    req = parse_infer_request(body([{"name": "s", "shape": [2], "datatype": "BYTES",
                                     "data": ["hi", "yo"]}]))
    assert list(req.inputs["s"]) == [b"hi", b"yo"]


def test_response_json_and_binary():
    y = np.array([[0.5, 1.5]], dtype=np.float32)
    text, header = encode_infer_response("m", "1", "r9", [("y", y, False)])
    assert header is None
    assert json.loads(text) == {"model_name": "m", "model_version": "1", "id": "r9",
                                "outputs": [{"name": "y", "datatype": "FP32",
                                             "shape": [1, 2], "data": [0.5, 1.5]}]}
    data, header = encode_infer_response("m", "1", "", [("y", y, True)])
    head = json.loads(data[:header])
    assert head["outputs"][0]["parameters"] == {"binary_data_size": 8}
    np.testing.assert_array_equal(np.frombuffer(data[header:], np.float32), y.ravel())


def test_datatype_names():
    assert datatype_of(np.float32) == "FP32" and datatype_of(np.int64) == "INT64"
    assert datatype_of(np.dtype(object)) == "BYTES" and datatype_of(bool) == "BOOL"
    assert numpy_dtype("FP16") == np.float16
    with pytest.raises(ProtocolError, match="unknown datatype 'FLOAT32'"):
        numpy_dtype("FLOAT32")


@pytest.mark.parametrize("raw, header, match", [
    (b"{not json", None, "not valid JSON"),
    (b"[1, 2]", None, "the request must be a JSON object"),
    (b'{"inputs": []}', None, "'inputs' must be a non-empty list"),
    (body([{"shape": [1], "datatype": "FP32", "data": [1]}]), None, "'name' must be"),
    (body([{"name": "x", "shape": [1], "datatype": "FP99", "data": [1]}]), None,
     "unknown datatype 'FP99'"),
    (body([{"name": "x", "shape": [-1], "datatype": "FP32", "data": [1]}]), None,
     "shape must be a list of non-negative ints"),
    (body([{"name": "x", "shape": [3], "datatype": "FP32", "data": [1, 2]}]), None,
     r"shape \[3\] needs 3 elements, got 2"),
    (body([{"name": "x", "shape": [2], "datatype": "FP32", "data": [1, "a"]}]), None,
     "FP32 data must be numbers"),
    (body([{"name": "x", "shape": [2], "datatype": "INT32", "data": [1.5, 2]}]), None,
     "INT32 data must be integers"),
    (body([{"name": "x", "shape": [1], "datatype": "UINT8", "data": [300]}]), None,
     "out of range for UINT8"),
    (body([{"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [[1, 2], [3]]}]),
     None, "regular"),
    (body([{"name": "x", "shape": [1], "datatype": "FP32"}]), None, "neither 'data'"),
    (body([{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]},
           {"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}]), None,
     "given twice"),
    (body([{"name": "x", "shape": [2], "datatype": "FP32",
            "parameters": {"binary_data_size": 8}}]), None, "runs past the end"),
    (body([{"name": "x", "shape": [2], "datatype": "FP32", "data": [1, 2]}]), "9999",
     "does not fit the body"),
    (body([{"name": "x", "shape": [2], "datatype": "FP32", "data": [1, 2]}]), "abc",
     "must be an int"),
    (body([{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}],
          outputs=[{"name": "y", "parameters": {"classification": 3}}]), None,
     "classification"),
])
def test_malformed_requests_raise_protocol_errors(raw, header, match):
    with pytest.raises(ProtocolError, match=match) as info:
        parse_infer_request(raw, header)
    assert info.value.status == 400


def test_binary_size_must_match_the_shape_and_leftover_bytes_are_refused():
    head = json.dumps({"inputs": [{"name": "x", "shape": [2], "datatype": "FP32",
                                   "parameters": {"binary_data_size": 4}}]}).encode()
    with pytest.raises(ProtocolError, match="needs 8 bytes, got binary_data_size 4"):
        parse_infer_request(head + b"\0" * 4, len(head))
    head = json.dumps({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32",
                                   "data": [1]}]}).encode()
    with pytest.raises(ProtocolError, match="3 bytes of binary data that no input claims"):
        parse_infer_request(head + b"abc", len(head))
