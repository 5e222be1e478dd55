"""Without onnx or onnxruntime installed, lezero.onnx says which extra to install."""
import sys

import pytest

from lezero.onnx import _deps


@pytest.mark.parametrize("name,getter,words", [
    ("onnx", _deps.onnx, "needs the onnx package"),
    ("onnxruntime", _deps.onnxruntime, "needs onnxruntime to validate exports"),
])
def test_a_missing_package_names_the_extra(monkeypatch, name, getter, words):
    monkeypatch.setitem(sys.modules, name, None)      # what an absent package looks like
    with pytest.raises(ImportError, match=words) as info:
        getter()
    assert "pip install -e '.[onnx]'" in str(info.value)


def test_present_packages_are_returned():
    assert _deps.onnx().__name__ == "onnx"
    assert _deps.onnxruntime().__name__ == "onnxruntime"
