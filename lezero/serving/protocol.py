"""The KServe v2 / Open Inference Protocol wire format: JSON tensors <-> NumPy arrays.

An inference request is a JSON object ``{"id": ..., "inputs": [{"name", "shape",
"datatype", "data"}], "outputs": [{"name", "parameters": {"binary_data": bool}}],
"parameters": {...}}``; ``data`` is a flat or nested list in row-major order.  The
*binary tensor data* extension (Triton's, which ``tritonclient`` uses by default) puts
the raw little-endian bytes of a tensor after the JSON instead: the input says
``"parameters": {"binary_data_size": n}`` and the HTTP header
``Inference-Header-Content-Length`` gives the JSON's length.  Responses use the same
forms.  ``BYTES`` tensors are strings (in binary form each element is a 4-byte
little-endian length followed by its bytes).

Everything a client can get wrong raises ``ProtocolError`` (an HTTP 400) naming the
input and what was wrong.
"""
import dataclasses
import functools
import json
import math
import struct

import numpy as np

__all__ = ["DATATYPES", "ProtocolError", "InferRequest", "numpy_dtype", "datatype_of",
           "parse_infer_request", "encode_infer_response", "serialize_bytes",
           "deserialize_bytes"]

DATATYPES = {"BOOL": "bool", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32",
             "UINT64": "uint64", "INT8": "int8", "INT16": "int16", "INT32": "int32",
             "INT64": "int64", "FP16": "float16", "FP32": "float32", "FP64": "float64",
             "BF16": "bfloat16", "BYTES": "object"}
_BY_DTYPE = {v: k for k, v in DATATYPES.items()}
MAX_RANK = 32


