"""Hostile HDF5, .npz and safetensors files and LeZero skeletons (issue 32): storage that
reaches outside the file, links, cycles, bombs, dtypes that are not numbers, and malformed
files, each refused with the format's one error (a ValueError naming the file).  Also
``Module.load_state_dict``'s checks of what it copies."""
import json
import os
import struct
import zipfile

import h5py
import numpy as np
import pytest

import lezero as lz
from lezero import nn
from lezero.utils import serialization as ser


def refused(path, kind, match=None, **kwargs):
    """``lz.load(path)`` raises ``ser.<kind>``: a ValueError naming the file."""
    with pytest.raises(getattr(ser, kind), match=match) as info:
        lz.load(path, **kwargs)
    assert isinstance(info.value, ValueError) and str(path) in str(info.value)
    return info.value


# ----- HDF5: nothing outside the file ------------------------------------------------------
@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_bytes(b"root:x:0:0:the password file\n" * 4)
    return path


def test_external_storage_is_refused_and_never_read(tmp_path, secret):
    """A dataset whose bytes live in another file returned that file (/etc/passwd)."""
    with h5py.File(tmp_path / "ext.h5", "w") as f:
        f.create_dataset("x", shape=(64,), dtype="u1", external=[(str(secret), 0, 64)])
    e = refused(tmp_path / "ext.h5", "HDF5FormatError", "'/x' uses external storage")
    assert "root:x" not in str(e)


def test_virtual_datasets_are_refused(tmp_path, secret):
    with h5py.File(tmp_path / "src.h5", "w") as f:
        f["d"] = np.arange(4.0)
    layout = h5py.VirtualLayout(shape=(4,), dtype="f8")
    layout[:] = h5py.VirtualSource(str(tmp_path / "src.h5"), "d", shape=(4,))
    with h5py.File(tmp_path / "vds.h5", "w") as f:
        f.create_virtual_dataset("v", layout)
    refused(tmp_path / "vds.h5", "HDF5FormatError", "'/v' uses virtual storage")


@pytest.mark.parametrize("make,kind", [
    (lambda other: h5py.ExternalLink(str(other), "/secret"), "ExternalLink"),
    (lambda other: h5py.SoftLink("/data"), "SoftLink"),
    (lambda other: h5py.SoftLink("/nowhere"), "SoftLink"),
])
def test_links_other_than_hard_links_are_refused(make, kind, tmp_path):
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["secret"] = np.arange(3)
    with h5py.File(tmp_path / "link.h5", "w") as f:
        f["data"] = np.ones(2)
        f["g/link"] = make(tmp_path / "other.h5")
    refused(tmp_path / "link.h5", "HDF5FormatError", f"'/g/link' is not a hard link but a {kind}")


@pytest.mark.timeout(20)
def test_hard_link_cycles_and_shared_objects_are_refused(tmp_path):
    with h5py.File(tmp_path / "cycle.h5", "w") as f:
        b = f.create_group("a/b")
        b["up"] = f["a"]
    refused(tmp_path / "cycle.h5", "HDF5FormatError", "'/a/b/up' links to an object reached")
    with h5py.File(tmp_path / "fan.h5", "w") as f:     # 2**30 paths through 30 groups
        g = f.create_group("g0")
        for i in range(1, 30):
            g["l"] = g["r"] = f.create_group(f"g{i}")
            g = f[f"g{i}"]
    refused(tmp_path / "fan.h5", "HDF5FormatError", "reached before")


def test_a_dataset_of_fill_values_is_bounded_by_the_file_size(tmp_path):
    """A 2 KB file may declare gigabytes that HDF5 'reads' as fill values."""
    with h5py.File(tmp_path / "fill.h5", "w") as f:
        f.create_dataset("z", shape=(2 ** 16, 8), dtype="f8", chunks=(1024, 8),
                         compression="gzip")
    assert os.path.getsize(tmp_path / "fill.h5") < 10_000
    refused(tmp_path / "fill.h5", "HDF5FormatError", "'/z' would expand to 4194304 bytes")
    z = lz.load(tmp_path / "fill.h5", max_inflation=10_000)["z"]
    assert z.shape == (2 ** 16, 8) and not z.any()


