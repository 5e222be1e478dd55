"""onnx.load on hostile and malformed files: external data stays inside the model's folder,
tensors and attributes are checked, and every problem is an OnnxImportError naming the
file (issue 32, item 2)."""
import os
import random

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import lezero as lz  # noqa: E402
from lezero import onnx as lonnx  # noqa: E402

h = onnx.helper
TP = onnx.TensorProto


def _save(tmp_path, nodes, inputs, outputs, inits=(), name="m.onnx", opset=17):
    graph = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    path = str(tmp_path / name)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def _vi(name, dtype=TP.FLOAT, shape=(4,)):
    return h.make_tensor_value_info(name, dtype, list(shape))


def _add_model(tmp_path, init, name="m.onnx"):
    """y = x + w, with the initializer ``init`` as w."""
    return _save(tmp_path, [h.make_node("Add", ["x", "w"], ["y"])], [_vi("x")], [_vi("y")],
                 [init], name)


def _external(location, offset=None, length=None, dims=(4,)):
    t = TP()
    t.name, t.data_type = "w", TP.FLOAT
    t.dims.extend(dims)
    t.data_location = TP.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = t.external_data.add()
            entry.key, entry.value = key, str(value)
    return t


def _refused(path, *patterns):
    with pytest.raises(lonnx.OnnxImportError) as info:
        lonnx.load(path)
    text = str(info.value)
    assert path in text, text
    for p in patterns:
        assert p in text, text
    return text


def _naive_loader(model, base_dir):
    """What onnx < 1.16 did: read every external location as given, unchecked."""
    from onnx.external_data_helper import _get_all_tensors, uses_external_data
    for t in _get_all_tensors(model):
        if uses_external_data(t):
            info = {e.key: e.value for e in t.external_data}
            with open(os.path.join(base_dir, info["location"]), "rb") as f:
                f.seek(int(info.get("offset", 0)))
                t.raw_data = f.read(int(info["length"]) if "length" in info else -1)
            t.data_location = TP.DEFAULT
            del t.external_data[:]


@pytest.fixture
def old_onnx(monkeypatch):
    """onnx as old as setup.py allows (1.15) followed any external location."""
    monkeypatch.setattr(onnx, "load_external_data_for_model", _naive_loader)


# ----- external data --------------------------------------------------------------------------

def test_external_data_inside_the_folder_loads(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes() * 2)
    path = _add_model(tmp_path, _external("w.bin", offset=16, length=16))
    y = lonnx.load(path)(np.ones(4, np.float32))
    np.testing.assert_array_equal(y.data, np.arange(4) + 1)


@pytest.mark.parametrize("where, why", [
    ("/etc/passwd", "is not a relative path"), ("../secret.bin", "climbs out"),
    ("sub/../../secret.bin", "climbs out"), ("link.bin", "symbolic link"),
    ("dirlink/secret.bin", "symbolic link"), ("missing.bin", "is not a file")])
def test_external_data_outside_the_folder_is_refused(tmp_path, old_onnx, where, why):
    model_dir = tmp_path / "model"
    (model_dir / "sub").mkdir(parents=True)
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"top secret bytes")
    os.symlink(secret, model_dir / "link.bin")
    os.symlink(tmp_path, model_dir / "dirlink")
    path = _add_model(model_dir, _external(where, length=16 if where != "/etc/passwd" else None))
    _refused(path, "external data refused", why)


@pytest.mark.parametrize("offset, length, why", [
    (12, 16, "lies outside"), (100, 16, "lies outside"), (0, 8, "need 16"),
    (-4, 16, "lies outside"), ("x", 16, "not integers")])
def test_external_data_ranges_are_checked(tmp_path, offset, length, why):
    (tmp_path / "w.bin").write_bytes(bytes(24))
    _refused(_add_model(tmp_path, _external("w.bin", offset, length)), why)


# ----- tensors --------------------------------------------------------------------------------

def _raw(dims, data, dtype=TP.FLOAT):
    t = TP()
    t.name, t.data_type, t.raw_data = "w", dtype, data
    t.dims.extend(dims)
    return t


@pytest.mark.parametrize("tensor, why", [
    (_raw([4], bytes(8)), "raw data holds 8 bytes"),
    (_raw([4, -1], bytes(16)), "invalid dims"),
    (_raw([2 ** 40, 2 ** 40], bytes(16)), "declare"),
    (_raw([1] * 40, bytes(4)), "invalid dims"),
    (h.make_tensor("w", TP.STRING, [1], [b"abc"]), "type 8 is not supported"),
    (h.make_tensor("w", TP.COMPLEX64, [1], [1 + 2j]), "type 14 is not supported")])
