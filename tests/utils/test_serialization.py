"""lz.save / lz.load: round trips in every format, atomic writes, foreign files, errors."""
import json
import os
import struct

import numpy as np
import pytest
import torch

import lezero as lz
from lezero.utils import safetensors as st
from lezero.utils import serialization

FORMATS = ["npz", "h5", "safetensors"]


def sample():
    rng = np.random.default_rng(0)
    return {
        "model": {
            "fc.weight": rng.standard_normal((4, 3)).astype(np.float32),
            "fc.bias": lz.Parameter(np.arange(4, dtype=np.float32)),
            "bn.num_batches_tracked": np.array(7, dtype=np.int64),
            "half": rng.standard_normal(5).astype(np.float16),
            "transposed": np.arange(6.0).reshape(2, 3).T,            # not C-contiguous
            "empty": np.zeros((0, 3), np.float32),
        },
        "optimizer": {"state": {0: {"step": 3, "exp_avg": np.ones(3, np.float64)}},
                      "param_groups": [{"lr": 0.001, "betas": (0.9, 0.999), "amsgrad": False,
                                        "foreach": None, "params": [0, 1]}]},
        "epoch": 12, "loss": 0.25, "best": float("inf"), "tag": "run/α%1", "flags": [True, None],
        "np_scalar": np.float32(1.5), "np_int": np.int64(-3),
        "dtypes": [np.array([1, -2], np.int8), np.array([250], np.uint8),
                   np.array([True, False]), np.array([1 + 2j], np.complex64)],
        0: "int key", "0": "str key", 1.5: "float key", "a/b": {".": {}, "": [], "%2F": ()},
    }


