"""Resuming from a checkpoint continues training bit for bit as if never interrupted."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.optim import lr_scheduler

STEPS, STOP = 24, 9


def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 3)).astype(np.float32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)
    return x, y


def fresh_model(seed):
    rng = np.random.default_rng(seed)
    return {"W1": lz.Parameter((rng.standard_normal((3, 16)) * 0.5).astype(np.float32)),
            "b1": lz.Parameter(np.zeros(16, np.float32)),
            "W2": lz.Parameter((rng.standard_normal((16, 1)) * 0.5).astype(np.float32))}


def build(model):
    opt = optim.Adam(list(model.values()), lr=0.05, weight_decay=1e-3, amsgrad=True)
    sched = lr_scheduler.SequentialLR(
        opt, [lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=5),
              lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS - 5, eta_min=1e-3)],
        milestones=[5])
    return opt, sched


def train(model, opt, sched, steps, x, y):
    losses, rates = [], []
    for _ in steps:
        opt.zero_grad()
        h = F.tanh(F.matmul(lz.Variable(x), model["W1"]) + model["b1"])
        loss = F.sum((F.matmul(h, model["W2"]) - y) ** 2) / len(x)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        rates.append(sched.get_last_lr())
    return losses, rates


@pytest.mark.parametrize("fmt", ["npz", "h5", "safetensors"])
def test_resume_is_bit_for_bit(fmt, tmp_path):
    x, y = data()
    full = fresh_model(1)
    opt, sched = build(full)
    losses, rates = train(full, opt, sched, range(STEPS), x, y)
    assert losses[-1] < 0.5 * losses[0]                   # it does learn

    model = fresh_model(1)
    opt, sched = build(model)
    train(model, opt, sched, range(STOP), x, y)
    lz.save({"model": model, "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
             "step": STOP}, tmp_path / f"ck.{fmt}")

    ck = lz.load(tmp_path / f"ck.{fmt}")
    resumed = fresh_model(2)                              # different weights: all must load
    for name, p in resumed.items():
        p.data[...] = ck["model"][name]
    opt2, sched2 = build(resumed)      # as PyTorch advises: build the scheduler, then load
    opt2.load_state_dict(ck["optimizer"])
    sched2.load_state_dict(ck["scheduler"])
    assert ck["step"] == STOP
    rest_losses, rest_rates = train(resumed, opt2, sched2, range(STOP, STEPS), x, y)

    assert rest_losses == losses[STOP:]
    assert rest_rates == rates[STOP:]
    for name, p in full.items():
        np.testing.assert_array_equal(resumed[name].data, p.data, err_msg=name)
        assert resumed[name].data.dtype == np.float32
