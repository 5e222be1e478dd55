"""Native custom operators: the C/C++ extension loader and the examples of
docs/custom_ops_native.md (a Numba-backed and a C++-backed Function)."""
import os
import re
import runpy
import shutil

import numpy as np
import pytest

import lezero as lz
from lezero.utils import cpp_extension

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(shutil.which("g++") is None or shutil.which("gcc") is None,
                                reason="needs the system C/C++ compilers")

AXPY = r"""
#include <cstdint>
extern "C" {
// y += a * x
void axpy_f64(double a, const double* x, double* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}
int64_t count_positive(const float* x, int64_t n) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i) c += x[i] > 0;
    return c;
}
}
"""
AXPY_SIGS = {"axpy_f64": "void(double a, const double* x, double* y, int64_t n)",
             "count_positive": "int64_t(const float*, int64_t)"}


@pytest.fixture
def axpy(tmp_path):
    src = tmp_path / "axpy.cpp"
    src.write_text(AXPY)
    return cpp_extension.load("axpy", [str(src)], build_directory=str(tmp_path / "build"),
                              functions=AXPY_SIGS)


def test_load_compiles_and_calls_on_numpy_arrays(axpy):
    x, y = np.arange(5.0), np.ones(5)
    assert axpy.axpy_f64(2.0, x, y, x.size) is None
    np.testing.assert_array_equal(y, 1 + 2 * np.arange(5.0))
    assert axpy.count_positive(np.array([-1, 2, 3, 0], np.float32), 4) == 2
    assert os.path.basename(axpy.path).startswith("axpy_") and axpy.path.endswith(".so")


def test_build_is_cached_by_content_and_flags(tmp_path, capsys):
    src = tmp_path / "axpy.cpp"
    src.write_text(AXPY)
    build = str(tmp_path / "build")
    first = cpp_extension.load("axpy", [str(src)], build_directory=build)
    stamp = os.stat(first.path).st_mtime_ns
    again = cpp_extension.load("axpy", [str(src)], build_directory=build, verbose=True)
    assert again.path == first.path and os.stat(again.path).st_mtime_ns == stamp
    assert "using cached" in capsys.readouterr().out
    flags = cpp_extension.load("axpy", [str(src)], build_directory=build, extra_cflags=["-O2"])
    src.write_text(AXPY + "\n// changed\n")
    changed = cpp_extension.load("axpy", [str(src)], build_directory=build)
    assert len({first.path, flags.path, changed.path}) == 3
    # the atomic build leaves only finished libraries behind
    assert sorted(os.listdir(build)) == sorted(os.path.basename(p) for p in
                                               (first.path, flags.path, changed.path))


def test_c_sources_and_load_inline(tmp_path):
    lib = cpp_extension.load_inline(
        "twice", "void twice(const float* x, float* y, long n)"
                 "{ for (long i = 0; i < n; ++i) y[i] = 2 * x[i]; }",
        language="c", build_directory=str(tmp_path),
        functions={"twice": "void(const float*, float*, long)"})
    x = np.arange(4, dtype=np.float32)
    y = np.empty_like(x)
    lib.twice(x, y, 4)
    np.testing.assert_array_equal(y, 2 * x)


def test_compile_error_shows_the_compiler_message(tmp_path):
    src = tmp_path / "broken.cpp"
    src.write_text('extern "C" int f() { return undefined_name; }\n')
    with pytest.raises(cpp_extension.BuildError, match=r"(?s)building 'broken' failed.*"
                                                       r"broken\.cpp.*undefined_name"):
        cpp_extension.load("broken", [str(src)], build_directory=str(tmp_path / "b"))
    assert not os.listdir(tmp_path / "b")          # no partial library, no temp directory


def test_calls_check_arrays_and_arguments(axpy):
    x, y = np.arange(4.0), np.zeros(4)
    with pytest.raises(TypeError, match=r"axpy\.axpy_f64: argument 1 .*dtype float64, got "
                                        r"float32"):
        axpy.axpy_f64(1.0, x.astype(np.float32), y, 4)
    with pytest.raises(ValueError, match=r"axpy\.axpy_f64: argument 2 .*C-contiguous"):
        axpy.axpy_f64(1.0, x, np.zeros(8)[::2], 4)
    ro = np.zeros(4)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        axpy.axpy_f64(1.0, x, ro, 4)
    axpy.axpy_f64(1.0, ro, y, 4)                   # a const parameter may be read-only
    with pytest.raises(TypeError, match="takes 4 arguments"):
        axpy.axpy_f64(1.0, x, y)
    with pytest.raises(TypeError, match="must be a NumPy array, got Variable"):
        axpy.axpy_f64(1.0, lz.Variable(x), y, 4)
    with pytest.raises(TypeError, match="argument 0 .* is a scalar"):
        axpy.axpy_f64(x, x, y, 4)
    with pytest.raises(AttributeError, match="no declared function 'nope'"):
        axpy.nope
    with pytest.raises(AttributeError, match="exports no function"):
        axpy.declare("nope", "void()")
    with pytest.raises(ValueError, match="unsupported parameter type"):
        axpy.declare("axpy_f64", "void(complex*)")


def test_bad_load_arguments(tmp_path):
    with pytest.raises(ValueError, match="name must be an identifier"):
        cpp_extension.load("my-lib", ["x.cpp"])
    with pytest.raises(FileNotFoundError, match="not found"):
        cpp_extension.load("missing", [str(tmp_path / "missing.cpp")])


def _doc_blocks(lang):
    with open(os.path.join(ROOT, "docs", "custom_ops_native.md"), encoding="utf-8") as f:
        text = f.read()
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_docs_numba_and_cpp_functions(tmp_path, monkeypatch):
    """Run the guide's code as one module: its own gradient checks are assertions."""
    pytest.importorskip("numba")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LEZERO_EXTENSIONS_DIR", str(tmp_path / "ext"))
    (tmp_path / "silu.cpp").write_text(_doc_blocks("cpp")[0])
    module = tmp_path / "custom_ops_native_example.py"
    module.write_text("\n\n".join(_doc_blocks("python")))
    ns = runpy.run_path(str(module))
    x = np.random.default_rng(2).uniform(-2, 2, size=(2, 3))
    assert lz.utils.gradient_check(ns["logcosh"], x)
    assert lz.utils.gradient_check(ns["silu_native"], x)
    v = lz.Variable(x)
    (g,) = lz.grad([ns["silu_native"](v).sum()], [v], create_graph=True)
    with pytest.raises(NotImplementedError, match="no double backward"):
        g.sum().backward()
    with pytest.raises(TypeError, match="silu_native: needs a float32/float64"):
        ns["silu_native"](np.ones(3, np.int64))
