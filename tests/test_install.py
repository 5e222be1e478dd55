"""One install for what the README runs: ``make install`` installs every third-party package
the steps, the examples and the notebook sources import (and nothing test-only), and a
script run without an optional package stops before any work with a one-line hint whose
command installs it."""
import ast
import glob
import importlib.metadata
import importlib.util
import json
import os
import re
import runpy
import subprocess
import sys
from unittest import mock

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = sorted(glob.glob(os.path.join(ROOT, "examples", "*.py")) +
                 glob.glob(os.path.join(ROOT, "steps", "*.py")) +
                 glob.glob(os.path.join(ROOT, "notebooks", "src", "*.py")))
# Imported on purpose without being installed by `make install`, and why.
NOT_INSTALLED = {"torch": "notebook 08 compares with PyTorch only when it is installed",
                 "cupy": "--device gpu, for machines with CUDA (the gpu extra)"}
# What a LeZero subsystem a script imports needs at run time.
IMPLIED = {"lezero.serving": ["starlette", "uvicorn"], "lezero.onnx": ["onnx", "onnxruntime"],
           "lezero.parallel": ["mpi4py"], "lezero.distributed": ["mpi4py"]}
TEST_ONLY = {"torch", "torchvision", "transformers"}


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req):
    return _norm(re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0])


def setup_kwargs():
    """The keyword arguments setup.py hands to setuptools.setup."""
    import setuptools
    captured = {}
    cwd = os.getcwd()
    os.chdir(ROOT)                      # setup.py reads README.md
    try:
        with mock.patch.object(setuptools, "setup", lambda **kw: captured.update(kw)):
            runpy.run_path(os.path.join(ROOT, "setup.py"))
    finally:
        os.chdir(cwd)
    return captured


def make_rules():
    """Makefile rules: target -> (prerequisites, recipe lines)."""
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        text = f.read()
    rules, current = {}, None
    for line in text.splitlines():
        rule = re.match(r"^([^\s#=:][^:=]*):(?!=)(.*)$", line)
        if rule:
            current = rule.group(1).strip()
            rules[current] = (rule.group(2).split(), [])
        elif line.startswith("\t") and current:
            rules[current][1].append(line.strip())
        elif line.strip():
            current = None
    return rules


def extras_of_target(target):
    """The extras a make target's pip installs name (``pip install -e ".[a,b]"``),
    following its prerequisites."""
    rules, extras, todo, seen = make_rules(), set(), [target], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in rules:
            continue
        seen.add(name)
        prerequisites, recipe = rules[name]
        todo += prerequisites
        for line in recipe:
            if re.search(r"(pip|\$\(PIP\)) install", line):
                for group in re.findall(r"\.\[([\w,-]+)\]", line):
                    extras |= set(group.split(","))
    return extras


def installed_by(target):
    """Normalised names of the distributions a make target installs."""
    kw = setup_kwargs()
    reqs = list(kw["install_requires"])
    for extra in extras_of_target(target):
        reqs += kw["extras_require"][extra]
    return {_requirement_name(r) for r in reqs}


