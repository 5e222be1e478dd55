"""docs/architecture.md's map, kept true: the import direction between the floors of the
package and the privacy of modules, checked on every module's top-level imports.

Imports deferred into a function body are not checked: they run after every module has
loaded, so they cannot make an import cycle, and they are how a low floor reaches a high
one on purpose (``lezero.functions.registry.operators`` imports the operator families).
"""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "lezero")

# Floors from the bottom up: a module may import its own floor and the ones below.
FLOORS = [
    ("engine backend", ("lezero.cuda", "lezero.random", "lezero.backends")),
    ("engine", ("lezero.core", "lezero.grad_sum")),
    ("utils", ("lezero.utils",)),
    ("runtime", ("lezero.runtime",)),
    ("kernels", ("lezero.kernels",)),
    ("functions", ("lezero.functions", "lezero.creation", "lezero.grad_mode")),
    ("nn", ("lezero.nn",)),
    ("optim and data", ("lezero.optim", "lezero.data")),
    ("subsystems", ("lezero.amp", "lezero.checkpoint", "lezero.quantization",
                    "lezero.parallel", "lezero.distributed", "lezero.jit", "lezero.onnx",
                    "lezero.serving", "lezero.convert",
                    "lezero.testing", "lezero.demo")),
]
TOP = "lezero"          # lezero/__init__.py: the public names of every floor
# Modules of lezero.functions that every family uses (not a family of their own).
FUNCTIONS_SHARED = ("lezero.functions.common", "lezero.functions.registry")


