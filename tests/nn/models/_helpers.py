"""Helpers shared by the model twin tests."""
import numpy as np
import torch


def randomize_batchnorm_(module, seed=0):
    """Give every BatchNorm of a torch module non-trivial affine parameters and running
    statistics, so eval-mode parity really uses the stored statistics."""
    g = torch.Generator().manual_seed(seed)
    norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    with torch.no_grad():
        for m in norms:
            shape = m.running_mean.shape
            m.running_mean.uniform_(-0.1, 0.1, generator=g)
            m.running_var.uniform_(0.8, 1.3, generator=g)
            m.weight.copy_(1 + 0.2 * torch.randn(shape, generator=g))
            m.bias.copy_(0.2 * torch.randn(shape, generator=g))
    return module


def torch_state(module):
    """A torch module's state_dict as NumPy copies."""
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def assert_grads_close(model, ref, names, rtol=1e-3, rel_atol=1e-3):
    """The gradients of the named parameters agree (atol relative to the largest)."""
    ours, theirs = dict(model.named_parameters()), dict(ref.named_parameters())
    for name in names:
        want = theirs[name].grad.numpy()
        np.testing.assert_allclose(ours[name].grad.data, want, rtol=rtol,
                                   atol=rel_atol * np.abs(want).max(), err_msg=name)
