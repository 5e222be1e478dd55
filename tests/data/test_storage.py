"""File-backed datasets: memmap, .npy, .npz, HDF5, IDX and image folders."""
import gzip
import os
import pickle

import numpy as np
import pytest

from lezero.data import DataLoader
from lezero.data.datasets import (HDF5Dataset, ImageFolder, MemmapDataset, NpyDataset,
                                  NpzDataset, load_image, read_idx, write_idx)


@pytest.fixture
def rows():
    return np.arange(50 * 6, dtype=np.float32).reshape(50, 2, 3)


def test_npy_dataset_is_memory_mapped_and_pickles_small(tmp_path, rows):
    path = tmp_path / "rows.npy"
    np.save(path, rows)
    np.save(tmp_path / "t.npy", np.arange(50) % 7)
    ds = NpyDataset(path, targets=str(tmp_path / "t.npy"), transform=lambda x: x * 2)
    assert isinstance(ds.data, np.memmap)          # never loaded whole
    x, t = ds[13]
    np.testing.assert_array_equal(x, rows[13] * 2)
    assert t == 13 % 7 and isinstance(t, int)
    assert not isinstance(x, np.memmap)            # a sample is a copy, not a view
    assert len(pickle.dumps(NpyDataset(path))) < 1000     # a file name, not the data
    batch = ds.__getitems__([5, -1, 5, 0])
    np.testing.assert_array_equal(np.stack([b[0] for b in batch]),
                                  rows[[5, 49, 5, 0]] * 2)


def test_memmap_dataset_and_loader_with_workers(tmp_path, rows):
    path = tmp_path / "raw.bin"
    rows.tofile(path)
    ds = MemmapDataset(path, np.float32, rows.shape, targets=np.arange(50))
    loader = DataLoader(ds, batch_size=8, shuffle=True, num_workers=2, seed=0)
    seen = {}
    for x, t in loader:
        for xi, ti in zip(x, t):
            seen[int(ti)] = xi
    assert sorted(seen) == list(range(50))
    for i, xi in seen.items():
        np.testing.assert_array_equal(xi, rows[i])
    with pytest.raises(ValueError, match=r"has 1200 bytes, shape \(51, 2, 3\) of float32 "
                                         r"at offset 8 needs 1232"):
        MemmapDataset(path, np.float32, (51, 2, 3), offset=8)
    with pytest.raises(FileNotFoundError, match="no such file"):
        MemmapDataset(tmp_path / "missing.bin", np.uint8, (1,))
    with pytest.raises(IndexError, match="out of range"):
        ds[50]


def test_npz_dataset(tmp_path, rows):
    path = tmp_path / "a.npz"
    np.savez_compressed(path, x=rows, y=np.arange(50))
    ds = NpzDataset(path, "x", "y")
    x, y = ds[7]
    np.testing.assert_array_equal(x, rows[7])
    assert y == 7 and len(ds) == 50
    with pytest.raises(KeyError, match=r"no array 'z'; it has \['x', 'y'\]"):
        NpzDataset(path, "z")


@pytest.mark.timeout(60)
def test_hdf5_dataset_reads_rows_in_workers(tmp_path, rows):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        f["images"] = rows
        f["labels"] = np.arange(50)
    ds = HDF5Dataset(path, "images", "labels")
    x, y = ds[42]
    np.testing.assert_array_equal(x, rows[42])
    assert y == 42
    got = ds.__getitems__([9, 3, 9])
    np.testing.assert_array_equal(np.stack([g[0] for g in got]), rows[[9, 3, 9]])
    assert [g[1] for g in got] == [9, 3, 9]
    batches = list(DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, seed=1))
    labels = np.concatenate([b[1] for b in batches])
    images = np.concatenate([b[0] for b in batches])
    assert sorted(labels.tolist()) == list(range(50))
    np.testing.assert_array_equal(images, rows[labels])
    with pytest.raises(KeyError, match="no dataset 'nope'"):
        HDF5Dataset(path, "nope")


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32,
                                   np.float64])
def test_idx_round_trip(tmp_path, dtype):
    a = (np.arange(2 * 3 * 4) - 5).astype(dtype).reshape(2, 3, 4)
    if dtype == np.uint8:
        a = np.abs(a).astype(dtype)
    for name in ("a.idx", "a.idx.gz"):
        write_idx(str(tmp_path / name), a)
        b = read_idx(tmp_path / name)
        assert b.dtype == a.dtype and b.dtype.isnative
        np.testing.assert_array_equal(a, b)


def test_idx_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad.gz"
    with gzip.open(bad, "wb") as f:
        f.write(b"\x00\x00\x08\x02\x00\x00\x00\x03\x00\x00\x00\x03" + b"\x01" * 5)
    with pytest.raises(ValueError, match="should hold 9 data bytes for shape \\(3, 3\\), "
                                         "found 5"):
        read_idx(bad)
    other = tmp_path / "x.idx"
    other.write_bytes(b"PK\x03\x04")
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(other)
    with pytest.raises(TypeError, match="no IDX type code"):
        write_idx(str(tmp_path / "c.idx"), np.zeros(2, np.uint32))
    assert sorted(os.listdir(tmp_path)) == ["bad.gz", "x.idx"]      # no temp file left


def test_image_folder_decodes_png_and_jpeg(tmp_path):
    from PIL import Image
    rng = np.random.default_rng(0)
    originals = {}
    for cls in ("cat", "dog"):
        os.makedirs(tmp_path / cls)
        for k in range(3):
            arr = rng.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
            path = tmp_path / cls / f"{k}.png"
            Image.fromarray(arr).save(path)
            originals[str(path)] = arr
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "dog" / "x.jpg")
    (tmp_path / "dog" / "notes.txt").write_text("not an image")
    ds = ImageFolder(tmp_path)
    assert ds.classes == ["cat", "dog"] and len(ds) == 7
    assert ds.targets == [0, 0, 0, 1, 1, 1, 1]
    for path, _ in ds.samples:
        if path.endswith(".png"):
            np.testing.assert_array_equal(load_image(path), originals[path])   # lossless
    x, t = ds[6]
    assert x.shape == (4, 4, 3) and x.dtype == np.uint8 and t == 1
    assert load_image(ds.samples[0][0], mode="L").shape == (5, 7)
    with pytest.raises(FileNotFoundError, match="no class folders"):
        ImageFolder(tmp_path / "cat")