class ProtocolError(ValueError):
    """A request the server cannot accept; ``status`` is its HTTP code (400 unless
    said otherwise)."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


def numpy_dtype(datatype):
    """The NumPy dtype of a protocol datatype name (``"FP32"`` -> float32)."""
    if not isinstance(datatype, str) or datatype not in DATATYPES:
        raise ProtocolError(f"unknown datatype {datatype!r}; the protocol's are "
                            f"{', '.join(DATATYPES)}")
    if datatype == "BF16":
        try:
            import ml_dtypes
        except ImportError:
            raise ProtocolError("BF16 tensors need ml_dtypes on the server "
                                "(pip install lezero[amp])") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(DATATYPES[datatype])


def datatype_of(dtype):
    """The protocol datatype name of a NumPy dtype (strings and bytes are ``BYTES``)."""
    return _datatype_of(np.dtype(dtype))


@functools.lru_cache(maxsize=64)
def _datatype_of(dtype):
    if dtype.kind in "OSU":
        return "BYTES"
    name = _BY_DTYPE.get(dtype.name)
    if name is None:
        raise TypeError(f"serving: dtype {dtype} has no KServe v2 datatype")
    return name


@dataclasses.dataclass
class InferRequest:
    """A parsed inference request: ``inputs`` maps names to arrays (request order);
    ``outputs`` lists ``(name, binary)`` pairs or is None (all outputs)."""

    id: str
    inputs: dict
    outputs: list
    parameters: dict
    binary_output: bool


def _object(value, what):
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def _shape(spec, name):
    shape = spec.get("shape")
    if (not isinstance(shape, list) or len(shape) > MAX_RANK
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                       for d in shape)):
        raise ProtocolError(f"input {name!r}: shape must be a list of non-negative "
                            f"ints, got {shape!r}")
    return tuple(shape)


def _json_tensor(data, name, datatype, dtype, shape):
    """An array from JSON ``data`` (flat or nested), checked element by element."""
    count = math.prod(shape)
    if datatype == "BYTES":
        flat = np.array(data, dtype=object).reshape(-1) if data != [] else np.array([])
        if flat.size != count or not all(isinstance(v, str) for v in flat):
            raise ProtocolError(f"input {name!r}: BYTES data must be {count} strings")
        return np.array([v.encode("utf-8") for v in flat], dtype=object).reshape(shape)
    try:
        arr = np.array(data)
    except (ValueError, TypeError, OverflowError):
        raise ProtocolError(f"input {name!r}: data must be a regular (nested) list of "
                            "numbers") from None
    if arr.size == 0:
        arr = arr.astype(dtype)
    allowed = {"b": "b", "u": "iu", "i": "iu"}.get(dtype.kind, "iuf")
    if arr.dtype.kind not in allowed:
        kind = {"b": "booleans", "u": "integers", "i": "integers"}.get(dtype.kind, "numbers")
        raise ProtocolError(f"input {name!r}: {datatype} data must be {kind}, got "
                            f"elements of kind {arr.dtype}")
    if arr.size != count:
        raise ProtocolError(f"input {name!r}: shape {list(shape)} needs {count} "
                            f"elements, got {arr.size}")
    if dtype.kind in "iu" and arr.size:
        info = np.iinfo(dtype)
        if arr.min() < info.min or arr.max() > info.max:
            raise ProtocolError(f"input {name!r}: values out of range for {datatype}")
    return arr.reshape(-1).astype(dtype).reshape(shape)


def _binary_tensor(buffer, offset, size, name, datatype, dtype, shape):
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ProtocolError(f"input {name!r}: binary_data_size must be a non-negative "
                            f"int, got {size!r}")
    if offset + size > len(buffer):
        raise ProtocolError(f"input {name!r}: binary_data_size {size} runs past the end "
                            f"of the body ({len(buffer) - offset} bytes left)")
    raw = buffer[offset:offset + size]
    if datatype == "BYTES":
        arr = deserialize_bytes(raw, name)
        if arr.size != math.prod(shape):
            raise ProtocolError(f"input {name!r}: shape {list(shape)} needs "
                                f"{math.prod(shape)} strings, got {arr.size}")
        return arr.reshape(shape)
    expected = math.prod(shape) * dtype.itemsize
    if size != expected:
        raise ProtocolError(f"input {name!r}: shape {list(shape)} of {datatype} needs "
                            f"{expected} bytes, got binary_data_size {size}")
    wire = dtype.newbyteorder("<")
    arr = np.frombuffer(raw, dtype=wire)     # a read-only view of the body: the batcher
    if wire != dtype:                        # stacks (copies) it anyway
        arr = arr.astype(dtype)
    return arr.reshape(shape)


def _parse_inputs(specs, buffer):
    if not isinstance(specs, list) or not specs:
        raise ProtocolError("'inputs' must be a non-empty list of tensors")
    inputs, offset = {}, 0
    for i, spec in enumerate(specs):
        spec = _object(spec, f"inputs[{i}]")
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise ProtocolError(f"inputs[{i}]: 'name' must be a non-empty string")
        if name in inputs:
            raise ProtocolError(f"input {name!r} is given twice")
        datatype = spec.get("datatype")
        dtype = numpy_dtype(datatype)
        shape = _shape(spec, name)
        params = _object(spec.get("parameters") or {}, f"input {name!r}: parameters")
        if "shared_memory_region" in params:
            raise ProtocolError(f"input {name!r}: shared memory is not supported")
        if "binary_data_size" in params:
            size = params["binary_data_size"]
            inputs[name] = _binary_tensor(buffer, offset, size, name, datatype, dtype,
                                          shape)
            offset += size
        elif "data" in spec:
            inputs[name] = _json_tensor(spec["data"], name, datatype, dtype, shape)
        else:
            raise ProtocolError(f"input {name!r} has neither 'data' nor "
                                "parameters.binary_data_size")
    if offset != len(buffer):
        raise ProtocolError(f"the body has {len(buffer) - offset} bytes of binary data "
                            "that no input claims")
    return inputs


def _parse_outputs(specs):
    if specs is None:
        return None
    if not isinstance(specs, list):
        raise ProtocolError("'outputs' must be a list")
    out = []
    for i, spec in enumerate(specs):
        spec = _object(spec, f"outputs[{i}]")
        name = spec.get("name")
        if not isinstance(name, str):
            raise ProtocolError(f"outputs[{i}]: 'name' must be a string")
        params = _object(spec.get("parameters") or {}, f"output {name!r}: parameters")
        if "classification" in params or "shared_memory_region" in params:
            raise ProtocolError(f"output {name!r}: classification and shared memory "
                                "outputs are not supported")
        out.append((name, params.get("binary_data")))
    return out


def parse_infer_request(body, header_length=None):
    """An ``InferRequest`` from an HTTP body (``header_length``: the value of the
    ``Inference-Header-Content-Length`` header, None when the body is all JSON)."""
    if header_length is not None:
        try:
            header_length = int(header_length)
        except ValueError:
            raise ProtocolError("Inference-Header-Content-Length must be an int") from None
        if not 0 <= header_length <= len(body):
            raise ProtocolError(f"Inference-Header-Content-Length {header_length} does "
                                f"not fit the body of {len(body)} bytes")
    split = len(body) if header_length is None else header_length
    try:
        head = json.loads(bytes(body[:split]))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"the request is not valid JSON: {exc}") from None
    head = _object(head, "the request")
    params = _object(head.get("parameters") or {}, "parameters")
    request_id = head.get("id", "")
    if not isinstance(request_id, str):
        raise ProtocolError("'id' must be a string")
    binary_output = params.get("binary_data_output", False)
    if not isinstance(binary_output, bool):
        raise ProtocolError("parameters.binary_data_output must be a bool")
    inputs = _parse_inputs(head.get("inputs"), memoryview(body)[split:])
    return InferRequest(request_id, inputs, _parse_outputs(head.get("outputs")), params,
                        binary_output)


def serialize_bytes(array):
    """A BYTES tensor in binary form: per element a 4-byte length, then the bytes."""
    parts = []
    for v in np.asarray(array, dtype=object).reshape(-1):
        b = v.encode("utf-8") if isinstance(v, str) else bytes(v)
        parts += [struct.pack("<I", len(b)), b]
    return b"".join(parts)


def deserialize_bytes(raw, name="tensor"):
    """The inverse of ``serialize_bytes``: an object array of ``bytes``."""
    raw, out, i = bytes(raw), [], 0
    while i < len(raw):
        if i + 4 > len(raw):
            raise ProtocolError(f"input {name!r}: truncated BYTES element length")
        (n,) = struct.unpack_from("<I", raw, i)
        if i + 4 + n > len(raw):
            raise ProtocolError(f"input {name!r}: a BYTES element runs past its data")
        out.append(raw[i + 4:i + 4 + n])
        i += 4 + n
    return np.array(out, dtype=object)


def _json_data(array):
    if array.dtype.kind in "OSU":
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                for v in array.reshape(-1)]
    if array.dtype.kind == "V" or array.dtype.name == "bfloat16":
        array = array.astype(np.float32)
    return array.reshape(-1).tolist()


def encode_infer_response(model_name, model_version, request_id, outputs):
    """The response body and its JSON header's length (None when all JSON).

    ``outputs``: ``(name, array, binary)`` triples; binary outputs travel as raw bytes
    after the JSON (the binary tensor data extension)."""
    tensors, blobs = [], []
    for name, array, binary in outputs:
        tensor = {"name": name, "datatype": datatype_of(array.dtype),
                  "shape": list(array.shape)}
        if binary:
            blob = serialize_bytes(array) if tensor["datatype"] == "BYTES" else \
                np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
            tensor["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            tensor["data"] = _json_data(array)
        tensors.append(tensor)
    head = {"model_name": model_name, "model_version": model_version, "outputs": tensors}
    if request_id:
        head["id"] = request_id
    text = json.dumps(head).encode()
    if not blobs:
        return text, None
    return b"".join([text] + blobs), len(text)
