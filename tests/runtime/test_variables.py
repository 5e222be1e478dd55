"""Every environment variable LeZero reads is in ``lezero.runtime.variables``' table (and
so in ``show()``); the runtime reads its own only through ``getenv``."""
import os
import re

import pytest

from lezero.runtime import variables

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "lezero")


def _names_in_the_package():
    found = set()
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                    found |= set(re.findall(r"\bLEZERO_[A-Z_]+\b", fh.read()))
    return found


def test_every_lezero_variable_of_the_package_is_listed():
    missing = sorted(n for n in _names_in_the_package() if not variables.listed(n))
    assert not missing, f"add these to lezero/runtime/variables.py: {missing}"


def test_getenv_refuses_a_variable_missing_from_the_table(monkeypatch):
    monkeypatch.setenv("LEZERO_PROFILE", "serial")
    assert variables.getenv("LEZERO_PROFILE") == "serial"
    with pytest.raises(KeyError, match="LEZERO_NOT_LISTED"):
        variables.getenv("LEZERO_NOT_LISTED")


def test_the_runtime_reads_the_environment_only_through_getenv():
    folder = os.path.join(ROOT, "runtime")
    for f in os.listdir(folder):
        if f.endswith(".py") and f != "variables.py":
            with open(os.path.join(folder, f), encoding="utf-8") as fh:
                text = fh.read()
            assert "os.environ.get(" not in text and "os.getenv(" not in text, f
