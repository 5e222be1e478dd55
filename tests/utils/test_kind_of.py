"""``kind_of``: NumPy's dtype kind, with bfloat16 (kind 'V' to NumPy) counted as floating."""
import numpy as np
import pytest

from lezero.utils.checks import kind_of


@pytest.mark.parametrize("dtype, kind", [("float32", "f"), ("float16", "f"), ("int64", "i"),
                                         ("uint8", "u"), ("bool", "b"), ("complex64", "c")])
def test_plain_dtypes_keep_their_kind(dtype, kind):
    assert kind_of(np.dtype(dtype)) == kind


def test_bfloat16_counts_as_floating_other_voids_do_not():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert kind_of(np.dtype(ml_dtypes.bfloat16)) == "f"
    assert kind_of(np.dtype("V4")) == "V"
