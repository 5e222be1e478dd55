"""The export coverage table: generated from the registry, verified by exporting, and
the copy in docs/onnx.md is current."""
import os
import re

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from lezero.functions.registry import REGISTRY  # noqa: E402
from lezero.onnx import coverage_table  # noqa: E402

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "onnx.md")


@pytest.fixture(scope="module")
def rows():
    return coverage_table.coverage_rows(verify=True)   # every "yes" exported and matched


def test_one_row_per_registered_operator(rows):
    assert sorted(r["name"] for r in rows) == sorted(REGISTRY)


def test_most_operators_export(rows):
    yes = {r["name"] for r in rows if r["status"] == "yes"}
    assert len(yes) >= 170
    assert {"conv2d", "lstm", "layer_norm", "scaled_dot_product_attention", "embedding",
            "max_pool2d", "gelu", "einsum"} <= yes
    no = {r["name"]: r["why"] for r in rows if r["status"] == "no"}
    assert "Inv" in no["inv"]                       # no ONNX operator inverts a matrix


def test_docs_table_is_current(rows):
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    section = re.search(r"<!-- coverage:start -->\n(.*?)<!-- coverage:end -->", text, re.S)
    assert section, "docs/onnx.md lost its coverage markers"
    assert section.group(1) == coverage_table.markdown_table(rows), (
        "docs/onnx.md is stale: run python -m lezero.onnx.coverage_table --markdown "
        "docs/onnx.md")
