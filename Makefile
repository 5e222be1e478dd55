# The two commands: `make demo` and `make test`. Each creates .venv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# One BLAS thread per MPI rank: oversubscribed BLAS threads slow a step several times over.
MPI_ENV := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1

.PHONY: demo test test-backends test-gpu test-serial mutate install install-test bench figures figures-check clean ops-count docs budgets zoo-table notebooks jupyter

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel

# LeZero and its core dependencies only: enough for `make demo`.
$(VENV)/.installed: $(PY) setup.py
	$(PIP) install -e .
	touch $@

# `make install`: everything the README, the steps, the examples and the notebook
# sources import (the `examples` extra: gymnasium, networkx, IPython, tritonclient and
# the mpi, onnx, serve and amp extras; mpiexec comes with mpich).  No torch.
$(VENV)/.installed-examples: $(VENV)/.installed setup.py
	$(PIP) install -e ".[examples]"
	touch $@

# The tests: the above plus the test-only oracles (torch, torchvision, transformers).
$(VENV)/.installed-test: $(VENV)/.installed-examples setup.py
	$(PIP) install -e ".[dev]"
	touch $@

# Notebooks: Jupyter itself plus what the notebook sources import (MPI for 13 and 15,
# ONNX for 14, the server for 17, bfloat16 storage for 12).  No torch: notebook 08
# skips its PyTorch comparison when torch is absent.
$(VENV)/.installed-notebooks: $(VENV)/.installed-examples setup.py
	$(PIP) install -e ".[notebooks,examples]"
	touch $@

install: $(VENV)/.installed-examples
install-test: $(VENV)/.installed-test

demo: $(VENV)/.installed
	$(PY) -m lezero.demo

# Line coverage (.coveragerc) and the operator check log (lezero/testing/recording.py) come
# from the same run; the floors and the check table then fail it when crossed.  The MPI
# runs stay out of coverage (their ranks are separate mpiexec processes).
COV_DIR := build/coverage
CHECK_LOG := build/op-checks
test: install-test
	$(PY) tools/budgets.py
	rm -rf $(COV_DIR) $(CHECK_LOG) && mkdir -p $(COV_DIR) $(CHECK_LOG)
	LEZERO_CHECK_LOG=$(CHECK_LOG) $(PY) -m pytest -n 2 --ignore=tests/parallel \
		--cov=lezero --cov-config=.coveragerc --cov-report= \
		--cov-report=json:$(COV_DIR)/coverage.json tests
	$(PY) tools/coverage_floors.py $(COV_DIR)/coverage.json --package 90 --module 75
	$(PY) -m lezero.functions --coverage --from $(CHECK_LOG) --strict > $(CHECK_LOG)/table.md
	@echo "== ONNX's node test suite (pytest ran it above; the table: tools/onnx_suite.py)"
	$(PY) tools/onnx_suite.py | grep -E "^\| (all|cases)|^Silently"
	$(MAKE) test-backends
	$(MAKE) test-serial
	$(MAKE) test-mpi

# The backends (docs/backends.md), one pytest run each so each prints its own counts: the
# gpu-marked tests with the strict device standing in for CuPy (`import cupy` gives strict
# arrays), then the conformance suite on strict and on the worked new chip
# (examples/backend_plugin, installed editable: no network, no dependency but lezero).
test-backends: install-test
	$(PIP) install -q --no-deps --no-build-isolation -e examples/backend_plugin
	@echo "== the gpu-marked tests on strict (lezero.testing.conformance.strict_as_cupy)"
	$(PY) -m pytest -q -p no:randomly -n 0 -p lezero.testing.conformance.strict_as_cupy -m gpu \
		--ignore=tests/parallel tests
	@echo "== conformance suite on strict"
	LEZERO_BACKEND=strict $(PY) -m pytest -q -p no:randomly -n 0 --pyargs lezero.testing.conformance
	@echo "== conformance suite on f32chip (examples/backend_plugin)"
	LEZERO_BACKEND=f32chip $(PY) -m pytest -q -p no:randomly -n 0 --pyargs lezero.testing.conformance

# On a machine with an NVIDIA GPU and CUDA 13: installs cupy-cuda13x, runs the conformance
# suite and the gpu-marked tests on CuPy, trains ResNet-18 under autocast float16, prints
# one table (tools/gpu_check.sh).  Without a GPU it says so and exits 0.
test-gpu: install-test
	bash tools/gpu_check.sh

# The serial profile (lezero.runtime.use_profile("serial"): no thread anywhere, BLAS and
# Numba on one) over a representative part of the suite: the runtime, the kernels, the
# operator families that split their work and the layers built on them.
SERIAL_TESTS := tests/runtime tests/kernels tests/functions/conv tests/functions/pooling \
	tests/functions/attention tests/functions/rnn tests/functions/linalg \
	tests/functions/activation tests/nn/layers
test-serial: install-test
	LEZERO_PROFILE=serial $(PY) -m pytest -q -n 2 $(SERIAL_TESTS)

# Mutation testing (slow, not part of `make test`): mutmut per area, `make mutate
# AREAS="core optim"`; see tools/mutate.py and docs/testing.md.
AREAS ?=
mutate: install-test
	$(PY) -c "import mutmut" 2>/dev/null || $(PIP) install -e ".[mutate]"
	$(PY) tools/mutate.py $(AREAS) --jobs 2

test-mpi: install-test
	@if [ -d tests/parallel ] && ls tests/parallel/test_*.py >/dev/null 2>&1; then \
		$(MPI_ENV) timeout 900 $(VENV)/bin/mpiexec -n 2 $(PY) -m pytest -q tests/parallel && \
		$(MPI_ENV) timeout 900 $(VENV)/bin/mpiexec -n 4 $(PY) -m pytest -q tests/parallel; \
	else echo "no MPI tests yet"; fi

budgets:
	python3 tools/budgets.py --report

ops-count: install
	$(PY) -m lezero.functions --count

docs: install
	$(PY) -m lezero.functions --markdown docs/operators.md

# Run every example and regenerate docs/model_zoo.md's results table from their
# summary.json files; `make zoo-table ZOO_FLAGS=--quick` is the budget mode (one epoch each).
zoo-table: install-test
	$(PY) tools/zoo_table.py $(ZOO_FLAGS)

# Rebuild every notebook from notebooks/src/ (executes each one: a few minutes in all).
notebooks: $(VENV)/.installed-notebooks
	$(PY) tools/make_notebook.py notebooks/src/*.py

# Open the notebooks in JupyterLab.
jupyter: $(VENV)/.installed-notebooks
	$(VENV)/bin/jupyter lab notebooks/

bench: install-test
	$(PY) benchmarks/run_all.py

# Figures in docs/ are written by the scripts that measure them: every command listed in
# tools/figures_scripts.txt records its blocks (tools/doc_figures.record), then every page
# is synced.  figures-check lists the blocks that differ from their script's last output.
FIGURES_SCRIPTS := tools/figures_scripts.txt
figures: install-test
	@grep -v -e '^#' -e '^$$' $(FIGURES_SCRIPTS) | while read -r cmd; do \
		echo "== $$cmd"; PATH="$(CURDIR)/$(VENV)/bin:$$PATH" sh -c "$$cmd" < /dev/null || exit 1; \
	done
	$(PY) tools/doc_figures.py

figures-check:
	$(PY) tools/doc_figures.py --check

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