def floor_of(module):
    for level, (_, prefixes) in enumerate(FLOORS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return level
    return None


def _module_name(path):
    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def _top_level_nodes(tree):
    """Statements at module level, including those inside module-level if/try blocks."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            todo = list(node.body) + list(getattr(node, "orelse", [])) + \
                [s for h in getattr(node, "handlers", []) for s in h.body] + \
                list(getattr(node, "finalbody", [])) + todo


def imports(path):
    """(line, imported module, imported name or None) of the top-level lezero imports."""
    module = _module_name(path)
    package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = []
    for node in _top_level_nodes(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names
                    if a.name.split(".")[0] == "lezero"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base.split(".")[0] == "lezero":
                out += [(node.lineno, base, a.name) for a in node.names]
    return out


def _modules():
    for dirpath, dirnames, files in os.walk(PACKAGE):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in sorted(files):
            if f.endswith(".py"):
                yield os.path.join(dirpath, f)


def _is_module(name):
    base = os.path.join(ROOT, *name.split("."))
    return os.path.exists(base + ".py") or os.path.exists(os.path.join(base, "__init__.py"))


def _target(base, name):
    """The module an import reaches: ``from a.b import c`` reaches a.b.c when c is one."""
    return f"{base}.{name}" if name and _is_module(f"{base}.{name}") else base


def _private_part(module):
    """The package owning the first underscore-named part of ``module``, or None."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and part != "__init__":
            return ".".join(parts[:i])
    return None


def _problems(path):
    src = _module_name(path)
    src_floor = floor_of(src)
    found = []
    for line, base, name in imports(path):
        target = _target(base, name)
        where = f"{os.path.relpath(path, ROOT)}:{line}: {src} imports {target}"
        t_floor = floor_of(target)
        if src != TOP and t_floor is not None and src_floor is not None and t_floor > src_floor:
            found.append(f"{where} (floor '{FLOORS[t_floor][0]}' is above "
                         f"'{FLOORS[src_floor][0]}')")
        owner = _private_part(target)
        if owner is not None and not src.startswith(owner + ".") and src != owner:
            found.append(f"{where} (a private module of {owner})")
        if name and name.startswith("_") and not name.startswith("__") \
                and not _is_module(f"{base}.{name}") \
                and base.rsplit(".", 1)[0] != src.rsplit(".", 1)[0] and not \
                src.startswith(base.rsplit(".", 1)[0] + "."):
            found.append(f"{where}.{name} (a private name of another package)")
        parts, own = target.split("."), src.split(".")
        if len(parts) >= 4 and parts[:2] == ["lezero", "functions"] and \
                not target.startswith(FUNCTIONS_SHARED) and _is_module(target) and \
                own[:3] != parts[:3] and os.path.isdir(os.path.join(PACKAGE, "functions",
                                                                     parts[2])):
            found.append(f"{where} (another family's module: import lezero.functions."
                         f"{parts[2]}, its facade)")
    return found


def test_every_module_lives_on_a_floor():
    unplaced = sorted(m for m in map(_module_name, _modules())
                      if m != TOP and floor_of(m) is None)
    assert not unplaced, (f"modules on no floor: {unplaced}; add them to FLOORS here and to "
                          f"the map in docs/architecture.md")


def test_no_floor_imports_a_higher_one_or_another_family_s_private_module():
    problems = [p for path in _modules() for p in _problems(path)]
    assert not problems, "\n".join(problems)


# Threads and BLAS belong to lezero.runtime: a kernel module imports none of these, and
# reaches the runtime only through its public names (``from lezero.runtime import ...``)
# or the Numba binding (``lezero.runtime.lazyjit``, through ``lezero.kernels``).
RUNTIME_ONLY = ("threading", "threadpoolctl", "queue", "concurrent", "multiprocessing",
                "ctypes", "_thread")
RUNTIME_MODULES_ALLOWED = ("lezero.runtime", "lezero.runtime.lazyjit")
RUNTIME_SUBMODULES = [os.path.splitext(n)[0] for n in os.listdir(
    os.path.join(ROOT, "lezero", "runtime")) if n.endswith(".py")]
RUNTIME_ONLY_NAMES = ("atomic_add", "atomic_load", "spin_until", "usleep",
                      "held_to_one_thread", "one_blas_thread", "controller", "limit_all",
                      "settle_threads", "Join", "submit", "queues")


def _runtime_only_imports(tree):
    """(line, names) of the imports in ``tree`` that only the runtime may make."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules, names = [a.name for a in node.names], []
        elif isinstance(node, ast.ImportFrom):
            modules, names = [node.module or ""], [a.name for a in node.names]
        else:
            continue
        bad = [m for m in modules if m.split(".")[0] in RUNTIME_ONLY or (
            m.startswith("lezero.runtime") and m not in RUNTIME_MODULES_ALLOWED)]
        bad += [n for n in names if n in RUNTIME_ONLY_NAMES]
        if modules == ["lezero"]:
            bad += [n for n in names if n == "runtime"]     # the package as a module object
        if modules == ["lezero.runtime"]:                   # a module of it, by name
            bad += [n for n in names if n in RUNTIME_SUBMODULES and n != "lazyjit"]
        if bad:
            yield node.lineno, bad


def test_kernels_start_no_thread_and_touch_no_blas_setting():
    found = []
    for path in _modules():
        if _module_name(path).split(".")[:2] != ["lezero", "kernels"]:
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        found += [f"{os.path.relpath(path, ROOT)}:{line} imports {bad}"
                  for line, bad in _runtime_only_imports(tree)]
    assert not found, "move this to lezero.runtime:\n" + "\n".join(found)


@pytest.mark.parametrize("line", [
    "import threading", "from threading import Thread", "import ctypes",
    "from threadpoolctl import threadpool_limits", "from concurrent.futures import wait",
    "from lezero.runtime.waits import arrive_and_wait", "from lezero.runtime import workers",
    "from lezero.runtime.openblas import sgemm", "from lezero.runtime.blas import is_small",
    "from lezero.runtime import held_to_one_thread", "from lezero.runtime.waits import spin_until",
])
def test_the_kernel_check_finds_runtime_only_imports(line):
    assert list(_runtime_only_imports(ast.parse(line)))


@pytest.mark.parametrize("line", [
    "from lezero.runtime import run_elementwise, policy, sgemm, arrive_and_wait",
    "from lezero.runtime.lazyjit import jit, prange", "import numpy as np",
])
def test_the_kernel_check_lets_public_runtime_names_pass(line):
    assert not list(_runtime_only_imports(ast.parse(line)))


@pytest.mark.parametrize("src,line,expected", [
    ("lezero/kernels/fake.py", "from lezero.functions import relu", "above"),
    ("lezero/functions/loss/fake.py", "from lezero.functions.activation.piecewise import relu",
     "another family's module"),
    ("lezero/optim/fake.py", "from lezero.data._random import get_rng", "private module"),
    ("lezero/optim/fake.py", "from lezero.nn.layers import _utils", "private module"),
    ("lezero/functions/loss/fake.py", "from lezero.functions.loss.common import reduce_loss",
     None),
    ("lezero/functions/loss/fake.py", "from lezero.functions.activation import relu", None),
    ("lezero/nn/fake.py", "from lezero.functions import relu\n"
                          "def f():\n    from lezero.optim import SGD", None),
])
def test_the_check_finds_what_it_should(tmp_path, src, line, expected):
    path = tmp_path / src
    path.parent.mkdir(parents=True)
    path.write_text(line + "\n")
    globals()["ROOT"], saved = str(tmp_path), ROOT
    try:
        for d in ("lezero/functions/activation", "lezero/functions/loss", "lezero/nn/layers",
                  "lezero/data", "lezero/optim"):
            (tmp_path / d).mkdir(parents=True, exist_ok=True)
            (tmp_path / d / "__init__.py").touch()
        (tmp_path / "lezero/functions/activation/piecewise.py").touch()
        (tmp_path / "lezero/functions/loss/common.py").touch()
        (tmp_path / "lezero/nn/layers/_utils.py").touch()
        (tmp_path / "lezero/data/_random.py").touch()
        found = _problems(str(path))
    finally:
        globals()["ROOT"] = saved
    if expected is None:
        assert not found, found
    else:
        assert len(found) == 1 and expected in found[0], found
