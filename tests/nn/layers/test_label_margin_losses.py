"""The classification margin loss layers -- SoftMarginLoss, MultiLabelSoftMarginLoss,
MultiMarginLoss, MultiLabelMarginLoss -- against torch.nn: values and input gradients,
weight buffers in state_dict, the legacy size_average/reduce arguments, bad arguments."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from tests.nn.layers.layer_parity import check_layer, rand
from tests.nn.layers.test_loss import check_loss_case

N, C = 6, 4
SCORES = rand(N, C, low=-2, high=2)
SIGNS = np.where(rand(N, C, seed=1) > 0, 1.0, -1.0).astype(np.float32)
LABELS01 = (rand(N, C, seed=2) > 0).astype(np.float32)
CLASSES = np.array([0, 3, 1, 1, 2, 0])
LISTS = np.array([[3, 0, -1, 1], [1, 1, -1, 2], [-1, 0, 0, 0], [0, 1, 2, 3], [2, -1, 3, 3],
                  [1, 2, 0, -1]])
WEIGHTS = np.array([0.5, 2.0, 1.0, 1.5], np.float32)

CASES = [
    ("SoftMarginLoss", {}, (SCORES, SIGNS)),
    ("SoftMarginLoss", {"reduction": "none"}, (SCORES, SIGNS)),
    ("MultiLabelSoftMarginLoss", {}, (SCORES, LABELS01)),
    ("MultiLabelSoftMarginLoss", {"weight": WEIGHTS, "reduction": "sum"}, (SCORES, LABELS01)),
    ("MultiMarginLoss", {}, (SCORES, CLASSES)),
    ("MultiMarginLoss", {"p": 2, "margin": 0.7, "weight": WEIGHTS, "reduction": "none"},
     (SCORES, CLASSES)),
    ("MultiMarginLoss", {"margin": 1.5, "reduction": "sum"}, (SCORES[0], np.array(CLASSES[0]))),
    ("MultiLabelMarginLoss", {}, (SCORES, LISTS)),
    ("MultiLabelMarginLoss", {"reduction": "none"}, (SCORES[1], LISTS[1])),
]


@pytest.mark.parametrize("name,kwargs,inputs", CASES,
                         ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_loss_matches_torch(name, kwargs, inputs):
    check_loss_case(name, kwargs, inputs)


def test_weight_buffers_appear_in_state_dict_as_torchs():
    for ours, theirs in (
            (nn.MultiMarginLoss(), torch.nn.MultiMarginLoss()),
            (nn.MultiMarginLoss(weight=WEIGHTS), torch.nn.MultiMarginLoss(
                weight=torch.tensor(WEIGHTS))),
            (nn.MultiLabelSoftMarginLoss(weight=WEIGHTS), torch.nn.MultiLabelSoftMarginLoss(
                weight=torch.tensor(WEIGHTS))),
            (nn.SoftMarginLoss(), torch.nn.SoftMarginLoss()),
            (nn.MultiLabelMarginLoss(), torch.nn.MultiLabelMarginLoss())):
        assert list(ours.state_dict()) == list(theirs.state_dict())
    loss = nn.MultiMarginLoss(weight=[1, 2, 3, 4])
    assert loss.weight.dtype == np.float32 and loss.state_dict()["weight"][3] == 4


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name,inputs", [("SoftMarginLoss", (SCORES, SIGNS)),
                                         ("MultiMarginLoss", (SCORES, CLASSES)),
                                         ("MultiLabelMarginLoss", (SCORES, LISTS)),
                                         ("MultiLabelSoftMarginLoss", (SCORES, LABELS01))])
@pytest.mark.parametrize("size_average,reduce", [(None, False), (False, None), (True, True)])
def test_legacy_reduction_arguments(name, inputs, size_average, reduce):
    ours = getattr(nn, name)(size_average=size_average, reduce=reduce)
    theirs = getattr(torch.nn, name)(size_average=size_average, reduce=reduce)
    assert ours.reduction == theirs.reduction
    check_layer(ours, theirs, *inputs, constants=(1,))


@pytest.mark.parametrize("build,error,match", [
    (lambda: nn.SoftMarginLoss(reduction="avg"), ValueError,
     "SoftMarginLoss: reduction must be one of"),
    (lambda: nn.MultiMarginLoss(p=3), ValueError, "MultiMarginLoss: p must be 1 or 2"),
    (lambda: nn.MultiMarginLoss(p="1"), TypeError, "MultiMarginLoss: p must be a number"),
    (lambda: nn.MultiMarginLoss(margin=None), TypeError,
     "MultiMarginLoss: margin must be a number"),
    (lambda: nn.MultiMarginLoss(weight="heavy"), TypeError, "MultiMarginLoss: weight must"),
    (lambda: nn.MultiLabelSoftMarginLoss(weight="heavy"), TypeError,
     "MultiLabelSoftMarginLoss: weight must"),
    (lambda: nn.MultiLabelMarginLoss(reduction="batchmean"), ValueError,
     "MultiLabelMarginLoss: reduction"),
])
def test_bad_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_bad_inputs_name_the_layer():
    x = lz.Variable(SCORES)
    with pytest.raises(ValueError, match="MultiMarginLoss: multi_margin_loss: target"):
        nn.MultiMarginLoss()(x, CLASSES[:3])
    with pytest.raises(ValueError, match="MultiMarginLoss: multi_margin_loss: weight"):
        nn.MultiMarginLoss(weight=WEIGHTS[:3])(x, CLASSES)
    with pytest.raises(ValueError, match="MultiLabelMarginLoss: multilabel_margin_loss"):
        nn.MultiLabelMarginLoss()(x, LISTS + 1)
    with pytest.raises(ValueError, match="SoftMarginLoss: soft_margin_loss: target"):
        nn.SoftMarginLoss()(x, SIGNS[:, :2])
    with pytest.raises(TypeError, match="MultiLabelSoftMarginLoss: forward takes 2 input"):
        nn.MultiLabelSoftMarginLoss()(x)
