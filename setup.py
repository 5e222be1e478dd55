"""Packaging for LeZero.

The core needs only NumPy; Numba powers the CPU kernels and h5py the HDF5 checkpoints.
Everything else is an extra so that ``import lezero`` stays light.
"""
from setuptools import find_packages, setup

TEST_DEPS = [
    "pytest>=7",
    "pytest-xdist",
    "pytest-timeout",
    "hypothesis",
    "torch==2.13.0",        # test-only oracle; pinned: an unpinned torch pulls a multi-GB CUDA build
    "nbclient",
    "nbformat",
    "ipykernel",
    "matplotlib",
]

setup(
    name="lezero",
    version="0.1.0",
    description="A readable define-by-run deep learning framework on NumPy and CuPy",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["lezero", "lezero.*"]),
    package_data={"lezero": ["data/datasets/*.txt", "data/datasets/*.gz"]},
    install_requires=[
        "numpy>=1.26",
        "scipy>=1.10",         # special functions (erf) on the CPU
        "numba>=0.59",
        "h5py>=3.8",
        "scikit-learn>=1.3",   # ships the real handwritten-digits data used by the demo
        "tqdm>=4.60",
        "threadpoolctl>=3",     # single-threaded BLAS inside batch-split convolutions
        "Pillow>=9",
        "matplotlib>=3.7",
    ],
    extras_require={
        "dev": TEST_DEPS,
        "mpi": ["mpi4py>=3.1", "mpich"],
        "gpu": ["cupy-cuda12x"],
        "onnx": ["onnx", "onnxruntime"],
        "all": TEST_DEPS + ["mpi4py>=3.1", "mpich", "onnx", "onnxruntime"],
    },
)