@pytest.mark.parametrize("make,message", [
    (lambda f: f.create_dataset("s", data=["a", "bc"], dtype=h5py.string_dtype()), "object"),
    (lambda f: f.create_dataset("c", data=np.zeros(2, [("a", "f4"), ("b", "i2")])), "dtype"),
    (lambda f: f.create_dataset("r", data=[f.ref]), "object"),
    (lambda f: f.create_dataset("n", data=h5py.Empty("f4")), "shape None"),
])
def test_datasets_that_are_not_numeric_arrays_are_refused(make, message, tmp_path):
    with h5py.File(tmp_path / "t.h5", "w") as f:
        make(f)
    refused(tmp_path / "t.h5", "HDF5FormatError", message)


def test_a_filter_that_is_not_built_in_is_refused(tmp_path):
    """HDF5 would search its plugin folder for code implementing filter 32004 (lz4)."""
    with h5py.File(tmp_path / "filter.h5", "w") as f:
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_chunk((4,))
        plist.set_filter(32004, h5py.h5z.FLAG_OPTIONAL, ())
        h5py.h5d.create(f.id, b"x", h5py.h5t.NATIVE_FLOAT, h5py.h5s.create_simple((8,)),
                        dcpl=plist)
    refused(tmp_path / "filter.h5", "HDF5FormatError", "needs HDF5 filter 32004")


@pytest.mark.parametrize("ext", [".pt", ".npz", ".safetensors", ".h5"])
def test_a_missing_file_is_still_file_not_found(ext, tmp_path):
    with pytest.raises(FileNotFoundError):
        lz.load(tmp_path / f"missing{ext}")


@pytest.mark.timeout(20)
@pytest.mark.parametrize("ext,kind", [(".pt", "TorchFileError"), (".npz", "NpzFormatError"),
                                      (".safetensors", "SafetensorsError"),
                                      (".h5", "HDF5FormatError")])
def test_a_pipe_is_refused_instead_of_blocking_forever(ext, kind, tmp_path):
    os.mkfifo(tmp_path / f"pipe{ext}")
    refused(tmp_path / f"pipe{ext}", kind, "not a regular file")
    (tmp_path / f"dir{ext}").mkdir()
    with pytest.raises(IsADirectoryError):
        lz.load(tmp_path / f"dir{ext}")


def test_a_file_that_is_not_hdf5_names_the_file(tmp_path):
    (tmp_path / "junk.h5").write_bytes(b"not an HDF5 file")
    refused(tmp_path / "junk.h5", "HDF5FormatError", "not a readable HDF5 file")
    with pytest.raises(FileNotFoundError):
        lz.load(tmp_path / "missing.h5")


def test_lezero_h5_files_still_round_trip_with_old_variable_length_skeletons(tmp_path):
    obj = {"w": np.arange(3.0), "meta": {"epoch": 2, "name": "run"}, "bits": np.ones(2, "S3")}
    lz.save(obj, tmp_path / "new.h5")
    back = lz.load(tmp_path / "new.h5")
    np.testing.assert_array_equal(back["w"], obj["w"])
    assert back["meta"] == obj["meta"] and back["bits"].dtype == np.dtype("S3")
    with h5py.File(tmp_path / "new.h5", "a") as f:       # the skeleton as files before had it
        text = f["__lezero__"][()].decode()
        del f["__lezero__"]
        f.create_dataset("__lezero__", data=text)
        assert h5py.check_string_dtype(f["__lezero__"].dtype).length is None
    assert lz.load(tmp_path / "new.h5")["meta"] == obj["meta"]


# ----- .npz --------------------------------------------------------------------------------
def test_npz_members_of_non_numeric_dtypes_are_refused(tmp_path):
    np.savez(tmp_path / "rec.npz", r=np.zeros(2, [("a", "f4"), ("b", "i2")]))
    refused(tmp_path / "rec.npz", "NpzFormatError", r"member 'r.npy': dtype .* is not loaded")
    np.savez(tmp_path / "obj.npz", o=np.array([1, None], dtype=object))
    refused(tmp_path / "obj.npz", "NpzFormatError", "member 'o.npy': dtype object")
    np.savez(tmp_path / "ok.npz", s=np.array(["ab", "c"]), b=np.array([b"x"]))
    assert lz.load(tmp_path / "ok.npz")["s"].tolist() == ["ab", "c"]     # fixed-width text


