"""Datasets: toy and real (Spiral, SinCurve, Digits, MNIST, FashionMNIST, CIFAR10),
file-backed storage (memmap, .npy, .npz, HDF5, image folders) and a character corpus."""
from lezero.data.datasets.download import (check_integrity, default_root, download_from_mirrors,
                                           download_url, extract_tar)
from lezero.data.datasets.graphs import Graph, karate_club, stochastic_block_model
from lezero.data.datasets.idx import read_idx, write_idx
from lezero.data.datasets.errors import (ArchiveError, CIFARFileError, DataFileError,
                                         HDF5FileError, HDF5KeyError, IdxFileError,
                                         ImageFileError, NpyFileError, NpzFileError,
                                         NpzKeyError, RawFileError)
from lezero.data.datasets.hdf5 import HDF5Dataset
from lezero.data.datasets.storage import (ImageFolder, MemmapDataset, NpyDataset, NpzDataset,
                                          load_image)
from lezero.data.datasets.shapes import (SHAPE_CLASSES, ShapesDetection,
                                         ShapesSegmentation, generate_shapes)
from lezero.data.datasets.spoken_digits import SpokenDigits
from lezero.data.datasets.text import CharDataset, load_corpus
from lezero.data.datasets.toy import ArrayDataset, Digits, SinCurve, Spiral, get_spiral
from lezero.data.datasets.vision import CIFAR10, DEBIAN_FASHION_MNIST, MNIST, FashionMNIST

__all__ = ["Spiral", "SinCurve", "Digits", "MNIST", "FashionMNIST", "CIFAR10",
           "ArrayDataset", "get_spiral", "MemmapDataset", "NpyDataset", "NpzDataset",
           "HDF5Dataset", "ImageFolder", "load_image", "CharDataset", "load_corpus",
           "read_idx", "write_idx", "download_url", "download_from_mirrors", "extract_tar",
           "check_integrity", "default_root", "DEBIAN_FASHION_MNIST", "SHAPE_CLASSES",
           "generate_shapes", "ShapesDetection", "ShapesSegmentation", "Graph", "karate_club",
           "stochastic_block_model", "SpokenDigits", "DataFileError", "RawFileError",
           "IdxFileError", "NpyFileError", "NpzFileError", "NpzKeyError", "HDF5FileError",
           "HDF5KeyError", "ImageFileError", "ArchiveError", "CIFARFileError"]
