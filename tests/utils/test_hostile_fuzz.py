"""Fuzzing every loader (issue 32): a small valid file of each format, ~200 deterministic
mutations (truncations, flipped and overwritten bytes, insertions, edited header fields),
and each outcome must be a successful load or the format's one error naming the file --
never another exception, a crash or a hang."""
import collections
import io
import json
import random
import struct
import zipfile

import numpy as np
import pytest
import torch

import lezero as lz
from lezero.utils import serialization as ser

N = 200
OBJ = {"model": {"w": np.arange(6.0).reshape(2, 3), "b": np.array([1, 2], np.int64),
                 "h": np.ones(2, np.float16)}, "epoch": 3, "pair": (1, "x"), "ok": None}


def byte_mutations(data, seed, n=N):
    """``n`` mutated copies of ``data``: truncated, bits flipped, 4 bytes overwritten with
    extreme values, bytes inserted, one byte replaced (cycling through the five)."""
    rng = random.Random(seed)
    for i in range(n):
        b = bytearray(data)
        at = rng.randrange(len(b))
        kind = i % 5
        if kind == 0:
            del b[at:]
        elif kind == 1:
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif kind == 2:
            b[at:at + 4] = rng.choice([b"\xff" * 4, b"\0" * 4, b"\x7f\xff\xff\xff",
                                       b"\0\0\0\x80"])
        elif kind == 3:
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            b[at] = rng.randrange(256)
        yield bytes(b)


def rezip(source, member_filter, seed, n=N):
    """Copies of the zip ``source`` whose members chosen by ``member_filter`` are mutated
    and written back with valid CRCs, so the mutations reach the parser, not zipfile."""
    with zipfile.ZipFile(io.BytesIO(source)) as z:
        members = [(info.filename, z.read(info)) for info in z.infolist()]
    targets = [name for name, _ in members if member_filter(name)]
    rng = random.Random(seed)
    for i in range(n):
        victim = targets[i % len(targets)]
        mutated = dict(members)
        *_, mutated[victim] = byte_mutations(mutated[victim], rng.random(), 1 + i % 5)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for name, _ in members:
                z.writestr(name, mutated[name])
        yield buf.getvalue()


def header_edits(data, seed, n=N):
    """Copies of a safetensors file whose JSON header has one field replaced by a hostile
    value (negative, huge, wrong type, deeply nested ...)."""
    (length,) = struct.unpack("<Q", data[:8])
    header, body = json.loads(data[8:8 + length]), data[8 + length:]
    values = [-1, 0, 2 ** 63, 2 ** 64 + 5, 1.5, "F32", None, [], {}, [[0]], True, "x" * 300,
              [2 ** 40, 2 ** 40], [0, 2 ** 70], [4, 2], [1] * 70, "BF16", "U64"]
    rng = random.Random(seed)
    for _ in range(n):
        edited = json.loads(json.dumps(header))
        name = rng.choice(sorted(k for k in edited if k != "__metadata__"))
        field = rng.choice(["dtype", "shape", "data_offsets"])
        old = edited[name].get(field)
        if rng.random() < 0.3 and isinstance(old, list) and old:      # one element only
            old[rng.randrange(len(old))] = rng.choice(values)
        else:
            edited[name][field] = rng.choice(values)
        text = json.dumps(edited).encode()
        yield struct.pack("<Q", len(text)) + text + body


def check_all(tmp_path, ext, mutations, error):
    """Load each mutation; count the outcomes; any other exception fails the test."""
    path = tmp_path / f"fuzz{ext}"
    outcomes = collections.Counter()
    for i, data in enumerate(mutations):
        path.write_bytes(data)
        try:
            lz.load(path)
            outcomes["loaded"] += 1
        except error as e:
            assert str(path) in str(e), f"mutation {i}: {e}"
            outcomes["refused"] += 1
    assert sum(outcomes.values()) >= N and outcomes["refused"] > N // 4, outcomes
    return outcomes


def _torch_file(tmp_path, legacy=False):
    sd = collections.OrderedDict(w=torch.arange(6.0).reshape(2, 3), b=torch.tensor([1, 2]))
    obj = {"model": sd, "t": sd["w"].t(), "epoch": 3, "np": np.arange(3), "meta": {"x": (1,)}}
    torch.save(obj, tmp_path / "src.pt", _use_new_zipfile_serialization=not legacy)
    return (tmp_path / "src.pt").read_bytes()


@pytest.mark.timeout(60)
def test_fuzzed_pt_pickles(tmp_path):
    data = _torch_file(tmp_path)
    check_all(tmp_path, ".pt", rezip(data, lambda n: n.endswith(".pkl"), 1), ser.TorchFileError)


@pytest.mark.timeout(60)
def test_fuzzed_pt_archives_and_legacy_files(tmp_path):
    check_all(tmp_path, ".pt", byte_mutations(_torch_file(tmp_path), 2), ser.TorchFileError)
    check_all(tmp_path, ".pth", byte_mutations(_torch_file(tmp_path, legacy=True), 3),
              ser.TorchFileError)


@pytest.mark.timeout(60)
def test_fuzzed_safetensors(tmp_path):
    lz.save(OBJ, tmp_path / "src.safetensors")
    data = (tmp_path / "src.safetensors").read_bytes()
    check_all(tmp_path, ".safetensors", byte_mutations(data, 4), ser.SafetensorsError)
    check_all(tmp_path, ".safetensors", header_edits(data, 5), ser.SafetensorsError)


@pytest.mark.timeout(60)
def test_fuzzed_npz(tmp_path):
    lz.save(OBJ, tmp_path / "src.npz")
    data = (tmp_path / "src.npz").read_bytes()
    check_all(tmp_path, ".npz", byte_mutations(data, 6), ser.NpzFormatError)
    check_all(tmp_path, ".npz", rezip(data, lambda n: n.endswith(".npy"), 7),
              ser.NpzFormatError)
    np.savez_compressed(tmp_path / "c.npz", a=np.arange(50), b=np.eye(4))
    check_all(tmp_path, ".npz", byte_mutations((tmp_path / "c.npz").read_bytes(), 8),
              ser.NpzFormatError)


@pytest.mark.timeout(60)
def test_fuzzed_hdf5(tmp_path):
    lz.save(OBJ, tmp_path / "src.h5")
    check_all(tmp_path, ".h5", byte_mutations((tmp_path / "src.h5").read_bytes(), 9),
              ser.HDF5FormatError)
