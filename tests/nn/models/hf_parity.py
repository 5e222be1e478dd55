"""Shared by the Hugging Face parity tests: build the reference, copy its weights, compare.

The reference comes from ``transformers`` (a test-only oracle, imported through
``lezero.testing.oracles``), with random weights and a small config: nothing downloads.
"""
import numpy as np
import pytest

import lezero as lz
from lezero.nn import models
from lezero.testing.oracles import import_transformers


@pytest.fixture(scope="session")
def transformers():
    return import_transformers()


def build_pair(transformers, config_cls, model_cls, name, seed=0, **config):
    """(ours, reference): the reference HF model in eval mode with random weights, and
    ours built from the same config's to_dict() and loaded from its state_dict as-is."""
    import torch
    torch.manual_seed(seed)
    config.setdefault("attn_implementation", "eager")
    cfg = getattr(transformers, config_cls)(**config)
    ref = getattr(transformers, model_cls)(cfg).eval()
    randomize_norms_(ref, seed)
    ours = models.get_model(name, **cfg.to_dict())
    state = {k: v.detach().numpy().copy() for k, v in ref.state_dict().items()}
    ours.load_state_dict(state, strict=True)
    assert sorted(ours.state_dict()) == sorted(state)
    ours.eval()
    return ours, ref


def randomize_norms_(ref, seed):
    """Norm weights and all biases away from 1 and 0 (HF initialises them so), so the
    comparison sees them used, and the tied output bias nonzero."""
    import torch
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if p.ndim == 1:
                p.add_(0.1 * torch.randn(p.shape, generator=g))


def logits_pair(ours, ref, ids, mask=None, **kwargs):
    """Both models' logits as NumPy arrays (ours, HF's)."""
    import torch
    with lz.no_grad():
        mine = ours(ids, attention_mask=mask, **kwargs).data
    tkw = {k: torch.as_tensor(v) for k, v in kwargs.items()}
    with torch.no_grad():
        theirs = ref(torch.as_tensor(ids), attention_mask=None if mask is None
                     else torch.as_tensor(mask), **tkw).logits.numpy()
    return mine, theirs


def assert_grads_match(ours, ref, our_loss, their_loss, atol=2e-5):
    """After both losses' backward: the losses and every parameter's gradient agree
    (by name; HF lists a tied parameter once, under its first name)."""
    np.testing.assert_allclose(our_loss.item(), their_loss.item(), rtol=1e-5, atol=1e-6)
    mine = dict(ours.named_parameters())
    compared = 0
    for name, p in ref.named_parameters():
        if p.grad is None:
            assert mine[name].grad is None or not np.any(mine[name].grad.data), name
            continue
        assert mine[name].grad is not None, f"{name} got no gradient"
        np.testing.assert_allclose(mine[name].grad.data, p.grad.numpy(), rtol=1e-4,
                                   atol=atol, err_msg=name)
        compared += 1
    assert compared >= 5


def check_loss_and_grads(ours, ref, ids, labels, mask=None):
    """Our ``loss(ids, labels, attention_mask=mask)`` and HF's ``loss`` (labels given)
    agree, and so does every parameter's gradient after both backward passes."""
    import torch
    loss = ours.loss(ids, labels, attention_mask=mask)
    loss.backward()
    theirs = ref(torch.as_tensor(ids), labels=torch.as_tensor(labels),
                 attention_mask=None if mask is None else torch.as_tensor(mask)).loss
    theirs.backward()
    assert_grads_match(ours, ref, loss, theirs)


def random_ids(shape, vocab, seed=0, low=1):
    return np.random.default_rng(seed).integers(low, vocab, shape).astype(np.int64)
