"""Size budgets, checked by ``make test`` before the tests run:

* ``lezero/core`` holds at most 565 code lines (the engine, read in one sitting; 450
  until the graph learned to hold unread inputs as edges and to free what backward
  used, core/inputref.py, and to skip inputs whose array autocast dropped; 545 until
  ``Function`` gained ``call1``/``call2``, the calls without ``__call__``'s argument
  tuple that a one-element add needs to stay within 1.2x of PyTorch's);
* no file under ``lezero/`` passes 600 lines;
* no function passes 60 lines.

Code lines are the lines that are not blank, not comments and not docstrings; file and
function sizes count every line (a function from its ``def`` to its last line, decorators
and docstring included).  Prints every figure it checks against and exits 1 when a budget
is passed.

    python tools/budgets.py            # check
    python tools/budgets.py --report   # also list the largest files and functions
"""
import argparse
import ast
import io
import os
import sys
import tokenize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "lezero")
CORE_CODE_LINES = 565
FILE_LINES = 600
FUNCTION_LINES = 60


def python_files(top):
    for dirpath, dirnames, files in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                yield os.path.join(dirpath, f)


def docstring_lines(tree):
    """Line numbers covered by module, class and function docstrings."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def code_lines(source):
    """How many lines hold code: not blank, not only a comment, not a docstring."""
    tree = ast.parse(source)
    skip = docstring_lines(tree)
    comment_only = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and not tok.line[:tok.start[1]].strip():
            comment_only.add(tok.start[0])
    return sum(1 for i, line in enumerate(source.splitlines(), 1)
               if line.strip() and i not in skip and i not in comment_only)


def functions(tree):
    """(qualified name, first line, number of lines) of every function and method."""
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([d.lineno for d in child.decorator_list] + [child.lineno])
                out.append((prefix + child.name, first, child.end_lineno - first + 1))
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
    visit(tree, "")
    return out


def measure(top=PACKAGE):
    """{relative path: (lines, code lines, [(function, line, lines)])}."""
    out = {}
    for path in python_files(top):
        with open(path, encoding="utf-8") as f:
            source = f.read()
        tree = ast.parse(source)
        rel = os.path.relpath(path, ROOT)
        out[rel] = (len(source.splitlines()), code_lines(source), functions(tree))
    return out


def check(files):
    """The list of budget violations (strings) and the core's code-line count."""
    problems = []
    core = sum(c for rel, (_, c, _) in files.items()
               if rel.startswith(os.path.join("lezero", "core") + os.sep))
    if core > CORE_CODE_LINES:
        problems.append(f"lezero/core has {core} code lines (budget {CORE_CODE_LINES})")
    for rel, (lines, _, funcs) in sorted(files.items()):
        if lines > FILE_LINES:
            problems.append(f"{rel} has {lines} lines (budget {FILE_LINES})")
        for name, first, n in funcs:
            if n > FUNCTION_LINES:
                problems.append(f"{rel}:{first} {name} has {n} lines (budget {FUNCTION_LINES})")
    return problems, core


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", action="store_true",
                        help="also list the largest files and functions")
    args = parser.parse_args(argv)
    files = measure()
    problems, core = check(files)
    biggest_file = max(files.items(), key=lambda kv: kv[1][0])
    funcs = [(n, rel, first, name) for rel, (_, _, fs) in files.items() for name, first, n in fs]
    biggest_fn = max(funcs)
    print(f"lezero/core: {core} code lines (budget {CORE_CODE_LINES})")
    print(f"largest file: {biggest_file[0]} {biggest_file[1][0]} lines (budget {FILE_LINES})")
    print(f"largest function: {biggest_fn[1]}:{biggest_fn[2]} {biggest_fn[3]} "
          f"{biggest_fn[0]} lines (budget {FUNCTION_LINES})")
    if args.report:
        print("\nfiles by code lines:")
        for rel, (lines, code, _) in sorted(files.items(), key=lambda kv: -kv[1][1])[:25]:
            print(f"  {code:5d} code {lines:5d} lines  {rel}")
        print("\nfunctions by lines:")
        for n, rel, first, name in sorted(funcs, reverse=True)[:25]:
            print(f"  {n:5d}  {rel}:{first} {name}")
    for p in problems:
        print("OVER BUDGET: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
