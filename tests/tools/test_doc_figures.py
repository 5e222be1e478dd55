"""tools/doc_figures.py: a block in a page is its script's last output, copied; the check
fails when the two disagree; and every block in docs/ and the README agrees today."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import doc_figures  # noqa: E402

HEAD = "Measured 2026-12-06 with `python benchmarks/bench_x.py`.\n\n"


@pytest.fixture
def site(tmp_path, monkeypatch):
    (tmp_path / "figures").mkdir()
    page = tmp_path / "page.md"
    page.write_text("# Speed\n\nprose kept\n<!-- figures:speed:start -->\nold 1.5x\n"
                    "<!-- figures:speed:end -->\nafter\n")
    monkeypatch.setattr(doc_figures, "FIGURES", str(tmp_path / "figures"))
    monkeypatch.setattr(doc_figures, "ROOT", str(tmp_path))
    monkeypatch.setattr(doc_figures, "pages", lambda: [str(page)])
    return page


def test_record_copies_the_output_into_the_block_and_keeps_the_prose(site):
    assert doc_figures.record("speed", HEAD + "| a | 1.2x |") == []
    text = site.read_text()
    assert "old 1.5x" not in text and "| a | 1.2x |" in text
    assert text.startswith("# Speed\n\nprose kept\n") and text.endswith("end -->\nafter\n")
    assert doc_figures.sync(check=True) == []
    assert os.stat(site).st_mode & 0o777 == 0o644                  # readable by all, as before


def test_check_names_a_block_edited_by_hand_and_a_block_without_output(site):
    doc_figures.record("speed", HEAD + "| a | 1.2x |")
    site.write_text(site.read_text().replace("1.2x", "0.9x")
                    + "<!-- figures:memory:start -->\n<!-- figures:memory:end -->\n")
    problems = doc_figures.sync(check=True)
    assert problems == ["page.md: block memory has no docs/figures/memory.md (run its script)",
                        "page.md: block speed differs from docs/figures/speed.md"]
    assert "0.9x" in site.read_text()                   # --check writes nothing


def test_an_output_without_its_command_and_date_is_refused(site):
    with pytest.raises(ValueError, match="command .* and the date"):
        doc_figures.record("speed", "| a | 1.2x |")
    with pytest.raises(ValueError, match="lower case"):
        doc_figures.record("../x", HEAD)


def test_every_block_in_the_docs_is_its_scripts_last_output():
    assert doc_figures.sync(check=True) == []
