"""Hostile ``.pt`` files (issue 32): allowed globals abused through BUILD, crafted NumPy
dtypes and arrays, shared references, zip bombs, sizes past the file, and malformed files
that must raise the format's one error (``TorchFileError``, a ValueError) naming the file."""
import collections
import pickle
import zipfile

import numpy as np
import pytest
import torch

import lezero as lz
from lezero.utils import torch_pickle
from tests.utils import hostile_payloads as hp


def refused(path, match=None, kind=None):
    """Loading ``path`` raises the format's error (``kind``, default TorchFileError),
    a ValueError whose message names the file and matches ``match``."""
    kind = kind or torch_pickle.TorchFileError
    with pytest.raises(kind, match=match) as info:
        lz.load(path)
    assert isinstance(info.value, ValueError)
    assert str(path) in str(info.value)
    return info.value


# ----- item 1: NumPy dtypes and arrays ------------------------------------------------------
def test_a_structured_dtype_with_a_field_past_its_item_is_refused(tmp_path):
    """numpy.dtype + BUILD used to place a float64 field 100000 bytes into a 4-byte item:
    printing the loaded array read heap memory."""
    e = refused(hp.archive(tmp_path / "dtype.pt", {"d": hp.structured_dtype()}), "numpy.dtype")
    assert isinstance(e, torch_pickle.UnsafePickleError)
    array = hp.numpy_array((1, (2,), hp.structured_dtype(), False, b"\0" * 8))
    refused(hp.archive(tmp_path / "array.pt", {"a": array}), "refusing 'V4'")


@pytest.mark.parametrize("spec", ["O8", "V8", "U3", "S4", "M8[s]", "f4,i4", "(2,)f4"])
def test_only_numeric_dtypes_are_built(spec, tmp_path):
    path = hp.archive(tmp_path / "d.pt", {"d": hp.Reduce(np.dtype, (spec, False, True))})
    refused(path, "only bool, integer, float and complex dtypes load")


def test_an_object_array_is_refused(tmp_path):
    """The docs always said object arrays are refused; a pickled one used to load."""
    path = hp.archive(tmp_path / "obj.pt", {"a": np.array([1, "text"], dtype=object)})
    refused(path, "refusing 'O8'")


@pytest.mark.parametrize("state,message", [
    ((1, (3,), np.dtype("f4"), False, b"\0" * 8), r"needs 12 bytes of data, got 8"),
    ((1, (2 ** 40, 2 ** 40), np.dtype("f4"), False, b"\0"), "invalid shape"),
    ((1, (-1,), np.dtype("f4"), False, b"\0"), "invalid shape"),
    ((1, (2,), np.dtype("f4"), False, [1.0, 2.0]), "got list"),
])
def test_numpy_array_states_are_checked_before_use(state, message, tmp_path):
    refused(hp.archive(tmp_path / "a.pt", {"a": hp.numpy_array(state)}), message)


def test_plain_numpy_values_still_load_in_both_byte_orders_and_protocols(tmp_path):
    obj = {"be": np.arange(3, dtype=">i4"), "f": np.asfortranarray(np.eye(2, 3)),
           "c": np.array([1 + 2j], np.complex64), "s": np.float16(1.5), "dt": np.dtype(">f8")}
    for protocol in (2, 4, 5):
        hp.archive(tmp_path / "ok.pt", pickle.dumps(obj, protocol=protocol))
        back = lz.load(tmp_path / "ok.pt")
        for key in ("be", "f", "c"):
            np.testing.assert_array_equal(back[key], obj[key])
            assert back[key].dtype == obj[key].dtype, (protocol, key)
        assert back["f"].flags.f_contiguous and back["s"] == np.float16(1.5)
        assert back["dt"] == np.dtype(">f8")


# ----- item 1 siblings: BUILD on the allowed globals themselves -----------------------------
@pytest.mark.parametrize("module,name", [
    ("torch", "FloatStorage"), ("torch", "float32"), ("torch._utils", "_rebuild_tensor_v2"),
    ("numpy", "ndarray"), ("collections", "OrderedDict"), ("torch", "Tensor"),
])
def test_build_cannot_change_an_allowed_global(module, name, tmp_path):
    """BUILD on ``torch.FloatStorage`` used to rewrite the allow-list entry for the whole
    process (its element type became float64: every later float32 file loaded wrong)."""
    for state in (hp.dict_opcodes({"spec": "<f8"}),
                  b"N" + hp.dict_opcodes({"__defaults__": "x"}) + b"\x86"):   # slot state
        path = tmp_path / "build.pt"
        hp.archive(path, hp.global_then_build(module, name, state))
        refused(path)
    torch.save({"w": torch.arange(4.0)}, tmp_path / "good.pt")
    np.testing.assert_array_equal(lz.load(tmp_path / "good.pt")["w"], [0, 1, 2, 3])


