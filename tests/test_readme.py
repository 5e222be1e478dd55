"""The README works for a newcomer as written: the tour runs and prints what it computed,
the commands it gives for running a step and an example run from a fresh checkout, and
every `make` target it names exists."""
import math
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    README = f.read()
BASH = "\n".join(re.findall(r"```bash\n(.*?)```", README, re.S))
# `.venv/bin/python steps/step07.py` or, after `source .venv/bin/activate`, `python ...`
RUN = re.compile(r"^(?:\.venv/bin/)?python ((?:steps|examples)/\S+\.py)([^#\n]*)", re.M)


def readme_runs():
    """(script, arguments) of every step or example the README's commands run."""
    return [(m.group(1), shlex.split(m.group(2))) for m in RUN.finditer(BASH)]


NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def tour_and_its_output():
    """The tour's code and the output the README shows under it."""
    m = re.search(r"```python\n((?:(?!```).)*?nn\.Sequential.*?)```\n\n[^\n]*\n\n```text\n"
                  r"(.*?)```", README, re.S)
    assert m, "the README shows the tour's output in a ```text block right below it"
    return m.group(1), m.group(2)


def same_output(shown, printed, rel=0.05):
    """Problems between the README's output and the tour's: the same lines, each number
    within ``rel`` of the shown one (BLAS and thread counts move the last digits)."""
    shown, printed = shown.strip().splitlines(), printed.strip().splitlines()
    if len(shown) != len(printed):
        return [f"{len(shown)} lines shown, {len(printed)} printed: {printed}"]
    problems = []
    for want, got in zip(shown, printed):
        a, b = NUMBER.findall(want), NUMBER.findall(got)
        if NUMBER.sub("#", want) != NUMBER.sub("#", got) or len(a) != len(b) or any(
                abs(float(x) - float(y)) > rel * max(1.0, abs(float(x))) for x, y in zip(a, b)):
            problems.append(f"shown {want!r}, printed {got!r}")
    return problems


def test_readme_tour_runs_and_prints_what_the_readme_shows(tmp_path, monkeypatch, capsys):
    tour, shown = tour_and_its_output()
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(tour, "README.md", "exec"), scope)
    assert (tmp_path / "digits.safetensors").exists()
    out = capsys.readouterr().out
    x = 2.0                                     # y = x^3 + x sin x: the tour prints its values
    dy = 3 * x ** 2 + math.sin(x) + x * math.cos(x)
    assert f"dy/dx = {dy:.4f}" in out and f"dy/dx = {dy:.4f}" in shown, out
    assert not same_output(shown, out), "\n".join(same_output(shown, out))
    # what the reader should see: the loss falls every epoch, far below a guess's ln 10
    losses = [float(v) for v in re.findall(r"mean loss (\S+)", out)]
    assert len(losses) == 3 and losses[0] < math.log(10) and losses == sorted(losses)[::-1]
    assert losses[-1] < 0.5 and float(re.search(r"accuracy (\S+)%", out).group(1)) > 90


def test_the_output_comparison_catches_a_different_result():
    shown = "epoch 1: mean loss 1.476\ntest accuracy 94.7% on 359 digits\n"
    assert not same_output(shown, "epoch 1: mean loss 1.49\ntest accuracy 94.2% on 359 digits")
    assert same_output(shown, "epoch 1: mean loss 2.1\ntest accuracy 94.7% on 359 digits")
    assert same_output(shown, "epoch 1: mean loss 1.476\ntest accuracy 94.7% on 359 images")
    assert same_output(shown, "epoch 1: mean loss 1.476\n")


def test_readme_names_a_step_and_an_example_to_run():
    kinds = {script.split("/")[0] for script, _ in readme_runs()}
    assert kinds == {"steps", "examples"}, readme_runs()
    assert ".venv/bin/python steps/" in BASH and "source .venv/bin/activate" in BASH


@pytest.mark.parametrize("script,args", readme_runs(), ids=lambda v: str(v))
def test_a_first_run_from_the_readme_works(script, args, tmp_path):
    """Run as a newcomer would, from another folder so nothing lands in the checkout:
    the script exists, exits 0, prints, and writes only where its flags say."""
    path = os.path.join(ROOT, script)
    assert os.path.exists(path), f"README runs {script}, which does not exist"
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               NUMBA_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, path, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.strip(), "what a newcomer runs first prints what it computed"
    if "--out" in args:
        out = tmp_path / args[args.index("--out") + 1]
        assert (out / "summary.json").exists() and (out / "history.png").exists()