def test_an_npz_bomb_is_refused_before_it_inflates(tmp_path):
    np.savez_compressed(tmp_path / "bomb.npz", z=np.zeros(2 ** 23))
    refused(tmp_path / "bomb.npz", "NpzFormatError",
            "member 'z.npy' would expand to 67108992 bytes, more than 100 times")
    assert lz.load(tmp_path / "bomb.npz", max_inflation=5000)["z"].shape == (2 ** 23,)


def _npz_with_member(path, name, raw):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(name, raw)
    return path


def _npy(header, data=b""):
    text = repr(header).encode()
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + data


@pytest.mark.parametrize("raw,message", [
    (_npy({"descr": "<f4", "fortran_order": False, "shape": (1000,)}, b"\0" * 8),
     "needs 4000 bytes, the member has 8"),
    (_npy({"descr": "<f4", "fortran_order": False, "shape": (2 ** 62, 4)}), "invalid shape"),
    (_npy({"descr": "<f4", "fortran_order": False, "shape": (-1,)}), "invalid shape"),
    (_npy({"descr": "<f4", "fortran_order": False, "shape": "x"}), "bad .npy header"),
    (_npy({"descr": "<f4", "fortran_order": False, "shape": (1,) * 40}), "invalid shape"),
    (_npy({"descr": [("a", "<f4")], "fortran_order": False, "shape": (1,)}, b"\0" * 4),
     "is not loaded"),
    (b"\x93NUMPY\x09\x00", "unsupported .npy format version"),
    (b"not an npy", "bad .npy header"),
])
def test_npy_headers_are_checked_against_their_bytes(raw, message, tmp_path):
    refused(_npz_with_member(tmp_path / "m.npz", "a.npy", raw), "NpzFormatError", message)


def test_files_that_are_not_npz_name_the_file(tmp_path):
    (tmp_path / "text.npz").write_text("hello")
    refused(tmp_path / "text.npz", "NpzFormatError", "not a .npz file")
    refused(_npz_with_member(tmp_path / "x.npz", "readme.txt", b"hi"), "NpzFormatError",
            "'readme.txt' is not a .npy array")


# ----- LeZero skeletons (same checks in every format) ---------------------------------------
def _skeleton_npz(path, obj, arrays=None):
    text = np.frombuffer(json.dumps({"version": 1, "object": obj}).encode(), np.uint8)
    np.savez(path, __lezero__=text, **(arrays or {}))
    return path


@pytest.mark.parametrize("obj,message", [
    ({"$": "dict"}, "unknown skeleton entry"),                               # no items
    ({"$": "dict", "items": [[["a"], 1]]}, "unknown skeleton entry"),       # list as key
    ({"$": "dict", "items": [[1]]}, "unknown skeleton entry"),
    ({"$": "tuple", "items": 3}, "unknown skeleton entry"),
    ({"$": "array", "name": ["w"]}, "names array"),
    ({"$": "array", "name": "w", "dtype": "__class__"}, "unknown dtype tag"),
    ({"$": "array", "name": "w", "dtype": "bfloat16"}, "tagged bfloat16 holds float64"),
    ({"$": "array", "name": "w", "scalar": True}, "marked a scalar but has shape"),
    ({"$": "set", "items": []}, "unknown skeleton entry"),
])
def test_malformed_skeletons_raise_the_format_error(obj, message, tmp_path):
    path = _skeleton_npz(tmp_path / "s.npz", obj, {"w": np.zeros(2)})
    refused(path, "NpzFormatError", message)


