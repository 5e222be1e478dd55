"""No host escape: a steady-state training step makes one host round trip, ``loss.item()``.

A device that must wait for, or copy to, the host inside a step loses its lead (a CUDA
stream stalls at every ``bool(x.any())``).  The step runs once to warm up (first calls may
upload constants), then once under ``Backend.count_transfers``; backends that cannot
count skip.  Each failure lists the call site of every round trip.
"""
import numpy as np
import pytest

import lezero.functions as F
from lezero import cuda, optim
from lezero.nn.models.char_lstm import CharLSTM
from lezero.nn.models.gpt import GPT
from lezero.nn.models.lenet import LeNet5

VOCAB = 32


def _lenet():
    x = np.random.default_rng(0).standard_normal((4, 1, 28, 28)).astype(np.float32)
    return LeNet5(input_size=28), x, np.array([1, 2, 3, 4]), lambda out: out


def _lstm():
    ids = np.random.default_rng(0).integers(0, VOCAB, (2, 8))
    return (CharLSTM(VOCAB, embed_dim=8, hidden_size=16), ids, ids.reshape(-1),
            lambda out: out[0].reshape(-1, VOCAB))


def _gpt():
    ids = np.random.default_rng(0).integers(0, VOCAB, (2, 8))
    model = GPT(vocab_size=VOCAB, block_size=8, n_layer=1, n_head=2, d_model=16)
    return model, ids, ids.reshape(-1), lambda out: out.reshape(-1, VOCAB)


MODELS = {"lenet": _lenet, "lstm_lm": _lstm, "gpt_mini": _gpt}


@pytest.mark.parametrize("model_name", list(MODELS))
def test_a_training_step_syncs_only_for_loss_item(on_device, model_name):
    model, x, t, logits_of = MODELS[model_name]()
    model.to_gpu()
    opt = optim.Adam(model.parameters(), lr=1e-3)
    x, t = cuda.as_cupy(x), cuda.as_cupy(t)

    def step():
        loss = F.cross_entropy(logits_of(model(x)), t)
        model.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    first = step()
    counting = on_device.count_transfers()
    if counting is None:
        pytest.skip(f"backend {on_device.name!r} cannot count host transfers")
    with counting as c:
        second = step()
    assert np.isfinite(first) and np.isfinite(second) and second != first
    sites = "\n  ".join(c.sites)
    assert (c.syncs, c.d2h, c.h2d) == (1, 1, 0), \
        f"{model_name}: {c} in one step; expected only loss.item():\n  {sites}"