def assert_same(a, b, where="obj"):
    """Deep equality that also checks container types, dtypes and shapes."""
    if isinstance(b, lz.Variable):
        b = b.data
    if isinstance(b, (np.ndarray, np.generic)):
        assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b), where
        np.testing.assert_array_equal(a, b, err_msg=where)
        return
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(b, dict):
        assert list(a) == list(b), where
        for k in b:
            assert type(k) is type(list(a)[list(b).index(k)]), f"{where}: key {k!r} type"
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(b, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip(fmt, tmp_path):
    obj = sample()
    path = tmp_path / f"ck.{fmt}"
    lz.save(obj, path)
    back = lz.load(path)
    assert_same(back, obj)
    assert isinstance(back["model"]["fc.bias"], np.ndarray)      # Parameters load as arrays
    lz.save(back, str(path))                                      # and save again
    assert_same(lz.load(str(path)), obj)


@pytest.mark.parametrize("fmt", FORMATS)
def test_top_level_array_and_scalar_values(fmt, tmp_path):
    for obj in [np.arange(5.0), 3, "text", None, [np.zeros(2), {"x": 1}]]:
        lz.save(obj, tmp_path / f"x.{fmt}")
        assert_same(lz.load(tmp_path / f"x.{fmt}"), obj)


def test_files_are_what_their_extension_says(tmp_path):
    obj = {"w": np.ones((2, 2), np.float32), "nested": {"b": np.zeros(3)}, "epoch": 2}
    lz.save(obj, tmp_path / "a.npz")
    with np.load(tmp_path / "a.npz") as npz:
        np.testing.assert_array_equal(npz["w"], obj["w"])
        assert "nested/b" in npz.files
    h5py = pytest.importorskip("h5py")
    lz.save(obj, tmp_path / "a.h5")
    with h5py.File(tmp_path / "a.h5", "r") as f:
        assert isinstance(f["nested"], h5py.Group)
        np.testing.assert_array_equal(f["nested/b"][()], obj["nested"]["b"])
    lz.save(obj, tmp_path / "a.safetensors")
    tensors, meta = st.load_file_with_metadata(tmp_path / "a.safetensors")
    assert set(tensors) == {"w", "nested/b"} and "__lezero__" in meta


def test_flat_state_dict_is_a_standard_safetensors_file(tmp_path):
    sd = {"fc.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
          "fc.bias": np.array([1, 2], np.int64)}
    lz.save(sd, tmp_path / "m.safetensors")
    raw = (tmp_path / "m.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    assert n % 8 == 0 and "__metadata__" not in header
    assert header["fc.weight"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}
    assert header["fc.bias"] == {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]}
    assert raw[8 + n:8 + n + 24] == sd["fc.weight"].astype("<f4").tobytes()
    assert len(raw) == 8 + n + 40
    assert_same(lz.load(tmp_path / "m.safetensors"), sd)


def test_safetensors_reads_bf16_and_float8_like_torch(tmp_path, ml_dtypes_state):
    """Hand-written BF16 and F8 tensors decode to the values torch gives the same bits."""
    bits16 = np.random.default_rng(0).integers(0, 2 ** 16, 64).astype("<u2")
    codes = np.arange(256, dtype=np.uint8)
    entries = [("bf", "BF16", bits16), ("e4", "F8_E4M3", codes), ("e5", "F8_E5M2", codes)]
    header, offset, data = {"__metadata__": {"format": "pt"}}, 0, b""
    for name, dtype, raw in entries:
        header[name] = {"dtype": dtype, "shape": list(raw.shape),
                        "data_offsets": [offset, offset + raw.nbytes]}
        offset += raw.nbytes
        data += raw.tobytes()
    text = json.dumps(header).encode()
    (tmp_path / "x.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + data)
    loaded = lz.load(tmp_path / "x.safetensors")
    expected = {
        "bf": torch.from_numpy(bits16.astype(np.int16)).view(torch.bfloat16).float().numpy(),
        "e4": torch.from_numpy(codes).view(torch.float8_e4m3fn).float().numpy(),
        "e5": torch.from_numpy(codes).view(torch.float8_e5m2).float().numpy(),
    }
    kinds = {"bf": "bfloat16", "e4": "float8_e4m3fn", "e5": "float8_e5m2"}
    for name, ref in expected.items():
        assert loaded[name].dtype == ml_dtypes_state(kinds[name]), name
        np.testing.assert_array_equal(loaded[name].astype(np.float32), ref, err_msg=name)


def test_safetensors_rejects_hostile_headers(tmp_path):
    f32 = lambda begin, end, shape=(1,): {"dtype": "F32", "shape": list(shape),
                                          "data_offsets": [begin, end]}
    cases = [
        (dict(header={"a": f32(0, 4)}, length=10 ** 9), "does not fit the file"),
        (dict(header={"a": f32(0, 4), "b": f32(2, 6)}), "tile the data"),       # overlap
        (dict(header={"a": f32(4, 8)}), "starts at byte 4"),                    # gap
        (dict(header={"a": f32(0, 8, (3,))}), "does not match"),                # wrong size
        (dict(header={"a": {"dtype": "F99", "shape": [2], "data_offsets": [0, 8]}}),
         "dtype 'F99'"),
        (dict(header={"a": f32(0, 4)}), "4 trailing bytes"),
        (dict(header={"a": f32(0, 8, (2 ** 62, 2 ** 62))}), "invalid shape"),   # overflow
        (dict(header={"a": f32(0, 8, (-2,))}), "invalid shape"),
        (dict(header={"a": f32(0, 4)}, data=b"\0\0"), "does not match"),         # truncated
        (dict(header=[1, 2]), "must be a JSON object"),
    ]
    path = tmp_path / "h.safetensors"
    for spec, message in cases:
        text = json.dumps(spec["header"]).encode()
        n = spec.get("length", len(text))
        path.write_bytes(struct.pack("<Q", n) + text + spec.get("data", b"\0" * 8))
        with pytest.raises(ValueError, match=message):
            lz.load(path)


def test_reads_foreign_npz_and_h5(tmp_path):
    np.savez(tmp_path / "plain.npz", a=np.arange(3), b=np.eye(2))
    loaded = lz.load(tmp_path / "plain.npz")
    assert list(loaded) == ["a", "b"]
    np.testing.assert_array_equal(loaded["b"], np.eye(2))
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "plain.h5", "w") as f:
        f.create_dataset("layer1/kernel", data=np.ones((2, 2)))
        f.create_dataset("scalar", data=3.0)
    loaded = lz.load(tmp_path / "plain.h5")
    np.testing.assert_array_equal(loaded["layer1"]["kernel"], np.ones((2, 2)))
    assert loaded["scalar"].shape == () and loaded["scalar"] == 3.0


# ----- atomic writes --------------------------------------------------------------------------
class _CrashingFile:
    """Wraps the temporary file: the write that passes ``limit`` bytes writes part of its
    data and then raises, like a full disk or a killed process."""

    def __init__(self, f, limit, exc):
        self._f, self._left, self._exc = f, limit, exc

    def write(self, data):
        data = memoryview(data).cast("B")
        if len(data) > self._left:
            self._f.write(data[:self._left])
            raise self._exc
        self._left -= len(data)
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("exc", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_crash_mid_save_keeps_the_old_file(fmt, exc, tmp_path, monkeypatch):
    path = tmp_path / f"ck.{fmt}"
    lz.save({"w": np.zeros(4), "epoch": 1}, path)
    before = path.read_bytes()
    real_fdopen = os.fdopen
    monkeypatch.setattr(serialization.os, "fdopen",
                        lambda fd, *a, **k: _CrashingFile(real_fdopen(fd, *a, **k), 600, exc))
    big = {"w": np.ones(10_000), "epoch": 2}
    # h5py reports an error raised inside its file driver as OSError
    with pytest.raises((type(exc), OSError) if fmt == "h5" else type(exc)):
        lz.save(big, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == [path.name], "the temporary file was removed"
    assert lz.load(path)["epoch"] == 1
    lz.save(big, path)                                  # and a later save succeeds
    assert lz.load(path)["epoch"] == 2


def test_crash_before_rename_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ck.npz"
    lz.save({"epoch": 1}, path)

    def failing_fsync(fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output"):
        lz.save({"epoch": 2}, path)
    monkeypatch.undo()
    assert lz.load(path) == {"epoch": 1}
    assert os.listdir(tmp_path) == ["ck.npz"]


def test_new_files_get_normal_permissions(tmp_path):
    path = tmp_path / "ck.npz"
    lz.save({"a": 1}, path)
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    os.chmod(path, 0o600)
    lz.save({"a": 2}, path)
    assert path.stat().st_mode & 0o777 == 0o600         # an existing file keeps its mode


# ----- errors -----------------------------------------------------------------------------
def test_unknown_extension_names_path_and_formats(tmp_path):
    with pytest.raises(ValueError, match=r"ck\.pkl.*'\.pkl'.*\.npz"):
        lz.save({"a": 1}, tmp_path / "ck.pkl")
    with pytest.raises(ValueError, match="read-only"):
        lz.save({"a": 1}, tmp_path / "ck.pt")
    with pytest.raises(ValueError, match="'.txt'"):
        lz.load(tmp_path / "ck.txt")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("obj,message", [
    ({"model": {"bad": object()}}, r"builtins\.object at \['model'\]\['bad'\]"),
    ({"s": {1, 2}}, r"builtins\.set at \['s'\]"),
    ({"f": [lambda: 0]}, r"function at \['f'\]\[0\]"),
    ({(1, 2): np.zeros(1)}, "dict key .1, 2. at the top has type tuple"),
    ({"o": np.array([None, 1], dtype=object)}, r"\['o'\] has dtype object"),
])
def test_unsupported_objects_name_key_and_type(obj, message, tmp_path):
    path = tmp_path / "ck.npz"
    lz.save({"old": True}, path)
    with pytest.raises(TypeError, match=message):
        lz.save(obj, path)
    assert lz.load(path) == {"old": True}


@pytest.mark.gpu
def test_cupy_arrays_save_as_numpy(tmp_path):
    import cupy
    x = lz.Parameter(cupy.arange(4, dtype=cupy.float32))
    for fmt in FORMATS:
        lz.save({"x": x, "raw": cupy.ones(2)}, tmp_path / f"g.{fmt}")
        back = lz.load(tmp_path / f"g.{fmt}")
        assert type(back["x"]) is np.ndarray and type(back["raw"]) is np.ndarray
        np.testing.assert_array_equal(back["x"], np.arange(4, dtype=np.float32))


def _npz_with_skeleton(path, skeleton_doc, arrays):
    text = np.frombuffer(json.dumps(skeleton_doc).encode(), np.uint8)
    np.savez(path, __lezero__=text, **arrays)


def test_bfloat16_bits_in_npz_decode_like_torch(tmp_path):
    """Without ml_dtypes a bfloat16 leaf (stored as its uint16 bits) loads as float32."""
    bits = np.array([0x3FC0, 0xC010, 0x7F80, 0x0001], np.uint16)    # 1.5, -2.25, inf, tiny
    doc = {"version": 1, "object": {"$": "dict", "items": [
        ["w", {"$": "array", "name": "w", "dtype": "bfloat16"}]]}}
    _npz_with_skeleton(tmp_path / "bf.npz", doc, {"w": bits})
    loaded = lz.load(tmp_path / "bf.npz")["w"]
    expected = torch.from_numpy(bits.astype(np.int16)).view(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(loaded, expected)
    assert loaded[0] == 1.5 and loaded[1] == -2.25 and np.isinf(loaded[2])


def test_newer_or_broken_skeleton_is_a_clear_error(tmp_path):
    _npz_with_skeleton(tmp_path / "new.npz", {"version": 99, "object": 1}, {})
    with pytest.raises(ValueError, match="format 99"):
        lz.load(tmp_path / "new.npz")
    _npz_with_skeleton(tmp_path / "bad.npz", {"version": 1,
                                              "object": {"$": "array", "name": "gone"}}, {})
    with pytest.raises(ValueError, match="names array 'gone'"):
        lz.load(tmp_path / "bad.npz")
