"""PyTorch parity of the operators that have no gradient: forward only (check_torch with
grad=False), so the operator check table (docs/testing.md) shows a real check for them."""
import numpy as np
import pytest
import torch

import lezero.functions as F
from lezero.testing import check_torch

RNG = np.random.default_rng(0)
X = (RNG.standard_normal((3, 4)) * 3).astype(np.float32)
X[0, 0], X[0, 1], X[1, 0] = 2.5, -0.5, 0.0        # ties of round-half-to-even, a zero sign
BOOL = RNG.random((3, 4)) > 0.4

CASES = {
    "ceil": (F.ceil, torch.ceil, X),
    "floor": (F.floor, torch.floor, X),
    "round": (F.round, torch.round, X),
    "round_decimals": (lambda x: F.round(x, decimals=1),
                       lambda x: torch.round(x, decimals=1), X / 7),
    "sign": (F.sign, torch.sign, X),
    "all": (lambda x: F.all(x, axis=1), lambda x: torch.all(x, dim=1), BOOL),
    "any_keepdims": (lambda x: F.any(x, axis=0, keepdims=True),
                     lambda x: torch.any(x, dim=0, keepdim=True), BOOL),
    "all_full": (F.all, torch.all, BOOL),
    "argmax": (lambda x: F.argmax(x, axis=1), lambda x: torch.argmax(x, dim=1), X),
    "argmin_flat": (F.argmin, torch.argmin, X),
    "argsort": (lambda x: F.argsort(x, axis=1),
                lambda x: torch.argsort(x, dim=1, stable=True), X),
    "argsort_descending": (lambda x: F.argsort(x, axis=0, descending=True),
                           lambda x: torch.argsort(x, dim=0, descending=True, stable=True), X),
    "one_hot": (lambda t: F.one_hot(t, num_classes=5),
                lambda t: torch.nn.functional.one_hot(t, num_classes=5), np.array([0, 3, 4, 1])),
    "accuracy": (lambda y, t: F.accuracy(y, t),
                 lambda y, t: (y.argmax(1) == t).float().mean(), X, np.array([0, 1, 2])),
}


@pytest.mark.parametrize("name", CASES)
def test_forward_matches_torch(name):
    fn, torch_fn, *arrays = CASES[name]
    check_torch(fn, torch_fn, *arrays, grad=False)