# Every command the README gives: the lines of its bash blocks and the spans of its prose.
COMMAND = re.compile(r"^(?:\.venv/bin/)?(?:python|mpiexec|make)\b.*")


def readme_commands():
    """Every ``python``/``mpiexec``/``make`` command the README gives, comments cut."""
    lines = [line.split("  #")[0].strip() for line in BASH.splitlines()]
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", README, flags=re.S))
    return sorted({c for c in lines + spans if COMMAND.match(c)})


def test_every_python_command_the_readme_gives_names_what_exists():
    """A script path exists, a ``-m`` module imports (found without running it)."""
    import importlib.util
    checked = []
    for command in readme_commands():
        words = shlex.split(command)
        if words[0] == "make":
            continue                     # test_every_make_target_the_readme_names_exists
        if words[0] == "mpiexec" and words[1:2] == ["-n"]:
            words = words[3:]            # mpiexec -n N python ...
        if len(words) < 2:
            continue                     # `mpiexec` named in prose, no script
        if words[1] == "-m":
            assert importlib.util.find_spec(words[2]), f"README: {command}: no module {words[2]}"
        else:
            assert os.path.exists(os.path.join(ROOT, words[1])), f"README: {command}: no {words[1]}"
        checked.append(command)
    assert {"python -m lezero.serving", "mpiexec -n 2 python examples/train_ddp_cnn.py",
            "python benchmarks/bench_mlp.py"} <= set(checked), checked


MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")


@pytest.mark.parametrize("command", [c for c in readme_commands()
                                     if c.startswith("mpiexec") and " python " in c])
def test_an_mpiexec_command_of_the_readme_runs(command, tmp_path):
    """Run as given plus ``--smoke`` (one short epoch), with one BLAS thread per rank;
    a machine with fewer cores than ranks skips it (oversubscribed ranks crawl)."""
    words = shlex.split(command)
    ranks = int(words[2])
    if not os.path.exists(MPIEXEC) or (os.cpu_count() or 1) < ranks:
        pytest.skip(f"needs the mpi extra's mpiexec and {ranks} cores")
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               NUMBA_NUM_THREADS="1")
    script = os.path.join(ROOT, words[4])
    proc = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, script, *words[5:],
                           "--smoke", "--out", "out"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "after epoch" in proc.stdout and (tmp_path / "out" / "summary.json").exists()


def test_every_make_target_the_readme_names_exists():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        targets = set(re.findall(r"^([\w-]+):", f.read(), re.M))
    named = set(re.findall(r"`make ([\w-]+)", README)) | set(re.findall(r"^make ([\w-]+)",
                                                                          BASH, re.M))
    assert {"demo", "test", "install", "notebooks", "jupyter"} <= named
    assert named <= targets, f"the README names make targets the Makefile lacks: " \
                             f"{sorted(named - targets)}"


def test_readme_points_inside_the_checkout():
    """Every relative link of the README resolves in a clone (no ../shared/...)."""
    links = re.findall(r"\]\(([^)#]+)\)", README)
    local = [link for link in links if not re.match(r"https?://", link)]
    assert "docs/architecture.md" in local
    missing = [link for link in local if not os.path.exists(os.path.join(ROOT, link))]
    assert not missing, f"README links outside the checkout or to nothing: {missing}"


def test_make_notebooks_installs_what_notebooks_need_and_no_torch():
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        setup = f.read()
    deps = re.search(r"NOTEBOOK_DEPS = \[(.*?)\]", setup, re.S).group(1)
    names = {re.split(r"[<>=\[]", d.strip().strip('"'))[0] for d in deps.split(",") if d.strip()}
    assert {"jupyterlab", "nbclient", "nbformat", "ipykernel", "matplotlib"} <= names
    assert not {"torch", "torchvision", "transformers"} & names
    assert '"notebooks": NOTEBOOK_DEPS' in setup
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        make = f.read()
    rule = re.search(r"^notebooks:.*?\n((?:\t.*\n)+)", make, re.M).group(1)
    assert "tools/make_notebook.py notebooks/src/*.py" in rule
    assert '.[notebooks' in make and re.search(r"^jupyter:.*\n\t.*jupyter lab", make, re.M)