def test_build_cannot_replace_a_loaded_tensor(tmp_path):
    """A tensor rebuilt from a storage, then BUILT with an object-array state."""
    data = hp.tensor_pickle(0, (2,), (1,), state=(1, (2,), np.dtype("O"), False, [1, 2]))
    refused(hp.archive(tmp_path / "t.pt", data, {"0": np.zeros(4, "<f4").tobytes()}))


def test_rebuild_v3_takes_only_a_torch_dtype(tmp_path):
    data = np.arange(4, dtype="<f4").tobytes()
    path = hp.archive(tmp_path / "v3.pt", hp.tensor_pickle(0, (2,), (1,), dtype=torch.Tensor,
                                                           version=3), {"0": data})
    refused(path, "expected a torch dtype")
    hp.archive(path, hp.tensor_pickle(0, (2,), (1,), dtype=torch.int32, version=3), {"0": data})
    assert lz.load(path)["t"].dtype == np.int32


@pytest.mark.parametrize("size,stride,message", [
    ((2 ** 40, 2 ** 40), (0, 0), "invalid shape"),            # product past int64
    ((1,) * 40, (1,) * 40, "invalid shape"),                   # more dimensions than allowed
    ((2,), (True,), "invalid layout"),                         # a bool is not a stride
])
def test_tensor_layouts_that_numpy_cannot_hold_are_refused(size, stride, message, tmp_path):
    path = hp.archive(tmp_path / "l.pt", hp.tensor_pickle(0, size, stride),
                      {"0": np.zeros(4, "<f4").tobytes()})
    refused(path, message)


# ----- item 2: shared references, depth, cycles, bombs --------------------------------------
@pytest.mark.timeout(20)
def test_shared_references_load_in_linear_time(tmp_path):
    """``x = [x, x]`` 40 times is a 286-byte file that never finished loading."""
    path = hp.archive(tmp_path / "shared.pt", hp.shared_references(40))
    assert path.stat().st_size < 1000
    x = lz.load(path)
    for _ in range(40):
        assert x[0] is x[1]         # still shared, never copied
        x = x[0]
    assert x == []


def test_nesting_deeper_than_the_limit_is_refused(tmp_path):
    ok = lz.load(hp.archive(tmp_path / "ok.pt", hp.nested_lists(50)))
    assert len(ok) == 1
    refused(hp.archive(tmp_path / "deep.pt", hp.nested_lists(100_000)), "nested deeper than 100")


def test_a_reference_cycle_is_refused(tmp_path):
    x = []
    x.append(x)
    refused(hp.archive(tmp_path / "cycle.pt", x), "reference cycle")
    y = {}
    y["self"] = (y,)
    refused(hp.archive(tmp_path / "cycle2.pt", y), "reference cycle")


