"""Packaging for LeZero.

The core needs only NumPy; Numba powers the CPU kernels and h5py the HDF5 checkpoints.
Everything else is an extra so that ``import lezero`` stays light.  ``examples`` is the
extra ``make install`` installs: every package the README, the steps, the examples and
the notebook sources import (tests/test_install.py keeps that true), without the test-only
oracles (torch, torchvision, transformers).
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
    "httpx",
    "pydot",                # parses the DOT text of utils/graph.py in its tests
    "openvino>=2024.0",     # the second runtime that ONNX exports are checked on (CPU plugin)
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
# tritonclient: Triton's KServe v2 client, which examples/serve_*.py and the serving
# tests talk to the server with.
SERVE_DEPS = ["starlette>=0.37", "uvicorn>=0.29", "httptools>=0.6", "tritonclient[http]"]
AMP_DEPS = ["ml_dtypes>=0.3"]   # bfloat16 storage on the CPU
# What the examples and notebook sources import beyond the core: CartPole for the
# reinforcement-learning examples, the graphs of the GNN examples, IPython's display for
# the notebook sources run as scripts.  The `examples` extra adds every other extra a
# README command, step or example uses (mpiexec comes from `mpi`).  Checked with
# `pip install --dry-run --ignore-installed`: none of it pulls torch.
EXAMPLE_DEPS = ["gymnasium", "networkx", "ipython"]
RUN_DEPS = list(dict.fromkeys(EXAMPLE_DEPS + MPI_DEPS + ONNX_DEPS + SERVE_DEPS + AMP_DEPS))

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
        # Intel MKL's sgemm and AMX/VNNI int8 GEMM (lezero.runtime.mkl); elsewhere NumPy's
        "mkl>=2024; platform_machine == 'x86_64' and sys_platform == 'linux'",
        "Pillow>=9",
        "matplotlib>=3.7",
    ],
    extras_require={
        "dev": TEST_DEPS + RUN_DEPS,   # the tests run every example too
        "mpi": MPI_DEPS,
        "gpu": ["cupy-cuda13x"],
        "onnx": ONNX_DEPS,
        "serve": SERVE_DEPS,
        "amp": AMP_DEPS,
        "examples": RUN_DEPS,
        "mutate": ["mutmut>=3"],
        "notebooks": NOTEBOOK_DEPS,
        "all": list(dict.fromkeys(TEST_DEPS + RUN_DEPS + NOTEBOOK_DEPS)),
    },
    # Backends: lezero.backends finds plugins in this group (name = "module:factory",
    # a Backend or a callable returning one); the built-ins are listed as examples.
    entry_points={
        "lezero.backends": [
            "numpy = lezero.backends.numpy_backend:NumpyBackend",
            "cupy = lezero.backends.cupy_backend:CupyBackend",
            "strict = lezero.backends.strict:StrictBackend",
        ],
    },
)