def test_malformed_initializers_are_refused(tmp_path, tensor, why):
    _refused(_add_model(tmp_path, tensor), why)


def test_typed_values_must_match_the_dims(tmp_path):
    t = h.make_tensor("w", TP.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
    del t.dims[:]
    t.dims.extend([400])
    _refused(_add_model(tmp_path, t), "holds 4 values", "need 400")


# ----- attributes and graph structure ---------------------------------------------------------

def _one(tmp_path, node, inputs=("x",), outputs=("y",)):
    return _save(tmp_path, [node], [_vi(n) for n in inputs], [_vi(n) for n in outputs])


def test_attributes_of_the_wrong_type_or_unknown_are_refused(tmp_path):
    _refused(_one(tmp_path, h.make_node("LeakyRelu", ["x"], ["y"], alpha="big")),
             "attribute 'alpha' has type 3", "declares type 1")
    _refused(_one(tmp_path, h.make_node("Relu", ["x"], ["y"], evil=1)),
             "'evil' is not one Relu takes")
    _refused(_one(tmp_path, h.make_node("Concat", ["x", "x"], ["y"])),
             "required attribute 'axis' is missing")
    _refused(_one(tmp_path, h.make_node("Gelu", ["x"], ["y"], approximate=b"\xff\xfe")),
             "not UTF-8")
    _refused(_one(tmp_path, h.make_node("Relu", ["x", "x", "x"], ["y"])), "3 inputs")


def test_a_subgraph_attribute_is_never_read(tmp_path):
    body = h.make_graph([h.make_node("Relu", ["x"], ["z"])], "b", [], [_vi("z")])
    node = h.make_node("Relu", ["x"], ["y"], body=body)
    _refused(_one(tmp_path, node), "'body'")


@pytest.mark.parametrize("nodes, why", [
    ([h.make_node("Relu", ["nowhere"], ["y"])], "reads 'nowhere' before it is defined"),
    ([h.make_node("Relu", ["b"], ["a"]), h.make_node("Relu", ["a"], ["b"]),
      h.make_node("Relu", ["x"], ["y"])], "reads 'b' before it is defined"),
    ([h.make_node("Relu", ["x"], ["y"]), h.make_node("Relu", ["x"], ["y"])],
     "defines 'y' a second time"),
    ([h.make_node("Relu", ["x"], ["z"])], "output 'y' is never computed"),
    ([h.make_node("Relu", ["x"], ["y"], domain="com.evil")], "of domain 'com.evil'")])
def test_malformed_graphs_are_refused(tmp_path, nodes, why):
    _refused(_save(tmp_path, nodes, [_vi("x")], [_vi("y")]), why)


def _field(number, payload):
    """A length-delimited protobuf field."""
    n, size = len(payload), b""
    while True:
        size += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            break
    return bytes([number << 3 | 2]) + size + payload


def test_deeply_nested_subgraphs_are_a_clear_error(tmp_path):
    leaf = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "b", [_vi("x")], [_vi("y")])
    body = leaf
    for k in range(20):                  # If inside If, deeper than import_checks allows
        node = h.make_node("If", ["c"], ["y"], then_branch=body, else_branch=leaf)
        body = h.make_graph([node], f"g{k}", [_vi("c", TP.BOOL, ())], [_vi("y")])
    path = str(tmp_path / "if.onnx")
    with open(path, "wb") as f:
        f.write(h.make_model(body).SerializeToString())
    _refused(path, "subgraphs nested 17 deep (at most 16)")
    graph = b""                          # graph > node > attribute > graph ... 5000 deep
    for _ in range(5000):
        graph = _field(1, _field(5, _field(6, graph)))
    path = str(tmp_path / "deep.onnx")
    with open(path, "wb") as f:
        f.write(_field(7, graph))
    _refused(path, "not a readable ONNX model")


@pytest.mark.timeout(20)
def test_a_pipe_or_a_folder_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "pipe.onnx")         # reading it would block
    _refused(str(tmp_path / "pipe.onnx"), "not a regular file")
    (tmp_path / "dir.onnx").mkdir()
    _refused(str(tmp_path / "dir.onnx"), "not a regular file")


# ----- run time: shape operators are bounded --------------------------------------------------

def _const(name, values, dtype=np.int64):
    return onnx.numpy_helper.from_array(np.asarray(values, dtype), name)


