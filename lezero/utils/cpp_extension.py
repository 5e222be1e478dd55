"""Native custom operators: compile C/C++ with the system compiler, call it on NumPy arrays.

    from lezero.utils import cpp_extension
    lib = cpp_extension.load("scale", ["scale.cpp"],
                             functions={"scale_f32": "void(const float*, float*, int64_t, float)"})
    lib.scale_f32(x, out, x.size, 2.0)

``load`` compiles the sources into a shared library (``g++``/``gcc -O3 -shared -fPIC``;
``$CXX``/``$CC`` override) named by a hash of the sources, flags and compiler version, so
an unchanged extension is compiled once and then loaded from the cache directory
(``build_directory``, else ``$LEZERO_EXTENSIONS_DIR``, else ``~/.cache/lezero/extensions``).
The library is written under a temporary name and renamed into place, so a crash or a
concurrent build never leaves a half-written ``.so`` behind.  A failed compilation raises
``BuildError`` carrying the compiler's own message.

Exported functions must have C linkage (``extern "C"`` in C++).  Each one named in
``functions`` gets a checked Python wrapper: its signature (C types, e.g.
``"void(const double*, double*, int64_t)"``) says which arguments are arrays; an array
argument must be a NumPy array of exactly that dtype, C-contiguous, and writeable unless
declared ``const``, or the call raises an error naming the function and the argument.
The raw ``ctypes`` library stays available as ``.lib``.
"""
import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

from lezero.utils.files import atomic_write

__all__ = ["load", "load_inline", "BuildError", "NativeLibrary", "NativeFunction"]

_CXX_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".C")

# C type name -> (ctypes type, NumPy dtype); pointers to these are array arguments.
_TYPES = {
    "float": (ctypes.c_float, np.float32), "float32": (ctypes.c_float, np.float32),
    "double": (ctypes.c_double, np.float64), "float64": (ctypes.c_double, np.float64),
    "int": (ctypes.c_int, np.intc), "int32_t": (ctypes.c_int32, np.int32),
    "int32": (ctypes.c_int32, np.int32), "int64_t": (ctypes.c_int64, np.int64),
    "int64": (ctypes.c_int64, np.int64), "long": (ctypes.c_long, np.int_),
    "long long": (ctypes.c_longlong, np.longlong), "size_t": (ctypes.c_size_t, np.uintp),
    "uint8_t": (ctypes.c_uint8, np.uint8), "uint8": (ctypes.c_uint8, np.uint8),
    "bool": (ctypes.c_bool, np.bool_), "void": (None, None),
}


class BuildError(RuntimeError):
    """Compiling or linking an extension failed; the message holds the compiler output."""


# ----- signatures and checked calls ----------------------------------------------------------

class _Arg:
    """One parameter: a scalar, or an array (pointer) with its dtype and constness."""

    def __init__(self, text, where):
        tokens = text.replace("*", " * ").split()
        self.const = "const" in tokens
        tokens = [t for t in tokens if t != "const"]
        # A trailing parameter name ("const float* x") is allowed and ignored.
        if len(tokens) > 1 and tokens[-1] != "*" and " ".join(tokens) not in _TYPES:
            tokens = tokens[:-1]
        stars = tokens.count("*")
        base = " ".join(t for t in tokens if t != "*")
        if base not in _TYPES or stars > 1 or (base == "void" and not stars):
            raise ValueError(f"{where}: unsupported parameter type {text.strip()!r}; use a "
                             f"scalar or a single pointer to one of "
                             f"{sorted(k for k in _TYPES if k != 'void')}")
        self.text = text.strip()
        self.pointer = stars == 1
        self.ctype, self.dtype = _TYPES[base]
        self.void = base == "void"


