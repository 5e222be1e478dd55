"""The operator registry: its count, its consistency with lezero.functions, and the doc."""
import os

import lezero.functions as F
from lezero.functions import registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_registry_counts_at_least_150_operators():
    assert len(registry.operators()) >= 150


def test_every_registered_operator_is_public():
    for op in registry.operators():
        assert getattr(F, op.name, None) is op.fn, f"{op.name} is not exported as F.{op.name}"
        assert op.fn.__doc__, f"{op.name} has no docstring"


def test_operators_doc_is_up_to_date():
    with open(os.path.join(ROOT, "docs", "operators.md"), encoding="utf-8") as f:
        committed = f.read()
    assert committed == registry.markdown(), (
        "docs/operators.md is stale: run `python -m lezero.functions.registry "
        "--markdown docs/operators.md`")


def test_registry_cli_count(capsys):
    registry.main(["--count"])
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].split()[-1] == str(len(registry.operators()))
