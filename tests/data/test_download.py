"""Downloads (checksums, mirrors, atomicity) and the real-data datasets, against fixture
files that the tests write locally: nothing here touches the network."""
import hashlib
import http.server
import io
import os
import pickle
import tarfile
import threading

import numpy as np
import pytest

from lezero.data.datasets import (CIFAR10, MNIST, FashionMNIST, check_integrity,
                                  download_from_mirrors, download_url, extract_tar, write_idx)


def md5(path):
    return hashlib.md5(open(path, "rb").read()).hexdigest()


@pytest.fixture
def served(tmp_path):
    """A folder of files and its file:// URL."""
    src = tmp_path / "mirror"
    src.mkdir()
    (src / "blob.bin").write_bytes(os.urandom(3_000_000))
    return src, src.as_uri() + "/"


def test_download_url_verifies_and_caches(served, tmp_path):
    src, url = served
    good = md5(src / "blob.bin")
    out = tmp_path / "cache"
    path = download_url(url + "blob.bin", out, checksum=good)
    assert md5(path) == good and check_integrity(path, good)
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    assert check_integrity(path, sha)
    (src / "blob.bin").write_bytes(b"changed")           # the cached copy is reused
    assert download_url(url + "blob.bin", out, checksum=good) == path
    assert md5(path) == good


def test_checksum_mismatch_leaves_nothing(served, tmp_path):
    _, url = served
    out = tmp_path / "cache"
    with pytest.raises(IOError, match="checksum mismatch .* expected 0{32}"):
        download_url(url + "blob.bin", out, checksum="0" * 32)
    assert os.listdir(out) == []                          # no partial, no temp file
    with pytest.raises(ValueError, match="md5 .* or sha256"):
        download_url(url + "blob.bin", out, checksum="abc")


def test_mirrors_fall_back_and_report_every_failure(served, tmp_path):
    src, url = served
    missing = (tmp_path / "nowhere").as_uri() + "/"
    path = download_from_mirrors([missing, url], "blob.bin", tmp_path / "c",
                                 md5(src / "blob.bin"))
    assert md5(path) == md5(src / "blob.bin")
    with pytest.raises(IOError, match="(?s)from any mirror.*nowhere/blob.bin.*"
                                      "mirror/blob.bin: OSError: download_url: checksum"):
        download_from_mirrors([missing, url], "blob.bin", tmp_path / "d", "1" * 32)


@pytest.mark.timeout(30)
def test_download_over_http(served, tmp_path):
    src, _ = served

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=str(src), **k)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/blob.bin"
        path = download_url(url, tmp_path / "h", checksum=md5(src / "blob.bin"))
        assert md5(path) == md5(src / "blob.bin")
        with pytest.raises(IOError):
            download_url(url[:-3] + "xyz", tmp_path / "h")      # 404
    finally:
        server.shutdown()
        server.server_close()


def make_idx_mirror(folder, n_train=30, n_test=10):
    """MNIST-format fixture files: image k of each split is filled with its label."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("t10k", n_test)):
        labels = (np.arange(n) % 10).astype(np.uint8)
        images = np.repeat(labels[:, None, None], 28, 1).repeat(28, 2).astype(np.uint8)
        write_idx(str(folder / f"{split}-images-idx3-ubyte.gz"), images)
        write_idx(str(folder / f"{split}-labels-idx1-ubyte.gz"), labels)
    return {name: md5(folder / name) for name in os.listdir(folder)}


@pytest.mark.parametrize("cls", [MNIST, FashionMNIST])
def test_mnist_family_downloads_verifies_and_reads(cls, tmp_path, monkeypatch):
    sums = make_idx_mirror(tmp_path / "mirror")
    monkeypatch.setattr(cls, "mirrors", ((tmp_path / "mirror").as_uri(),))
    monkeypatch.setattr(cls, "files", sums)
    root = tmp_path / "root"
    with pytest.raises(FileNotFoundError, match="pass download=True"):
        cls(root)
    train = cls(root, train=True, download=True)
    test = cls(root, train=False, download=True)
    assert len(train) == 30 and len(test) == 10
    x, t = train[13]
    assert x.shape == (28, 28) and x.dtype == np.uint8 and t == 3 and np.all(x == 3)
    assert sorted(os.listdir(root / cls.__name__)) == sorted(sums)
    again = cls(root, train=True)                 # from the cache, no download asked
    np.testing.assert_array_equal(again.targets, train.targets)
    # a folder holding the four files directly (as Debian's package installs them)
    direct = cls(tmp_path / "mirror", train=False, transform=lambda im: im[:2, :2])
    assert direct[4][0].shape == (2, 2)


def test_mnist_refuses_a_corrupt_download(tmp_path, monkeypatch):
    make_idx_mirror(tmp_path / "mirror")
    monkeypatch.setattr(MNIST, "mirrors", ((tmp_path / "mirror").as_uri(),))
    with pytest.raises(IOError, match="checksum mismatch"):
        MNIST(tmp_path / "root", download=True)          # real md5s, fixture bytes
    assert not os.path.exists(tmp_path / "root" / "MNIST" / "train-images-idx3-ubyte.gz")


def test_mnist_validates_structure(tmp_path):
    folder = tmp_path / "bad"
    make_idx_mirror(folder)
    write_idx(str(folder / "train-labels-idx1-ubyte.gz"), np.full(30, 12, np.uint8))
    with pytest.raises(ValueError, match=r"labels outside 0..9"):
        MNIST(folder)


def make_cifar_archive(folder, per_batch=4):
    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            batch = {b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                     b"labels": list(rng.integers(0, 10, per_batch).tolist()),
                     b"batch_label": name.encode()}
            raw = pickle.dumps(batch, protocol=2)
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cifar-10-python.tar.gz"
    path.write_bytes(buf.getvalue())
    return md5(path)


def test_cifar10_download_extract_read(tmp_path, monkeypatch):
    monkeypatch.setattr(CIFAR10, "md5", make_cifar_archive(tmp_path / "mirror"))
    monkeypatch.setattr(CIFAR10, "mirrors", ((tmp_path / "mirror").as_uri(),))
    train = CIFAR10(tmp_path / "root", train=True, download=True)
    test = CIFAR10(tmp_path / "root", train=False)
    assert len(train) == 20 and len(test) == 4
    x, y = train[5]
    assert x.shape == (32, 32, 3) and x.dtype == np.uint8 and 0 <= y < 10
    with open(tmp_path / "root" / "cifar-10-batches-py" / "data_batch_2", "rb") as f:
        raw = pickle.load(f)
    np.testing.assert_array_equal(x, raw[b"data"][1].reshape(3, 32, 32).transpose(1, 2, 0))
    assert not [e for e in os.listdir(tmp_path / "root") if e.startswith(".extract")]


def test_cifar10_refuses_code_in_a_batch_file(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    (folder / "test_batch").write_bytes(pickle.dumps({b"data": Evil()}))
    with pytest.raises(pickle.UnpicklingError, match="unexpected object"):
        CIFAR10(tmp_path, train=False)


def test_extract_tar_refuses_paths_outside(tmp_path):
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tar:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(IOError, match="unsafe member '../outside.txt'"):
        extract_tar(evil, tmp_path / "dest")
    assert not (tmp_path / "outside.txt").exists()
    assert os.listdir(tmp_path / "dest") == []
