"""Smaller PyTorch manners and newcomer traps: ``lezero.nn.functional``, string data,
the cross_entropy hint for float class labels (docs/pytorch_manners.md)."""
import subprocess
import sys

import numpy as np
import pytest

import lezero as lz
import lezero.functions


def test_nn_functional_is_the_functions_module():
    import lezero.nn.functional as F
    from lezero.nn import functional as G
    assert F is lezero.functions and G is F and lz.nn.functional is F
    assert F.relu is lezero.functions.relu and F.softmax(lz.tensor([0.0, 0.0]), dim=0
                                                        ).data.tolist() == [0.5, 0.5]


def test_nn_functional_imports_first_in_a_fresh_process():
    code = ("import lezero.nn.functional as F, lezero.functions as G; assert F is G; "
            "from lezero.nn import functional as H; assert H is G; print(F.cat.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "concatenate"


@pytest.mark.parametrize("data", [np.array(["a", "b"]), ["a", "b"], np.array([b"x"]),
                                  np.array([object()])])
def test_string_and_object_data_are_rejected_alike(data):
    with pytest.raises(TypeError, match=r"Variable: data of dtype .* is not numeric"):
        lz.Variable(data)


def test_float_class_labels_get_the_integer_hint():
    logits = lz.Variable(np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"cross_entropy: a probability target must have the "
                       r"input's shape \(3, 4\), got \(3,\); class indices must be integers "
                       r"\(pass target.astype\(np.int64\)\)"):
        lezero.functions.cross_entropy(logits, np.array([0.0, 1.0, 2.0]))
    loss = lezero.functions.cross_entropy(logits, np.array([0.0, 1.0, 2.0]).astype(np.int64))
    assert loss.data == pytest.approx(np.log(4))