class NativeFunction:
    """A checked Python wrapper of one exported C function."""

    def __init__(self, lib_name, name, cfunc, signature):
        where = f"{lib_name}.{name}"
        m = re.fullmatch(r"\s*([\w\s]+?)\s*\((.*)\)\s*", signature)
        if m is None:
            raise ValueError(f"{where}: cannot parse signature {signature!r}; expected "
                             "e.g. 'void(const float*, float*, int64_t)'")
        ret, params = m.group(1).strip(), m.group(2).strip()
        if ret not in _TYPES:
            raise ValueError(f"{where}: unknown return type {ret!r}")
        self.name, self.where, self.signature = name, where, signature
        self.args = [] if params in ("", "void") else \
            [_Arg(p, where) for p in params.split(",")]
        self.restype = _TYPES[ret][0]
        cfunc.argtypes = [ctypes.c_void_p if a.pointer else a.ctype for a in self.args]
        cfunc.restype = self.restype
        self.cfunc = cfunc

    def __call__(self, *values):
        if len(values) != len(self.args):
            raise TypeError(f"{self.where} takes {len(self.args)} arguments "
                            f"({self.signature}), got {len(values)}")
        converted = [self._convert(i, a, v) for i, (a, v) in enumerate(zip(self.args, values))]
        return self.cfunc(*converted)

    def _convert(self, i, arg, value):
        what = f"{self.where}: argument {i} ({arg.text})"
        if not arg.pointer:
            if isinstance(value, np.ndarray) and value.ndim:
                raise TypeError(f"{what} is a scalar, got an array of shape {value.shape}")
            try:
                return arg.ctype(value.item() if isinstance(value, (np.ndarray, np.generic))
                                 else value)
            except TypeError:
                raise TypeError(f"{what} must be a number, got {type(value).__name__}") from None
        if not isinstance(value, np.ndarray):
            raise TypeError(f"{what} must be a NumPy array, got {type(value).__name__} (CuPy "
                            "arrays and Variables are not accepted: pass x.data on the CPU)")
        if not arg.void and value.dtype != arg.dtype:
            raise TypeError(f"{what} must have dtype {np.dtype(arg.dtype).name}, got "
                            f"{value.dtype}")
        if not value.flags.c_contiguous:
            raise ValueError(f"{what} must be C-contiguous (np.ascontiguousarray), got "
                             f"strides {value.strides} for shape {value.shape}")
        if not arg.const and not value.flags.writeable:
            raise ValueError(f"{what} is written to but the array is read-only; declare the "
                             "parameter const if the function only reads it")
        return value.ctypes.data

    def __repr__(self):
        return f"<native {self.where}: {self.signature}>"


class NativeLibrary:
    """A compiled extension: ``lib.<name>(...)`` calls a declared function with checks;
    ``.lib`` is the raw ``ctypes.CDLL``; ``.path`` the shared library file."""

    def __init__(self, name, path, functions=None):
        self.name, self.path = name, path
        self.lib = ctypes.CDLL(path)
        self._functions = {}
        for fname, signature in (functions or {}).items():
            self.declare(fname, signature)

    def declare(self, name, signature):
        """Add a checked wrapper for exported function ``name`` with a C ``signature``."""
        try:
            cfunc = getattr(self.lib, name)
        except AttributeError:
            raise AttributeError(f"{self.name}: the library exports no function {name!r} "
                                 "(C++ functions need extern \"C\")") from None
        self._functions[name] = NativeFunction(self.name, name, cfunc, signature)
        return self._functions[name]

    def __getattr__(self, name):
        functions = self.__dict__.get("_functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"{self.__dict__.get('name')}: no declared function {name!r}; "
                             "declare it with functions={...} or .declare(name, signature), "
                             "or call it unchecked through .lib")

    def __repr__(self):
        return f"<NativeLibrary {self.name} at {self.path}: {sorted(self._functions)}>"


# ----- building --------------------------------------------------------------------------------

