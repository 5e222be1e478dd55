"""Reading torch.save files without torch, and refusing pickles that would run code."""
import collections
import io
import os
import pickle
import subprocess
import zipfile

import numpy as np
import pytest
import torch

import lezero as lz
from lezero.utils.torch_pickle import UnsafePickleError


def trained_sequential():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
                                torch.nn.Linear(4, 2))
    for _ in range(3):                      # move the running statistics and the counter
        model(torch.randn(8, 3))
    model[3].half()
    return model


def test_sequential_state_dict_loads_as_dict_of_arrays(tmp_path):
    sd = trained_sequential().state_dict()
    torch.save(sd, tmp_path / "model.pt")
    loaded = lz.load(tmp_path / "model.pt")
    assert type(loaded) is dict and list(loaded) == list(sd)
    assert loaded["1.num_batches_tracked"].dtype == np.int64
    assert loaded["1.num_batches_tracked"].shape == () and loaded["1.num_batches_tracked"] == 3
    assert loaded["3.weight"].dtype == np.float16
    for key, tensor in sd.items():
        ref = tensor.numpy()
        assert loaded[key].dtype == ref.dtype and loaded[key].shape == ref.shape, key
        np.testing.assert_array_equal(loaded[key], ref, err_msg=key)


def test_views_offsets_and_shared_storage(tmp_path):
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    obj = {"base": base, "t": base.t(), "strided": base[1:3, ::2], "row": base[2],
           "expanded": base[:1].expand(3, 6), "scalar": base[3, 5], "empty": base[:0]}
    torch.save(obj, tmp_path / "views.pth")
    loaded = lz.load(tmp_path / "views.pth")
    for key, tensor in obj.items():
        np.testing.assert_array_equal(loaded[key], tensor.numpy(), err_msg=key)
        assert loaded[key].shape == tuple(tensor.shape), key
    assert loaded["t"].strides == (8, 48)                  # a view, as in PyTorch ...
    assert np.shares_memory(loaded["t"], loaded["base"])   # ... of the shared storage
    loaded["base"][2, 0] = -1.0
    assert loaded["row"][0] == -1.0 and loaded["t"][0, 2] == -1.0


def test_parameters_dtypes_and_plain_values(tmp_path, ml_dtypes_state):
    rng = np.random.default_rng(0)
    bf = torch.from_numpy(rng.standard_normal(5).astype(np.float32)).bfloat16()
    f8 = torch.from_numpy(rng.standard_normal(6).astype(np.float32)).to(torch.float8_e4m3fn)
    obj = {"param": torch.nn.Parameter(torch.ones(2, 2)), "bf16": bf, "f8": f8,
           "u16": torch.tensor([1, 60000]).to(torch.uint16), "bool": torch.tensor([True, False]),
           "c64": torch.tensor([1 + 2j], dtype=torch.complex64), "i8": torch.tensor([-3], dtype=torch.int8),
           "meta": {"epoch": 4, "lr": 0.1, "name": "run", "ok": None, "pair": (1, 2), "set": {3},
                    "bytes": b"\x00\xff", "np": np.float64(2.5), "array": np.arange(3),
                    "dtype": torch.float16}}
    torch.save(obj, tmp_path / "mix.pt")
    loaded = lz.load(tmp_path / "mix.pt")
    np.testing.assert_array_equal(loaded["param"], np.ones((2, 2), np.float32))
    assert loaded["bf16"].dtype == ml_dtypes_state("bfloat16")
    assert loaded["f8"].dtype == ml_dtypes_state("float8_e4m3fn")
    np.testing.assert_array_equal(loaded["bf16"].astype(np.float32), bf.float().numpy())
    np.testing.assert_array_equal(loaded["f8"].astype(np.float32), f8.float().numpy())
    for key in ("u16", "bool", "c64", "i8"):
        assert loaded[key].dtype == obj[key].numpy().dtype, key
        np.testing.assert_array_equal(loaded[key], obj[key].numpy())
    meta = loaded["meta"]
    assert meta["epoch"] == 4 and meta["lr"] == 0.1 and meta["name"] == "run"
    assert meta["ok"] is None and meta["pair"] == (1, 2) and meta["set"] == {3}
    assert meta["bytes"] == b"\x00\xff" and meta["np"] == 2.5 and type(meta["np"]) is np.float64
    np.testing.assert_array_equal(meta["array"], np.arange(3))
    assert meta["dtype"] == np.float16


