"""MoETransformerLM: the loss adds the scaled load-balancing loss, one training step
reaches every expert and the router, capacity drops show in the routing record."""
import numpy as np

import lezero as lz
from lezero import optim
from lezero.nn import models


def test_loss_is_cross_entropy_plus_scaled_aux_loss_and_trains():
    lz.manual_seed(0)
    m = models.get_model("moe_transformer", vocab_size=11, block_size=8, d_model=16,
                         n_head=2, n_layer=2, d_ff=24, num_experts=3, top_k=2,
                         aux_loss_coef=0.5)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 11, (4, 8))
    total, ce = m.loss(idx, np.roll(idx, -1, axis=1))
    aux = np.mean([b.moe.aux_loss.item() for b in m.blocks])
    np.testing.assert_allclose(total.item(), ce.item() + 0.5 * aux, rtol=1e-6)
    assert m.state_dict()["lm_head.weight"] is m.state_dict()["wte.weight"]
    opt = optim.Adam(m.parameters(), lr=1e-2)
    opt.zero_grad()
    total.backward()
    missing = {n for n, p in m.named_parameters() if p.grad is None}
    idle = {f"blocks.{i}.moe.experts.{e}.{w}" for i, b in enumerate(m.blocks)
            for e in np.flatnonzero(b.moe.last_routing["load"] == 0)
            for w in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")}
    assert missing == idle                  # only experts no token went to get nothing
    assert len(idle) < 8
    opt.step()


def test_capacity_drops_are_recorded():
    lz.manual_seed(0)
    m = models.get_model("moe_transformer", vocab_size=11, block_size=8, d_model=16,
                         n_head=2, n_layer=1, d_ff=24, num_experts=4, top_k=1,
                         capacity_factor=0.25)
    m(np.random.default_rng(0).integers(0, 11, (4, 8)))
    routing = m.blocks[0].moe.last_routing
    assert routing["experts"].shape == (32, 1) and routing["dropped"] > 0
