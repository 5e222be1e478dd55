"""Normalization layers against torch.nn: forward/backward in train and eval, running
statistics after several steps, state_dict keys, bad arguments and inputs."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from tests.nn.layers.layer_parity import check_buffers, check_layer, load_from_torch, rand


def _randomise(theirs, seed=1):
    """Non-trivial affine parameters and running statistics, so loading them matters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.rand(p.shape, generator=g) + 0.5)
        for name, b in theirs.named_buffers():
            if b.dtype.is_floating_point:
                b.copy_(torch.rand(b.shape, generator=g) + 0.5)
    return theirs


BATCH_NORMS = [
    ("BatchNorm1d", (4,), {}, (8, 4)),
    ("BatchNorm1d", (4,), {"affine": False}, (5, 4, 3)),
    ("BatchNorm2d", (3,), {"momentum": 0.3}, (4, 3, 5, 5)),
    ("BatchNorm2d", (3,), {"momentum": None}, (2, 3, 4, 4)),
    ("BatchNorm2d", (3,), {"bias": False}, (2, 3, 4, 4)),
    ("BatchNorm3d", (2,), {}, (2, 2, 3, 3, 3)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", BATCH_NORMS)
def test_batch_norm_train_steps_update_running_stats_as_torch(name, args, kwargs, shape):
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    _randomise(theirs)
    load_from_torch(ours, theirs)
    for step in range(4):     # several batches: the momentum (or the average) compounds
        check_layer(ours, theirs, rand(*shape, seed=step) * (step + 1), load=False)
        ours.zero_grad()
        theirs.zero_grad()
    check_buffers(ours, theirs)
    assert int(ours.num_batches_tracked) == 4
    check_layer(ours, theirs, rand(*shape, seed=9), train=False, load=False)
    check_buffers(ours, theirs)          # evaluation leaves the statistics alone


def test_batch_norm_without_running_stats_uses_batch_stats_in_eval():
    ours = nn.BatchNorm1d(3, track_running_stats=False)
    theirs = torch.nn.BatchNorm1d(3, track_running_stats=False)
    assert list(ours.state_dict()) == ["weight", "bias"]
    check_layer(ours, theirs, rand(6, 3), train=False)
    check_layer(ours, theirs, rand(6, 3), train=True)


def test_batch_norm_eval_matches_torch_from_loaded_statistics():
    ours, theirs = nn.BatchNorm2d(3), _randomise(torch.nn.BatchNorm2d(3))
    check_layer(ours, theirs, rand(2, 3, 4, 4), train=False)
    np.testing.assert_array_equal(ours.running_var, theirs.running_var.numpy())


@pytest.mark.parametrize("kwargs", [{}, {"affine": True}, {"track_running_stats": True},
                                    {"affine": True, "track_running_stats": True,
                                     "momentum": 0.5}])
def test_instance_norm2d(kwargs):
    ours, theirs = nn.InstanceNorm2d(3, **kwargs), torch.nn.InstanceNorm2d(3, **kwargs)
    _randomise(theirs)
    for step in range(3):
        check_layer(ours, theirs, rand(2, 3, 4, 5, seed=step) * (step + 1), load=step == 0)
    check_buffers(ours, theirs)
    check_layer(ours, theirs, rand(2, 3, 4, 5, seed=5), train=False, load=False)
    check_layer(ours, theirs, rand(3, 4, 5, seed=6), load=False)       # unbatched


def test_instance_norm1d():
    check_layer(nn.InstanceNorm1d(4, affine=True), _randomise(torch.nn.InstanceNorm1d(
        4, affine=True)), rand(2, 4, 7))


@pytest.mark.parametrize("ours,theirs,shape", [
    (lambda: nn.LayerNorm(6), lambda: torch.nn.LayerNorm(6), (3, 6)),
    (lambda: nn.LayerNorm((4, 6), eps=1e-3), lambda: torch.nn.LayerNorm((4, 6), eps=1e-3),
     (2, 4, 6)),
    (lambda: nn.LayerNorm(6, bias=False), lambda: torch.nn.LayerNorm(6, bias=False), (2, 6)),
    (lambda: nn.LayerNorm(6, elementwise_affine=False),
     lambda: torch.nn.LayerNorm(6, elementwise_affine=False), (2, 6)),
    (lambda: nn.RMSNorm(6), lambda: torch.nn.RMSNorm(6), (3, 6)),
    (lambda: nn.RMSNorm([2, 6], eps=1e-4), lambda: torch.nn.RMSNorm([2, 6], eps=1e-4),
     (3, 2, 6)),
    (lambda: nn.GroupNorm(2, 6), lambda: torch.nn.GroupNorm(2, 6), (3, 6, 4)),
    (lambda: nn.GroupNorm(3, 6, affine=False), lambda: torch.nn.GroupNorm(3, 6, affine=False),
     (2, 6, 2, 3)),
    (lambda: nn.LocalResponseNorm(3, alpha=0.1, beta=0.5, k=2.0),
     lambda: torch.nn.LocalResponseNorm(3, alpha=0.1, beta=0.5, k=2.0), (2, 5, 3, 3)),
], ids=["ln", "ln2d", "ln_nobias", "ln_noaffine", "rms", "rms2d", "gn", "gn_noaffine", "lrn"])
def test_shape_norms_match_torch(ours, theirs, shape):
    check_layer(ours(), _randomise(theirs()), rand(*shape, low=-2, high=3))


def test_default_parameters_are_torchs():
    for ours, theirs in ((nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)),
                         (nn.LayerNorm(3), torch.nn.LayerNorm(3)),
                         (nn.GroupNorm(1, 3), torch.nn.GroupNorm(1, 3)),
                         (nn.RMSNorm(3), torch.nn.RMSNorm(3))):
        t = {k: v.numpy() for k, v in theirs.state_dict().items()}
        for k, v in ours.state_dict().items():
            np.testing.assert_array_equal(v, t[k], err_msg=k)
            assert v.dtype == t[k].dtype, k


@pytest.mark.parametrize("build,error,match", [
    (lambda: nn.BatchNorm2d(0), ValueError, "BatchNorm2d: num_features must be a positive"),
    (lambda: nn.BatchNorm1d(3, momentum=2.0), ValueError, "BatchNorm1d: momentum must be in"),
    (lambda: nn.BatchNorm1d(3, affine="no"), TypeError, "BatchNorm1d: affine must be a bool"),
    (lambda: nn.LayerNorm(()), ValueError, "LayerNorm: normalized_shape"),
    (lambda: nn.LayerNorm(4, eps="small"), TypeError, "LayerNorm: eps must be a number"),
    (lambda: nn.GroupNorm(4, 6), ValueError, r"GroupNorm: num_channels \(6\) must be divis"),
    (lambda: nn.RMSNorm([3, -1]), ValueError, "RMSNorm: normalized_shape"),
    (lambda: nn.LocalResponseNorm(0), ValueError, "LocalResponseNorm: size"),
])
def test_bad_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_bad_inputs_name_the_layer():
    x = lz.Variable(rand(2, 3, 4))
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected \(N, C, H, W\) input"):
        nn.BatchNorm2d(3)(x)
    with pytest.raises(ValueError, match="BatchNorm1d: expected 5 channels"):
        nn.BatchNorm1d(5)(x)
    with pytest.raises(ValueError, match=r"LayerNorm: .*trailing dims are \(3,\)"):
        nn.LayerNorm(3)(x)
    with pytest.raises(ValueError, match="GroupNorm: expected"):
        nn.GroupNorm(1, 4)(x)
    with pytest.raises(ValueError, match="InstanceNorm2d: expected 4 channels"):
        nn.InstanceNorm2d(4, affine=True)(lz.Variable(rand(2, 3, 4, 4)))
    with pytest.raises(ValueError, match="BatchNorm1d: .*more than 1 value per channel"):
        nn.BatchNorm1d(3)(lz.Variable(rand(1, 3)))
