"""Fuzzing every dataset file format LeZero reads (issue 32).

For each format: a small valid file, then 200 deterministic mutations of it (truncations,
random bytes, saturated or zeroed words, bytes set to boundary values near the header,
duplicated and appended chunks).  Every outcome must be a good load (and every sample
then reads) or the format's one error type naming the file: never another exception, a
hang or a crash.
"""
import collections
import io
import os
import pickle
import tarfile

import numpy as np
import pytest

from lezero.data.datasets import (CIFAR10, ArchiveError, CIFARFileError, HDF5Dataset,
                                  HDF5FileError, IdxFileError, ImageFileError, NpyDataset,
                                  NpyFileError, NpzDataset, NpzFileError, extract_tar,
                                  load_image, read_idx, write_idx)

N_MUTATIONS = 200


def mutations(data, seed):
    """``N_MUTATIONS`` deterministic variants of ``data`` (bytes)."""
    rng = np.random.default_rng(seed)
    n = len(data)
    for k in range(N_MUTATIONS):
        b = bytearray(data)
        pos = int(rng.integers(0, n))
        kind = k % 7
        if kind == 0:
            b = b[:pos]
        elif kind == 1:
            for _ in range(int(rng.integers(1, 5))):
                b[int(rng.integers(0, n))] = int(rng.integers(0, 256))
        elif kind in (2, 3):
            b[pos:pos + 8] = (b"\xff" if kind == 2 else b"\x00") * len(b[pos:pos + 8])
        elif kind == 4:                  # boundary values where headers and sizes live
            b[int(rng.integers(0, min(n, 256)))] = int(rng.choice([0, 1, 0x7F, 0x80, 0xFF]))
        elif kind == 5:
            end = min(n, pos + int(rng.integers(1, 64)))
            b[pos:pos] = b[pos:end]
        else:
            b += rng.integers(0, 256, int(rng.integers(1, 100)), dtype=np.uint8).tobytes()
        yield bytes(b)


def read_all(ds):
    """Touch every sample, one by one and as one batch."""
    for i in range(len(ds)):
        ds[i]
    ds.__getitems__(list(range(len(ds))))


# ----- one valid file per format, and how to load it ------------------------------------------

def make_idx(folder):
    path = folder / "v.idx"
    write_idx(str(path), np.arange(60, dtype=np.uint8).reshape(3, 4, 5))
    return path.read_bytes()


def make_idx_gz(folder):
    path = folder / "v.idx.gz"
    write_idx(str(path), np.arange(60, dtype=np.int16).reshape(3, 20))
    return path.read_bytes()


def make_npy(folder):
    buf = io.BytesIO()
    np.save(buf, np.arange(24, dtype=np.float32).reshape(6, 2, 2))
    return buf.getvalue()


def make_npz(folder, compressed=True):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(
        buf, x=np.arange(40, dtype=np.float64).reshape(10, 4), y=np.arange(10))
    return buf.getvalue()


def make_h5(folder):
    import h5py
    path = folder / "v.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(24.0).reshape(6, 4), chunks=(2, 4),
                         compression="gzip")
        f["y"] = np.arange(6)
    return path.read_bytes()


def make_cifar(folder):
    rng = np.random.default_rng(0)
    return pickle.dumps({b"data": rng.integers(0, 256, (2, 3072), dtype=np.uint8),
                         b"labels": [3, 7], b"batch_label": b"test"}, protocol=2)


def make_tar(folder, mode="w:gz"):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in (("d/a.txt", b"alpha" * 20), ("d/b.bin", bytes(range(200)))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def make_png(folder):
    from PIL import Image
    buf = io.BytesIO()
    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)).save(buf, "PNG")
    return buf.getvalue()


def load_cifar(path):
    CIFAR10(path.parent.parent, train=False)


def load_tar(path):
    extract_tar(path, path.parent / f"out-{path.name}")


FORMATS = {
    "idx": (make_idx, "m.idx", read_idx, IdxFileError),
    "idx.gz": (make_idx_gz, "m.idx.gz", read_idx, IdxFileError),
    "npy": (make_npy, "m.npy", lambda p: read_all(NpyDataset(p)), NpyFileError),
    "npz-deflated": (make_npz, "m.npz", lambda p: read_all(NpzDataset(p, "x", "y")),
                     NpzFileError),
    "npz-stored": (lambda d: make_npz(d, compressed=False), "m.npz",
                   lambda p: read_all(NpzDataset(p, "x", "y")), NpzFileError),
    "hdf5": (make_h5, "m.h5", lambda p: read_all(HDF5Dataset(p, "x", "y")), HDF5FileError),
    "cifar-batch": (make_cifar, "cifar-10-batches-py/test_batch", load_cifar,
                    CIFARFileError),
    "tar.gz": (make_tar, "m.tar.gz", load_tar, ArchiveError),
    "tar": (lambda d: make_tar(d, "w"), "m.tar", load_tar, ArchiveError),
    "png": (make_png, "m.png", load_image, ImageFileError),
}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_mutation_loads_or_raises_the_format_error(fmt, tmp_path):
    if fmt == "hdf5":
        pytest.importorskip("h5py")
    make, name, load, error = FORMATS[fmt]
    valid = make(tmp_path)
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(valid)
    load(path)                                      # the valid file loads
    outcomes, wrong = collections.Counter(), []
    for k, data in enumerate(mutations(valid, seed=sum(map(ord, fmt)))):
        path.write_bytes(data)
        try:
            load(path)
            outcomes["loaded"] += 1
        except error as e:
            assert os.path.basename(str(path)) in str(e), f"mutation {k}: {e}"
            outcomes["refused"] += 1
        except Exception as e:          # anything else is a defect: collect and report
            wrong.append(f"mutation {k}: {type(e).__name__}: {e}")
    assert wrong == [], "\n".join(wrong[:10])
    assert outcomes["refused"] >= 20 and sum(outcomes.values()) == N_MUTATIONS, outcomes
