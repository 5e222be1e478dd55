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
input and what was wrong.  Limits are checked before the work they bound: a shape has
at most ``MAX_RANK`` dimensions and ``MAX_ELEMENTS`` elements (zero dimensions counted
as one), a JSON header at most ``MAX_JSON_CONTAINERS`` arrays and objects (counted as
``[`` and ``{`` bytes before parsing) and a nesting depth the parser can follow, a
``BYTES`` tensor at most ``MAX_BYTES_ELEMENTS`` strings, a request at most ``MAX_TENSORS``
inputs and as many outputs.

JSON outputs are strict JSON: a non-finite float is sent as the string ``"NaN"``,
``"Infinity"`` or ``"-Infinity"`` (the proto3 JSON mapping of float, which NumPy and
``tritonclient`` read back as the float); binary outputs carry the IEEE bytes as they are.
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
MAX_ELEMENTS = 1 << 40              # product of a shape's dims (zeros counted as 1)
MAX_JSON_CONTAINERS = 1 << 20       # '[' and '{' bytes in a JSON header
MAX_BYTES_ELEMENTS = 1 << 20        # strings in one BYTES tensor
MAX_TENSORS = 1024                  # inputs (and outputs asked for) in one request
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


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
                                "(pip install -e '.[amp]')") from None
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
        raise ProtocolError(f"input {name!r}: shape must be a list of non-negative ints "
                            f"(at most {MAX_RANK}), got {_brief(shape)}")
    if math.prod(max(d, 1) for d in shape) > MAX_ELEMENTS:
        raise ProtocolError(f"input {name!r}: shape {shape} is too large (more than "
                            f"2**40 elements, zero dimensions counted as 1)")
    return tuple(shape)


def _brief(value, limit=80):
    """``repr(value)`` cut to ``limit`` characters (a hostile value can be huge)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _json_tensor(data, name, datatype, dtype, shape):
    """An array from JSON ``data`` (flat or nested), checked element by element."""
    count = math.prod(shape)
    if not isinstance(data, list):
        raise ProtocolError(f"input {name!r}: data must be a (nested) list, got "
                            f"{type(data).__name__}")
    if datatype == "BYTES":
        return _json_strings(data, name, count, shape)
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


def _json_strings(data, name, count, shape):
    """A BYTES tensor from JSON strings (UTF-8 encoded, as the protocol says)."""
    if count > MAX_BYTES_ELEMENTS:
        raise ProtocolError(f"input {name!r}: {count} strings in one BYTES tensor, more "
                            f"than the server takes ({MAX_BYTES_ELEMENTS})")
    try:
        flat = np.array(data, dtype=object).reshape(-1) if data != [] else np.array([])
    except (ValueError, TypeError):
        flat = None
    if flat is None or flat.size != count or not all(isinstance(v, str) for v in flat):
        raise ProtocolError(f"input {name!r}: BYTES data must be {count} strings")
    try:
        encoded = [v.encode("utf-8") for v in flat]
    except UnicodeEncodeError as exc:
        raise ProtocolError(f"input {name!r}: a string is not valid Unicode "
                            f"({exc.reason})") from None
    return np.array(encoded, dtype=object).reshape(shape)


def _binary_tensor(buffer, offset, size, name, datatype, dtype, shape):
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ProtocolError(f"input {name!r}: binary_data_size must be a non-negative "
                            f"int, got {size!r}")
    if offset + size > len(buffer):
        raise ProtocolError(f"input {name!r}: binary_data_size {size} runs past the end "
                            f"of the body ({len(buffer) - offset} bytes left)")
    raw = buffer[offset:offset + size]
    if datatype == "BYTES":
        if math.prod(shape) > MAX_BYTES_ELEMENTS:
            raise ProtocolError(f"input {name!r}: {math.prod(shape)} strings in one BYTES "
                                f"tensor, more than the server takes ({MAX_BYTES_ELEMENTS})")
        arr = deserialize_bytes(raw, name, limit=math.prod(shape))
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


def _tensor_list(specs, what):
    if len(specs) > MAX_TENSORS:
        raise ProtocolError(f"'{what}' lists {len(specs)} tensors, more than the server "
                            f"takes ({MAX_TENSORS})")
    return specs


def _parse_inputs(specs, buffer):
    if not isinstance(specs, list) or not specs:
        raise ProtocolError("'inputs' must be a non-empty list of tensors")
    _tensor_list(specs, "inputs")
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
    _tensor_list(specs, "outputs")
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
        binary = params.get("binary_data")
        if binary is not None and not isinstance(binary, bool):
            raise ProtocolError(f"output {name!r}: parameters.binary_data must be a bool, "
                                f"got {_brief(binary, 40)}")
        out.append((name, binary))
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
    head = _parse_json(bytes(body[:split]))
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


def _parse_json(text):
    """The JSON header, its size in containers bounded before parsing and its depth by
    the parser (whose recursion limit stops it: a RecursionError, turned into a 400)."""
    containers = text.count(b"[") + text.count(b"{")
    if containers > MAX_JSON_CONTAINERS:
        raise ProtocolError(f"the request's JSON has {containers} arrays and objects, more "
                            f"than the server parses ({MAX_JSON_CONTAINERS}); send large "
                            "tensors flat or as binary data")
    try:
        return json.loads(text)
    except RecursionError:
        raise ProtocolError("the request's JSON is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"the request is not valid JSON: {exc}") from None


def serialize_bytes(array):
    """A BYTES tensor in binary form: per element a 4-byte length, then the bytes."""
    parts = []
    for v in np.asarray(array, dtype=object).reshape(-1):
        b = v.encode("utf-8") if isinstance(v, str) else bytes(v)
        parts += [struct.pack("<I", len(b)), b]
    return b"".join(parts)


def deserialize_bytes(raw, name="tensor", limit=None):
    """The inverse of ``serialize_bytes``: an object array of ``bytes``.  With ``limit``
    it stops (and raises) at the first element past ``limit``."""
    raw, out, i = bytes(raw), [], 0
    while i < len(raw):
        if limit is not None and len(out) >= limit:
            raise ProtocolError(f"input {name!r}: more than {limit} BYTES elements")
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
    flat = array.reshape(-1)
    if flat.dtype.kind != "f" or np.isfinite(flat).all():
        return flat.tolist()
    out = flat.astype(object)               # non-finite values as strings: strict JSON
    bad = ~np.isfinite(flat)
    out[bad] = [_NON_FINITE[repr(float(v))] for v in flat[bad]]
    return out.tolist()


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
    text = json.dumps(head, allow_nan=False).encode()
    if not blobs:
        return text, None
    return b"".join([text] + blobs), len(text)
