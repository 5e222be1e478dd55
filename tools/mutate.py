"""Mutation testing with mutmut, one area at a time: ``make mutate`` (``AREAS=core optim``).

    python tools/mutate.py [AREA ...] [--jobs N] [--list]

mutmut (3.x) reads its configuration from ``setup.cfg``'s ``[mutmut]`` section, which
names every mutated file and the tests that may kill them.  On a small machine the whole
set is slow, so this tool runs it per area: it copies the tracked files into
``build/mutmut/AREA`` (the worktree stays clean), narrows ``only_mutate`` and the test
selection to the area, runs ``mutmut run`` there (each mutant is tried against the tests
that cover it, as mutmut's own coverage stats say), and prints the score and the
surviving mutants.  ``build/mutmut/AREA/summary.json`` keeps the result; docs/testing.md
records the last run and explains every survivor.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# area: (files mutated, tests that may kill them)
AREAS = {
    "gradient_check": (["lezero/utils/gradient_check.py"],
                       ["tests/utils/test_gradient_check.py",
                        "tests/utils/test_gradient_check_contract.py"]),
    "core": (["lezero/core/*"],
             ["tests/core", "tests/functions/test_laws.py", "tests/utils/test_gradient_check.py"]),
    "module": (["lezero/nn/module.py", "lezero/nn/containers.py"],
               ["tests/nn/test_module.py", "tests/nn/test_containers.py",
                "tests/nn/test_state_dict.py", "tests/nn/test_module_contract.py"]),
    "optim": (["lezero/optim/optimizer.py", "lezero/optim/sgd.py", "lezero/optim/adam.py"],
              ["tests/optim/test_optimizers.py", "tests/optim/test_optimizer_contract.py",
               "tests/optim/test_update_rules_vs_torch.py"]),
    "optim_rest": (["lezero/optim/adaptive.py", "lezero/optim/lion.py",
                    "lezero/optim/lr_scheduler.py"], ["tests/optim"]),
    "layers": (["lezero/nn/layers/linear.py", "lezero/nn/layers/normalization.py",
                "lezero/nn/layers/conv.py"],
               ["tests/test_defaults_match_torch.py",
                "tests/nn/layers/test_linear_conv_embedding_and_dropout.py",
                "tests/nn/layers/test_normalization.py", "tests/nn/layers/test_lazy.py",
                "tests/nn/layers/test_layer_arguments_and_repr.py",
                "tests/nn/layers/test_conv_and_norm_forward_vs_torch.py"]),
}


def _cfg_list(name, values):
    return f"{name} =\n" + "".join(f"    {v}\n" for v in values)


def narrow_config(text, files, tests):
    """``setup.cfg`` text with ``only_mutate`` and the test selection set to one area."""
    for name, values in (("only_mutate", files), ("pytest_add_cli_args_test_selection", tests)):
        pattern = re.compile(rf"^{name} =\n(?:    .*\n)+", re.M)
        if not pattern.search(text):
            raise ValueError(f"mutate: setup.cfg [mutmut] has no {name!r} list")
        text = pattern.sub(_cfg_list(name, values), text, count=1)
    return text


def copy_tree(dest):
    """Copy the git-tracked files (and untracked, not ignored ones) into ``dest``."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.split("\n")
    if dest.exists():
        shutil.rmtree(dest)
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def results(workdir):
    """{mutant name: status} from ``mutmut results --all true``."""
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"],
                         cwd=workdir, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            found[name] = status
    return found


def run_area(area, jobs):
    """Run mutmut over one area; returns its summary dict."""
    files, tests = AREAS[area]
    workdir = ROOT / "build" / "mutmut" / area
    copy_tree(workdir)
    cfg = workdir / "setup.cfg"
    cfg.write_text(narrow_config(cfg.read_text(encoding="utf-8"), files, tests), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    start = datetime.datetime.now(datetime.timezone.utc)
    subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs)],
                   cwd=workdir, env=env, stdout=subprocess.DEVNULL)
    status = results(workdir)
    counts = {}
    for s in status.values():
        counts[s] = counts.get(s, 0) + 1
    tried = sum(n for s, n in counts.items() if s not in ("not checked", "skipped"))
    killed = sum(counts.get(s, 0) for s in ("killed", "timeout", "segfault"))
    summary = {"area": area, "files": files, "tests": tests, "date": start.isoformat(timespec="minutes"),
               "seconds": round((datetime.datetime.now(datetime.timezone.utc) - start).total_seconds()),
               "counts": counts, "score": round(100.0 * killed / tried, 1) if tried else None,
               "survivors": sorted(n for n, s in status.items() if s in ("survived", "no tests"))}
    (workdir / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("areas", nargs="*", help=f"areas to run (default all): {', '.join(AREAS)}")
    parser.add_argument("--jobs", type=int, default=2, help="mutmut --max-children")
    parser.add_argument("--list", action="store_true", help="print the areas and exit")
    args = parser.parse_args(argv)
    unknown = [a for a in args.areas if a not in AREAS]
    if unknown:
        parser.error(f"unknown area(s) {unknown}; expected some of {list(AREAS)}")
    if args.list:
        for area, (files, tests) in AREAS.items():
            print(f"{area:<15} {' '.join(files)}  <-  {' '.join(tests)}")
        return 0
    for area in args.areas or list(AREAS):
        s = run_area(area, args.jobs)
        print(f"{area:<15} score {s['score']}%  {s['counts']}  {s['seconds']} s")
        for name in s["survivors"]:
            print(f"    survived: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
