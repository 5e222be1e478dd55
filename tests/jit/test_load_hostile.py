"""jit.load on hostile and malformed .lzg files: nothing named in a file runs, every stored
array and recorded shape is checked, and every problem is a GraphFormatError naming the
file (issue 32, items 1 and 2)."""
import io
import json
import os
import random
import zipfile

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import jit
from lezero.core import Function
from lezero.jit import GraphFormatError, GuardError, serialize
from lezero.utils import safetensors


# ----- helpers ------------------------------------------------------------------------------

def _parts(path):
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("graph.json")), z.read("weights.safetensors")


def _write(out, doc, blob, text=None):
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("graph.json", text if text is not None else json.dumps(doc))
        z.writestr("weights.safetensors", blob)
    return str(out)


def _rewrite(path, out, doc_edit=None, tensor_edit=None):
    doc, blob = _parts(path)
    if doc_edit:
        doc_edit(doc)
    if tensor_edit:
        tensors, meta = safetensors.read(io.BytesIO(blob))
        tensor_edit(tensors)
        buf = io.BytesIO()
        safetensors.write(buf, tensors, meta)
        blob = buf.getvalue()
    return _write(out, doc, blob)


def _saved(tmp_path, fn, *xs, name="g.lzg", **kw):
    return jit.trace(fn, *xs, **kw).save(str(tmp_path / name))


def _fused(x):
    return F.leaky_relu(x * 2.0 + 1.0, 0.1)