def test_deep_skeletons_and_objects_are_refused_on_both_sides(tmp_path):
    text = b'{"version": 1, "object": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    np.savez(tmp_path / "deep.npz", __lezero__=np.frombuffer(text, np.uint8))
    refused(tmp_path / "deep.npz", "NpzFormatError", "RecursionError")
    refused(_skeleton_npz(tmp_path / "d2.npz", _nested(150)), "NpzFormatError",
            "deeper than 100")
    with pytest.raises(ValueError, match="nested deeper than 100 levels"):
        lz.save(_nested(5000), tmp_path / "x.npz")
    lz.save(_nested_obj(90), tmp_path / "ok.npz")          # what saves, loads
    assert lz.load(tmp_path / "ok.npz") == _nested_obj(90)


def _nested(depth):
    node = 1
    for _ in range(depth):
        node = [node]
    return node


def _nested_obj(depth):
    node = {"leaf": 1}
    for _ in range(depth):
        node = {"x": node}
    return node


# ----- safetensors ------------------------------------------------------------------------
def _safetensors(path, header, data=b""):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


@pytest.mark.parametrize("header,data,message", [
    (b"[" * 100_000 + b"]" * 100_000, b"", "not valid JSON"),            # RecursionError
    (b'{"a": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 4]}}',
     b"\0" * 4, "not valid JSON"),                                       # int too long
    ({"a": {"dtype": "F32", "shape": [1] * 65, "data_offsets": [0, 4]}}, b"\0" * 4,
     "invalid shape"),
    ({"a": {"dtype": "F32", "shape": [0, 2 ** 70], "data_offsets": [0, 0]}}, b"",
     "invalid shape"),
    ({"a": {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}}, b"\0" * 4,
     "invalid shape"),
    ({"a": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4,
     "unsupported dtype"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0.0, 4]}}, b"\0" * 4,
     "invalid data_offsets"),
    ({"a": [1, 2]}, b"", "invalid data_offsets"),
    ({"__metadata__": {"k": 1}}, b"", "__metadata__ must map strings"),
    (b"\xff\xfe", b"", "not valid JSON"),
])
def test_safetensors_headers_raise_safetensors_error_naming_the_file(header, data, message,
                                                                    tmp_path):
    refused(_safetensors(tmp_path / "h.safetensors", header, data), "SafetensorsError", message)


def test_safetensors_skeleton_errors_are_safetensors_errors(tmp_path):
    meta = {"__lezero__": json.dumps({"version": 1, "object": {"$": "array", "name": "gone"}})}
    path = _safetensors(tmp_path / "s.safetensors", {"__metadata__": meta})
    refused(path, "SafetensorsError", "names array 'gone'")


# ----- Module.load_state_dict ------------------------------------------------------------
@pytest.mark.parametrize("value,message", [
    (np.array(["1.5", "2", "3"]), "cannot copy <U3 values into 'bias'"),
    (np.array([1.0, None, 2.0], dtype=object), "cannot copy object values into 'bias'"),
    (np.array([1 + 1j, 2, 3]), "cannot copy complex128 values into 'bias'"),
    (np.zeros(3, [("a", "f4")]), "cannot copy"),
])
def test_load_state_dict_copies_only_numbers(value, message):
    layer = nn.Linear(2, 3)
    before = layer.bias.data.copy()
    for strict in (True, False):
        sd = {"weight": layer.weight.data, "bias": value}
        with pytest.raises(TypeError, match=message):
            layer.load_state_dict(sd, strict=strict)
    np.testing.assert_array_equal(layer.bias.data, before)


def test_load_state_dict_refuses_shape_mismatches_even_when_not_strict(tmp_path):
    layer = nn.LayerNorm(8)
    with pytest.raises(ValueError, match=r"size mismatch for 'bias': checkpoint has shape "
                                         r"\(1,\), the model has \(8,\)"):
        layer.load_state_dict({"bias": np.zeros(1, np.float32)}, strict=False)
    lz.save({"weight": np.ones(8, np.float32), "bias": np.zeros(3, np.float32)},
            tmp_path / "ln.npz")
    with pytest.raises(ValueError, match="'bias'.*\\(3,\\).*\\(8,\\)"):
        layer.load(tmp_path / "ln.npz", strict=False)
    with pytest.raises(TypeError, match="expected a dict of name -> array, got list"):
        layer.load_state_dict([np.ones(8)])
