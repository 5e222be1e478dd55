"""tools/budgets.py: code lines, and the three budgets it enforces."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("budgets", os.path.join(ROOT, "tools", "budgets.py"))
budgets = importlib.util.module_from_spec(spec)
spec.loader.exec_module(budgets)

SOURCE = '''"""A module docstring
over two lines."""
import os   # a trailing comment keeps its line


def f(x):
    """A docstring."""
    # a comment line

    return x + 1
'''


def test_code_lines_leave_out_blanks_comments_and_docstrings():
    assert budgets.code_lines(SOURCE) == 3          # import, def, return


def test_functions_are_measured_from_the_decorator():
    import ast
    tree = ast.parse("@d\ndef g():\n    return 1\n\n\nclass C:\n    def m(self):\n        pass\n")
    assert budgets.functions(tree) == [("g", 1, 3), ("C.m", 7, 2)]


def test_each_budget_is_enforced():
    long_fn = "def f():\n" + "    x = 1\n" * 60
    over = budgets.CORE_CODE_LINES + 1
    files = {os.path.join("lezero", "core", "a.py"): (500, over, []),
             os.path.join("lezero", "x.py"): (601, 10, [("f", 1, 61)]),
             os.path.join("lezero", "y.py"): (10, 10, [("g", 1, 60)])}
    problems, core = budgets.check(files)
    assert core == over
    assert len(problems) == 3
    assert f"lezero/core has {over} code lines" in problems[0].replace(os.sep, "/")
    assert any("x.py has 601 lines" in p for p in problems)
    assert any("f has 61 lines" in p for p in problems)
    assert budgets.code_lines(long_fn) == 61


def test_the_script_reports_the_figures(capsys):
    budgets.main([])
    out = capsys.readouterr().out
    assert "lezero/core:" in out and "largest file:" in out and "largest function:" in out