def _default_directory():
    return os.environ.get("LEZERO_EXTENSIONS_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "lezero", "extensions")


def _compiler(cxx):
    name = os.environ.get("CXX", "g++") if cxx else os.environ.get("CC", "gcc")
    path = shutil.which(name)
    if path is None:
        raise BuildError(f"cpp_extension: compiler {name!r} not found on PATH (set "
                         f"{'CXX' if cxx else 'CC'} to choose one)")
    return path


@functools.lru_cache(maxsize=None)
def _compiler_version(path):
    out = subprocess.run([path, "--version"], capture_output=True, text=True)
    return out.stdout.splitlines()[0] if out.stdout else path


def _run(cmd, name, verbose):
    if verbose:
        print(" ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"cpp_extension: building {name!r} failed:\n$ {' '.join(cmd)}\n"
                         f"{proc.stderr or proc.stdout}")
    if verbose and (proc.stdout or proc.stderr):
        print(proc.stdout + proc.stderr)


def load(name, sources, extra_cflags=None, build_directory=None, verbose=False,
         functions=None, extra_ldflags=None):
    """Compile ``sources`` (paths to .c/.cpp files) into a shared library, or reuse the
    cached one, and return a ``NativeLibrary``.

    ``functions`` maps exported names to C signatures for checked wrappers.  C++ sources
    are compiled with ``$CXX`` (default g++) and ``-std=c++17``, C sources with ``$CC``.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise ValueError(f"cpp_extension.load: name must be an identifier, got {name!r}")
    sources = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    if not sources:
        raise ValueError(f"cpp_extension.load({name!r}): no sources given")
    texts = []
    for src in sources:
        src = os.fspath(src)
        if not os.path.isfile(src):
            raise FileNotFoundError(f"cpp_extension.load({name!r}): source {src!r} not found")
        with open(src, "rb") as f:
            texts.append(f.read())
    cflags = ["-O3", "-fPIC"] + list(extra_cflags or [])
    ldflags = list(extra_ldflags or [])
    cxx = any(os.fspath(s).endswith(_CXX_SUFFIXES) for s in sources)
    linker = _compiler(cxx)

    digest = hashlib.sha256()
    for part in [name, _compiler_version(linker), *cflags, "|", *ldflags]:
        digest.update(part.encode() + b"\0")
    for src, text in zip(sources, texts):
        digest.update(os.path.basename(os.fspath(src)).encode() + b"\0" + text + b"\0")
    directory = os.fspath(build_directory or _default_directory())
    os.makedirs(directory, exist_ok=True)
    target = os.path.join(directory, f"{name}_{digest.hexdigest()[:16]}.so")

    if os.path.exists(target):
        if verbose:
            print(f"cpp_extension: using cached {target}")
    else:
        tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=directory)
        try:
            objects = []
            for i, src in enumerate(sources):
                src = os.path.abspath(os.fspath(src))
                is_cxx = src.endswith(_CXX_SUFFIXES)
                obj = os.path.join(tmp, f"{i}.o")
                std = ["-std=c++17"] if is_cxx else []
                _run([_compiler(is_cxx), *cflags, *std, "-c", src, "-o", obj], name, verbose)
                objects.append(obj)
            built = os.path.join(tmp, "lib.so")
            _run([linker, "-shared", *objects, "-o", built, *ldflags], name, verbose)
            os.replace(built, target)       # atomic: the cache never holds a partial file
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return NativeLibrary(name, target, functions)


def load_inline(name, source, language="c++", **kwargs):
    """``load`` from source text: written to the build directory (named by its hash),
    then compiled as ``language`` ("c++" or "c")."""
    if language not in ("c++", "c"):
        raise ValueError(f"cpp_extension.load_inline: language must be 'c++' or 'c', got "
                         f"{language!r}")
    directory = os.fspath(kwargs.get("build_directory") or _default_directory())
    os.makedirs(directory, exist_ok=True)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = os.path.join(directory, f"{name}_{digest}{'.cpp' if language == 'c++' else '.c'}")
    if not os.path.exists(path):
        atomic_write(path, source, where="cpp_extension.load_inline")
    return load(name, [path], **kwargs)