def _x(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def _node(doc, op):
    return next(n for n in doc["nodes"] if n["op"] == op)


def _refused(path, *patterns):
    with pytest.raises(GraphFormatError) as info:
        jit.load(path)
    text = str(info.value)
    assert path in text, text
    for p in patterns:
        assert p in text, text
    return text


# ----- item 1: nothing named in a file runs ---------------------------------------------------

def test_a_namedtuple_naming_popen_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    path = _saved(tmp_path, _fused, _x(2, 3))
    evil = {"$namedtuple": "Popen", "module": "subprocess",
            "fields": {"args": ["touch", str(marker)]}}
    bad = _rewrite(path, tmp_path / "bad.lzg", lambda d: d.update(out_tree=evil))
    _refused(bad, "out_tree")
    assert not marker.exists()
    bad = _rewrite(path, tmp_path / "bad2.lzg",
                   lambda d: _node(d, "Fused")["sub"][2]["attrs"].update(slope=evil))
    _refused(bad, "slope")
    assert not marker.exists()


@pytest.mark.parametrize("cls, module", [
    ("Popen", "subprocess"), ("ClassTarget", "lezero.functions.loss.class_target"),
    ("Block", "lezero.checkpoint.node"), ("ConvProblem", "lezero.functions.conv.geometry")])
def test_an_object_of_a_class_outside_the_allow_list_is_refused(tmp_path, cls, module):
    path = _saved(tmp_path, _fused, _x(2, 3))
    evil = {"$object": cls, "module": module, "state": {"args": ["true"]}}
    bad = _rewrite(path, tmp_path / "bad.lzg", lambda d: d.update(out_tree=evil))
    _refused(bad, repr(cls), "not one of the classes a graph may hold")


class Sneaky(Function):       # a Function defined outside LeZero's operator packages
    def forward(self, x):
        return x


@pytest.mark.parametrize("op", ["Sneaky", "Checkpoint", "AllReduce", "Accumulate"])
def test_only_lezero_operators_may_be_named(tmp_path, op):
    path = _saved(tmp_path, lambda x: F.relu(x), _x(2, 3))
    bad = _rewrite(path, tmp_path / "bad.lzg", lambda d: d["nodes"][0].update(op=op))
    _refused(bad, f"uses operator {op!r}", "LeZero's own operators")


def test_a_reduction_cannot_name_an_arbitrary_numpy_function(tmp_path):
    path = _saved(tmp_path, lambda x: F.argmax(x, axis=1), _x(2, 3))
    bad = _rewrite(path, tmp_path / "bad.lzg",
                   lambda d: _node(d, "Reduce")["attrs"].update(name="save"))
    _refused(bad, "'save'", "argmax")


@pytest.mark.parametrize("key", ["forward", "__class__", "_kernel", "backward", "_array_forward"])
def test_attributes_cannot_replace_methods_or_graph_links(tmp_path, key):
    path = _saved(tmp_path, lz.nn.LayerNorm(8).eval(), _x(2, 8))
    bad = _rewrite(path, tmp_path / "bad.lzg",
                   lambda d: d["nodes"][0]["attrs"].update({key: 1}))
    _refused(bad, repr(key))


def test_generated_kernel_source_holds_only_numbers(tmp_path):
    path = _saved(tmp_path, _fused, _x(2, 3))
    code = "__import__('os').system('touch x')"
    bad = _rewrite(path, tmp_path / "bad.lzg",
                   lambda d: _node(d, "Fused")["sub"][2]["attrs"].update(slope=code))
    _refused(bad, "'slope' must be a number")
    # a non-finite slope is a valid number: it must compile and run
    inf = _rewrite(path, tmp_path / "inf.lzg",
                   lambda d: _node(d, "Fused")["sub"][2]["attrs"].update(slope={"$float": "inf"}))
    x = np.array([[-1.0, 0.0, 1.0], [2.0, -3.0, 0.5]], np.float32)
    y = jit.load(inf)(x).data
    ref = x * 2 + 1
    np.testing.assert_array_equal(y, np.where(ref > 0, ref, ref * np.inf))


def test_a_tampered_kernel_cache_file_is_rewritten(tmp_path, monkeypatch):
    import hashlib
    from lezero.jit.passes import codegen
    monkeypatch.setenv("LEZERO_JIT_CACHE", str(tmp_path))
    x = _x(2, 3)
    g = jit.trace(_fused, x)
    kernel = g.graph.nodes[0].attrs["_kernel"]
    digest = hashlib.sha1(kernel.source.encode()).hexdigest()[:16]
    cached = tmp_path / f"lzfused_{digest}.py"
    cached.write_text("def fused(out, *args):\n    out[...] = 42\n")
    monkeypatch.setattr(codegen, "_COMPILED", {})
    kernel._fn = None
    np.testing.assert_allclose(kernel.numba_path([x, np.float32(2), np.float32(1)]),
                               _fused(x).data, rtol=1e-6)
    assert cached.read_text() == kernel.source


# ----- item 1: stored arrays and recorded shapes ----------------------------------------------

def test_a_stored_bias_of_the_wrong_shape_is_refused(tmp_path):
    path = _saved(tmp_path, lz.nn.LayerNorm(4096).eval(), _x(2, 4096))
    bad = _rewrite(path, tmp_path / "bad.lzg",
                   tensor_edit=lambda t: t.update(bias=np.zeros(1, np.float32)))
    _refused(bad, "%bias", "float32[1]", "float32[4096]")
    bad = _rewrite(path, tmp_path / "dtype.lzg",
                   tensor_edit=lambda t: t.update(bias=t["bias"].astype(np.float64)))
    _refused(bad, "%bias", "float64[4096]", "float32[4096]")


def test_a_consistently_shrunk_bias_is_refused_by_the_operator_check(tmp_path):
    path = _saved(tmp_path, lz.nn.LayerNorm(4096).eval(), _x(2, 4096))

    def shrink(d):
        d["values"]["bias"]["shape"] = [1]
    bad = _rewrite(path, tmp_path / "bad.lzg", shrink,
                   tensor_edit=lambda t: t.update(bias=np.zeros(1, np.float32)))
    _refused(bad, "Normalize", "(1,)", "(4096,)")


def test_conv_and_pool_geometries_must_fit_the_recorded_shapes(tmp_path):
    net = lz.nn.Sequential(lz.nn.Conv2d(1, 2, 3), lz.nn.MaxPool2d(2)).eval()
    path = _saved(tmp_path, net, _x(1, 1, 8, 8))

    def geom(d, op):
        return _node(d, op)["attrs"]["geom"]["state"]
    big = _rewrite(path, tmp_path / "a.lzg",
                   lambda d: geom(d, "Conv").update(out_size={"$tuple": [60, 60]}))
    _refused(big, "ConvGeometry", "does not fit")
    small_in = _rewrite(path, tmp_path / "b.lzg", lambda d: (
        geom(d, "Conv").update(in_size={"$tuple": [80, 80]}, out_size={"$tuple": [78, 78]})))
    _refused(small_in, "Conv", "(8, 8)", "(80, 80)")
    pool = _rewrite(path, tmp_path / "c.lzg",
                    lambda d: geom(d, "MaxPoolNd").update(out_size={"$tuple": [9, 9]}))
    _refused(pool, "Geom", "does not fit")
    fields = _rewrite(path, tmp_path / "d.lzg", lambda d: geom(d, "Conv").update(evil=1))
    _refused(fields, "ConvGeometry", "'evil'")


def test_masks_linear_weights_and_avg_pooling_must_fit(tmp_path):
    mask = np.array([[True, False, True], [True, True, False], [False, True, True]])
    path = _saved(tmp_path, lambda q: F.scaled_dot_product_attention(q, q, q, attn_mask=mask),
                  _x(1, 3, 4), name="attn.lzg")
    key = _node(_parts(path)[0], "MaskedSoftmax")["attrs"]["keep"]["$array"]
    bad = _rewrite(path, tmp_path / "a.lzg",
                   tensor_edit=lambda t: t.update({key: np.ones((1, 1, 9, 9), bool)}))
    _refused(bad, "MaskedSoftmax", "(1, 1, 9, 9)")
    path = _saved(tmp_path, lz.nn.Linear(8, 16).eval(), _x(2, 8), name="lin.lzg")

    def shrink(d):
        d["values"]["bias"]["shape"] = [1]
    bad = _rewrite(path, tmp_path / "b.lzg", shrink,
                   tensor_edit=lambda t: t.update(bias=np.zeros(1, np.float32)))
    _refused(bad, "Linear", "bias of shape (1,)", "(16,)")
    path = _saved(tmp_path, lz.nn.AvgPool2d(2).eval(), _x(2, 3, 4, 4), name="avg.lzg")
    bad = _rewrite(path, tmp_path / "c.lzg", lambda d: _node(d, "AvgPoolNd")["attrs"][
        "geom"]["state"].update(in_size={"$tuple": [40, 40]}, out_size={"$tuple": [20, 20]}))
    _refused(bad, "AvgPoolNd", "(4, 4)", "(40, 40)")


def test_recurrent_time_steps_must_tile_the_input(tmp_path):
    path = _saved(tmp_path, lz.nn.LSTM(3, 4).eval(), _x(5, 2, 3))
    for steps in ([[0, 2], [2, 2], [4, 2], [6, 2], [8, 200]], [[0, 2], [2, 3]],
                  [[0, 2], [4, 2], [2, 2], [6, 2], [8, 2]], [[0, 3]] * 5):
        bad = _rewrite(path, tmp_path / "bad.lzg", lambda d: _node(d, "LSTMLayer")[
            "attrs"].update(steps=[{"$tuple": s} for s in steps]))
        _refused(bad, "LSTMLayer", "time steps")


def test_a_node_that_produces_another_shape_than_recorded_fails_at_call(tmp_path):
    path = _saved(tmp_path, lambda x: F.transpose(x) * 2.0, _x(2, 8), fuse=False)

    def lie(d):
        transpose = _node(d, "Transpose")
        d["values"][transpose["outputs"][0]]["shape"] = [4, 4]
        for n in d["nodes"]:
            for o in n["outputs"]:
                d["values"][o]["shape"] = [4, 4]
    g = jit.load(_rewrite(path, tmp_path / "bad.lzg", lie))
    with pytest.raises(GraphFormatError, match=r"Transpose produced float32\[8, 2\], but the "
                                               r"file records float32\[4, 4\]"):
        g(_x(2, 8))


def test_the_signature_must_match_the_inputs(tmp_path):
    path = _saved(tmp_path, lambda x: F.relu(x), _x(2, 3))
    bad = _rewrite(path, tmp_path / "bad.lzg", lambda d: d["signature"]["$tuple"][0][
        "$tuple"].__setitem__(1, {"$tuple": [200, 300]}))
    _refused(bad, "signature", "%x0")


# ----- item 2: malformed files are GraphFormatError naming the file ---------------------------

def _deep(n):
    return json.loads("[" * n + "]" * n) if n < 500 else None


_EDITS = {
    "version true": lambda d: d.update(version=True),
    "unknown key": lambda d: d.update(extra=1),
    "values not an object": lambda d: d.update(values=[1]),
    "negative dim": lambda d: d["values"]["x0"].update(shape=[-1, 3]),
    "huge shape": lambda d: d["values"]["x0"].update(shape=[2 ** 40, 2 ** 40]),
    "object dtype": lambda d: d["values"]["x0"].update(dtype="object"),
    "structured dtype": lambda d: d["values"]["x0"].update(dtype="[('a', '<f4')]"),
    "unknown kind": lambda d: d["values"]["x0"].update(kind="evil"),
    "nodes not a list": lambda d: d.update(nodes={"a": 1}),
    "node missing keys": lambda d: d["nodes"][0].pop("attrs"),
    "undefined input": lambda d: d["nodes"][0].update(inputs=["nowhere"]),
    "output defined twice": lambda d: d["nodes"][0].update(outputs=["x0"]),
    "outputs undefined": lambda d: d.update(outputs=["nowhere"]),
    "out_tree out of range": lambda d: d.update(out_tree={"$tuple": ["var", 7]}),
    "mode not bool": lambda d: d.update(mode={"$tuple": ["yes", None]}),
    "meta memory": lambda d: d.update(meta={"memory": "x"}),
    "unknown tag": lambda d: d.update(out_tree={"$eval": "1"}),
    "bad $float": lambda d: d.update(out_tree={"$float": "1e999"}),
    "overflowing scalar": lambda d: d["nodes"][0]["attrs"].update(
        a={"$scalar": ["int8", 1000]}),
    "scalar of object dtype": lambda d: d["nodes"][0]["attrs"].update(
        a={"$scalar": ["O", 1]}),
    "list key": lambda d: d["nodes"][0]["attrs"].update(a={"$dict": [[[1], 2]]}),
    "float slice": lambda d: d["nodes"][0]["attrs"].update(a={"$slice": [0.5, 1, None]}),
    "missing array": lambda d: d["nodes"][0]["attrs"].update(a={"$array": "nope"}),
    "undefined ref": lambda d: d["nodes"][0]["attrs"].update(a={"$ref": "nowhere"}),
    "deep attribute": lambda d: d["nodes"][0]["attrs"].update(a=_deep(100)),
    "huge int": lambda d: d["nodes"][0]["attrs"].update(a=10 ** 30),
    "deep value reference": lambda d: d["nodes"][0]["attrs"].update(
        a=[[[[[[[{"$ref": "x0"}]]]]]]]),
    "quote in a name": lambda d: d.update(name='a"b'),
    "dropout shape": lambda d: d["nodes"][0]["attrs"].update(
        _dropout={"$dict": [["p", 0.5], ["shape", {"$tuple": [10 ** 6, 10 ** 6]}]]}),
    "detach out of range": lambda d: d["nodes"][0]["attrs"].update(_detach=[5]),
}


@pytest.mark.parametrize("what", sorted(_EDITS))
def test_malformed_documents_are_graph_format_errors(tmp_path, what):
    path = _saved(tmp_path, lambda x: F.relu(x), _x(2, 3))
    _refused(_rewrite(path, tmp_path / "bad.lzg", _EDITS[what]))


@pytest.mark.parametrize("text", [b"[" * 100000 + b"]" * 100000, b"\xff\xfe", b"1" * 5000,
                                  b'{"format": "lezero-graph", "version": 1}'])
def test_unparsable_json_is_a_graph_format_error(tmp_path, text):
    _, blob = _parts(_saved(tmp_path, lambda x: F.relu(x), _x(2, 3)))
    _refused(_write(tmp_path / "bad.lzg", None, blob, text=text))


def test_repeated_json_keys_are_refused(tmp_path):
    doc, blob = _parts(_saved(tmp_path, lambda x: F.relu(x), _x(2, 3)))
    text = json.dumps(doc).replace('"version": 1', '"version": 1, "version": 1', 1)
    _refused(_write(tmp_path / "bad.lzg", None, blob, text=text), "repeats a key")


def test_weights_with_extra_tensors_or_a_deep_header_are_refused(tmp_path):
    path = _saved(tmp_path, lambda x: F.relu(x) + 1.0, _x(2, 3))
    extra = _rewrite(path, tmp_path / "a.lzg", tensor_edit=lambda t: t.update(
        spare=np.zeros(3, np.float32)))
    _refused(extra, "spare")
    doc, _ = _parts(path)
    header = b"[" * 50000 + b"]" * 50000
    blob = len(header).to_bytes(8, "little") + header
    _refused(_write(tmp_path / "b.lzg", doc, blob), "weights")


def test_archive_limits(tmp_path):
    path = _saved(tmp_path, lambda x: F.relu(x), _x(2, 3))
    doc, blob = _parts(path)
    bomb = tmp_path / "bomb.lzg"               # 10 MB of spaces deflate to a few KB
    with zipfile.ZipFile(bomb, "w") as z:
        z.writestr("graph.json", json.dumps(doc) + " " * (10 << 20),
                   compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("weights.safetensors", blob)
    _refused(str(bomb), "would inflate")
    three = tmp_path / "three.lzg"
    with zipfile.ZipFile(three, "w") as z:
        z.writestr("graph.json", json.dumps(doc))
        z.writestr("weights.safetensors", blob)
        z.writestr("payload.py", "print('hi')")
    _refused(str(three), "payload.py")
    with pytest.MonkeyPatch.context() as mp:     # the absolute limit, scaled down
        mp.setattr(serialize, "MAX_GRAPH_JSON", 100)
        _refused(path, "would inflate", "graph.json 100 bytes")
    bz = tmp_path / "bz.lzg"
    with zipfile.ZipFile(bz, "w") as z:
        z.writestr("graph.json", json.dumps(doc), compress_type=zipfile.ZIP_BZIP2)
        z.writestr("weights.safetensors", blob)
    _refused(str(bz), "compression method")


@pytest.mark.timeout(20)
def test_a_pipe_or_a_folder_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "pipe.lzg")          # opening it for reading would block
    _refused(str(tmp_path / "pipe.lzg"), "not a regular file")
    (tmp_path / "dir.lzg").mkdir()
    _refused(str(tmp_path / "dir.lzg"), "not a regular file")


# ----- fuzz: every mutation loads or is a GraphFormatError ------------------------------------

_JUNK = [None, -1, 0, 2 ** 70, 1.5, True, "x", "", [], {}, [[[]]], {"$tuple": 5},
         {"$object": "Popen", "module": "subprocess", "state": {}}, {"$ref": "x0"},
         {"$array": "attr"}, {"$dtype": "O"}, {"$namedtuple": "T", "module": "os",
                                                 "fields": {"a": 1}}]


def _mutate_doc(doc, rng):
    """Replace, delete or duplicate one randomly chosen item somewhere in ``doc``."""
    node = doc
    for _ in range(rng.randrange(1, 8)):
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = rng.choice(keys)
        if not isinstance(node[key], (dict, list)) or rng.random() < 0.3:
            break
        node = node[key]
    keys = list(node) if isinstance(node, dict) else list(range(len(node)))
    if not keys:
        return
    key = rng.choice(keys)
    action = rng.random()
    if action < 0.7:
        node[key] = rng.choice(_JUNK)
    elif action < 0.85:
        del node[key]
    elif isinstance(node, list):
        node.append(node[key])


@pytest.mark.timeout(60)
def test_fuzzed_files_load_or_raise_graph_format_error(tmp_path):
    path = _saved(tmp_path, lambda x: _fused(F.relu(x)) @ F.transpose(x), _x(3, 3))
    data = open(path, "rb").read()
    doc, blob = _parts(path)
    rng = random.Random(1234)
    x = _x(3, 3)
    outcomes = {"loaded": 0, "refused": 0}
    for k in range(200):
        out = tmp_path / f"m{k % 4}.lzg"
        if k % 2:
            bad = bytearray(data)
            for _ in range(rng.randrange(1, 6)):
                bad[rng.randrange(len(bad))] = rng.randrange(256)
            out.write_bytes(bytes(bad[: rng.randrange(len(bad) // 2, len(bad) + 1)]))
        else:
            mutated = json.loads(json.dumps(doc))
            for _ in range(rng.randrange(1, 4)):
                _mutate_doc(mutated, rng)
            _write(out, mutated, blob)
        try:
            g = jit.load(str(out))
        except GraphFormatError as e:
            assert str(out) in str(e)
            outcomes["refused"] += 1
            continue
        outcomes["loaded"] += 1
        with lz.using_config("use_numba", False):
            try:
                g(x)
            except (GuardError, GraphFormatError):
                pass
    assert outcomes["refused"] > 100 and outcomes["loaded"] > 0, outcomes