@pytest.mark.parametrize("node, inits, why", [
    (h.make_node("ConstantOfShape", ["s"], ["y"]), [_const("s", [2 ** 20, 2 ** 20])],
     "at most"),
    (h.make_node("Range", ["a", "b", "c"], ["y"]),
     [_const("a", 0), _const("b", 2 ** 40), _const("c", 1)], "at most"),
    (h.make_node("Range", ["a", "b", "c"], ["y"]),
     [_const("a", 0), _const("b", 5), _const("c", 0)], "delta 0"),
    (h.make_node("Expand", ["x", "s"], ["y"]), [_const("s", [2 ** 20, 2 ** 20, 1])],
     "at most"),
    (h.make_node("Tile", ["x", "s"], ["y"]), [_const("s", [2 ** 40])], "at most"),
    (h.make_node("Pad", ["x", "s"], ["y"]), [_const("s", [0, 2 ** 40])], "at most"),
    (h.make_node("Cast", ["x"], ["y"], to=TP.STRING), [], "tensor type 8 is not supported")])
def test_shape_operators_refuse_huge_results(tmp_path, node, inits, why):
    path = _save(tmp_path, [node], [_vi("x", shape=(1,))], [_vi("y")], inits)
    module = lonnx.load(path)
    with pytest.raises(lonnx.OnnxImportError, match=why) as info:
        module(np.ones(1, np.float32))
    assert path in str(info.value)


# ----- fuzz: every mutation loads or is an OnnxImportError ------------------------------------

def _valid(tmp_path):
    w = onnx.numpy_helper.from_array(np.full((4, 4), 0.5, np.float32), "w")
    b = onnx.numpy_helper.from_array(np.arange(4, dtype=np.float32), "b")
    shape = onnx.numpy_helper.from_array(np.array([2, 4], np.int64), "shape")
    nodes = [h.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1),
             h.make_node("LeakyRelu", ["g"], ["r"], alpha=0.1),
             h.make_node("Reshape", ["r", "shape"], ["s"]),
             h.make_node("Softmax", ["s"], ["y"], axis=-1)]
    return _save(tmp_path, nodes, [_vi("x", shape=(2, 4))], [_vi("y", shape=(2, 4))],
                 [w, b, shape], name="valid.onnx")


def _mutate(model, rng):
    g = model.graph
    choice = rng.randrange(7)
    if choice == 0:
        t = rng.choice(g.initializer)
        t.dims[rng.randrange(len(t.dims))] = rng.choice([-1, 0, 3, 2 ** 40])
    elif choice == 1:
        rng.choice(g.initializer).data_type = rng.choice([0, 2, 7, 8, 14, 17, 99])
    elif choice == 2:
        node = rng.choice(g.node)
        if node.attribute:
            node.attribute[0].type = rng.choice([0, 1, 2, 3, 5, 7, 11, 13])
    elif choice == 3:
        node = rng.choice(g.node)
        node.input[rng.randrange(len(node.input))] = rng.choice(["y", "s", "", "nope"])
    elif choice == 4:
        rng.choice(g.node).op_type = rng.choice(["If", "Relu", "Hardmax", "", "Gemm"])
    elif choice == 5:
        t = rng.choice(g.initializer)
        t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)]
    else:
        t = rng.choice(g.initializer)
        t.data_location = TP.EXTERNAL
        entry = t.external_data.add()
        entry.key, entry.value = "location", rng.choice(["/etc/passwd", "../x", "valid.onnx"])


@pytest.mark.timeout(60)
def test_fuzzed_models_load_or_raise_onnx_import_error(tmp_path):
    path = _valid(tmp_path)
    data = open(path, "rb").read()
    rng = random.Random(4321)
    x = np.ones((2, 4), np.float32)
    outcomes = {"loaded": 0, "refused": 0}
    for k in range(200):
        out = str(tmp_path / f"f{k % 4}.onnx")
        if k % 2:
            bad = bytearray(data)
            for _ in range(rng.randrange(1, 6)):
                bad[rng.randrange(len(bad))] = rng.randrange(256)
            blob = bytes(bad[: rng.randrange(len(bad) // 2, len(bad) + 1)])
        else:
            model = onnx.load(path)
            for _ in range(rng.randrange(1, 3)):
                _mutate(model, rng)
            blob = model.SerializeToString()
        with open(out, "wb") as f:
            f.write(blob)
        try:
            module = lonnx.load(out)
        except lonnx.OnnxImportError as e:
            assert out in str(e)
            outcomes["refused"] += 1
            continue
        outcomes["loaded"] += 1
        try:
            with lz.no_grad():
                module(x)
        except (lonnx.OnnxImportError, TypeError):   # TypeError: the input count changed
            pass
    assert outcomes["refused"] > 100 and outcomes["loaded"] > 0, outcomes