def script_imports(path):
    """Top-level module names a script imports (its ``require(...)`` calls included) and
    the LeZero subsystems it imports."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
        elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "require"):
            names |= {a.value for a in node.args if isinstance(a, ast.Constant)}
    return names


def third_party(names, local):
    out = set()
    for name in names:
        for prefix, needs in IMPLIED.items():
            if name == prefix or name.startswith(prefix + "."):
                out |= set(needs)
        top = name.split(".")[0]
        if top not in sys.stdlib_module_names and top not in local and top != "lezero":
            out.add(top)
    return out


def test_make_install_installs_what_every_script_imports():
    local = {os.path.splitext(os.path.basename(p))[0]      # the checkout's own modules
             for p in SCRIPTS + glob.glob(os.path.join(ROOT, "benchmarks", "*.py"))
             + glob.glob(os.path.join(ROOT, "tools", "*.py"))}
    dists = importlib.metadata.packages_distributions()
    installed = installed_by("install")
    problems = []
    for path in SCRIPTS:
        for module in sorted(third_party(script_imports(path), local)):
            if module in NOT_INSTALLED:
                continue
            names = {_norm(d) for d in dists.get(module, [])}
            if not names:
                problems.append(f"{os.path.relpath(path, ROOT)} imports {module}, which is "
                                "not installed here: declare it in setup.py")
            elif not names & installed:
                problems.append(f"{os.path.relpath(path, ROOT)} imports {module} "
                                f"({sorted(names)}), which `make install` does not install")
    assert not problems, "\n".join(problems)


def test_make_install_has_no_test_only_oracle_and_brings_mpiexec():
    installed = installed_by("install")
    assert not installed & TEST_ONLY, sorted(installed & TEST_ONLY)
    assert {"mpich", "mpi4py", "tritonclient", "onnxruntime", "gymnasium"} <= installed
    assert TEST_ONLY <= installed_by("install-test")
    torch_pins = [r for r in setup_kwargs()["extras_require"]["dev"]
                  if _requirement_name(r) == "torch"]
    assert torch_pins == ["torch==2.13.0"]         # never an unpinned torch
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert "mpiexec" in readme and "make install" in readme and "mpi" in readme


def test_every_install_hint_names_an_extra_that_installs_the_module():
    """The hints scripts print (``pip install -e ".[serve]"``) name extras of setup.py,
    and each optional module of examples/_common.EXTRAS is in the extra it names."""
    extras = setup_kwargs()["extras_require"]
    dists = importlib.metadata.packages_distributions()
    with open(os.path.join(ROOT, "examples", "_common.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    table = next(ast.literal_eval(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", None) == "EXTRAS")
    for module, extra in table.items():
        wanted = {_norm(d) for d in dists[module]}
        assert wanted & {_requirement_name(r) for r in extras[extra]}, (module, extra)
    for path in SCRIPTS:
        with open(path, encoding="utf-8") as f:
            for group in re.findall(r'pip install -e \\?"\.\[([\w,-]+)\]', f.read()):
                assert set(group.split(",")) <= set(extras), (path, group)


# (script, module hidden from it, the extra its hint must name)
HIDDEN = [("examples/export_onnx.py", "onnxruntime", "onnx"),
          ("examples/serve_client.py", "tritonclient", "serve"),
          ("examples/train_dqn.py", "gymnasium", "examples"),
          ("examples/train_gcn.py", "networkx", "examples"),
          ("steps/step53.py", "onnx", "onnx"),
          ("steps/step66.py", "onnx", "onnx"),
          ("steps/step60.py", "uvicorn", "serve")]


@pytest.mark.parametrize("script,module,extra", HIDDEN, ids=lambda v: str(v))
def test_a_missing_optional_module_stops_the_script_with_a_one_line_hint(
        script, module, extra, tmp_path):
    path = os.path.join(ROOT, script)
    code = (f"import runpy, sys; sys.modules[{module!r}] = None; "
            f"sys.path.insert(0, {os.path.dirname(path)!r}); "
            f"sys.argv = [{path!r}, '--smoke']; runpy.run_path({path!r}, run_name='__main__')")
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert module in lines[0] and f'pip install -e ".[{extra}]"' in lines[0], lines[0]
    assert not proc.stdout.strip(), "the check comes before any work"
    assert os.listdir(tmp_path) == [], "nothing written (no runs/ folder)"


def test_the_torchvision_oracle_matches_torch_or_says_it_does_not():
    """`make install-test`'s torchvision loads beside the CPU torch; when its C++
    operators are missing a TorchvisionMismatchWarning names both builds."""
    for name in ("torch", "torchvision"):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed (make install-test)")
    code = """if True:
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from lezero.testing import oracles
            tv = oracles.import_torchvision()
        import torch
        try:
            tv.ops.nms(torch.zeros((1, 4)), torch.zeros(1), 0.5)
            nms = True
        except Exception:
            nms = False
        print(json.dumps({"nms": nms, "mismatch": oracles.torchvision_mismatch(),
                          "torch": torch.__version__, "torchvision": tv.__version__,
                          "warnings": [(w.category.__name__, str(w.message)) for w in caught
                                       if w.category is oracles.TorchvisionMismatchWarning]}))
    """
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    if got["nms"]:
        assert got["mismatch"] is None and not got["warnings"]
        return
    assert got["warnings"] == [["TorchvisionMismatchWarning", got["mismatch"]]]
    assert got["torch"] in got["mismatch"] and got["torchvision"] in got["mismatch"]
    assert "torchvision::nms" in got["mismatch"] and "docs/testing.md" in got["mismatch"]


def started_under_mpiexec():
    """The steps and examples that start lezero.parallel's world, the ones a reader runs
    under mpiexec (examples through their shared _ddp or _parallel3d module)."""
    scripts = [p for p in SCRIPTS if os.path.basename(os.path.dirname(p)) in ("steps", "examples")
               and not os.path.basename(p).startswith("_")]
    return [os.path.relpath(p, ROOT) for p in scripts
            if script_imports(p) & {"lezero.parallel", "lezero.distributed", "_ddp",
                                    "_parallel3d"}]


def test_the_mpi_scripts_are_found():
    found = started_under_mpiexec()
    assert {"examples/train_ddp_cnn.py", "examples/train_3d_gpt.py", "steps/step48.py",
            "steps/step55.py"} <= set(found) and len(found) >= 10, found


@pytest.mark.parametrize("script", started_under_mpiexec())
def test_under_mpiexec_without_mpi4py_a_script_stops_with_the_hint(script, tmp_path):
    """A launcher's PMI_SIZE=2 (what mpiexec sets for each rank) with mpi4py hidden: the
    rank stops before any work with the one-line hint, not a traceback (alone, without
    a launcher, the same script runs as a world of one)."""
    path = os.path.join(ROOT, script)
    code = (f"import runpy, sys; sys.modules['mpi4py'] = None; "
            f"sys.path.insert(0, {os.path.dirname(path)!r}); "
            f"sys.argv = [{path!r}, '--smoke']; runpy.run_path({path!r}, run_name='__main__')")
    env = dict(os.environ, PMI_SIZE="2", PMI_RANK="0", MPLBACKEND="Agg",
               OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "mpi4py" in lines[0] and "pip install -e '.[mpi]'" in lines[0], lines[0]
    assert not proc.stdout.strip(), "the check comes before any work"
    assert os.listdir(tmp_path) == [], "nothing written (no runs/ folder)"
