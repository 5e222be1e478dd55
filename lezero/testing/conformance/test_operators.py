"""Every registered operator, forward and backward, on the backend under test, against
NumPy's float64 result.

The calls are the operator table of the LeZero repository
(``tests/functions/test_operator_contract.py``: one small valid call per registered
operator); outside a checkout these tests skip.  Random operators (dropout, ...) draw
from the device's generator, so only their shapes are compared.
"""
import importlib.util
import os

import numpy as np
import pytest

import lezero
from lezero.testing.compare import assert_results_match

_TABLE = os.path.join(os.path.dirname(os.path.dirname(lezero.__file__)),
                      "tests", "functions", "test_operator_contract.py")


def _load_table():
    if not os.path.exists(_TABLE):
        return None
    spec = importlib.util.spec_from_file_location("_lezero_operator_table", _TABLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


table = _load_table()
OPS = table.OPS if table is not None else []
pytestmark = pytest.mark.skipif(table is None, reason=f"no operator table at {_TABLE}")


def _compare(name, dtype, got, want, exact_shape_only):
    rtol, atol = table.PATH_TOLERANCE[dtype]
    assert_results_match(f"{name} ({np.dtype(dtype).name})", got, want, rtol, atol,
                         shapes_only=exact_shape_only)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", OPS)
def test_operator_matches_numpy(backend, name, dtype):
    if np.dtype(dtype).name not in backend.capabilities.dtypes:
        pytest.skip(f"{backend.name} holds no {np.dtype(dtype).name}")
    case = table.Case(name)
    outs, grads = table._run_path(case, dtype, backend.xp, False)
    ref_outs, ref_grads = table._reference(case)
    shapes_only = name in table.RANDOM and not backend.is_host
    _compare(name + " output", dtype, outs, ref_outs, shapes_only)
    _compare(name + " gradient", dtype, grads, ref_grads, shapes_only)