def test_torch_optimizer_checkpoint(tmp_path):
    model = trained_sequential().float()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 1},
               tmp_path / "ck.pt")
    ck = lz.load(tmp_path / "ck.pt")
    state = ck["optimizer"]["state"]
    assert sorted(state) == list(range(6))
    assert state[0]["step"].shape == () and float(state[0]["step"]) == 1.0
    np.testing.assert_array_equal(state[0]["exp_avg"], opt.state[model[0].weight]["exp_avg"].numpy())
    assert ck["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert ck["optimizer"]["param_groups"][0]["params"] == list(range(6))


def test_big_endian_archive(tmp_path):
    """byteorder 'big' means every storage's bytes are big-endian."""
    values = torch.tensor([1.5, -2.0, 3.25], dtype=torch.float32)
    torch.save({"x": values}, tmp_path / "le.pt")
    with zipfile.ZipFile(tmp_path / "le.pt") as src, \
            zipfile.ZipFile(tmp_path / "be.pt", "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("/byteorder"):
                data = b"big"
            elif "/data/" in info.filename:
                data = np.frombuffer(data, "<f4").astype(">f4").tobytes()
            dst.writestr(info, data)
    loaded = lz.load(tmp_path / "be.pt")
    np.testing.assert_array_equal(loaded["x"], values.numpy())
    assert loaded["x"].dtype.isnative


# ----- hostile files --------------------------------------------------------------------------
def fake_archive(path, payload, storages=None):
    """Write a torch-style zip whose data.pkl is ``payload`` (bytes)."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/byteorder", "little")
        for key, data in (storages or {}).items():
            z.writestr(f"archive/data/{key}", data)
    return path


class _Evil:
    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "pwned"
    yield path
    assert not path.exists(), "code from the pickle ran"


@pytest.mark.parametrize("make", [
    lambda m: (_Evil(os.system, (f"touch {m}",)), r"'posix\.system'"),
    lambda m: (_Evil(subprocess.Popen, (["touch", str(m)],)), r"'subprocess\.Popen'"),
    lambda m: ({"state": collections.OrderedDict(w=_Evil(eval, (f"open({str(m)!r}, 'w')",)))},
               r"'builtins\.eval'"),
    lambda m: (_Evil(getattr, ("text", "upper")), r"'builtins\.getattr'"),
])
def test_malicious_pickles_raise_and_never_run(make, marker, tmp_path):
    obj, name = make(marker)
    payload = pickle.dumps(obj, protocol=2)
    path = fake_archive(tmp_path / "evil.pt", payload)
    with pytest.raises(pickle.UnpicklingError, match=f"refusing to load global {name}"):
        lz.load(path)
    with pytest.raises(UnsafePickleError):
        lz.load(path)


def test_hand_written_global_opcodes_are_refused(marker, tmp_path):
    for proto_payload in [
        b"cbuiltins\neval\n(S'open(\"" + str(marker).encode() + b"\", \"w\")'\ntR.",  # GLOBAL
        b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x05touch\x85R.",                   # STACK_GLOBAL
        b"(S'touch x'\nios\nsystem\n.",                                             # INST
    ]:
        with pytest.raises(UnsafePickleError, match="refusing to load global"):
            lz.load(fake_archive(tmp_path / "op.pt", proto_payload))


def test_torch_save_of_a_malicious_object_is_refused(marker, tmp_path):
    torch.save({"w": torch.ones(2), "hook": _Evil(os.system, (f"touch {marker}",))},
               tmp_path / "ck.pt")
    with pytest.raises(UnsafePickleError, match="posix.system"):
        lz.load(tmp_path / "ck.pt")


def test_legacy_format_loads(tmp_path):
    """PyTorch's pre-1.6 format (four pickles, the key list, then raw storages)."""
    sd = trained_sequential().state_dict()
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    obj = {"model": sd, "t": base.t(), "base": base, "bf16": torch.tensor([1.5, -2.25]).bfloat16(),
           "epoch": 5}
    torch.save(obj, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    assert not zipfile.is_zipfile(tmp_path / "legacy.pt")
    loaded = lz.load(tmp_path / "legacy.pt")
    assert loaded["epoch"] == 5 and list(loaded["model"]) == list(sd)
    for key, tensor in sd.items():
        assert loaded["model"][key].dtype == tensor.numpy().dtype, key
        np.testing.assert_array_equal(loaded["model"][key], tensor.numpy(), err_msg=key)
    np.testing.assert_array_equal(loaded["t"], base.t().numpy())
    assert np.shares_memory(loaded["t"], loaded["base"])
    np.testing.assert_array_equal(loaded["bf16"], [1.5, -2.25])


def test_legacy_format_refuses_malicious_globals(marker, tmp_path):
    path = tmp_path / "legacy.pt"
    torch.save({"w": torch.ones(2), "x": _Evil(os.system, (f"touch {marker}",))}, path,
               _use_new_zipfile_serialization=False)
    with pytest.raises(UnsafePickleError, match="posix.system"):
        lz.load(path)
    (tmp_path / "raw.pt").write_bytes(pickle.dumps(_Evil(os.system, (f"touch {marker}",))))
    with pytest.raises(UnsafePickleError, match="posix.system"):
        lz.load(tmp_path / "raw.pt")
    (tmp_path / "num.pt").write_bytes(pickle.dumps(12345, protocol=2))
    with pytest.raises(ValueError, match="not a PyTorch file"):
        lz.load(tmp_path / "num.pt")


class _FakeStorage:
    pass


def _tensor_pickle(offset, size, stride, numel=4, key="0"):
    """data.pkl for one float tensor built on storage ``key`` (bypassing torch's checks)."""
    storage = _FakeStorage()

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if obj is storage:
                return ("storage", torch.FloatStorage, key, "cpu", numel)
            return None

    tensor = _Evil(torch._utils._rebuild_tensor_v2,
                   (storage, offset, size, stride, False, collections.OrderedDict()))
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump({"t": tensor})
    return buf.getvalue()


@pytest.mark.parametrize("offset,size,stride,message", [
    (0, (2, 2), (2, 1), None),                       # a legal view, as a control
    (0, (5,), (1,), "reaches element 4 of a storage of 4"),
    (3, (2,), (1,), "reaches element 4"),
    (0, (2, 2), (3, 1), "reaches element 4"),
    (0, (2,), (-1,), "invalid layout"),
    (-1, (1,), (1,), "invalid layout"),
])
def test_views_outside_their_storage_are_refused(offset, size, stride, message, tmp_path):
    data = np.arange(4, dtype="<f4").tobytes()
    path = fake_archive(tmp_path / "v.pt", _tensor_pickle(offset, size, stride), {"0": data})
    if message is None:
        np.testing.assert_array_equal(lz.load(path)["t"], [[0, 1], [2, 3]])
    else:
        with pytest.raises(pickle.UnpicklingError, match=message):
            lz.load(path)


def test_bad_storage_references(tmp_path):
    data = np.arange(4, dtype="<f4").tobytes()
    with pytest.raises(pickle.UnpicklingError, match="no 'archive/data/0'"):
        lz.load(fake_archive(tmp_path / "a.pt", _tensor_pickle(0, (2,), (1,))))
    with pytest.raises(pickle.UnpicklingError, match="invalid storage key"):
        lz.load(fake_archive(tmp_path / "b.pt", _tensor_pickle(0, (2,), (1,), key="../x"),
                             {"0": data}))
    with pytest.raises(ValueError, match="not a PyTorch file"):
        (tmp_path / "c.pt").write_bytes(b"hello")
        lz.load(tmp_path / "c.pt")
    with zipfile.ZipFile(tmp_path / "d.pt", "w") as z:
        z.writestr("m/constants.pkl", b"")
    with pytest.raises(ValueError, match="TorchScript"):
        lz.load(tmp_path / "d.pt")
