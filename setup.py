"""Packaging for LeZero.

The core needs only NumPy; Numba powers the CPU kernels and h5py the HDF5 checkpoints.
Everything else is an extra so that ``import lezero`` stays light.
"""
from setuptools import find_packages, setup

TEST_DEPS = [
    "pytest>=7",
    "pytest-xdist",
    "pytest-timeout",
    "pytest-cov",
    "hypothesis",
    "torch==2.13.0",        # test-only oracle; pinned: an unpinned torch pulls a multi-GB CUDA build
    # Oracles for the model zoo, pinned to the releases that match torch 2.13.0 (an
    # unpinned torchvision would ask for a newer torch).  See lezero/testing/oracles.py.
    "torchvision==0.28.0",
    "transformers==5.24.0",
    "tritonclient[http]",   # a real client of the KServe v2 protocol, for the serving tests
    "httpx",
    "pydot",                # parses the DOT text of utils/graph.py in its tests
    "gymnasium",            # CartPole for the reinforcement-learning examples
    "networkx",             # the karate club and stochastic block models of the GNN examples
    "nbclient",
    "nbformat",
    "ipykernel",
    "matplotlib",
]
# Opening and rebuilding notebooks/: `make notebooks` (execute every one with
# tools/make_notebook.py) and `make jupyter` (open them).  Checked with pip --dry-run:
# none of these pulls torch.
NOTEBOOK_DEPS = ["jupyterlab>=4", "nbclient", "nbformat", "ipykernel", "matplotlib"]
MPI_DEPS = ["mpi4py>=3.1", "mpich"]
ONNX_DEPS = ["onnx>=1.15", "onnxruntime>=1.17", "ml_dtypes>=0.3"]
# httptools: uvicorn's C HTTP parser (uvicorn uses it when installed; without it the
# pure-Python h11 costs the server about a third more CPU per request)
SERVE_DEPS = ["starlette>=0.37", "uvicorn>=0.29", "httptools>=0.6"]

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
        "mpi": MPI_DEPS,
        "gpu": ["cupy-cuda13x"],
        "onnx": ONNX_DEPS,
        "serve": SERVE_DEPS,
        "amp": ["ml_dtypes>=0.3"],   # bfloat16 storage on the CPU
        "mutate": ["mutmut>=3"],
        "notebooks": NOTEBOOK_DEPS,
        "all": TEST_DEPS + MPI_DEPS + ONNX_DEPS + SERVE_DEPS,
    },
)
