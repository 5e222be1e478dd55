"""docs/amp.md shows the cast policy table as the code has it."""
import os

from lezero import amp

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "amp.md")


def test_docs_table_is_current():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    assert amp.cast_policy.markdown() in text, \
        "docs/amp.md is stale: paste amp.cast_policy.markdown() between its table markers"
