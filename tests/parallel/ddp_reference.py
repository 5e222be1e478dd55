"""Shared by the data-parallel tests: train a model with DataParallel on this rank's shard
and, on the same rank, the one-process reference on the whole global batch (same seed),
then compare.  Runs under ``mpiexec -n K`` for any K dividing the global batch, and alone.
"""
import numpy as np

import lezero as lz
from lezero import nn, optim, parallel

GLOBAL_BATCH = 24            # divides by 1, 2, 3, 4 ranks, and each shard by 2 micro-batches


def world():
    return parallel.init(timeout=30)


def to_float64(model):
    """Parameters and floating buffers in float64 (for exact comparisons)."""
    for p in model.parameters():
        p.data = p.data.astype(np.float64)
    for m in model.modules():
        for name, b in list(m._buffers.items()):
            if b is not None and b.dtype.kind == "f":
                m._buffers[name] = b.astype(np.float64)
    return model


def shard(batch, comm, part=0, parts=1):
    """This rank's rows of a global batch (and micro-batch ``part`` of ``parts``)."""
    n = len(batch[0]) // comm.size
    rows = slice(comm.rank * n, (comm.rank + 1) * n)
    local = [b[rows] for b in batch]
    m = n // parts
    return [b[part * m:(part + 1) * m] for b in local]


def train_pair(build, make_batch, loss_fn, steps=3, dtype=np.float32, sync_bn=False,
               accum=1, lr=0.1, bucket_mb=0.0005, **dp_kwargs):
    """(reference model, DataParallel) after ``steps`` SGD steps on the same data."""
    comm = world()
    lz.manual_seed(0)
    ref = build()
    lz.manual_seed(0)
    mine = build()
    if dtype == np.float64:
        ref, mine = to_float64(ref), to_float64(mine)
    if sync_bn:
        mine = parallel.convert_sync_batchnorm(mine)
    dp = parallel.DataParallel(mine, comm, bucket_mb=bucket_mb, **dp_kwargs)
    opt_ref = optim.SGD(ref.parameters(), lr=lr, momentum=0.9)
    opt_dp = optim.SGD(dp.parameters(), lr=lr, momentum=0.9)
    for step in range(steps):
        batch = make_batch(np.random.default_rng(step), dtype)
        opt_ref.zero_grad()
        loss_fn(ref, *batch).backward()
        opt_ref.step()
        opt_dp.zero_grad()
        for part in range(accum):
            micro = shard(batch, comm, part, accum)
            if part < accum - 1:
                with dp.no_sync():
                    (loss_fn(dp, *micro) / accum).backward()
            else:
                (loss_fn(dp, *micro) / accum).backward()
        opt_dp.step()
    return ref, dp


def assert_same_state(ref, dp, rtol, atol):
    """Parameters and buffers of ``dp.module`` equal ``ref``'s, and equal on all ranks."""
    mine = dp.module.state_dict()
    for key, value in ref.state_dict().items():
        np.testing.assert_allclose(np.asarray(mine[key], np.float64),
                                   np.asarray(value, np.float64), rtol=rtol, atol=atol,
                                   err_msg=f"{key} differs from the one-process reference")
    flat = np.concatenate([np.asarray(v, np.float64).ravel() for v in mine.values()])
    everyone = dp.comm.allgather(flat)
    for r in range(dp.comm.size):
        np.testing.assert_array_equal(everyone[r], flat, err_msg=f"rank {r} drifted")


# ----- the models ------------------------------------------------------------------------

def mlp():
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, 3))


def mlp_batch(rng, dtype):
    return (rng.standard_normal((GLOBAL_BATCH, 6)).astype(dtype),
            rng.integers(0, 3, GLOBAL_BATCH))


def cnn():
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 5 * 5, 3))


def cnn_batch(rng, dtype):
    return (rng.standard_normal((GLOBAL_BATCH, 2, 5, 5)).astype(dtype),
            rng.integers(0, 3, GLOBAL_BATCH))


class LSTMClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def lstm_batch(rng, dtype):
    return (rng.standard_normal((GLOBAL_BATCH, 5, 4)).astype(dtype),
            rng.integers(0, 3, GLOBAL_BATCH))


def gpt():
    from lezero.nn.models import GPT, GPTConfig
    return GPT(GPTConfig(vocab_size=17, block_size=6, n_layer=1, n_head=2, d_model=8))


def gpt_batch(rng, dtype):
    ids = rng.integers(0, 17, (GLOBAL_BATCH, 7))
    return ids[:, :-1], ids[:, 1:]