def _zeros_checkpoint(tmp_path, megabytes):
    torch.save({"w": torch.zeros(megabytes << 18)}, tmp_path / "plain.pt")
    with zipfile.ZipFile(tmp_path / "plain.pt") as src, \
            zipfile.ZipFile(tmp_path / "bomb.pt", "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    return tmp_path / "bomb.pt"


def test_a_zip_bomb_is_refused_before_it_inflates(tmp_path):
    """64 MB of zeros deflate to ~64 KB: 1000 times the file; the limit is 100 times."""
    bomb = _zeros_checkpoint(tmp_path, 64)
    assert bomb.stat().st_size < 200_000
    e = refused(bomb, r"member 'plain/data/0' would expand to 67108864 bytes, more than 100 "
                      r"times")
    assert "max_inflation" in str(e)
    w = lz.load(bomb, max_inflation=2000)["w"]            # trusted: raise the limit
    assert w.shape == (64 << 18,) and not w.any()
    with pytest.raises(ValueError, match="max_inflation must be a number >= 1"):
        lz.load(bomb, max_inflation=0)


@pytest.mark.timeout(20)
def test_a_stored_member_must_declare_its_true_size(tmp_path):
    """An uncompressed member whose central-directory entry claims 1 GB."""
    torch.save({"w": torch.ones(4)}, tmp_path / "ok.pt")
    raw = bytearray((tmp_path / "ok.pt").read_bytes())
    at, patched = raw.find(b"PK\x01\x02"), 0
    while at != -1:                          # the central directory entry of the storage
        name_len = int.from_bytes(raw[at + 28:at + 30], "little")
        if raw[at + 46:at + 46 + name_len].endswith(b"/data/0"):
            raw[at + 24:at + 28] = (1 << 30).to_bytes(4, "little")     # uncompressed size
            patched += 1
        at = raw.find(b"PK\x01\x02", at + 4)
    assert patched == 1
    (tmp_path / "big.pt").write_bytes(raw)
    refused(tmp_path / "big.pt", "declares 1073741824 bytes but stores 16")


@pytest.mark.timeout(20)
def test_a_pickle_length_or_memo_index_past_the_file_is_refused(tmp_path):
    """The C unpickler allocated what a length field said (2**60 bytes) and sized its memo
    table by the largest index named (LONG_BINPUT 1.4e9: 19 GB)."""
    payload = b"\x80\x04\x8e" + (2 ** 60).to_bytes(8, "little") + b"abc."     # BINBYTES8
    refused(hp.archive(tmp_path / "len.pt", payload), "declares more data than the file holds")
    bytearray8 = b"\x80\x05\x96" + (2 ** 60).to_bytes(8, "little") + b"abc."
    refused(hp.archive(tmp_path / "ba.pt", bytearray8), "declares more data")
    memo = b"\x80\x02]r" + (1_479_017_329).to_bytes(4, "little") + b"."    # LONG_BINPUT
    assert lz.load(hp.archive(tmp_path / "memo.pt", memo)) == []


def test_a_legacy_storage_larger_than_the_file_is_refused(tmp_path):
    path = hp.legacy_file(tmp_path / "legacy.pt",
                          lambda s: {"t": hp.Reduce(torch._utils._rebuild_tensor_v2,
                                                    (s, 0, (2,), (1,), False,
                                                     collections.OrderedDict()))},
                          numel=2 ** 40)
    refused(path, "declares 1099511627776 elements, more than the file holds")
    good = hp.legacy_file(tmp_path / "good.pt",
                          lambda s: {"t": hp.Reduce(torch._utils._rebuild_tensor_v2,
                                                    (s, 0, (2,), (1,), False,
                                                     collections.OrderedDict()))},
                          numel=2, data=np.array([1.5, 2.5], "<f4").tobytes())
    np.testing.assert_array_equal(lz.load(good)["t"], [1.5, 2.5])


# ----- item 3: one error type naming the file -----------------------------------------------
@pytest.mark.parametrize("payload,message", [
    (pickle.dumps(hp.Reduce(collections.OrderedDict, (1,)), protocol=2), "TypeError"),
    (pickle.dumps(hp.Reduce(set, ([[1]],)), protocol=2), "TypeError"),
    (hp.global_then_build("builtins", "set", hp.dict_opcodes({"a": "b"})), "refusing to change"),
    (b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01", "the pickle is truncated"),
    (b"\x80\x02h\x05.", "Memo value not found"),              # BINGET of nothing
    (b"\x80\x02]K\x01\x85R.", "TypeError"),                    # REDUCE on a list
    (pickle.dumps(hp.Reduce(bytes, (2 ** 40,)), protocol=2), "only bytes may be copied"),
    (pickle.dumps({"a": hp.Reduce(complex, ("1e999999999j",))}, protocol=2), None),
    (b"garbage", "malformed PyTorch file"),
])
def test_malformed_pickles_raise_torch_file_error_naming_the_file(payload, message, tmp_path):
    path = hp.archive(tmp_path / "bad.pt", payload)
    if message is None:                     # legal, if odd: loads
        lz.load(path)
        return
    refused(path, message)


def test_damaged_archives_name_the_file(tmp_path):
    torch.save({"w": torch.ones(3)}, tmp_path / "ok.pt")
    raw = (tmp_path / "ok.pt").read_bytes()
    (tmp_path / "trunc.pt").write_bytes(raw[: len(raw) // 2])
    refused(tmp_path / "trunc.pt", "not a PyTorch file|malformed")
    with zipfile.ZipFile(tmp_path / "ok.pt") as src, zipfile.ZipFile(tmp_path / "bo.pt", "w") as d:
        for info in src.infolist():
            d.writestr(info, b"x" * 100 if info.filename.endswith("byteorder")
                       else src.read(info))
    refused(tmp_path / "bo.pt", "has 100 bytes; at most 16 expected")


def test_error_classes_form_one_family():
    from lezero.utils import files, serialization
    assert issubclass(torch_pickle.UnsafePickleError, torch_pickle.TorchFileError)
    assert issubclass(torch_pickle.TorchFileError, files.FileFormatError)
    assert issubclass(torch_pickle.TorchFileError, pickle.UnpicklingError)
    assert issubclass(files.FileFormatError, ValueError)
    for name in ("FileFormatError", "TorchFileError", "UnsafePickleError", "SafetensorsError",
                 "NpzFormatError", "HDF5FormatError"):
        assert issubclass(getattr(serialization, name), files.FileFormatError), name
