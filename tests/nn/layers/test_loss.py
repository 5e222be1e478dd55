"""Loss layers against torch.nn: values and input gradients, weight buffers in
state_dict, the legacy size_average/reduce arguments, bad arguments."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero import nn
from tests.nn.layers.layer_parity import check_layer, rand

N, C = 6, 4
LOGITS = rand(N, C, low=-2, high=2)
LABELS = np.array([0, 3, 1, 1, 2, 0])
PROBS = rand(N, C, seed=1, low=0.05, high=0.95)
TARGET01 = (rand(N, C, seed=2) > 0).astype(np.float32)
SIGNS = np.where(rand(N, seed=3) > 0, 1.0, -1.0).astype(np.float32)
LOG_PROBS = np.log(np.exp(LOGITS) / np.exp(LOGITS).sum(1, keepdims=True)).astype(np.float32)
WEIGHTS = np.array([0.5, 2.0, 1.0, 1.5], np.float32)


CASES = [
    ("L1Loss", {}, (LOGITS, PROBS)),
    ("MSELoss", {"reduction": "sum"}, (LOGITS, PROBS)),
    ("CrossEntropyLoss", {}, (LOGITS, LABELS)),
    ("CrossEntropyLoss", {"weight": WEIGHTS, "label_smoothing": 0.1, "ignore_index": 1},
     (LOGITS, LABELS)),
    ("CrossEntropyLoss", {"reduction": "none"}, (LOGITS, PROBS)),
    ("NLLLoss", {"weight": WEIGHTS}, (LOG_PROBS, LABELS)),
    ("SmoothL1Loss", {"beta": 0.5}, (LOGITS, PROBS)),
    ("HuberLoss", {"delta": 0.3, "reduction": "none"}, (LOGITS, PROBS)),
    ("BCELoss", {"weight": WEIGHTS}, (PROBS, TARGET01)),
    ("BCEWithLogitsLoss", {"pos_weight": WEIGHTS}, (LOGITS, TARGET01)),
    ("BCEWithLogitsLoss", {"weight": WEIGHTS, "reduction": "sum"}, (LOGITS, TARGET01)),
    ("KLDivLoss", {"reduction": "batchmean"}, (LOG_PROBS, PROBS)),
    ("KLDivLoss", {"reduction": "sum", "log_target": True}, (LOG_PROBS, np.log(PROBS))),
    ("PoissonNLLLoss", {}, (LOGITS, PROBS * 3)),
    ("PoissonNLLLoss", {"log_input": False, "full": True}, (PROBS, PROBS * 3)),
    ("GaussianNLLLoss", {"full": True}, (LOGITS, PROBS, PROBS + 0.1)),
    ("CosineEmbeddingLoss", {"margin": 0.2}, (LOGITS, PROBS, SIGNS)),
    ("MarginRankingLoss", {"margin": 0.1}, (LOGITS[:, 0], PROBS[:, 0], SIGNS)),
    ("TripletMarginLoss", {}, (LOGITS, PROBS, TARGET01)),
    ("HingeEmbeddingLoss", {"margin": 0.5}, (LOGITS, np.tile(SIGNS[:, None], (1, C)))),
    ("TripletMarginLoss", {"margin": 0.5, "p": 1.0, "swap": True}, (LOGITS, PROBS, TARGET01)),
]


@pytest.mark.parametrize("name,kwargs,inputs", CASES,
                         ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_loss_matches_torch(name, kwargs, inputs):
    check_loss_case(name, kwargs, inputs)


def check_loss_case(name, kwargs, inputs):
    """nn.<name>(**kwargs) against torch.nn.<name> on ``inputs``, forward and backward."""
    t_kwargs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v
                for k, v in kwargs.items()}
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**t_kwargs)
    # the first input is differentiated; targets are constants
    check_layer(ours, theirs, *inputs, constants=range(1, len(inputs)))


def test_ctc_loss_matches_torch():
    """Compared through a log_softmax: torch's CTC gradient is only right for inputs that
    come out of one (LeZero's is the true gradient for any log_probs); through it the two
    agree."""
    logits = rand(8, 2, 5, seed=4, low=-2, high=2)
    targets = np.array([[1, 2, 2], [3, 1, 0]])
    lengths = (np.array([8, 6]), np.array([3, 2]))
    for kwargs in ({}, {"reduction": "sum", "zero_infinity": True}):
        check_layer(nn.CTCLoss(**kwargs), torch.nn.CTCLoss(**kwargs), logits,
                    call=lambda m, xs: m(F.log_softmax(xs[0], axis=2), targets, *lengths),
                    torch_call=lambda m, xs: m(xs[0].log_softmax(2), torch.tensor(targets),
                                               *map(torch.tensor, lengths)))


def test_weight_buffers_appear_in_state_dict_as_torchs():
    for ours, theirs in (
            (nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss()),
            (nn.CrossEntropyLoss(weight=WEIGHTS), torch.nn.CrossEntropyLoss(
                weight=torch.tensor(WEIGHTS))),
            (nn.BCEWithLogitsLoss(pos_weight=WEIGHTS), torch.nn.BCEWithLogitsLoss(
                pos_weight=torch.tensor(WEIGHTS))),
            (nn.MSELoss(), torch.nn.MSELoss())):
        assert list(ours.state_dict()) == list(theirs.state_dict())
    loss = nn.NLLLoss(weight=[1, 2, 3, 4])
    assert loss.weight.dtype == np.float32 and loss.state_dict()["weight"][3] == 4


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("size_average,reduce", [(None, False), (False, None), (True, True),
                                                 (False, True)])
def test_legacy_reduction_arguments(size_average, reduce):
    ours = nn.MSELoss(size_average=size_average, reduce=reduce)
    theirs = torch.nn.MSELoss(size_average=size_average, reduce=reduce)
    assert ours.reduction == theirs.reduction
    check_layer(ours, theirs, LOGITS, PROBS)


@pytest.mark.parametrize("build,error,match", [
    (lambda: nn.MSELoss(reduction="avg"), ValueError, "MSELoss: reduction must be one of"),
    (lambda: nn.L1Loss(reduction="batchmean"), ValueError, "L1Loss: reduction"),
    (lambda: nn.CrossEntropyLoss(ignore_index=1.5), TypeError, "ignore_index must be an int"),
    (lambda: nn.CrossEntropyLoss(weight="heavy"), TypeError, "CrossEntropyLoss: weight must"),
    (lambda: nn.HuberLoss(delta="x"), TypeError, "HuberLoss: delta must be a number"),
    (lambda: nn.GaussianNLLLoss(True), TypeError, "GaussianNLLLoss: too many positional"),
    (lambda: nn.CTCLoss(zero_infinity=1), TypeError, "CTCLoss: zero_infinity must be a bool"),
])
def test_bad_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_bad_inputs_name_the_layer():
    x = lz.Variable(LOGITS)
    with pytest.raises(ValueError, match="MSELoss: mse_loss"):
        nn.MSELoss()(x, PROBS[:3])
    with pytest.raises(TypeError, match="CrossEntropyLoss: forward takes 2 input"):
        nn.CrossEntropyLoss()(x)
    with pytest.raises(ValueError, match="NLLLoss: nll_loss"):
        nn.NLLLoss()(x, LABELS + 10)
