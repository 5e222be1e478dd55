"""MNIST, Fashion-MNIST and CIFAR-10: download, verify, cache, read.

Downloads check the published md5 of every archive and go through
``download_from_mirrors`` (temporary file, checksum, atomic rename).  MNIST and
Fashion-MNIST also read the four standard IDX ``.gz`` files from any folder given as
``root``, e.g. Debian's ``dataset-fashion-mnist`` package
(``/usr/share/datasets/fashion-mnist``); such files are checked for structure (header,
sizes, label range) rather than md5, since repackaged archives differ byte for byte.
"""
import os

import numpy as np

from lezero.data.datasets.batch_pickle import load_batch
from lezero.data.datasets.download import default_root, download_from_mirrors, extract_tar
from lezero.data.datasets.errors import CIFARFileError, IdxFileError
from lezero.data.datasets.idx import read_idx
from lezero.data.datasets.toy import ArrayDataset

__all__ = ["MNIST", "FashionMNIST", "CIFAR10", "DEBIAN_FASHION_MNIST"]

DEBIAN_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


class _IDXImages(ArrayDataset):
    """MNIST-format datasets: 28x28 uint8 images and int64 labels from four IDX files.

    ``root`` is searched for the files directly and in ``root/<ClassName>``; with
    ``download=True`` missing files are fetched into ``root/<ClassName>``.
    A sample is ``(image (28, 28) uint8, label int)``.
    """

    mirrors = ()
    files = {}          # file name -> md5 of the published .gz
    classes = []

    def __init__(self, root=None, train=True, transform=None, target_transform=None,
                 download=False):
        self.root = os.fspath(root) if root is not None else default_root()
        self.train = train
        split = "train" if train else "t10k"
        names = (f"{split}-images-idx3-ubyte.gz", f"{split}-labels-idx1-ubyte.gz")
        folder = self._find(names)
        if folder is None:
            if not download:
                raise FileNotFoundError(
                    f"{type(self).__name__}: {names[0]} and {names[1]} not found in "
                    f"{self.root!r} or {self._own_folder()!r}; pass download=True")
            folder = self._own_folder()
            for name in names:
                download_from_mirrors(self.mirrors, name, folder, self.files[name])
        images = read_idx(os.path.join(folder, names[0]))
        labels = read_idx(os.path.join(folder, names[1])).astype(np.int64)
        self._validate(images, labels, folder)
        self.folder = folder
        super().__init__(images, labels, transform, target_transform)

    def _own_folder(self):
        return os.path.join(self.root, type(self).__name__)

    def _find(self, names):
        for folder in (self.root, self._own_folder()):
            if all(os.path.isfile(os.path.join(folder, n)) for n in names):
                return folder
        return None

    def _validate(self, images, labels, folder):
        where = f"{type(self).__name__} files in {folder!r}"
        if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
            raise IdxFileError(f"{where}: images should be (N, 28, 28) uint8, got "
                             f"{images.shape} {images.dtype}")
        if labels.ndim != 1 or len(labels) != len(images):
            raise IdxFileError(f"{where}: {len(images)} images but labels of shape "
                             f"{labels.shape}")
        if len(labels) and (labels.min() < 0 or labels.max() >= len(self.classes)):
            raise IdxFileError(f"{where}: labels outside 0..{len(self.classes) - 1}")


class MNIST(_IDXImages):
    """The MNIST handwritten digits (60000 train / 10000 test images of 28x28)."""

    mirrors = ("https://ossci-datasets.s3.amazonaws.com/mnist/",
               "http://yann.lecun.com/exdb/mnist/")
    files = {"train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
             "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
             "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
             "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c"}
    classes = [str(i) for i in range(10)]


class FashionMNIST(_IDXImages):
    """Zalando's Fashion-MNIST (same format as MNIST; ten kinds of clothing).

    Reads Debian's copy when ``root=DEBIAN_FASHION_MNIST``."""

    mirrors = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",)
    files = {"train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
             "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
             "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
             "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310"}
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]


class CIFAR10(ArrayDataset):
    """CIFAR-10: 50000 train / 10000 test colour images, ``(32, 32, 3)`` uint8 HWC.

    Expects (or with ``download=True`` fetches and extracts) the python version of the
    archive into ``root/cifar-10-batches-py``.  A sample is ``(image, label int)``.
    """

    mirrors = ("https://www.cs.toronto.edu/~kriz/",)
    archive = "cifar-10-python.tar.gz"
    md5 = "c58f30108f718f92721af3b95e74349a"
    folder_name = "cifar-10-batches-py"
    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
               "ship", "truck"]

    def __init__(self, root=None, train=True, transform=None, target_transform=None,
                 download=False):
        self.root = os.fspath(root) if root is not None else default_root()
        self.train = train
        folder = os.path.join(self.root, self.folder_name)
        names = [f"data_batch_{i}" for i in range(1, 6)] if train else ["test_batch"]
        if not all(os.path.isfile(os.path.join(folder, n)) for n in names):
            if not download:
                raise FileNotFoundError(f"CIFAR10: batch files not found in {folder!r}; "
                                        f"pass download=True")
            path = download_from_mirrors(self.mirrors, self.archive, self.root, self.md5)
            extract_tar(path, self.root)
        xs, ys = [], []
        for n in names:
            x, y = _read_cifar_batch(os.path.join(folder, n), len(self.classes))
            xs.append(x)
            ys.append(y)
        images = np.concatenate(xs).transpose(0, 2, 3, 1).copy()    # to HWC, as decoders give
        super().__init__(images, np.concatenate(ys), transform, target_transform)


def _read_cifar_batch(path, num_classes):
    """``(images (N, 3, 32, 32) uint8, labels (N,) int64)`` of one batch file, after
    checking what it holds (a uint8 array of N rows of 3072 bytes, N int labels in range)
    before anything is converted."""
    batch = load_batch(path)
    data = batch.get(b"data", batch.get("data"))
    labels = batch.get(b"labels", batch.get("labels"))
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2
            and data.shape[1] == 3 * 32 * 32):
        raise CIFARFileError(f"CIFAR10: {path}: 'data' should be a uint8 array of rows of "
                             f"3072 bytes, got {_describe(data)}")
    if not (isinstance(labels, list) and len(labels) == len(data) and
            all(type(t) is int and 0 <= t < num_classes for t in labels)):
        raise CIFARFileError(f"CIFAR10: {path}: 'labels' should be {len(data)} ints in "
                             f"0..{num_classes - 1}, got {_describe(labels)}")
    return data.reshape(-1, 3, 32, 32), np.asarray(labels, dtype=np.int64)


def _describe(obj):
    if isinstance(obj, np.ndarray):
        return f"{obj.dtype} array of shape {obj.shape}"
    return f"{type(obj).__name__} of length {len(obj)}" if hasattr(obj, "__len__") else \
        type(obj).__name__
