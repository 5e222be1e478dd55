"""What checkpointing frees, measured as a user measures it: ``tracemalloc`` (NumPy reports
every array buffer to it) once forward returns, and at the step's peak."""
import gc
import tracemalloc

import numpy as np

import lezero as lz
from lezero import nn
from lezero.nn.models import get_model

WIDTH, BATCH = 64, 512          # one activation: 128 KiB, far above the Python objects


def _mlp(depth):
    lz.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    x = lz.Variable(np.random.default_rng(0).standard_normal((BATCH, WIDTH), np.float32),
                    requires_grad=False)
    return layers, x


def _forward(layers, x, checkpointed):
    h = lz.checkpoint_sequential(layers, "sqrt", x) if checkpointed else x
    if not checkpointed:
        for m in layers:
            h = m(h)
    return (h * h).mean()


def _measure(depth, checkpointed):
    """(bytes alive once forward returns, peak bytes of the step) over what was there."""
    layers, x = _mlp(depth)
    _forward(layers, x, checkpointed).backward()     # warm: first-call caches out
    for m in layers:
        m.cleargrads()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        loss = _forward(layers, x, checkpointed)
        kept = tracemalloc.get_traced_memory()[0] - before
        loss.backward()
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return kept, peak


def test_a_64_layer_mlp_under_sqrt_segments_keeps_a_quarter_of_the_plain_run():
    plain, plain_peak = _measure(64, False)
    kept, peak = _measure(64, True)
    activation = WIDTH * BATCH * 4
    assert plain > 60 * activation                  # the plain graph: one per layer
    assert kept <= plain / 4                        # 11 segments: 10 boundaries + the loss
    assert peak <= plain_peak / 2                   # backward recomputes one segment at a time


def test_what_a_checkpointed_mlp_keeps_grows_as_the_square_root_of_its_depth():
    small, _ = _measure(16, True)
    large, _ = _measure(64, True)
    assert large < 2.5 * small                      # O(n) would be 4x, O(sqrt n) 2x


def test_each_checkpointed_transformer_block_keeps_only_its_input():
    lz.manual_seed(0)
    model = get_model("gpt2", vocab_size=50, n_positions=16, n_embd=32, n_layer=4, n_head=2)
    ids = np.random.default_rng(0).integers(0, 50, (2, 16))
    for block in model.transformer.h:
        block.forward = lz.checkpoint(block.forward)
    with lz.memory.profile(model, live=False) as prof:
        loss = model.loss(ids)
        blocks = prof.by_module()["transformer.h"]
    assert blocks == 4 * 2 * 16 * 32 * 4            # n_layer inputs of (2, 16, 32) float32
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
