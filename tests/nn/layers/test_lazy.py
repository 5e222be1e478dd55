"""Lazy layers against torch.nn: the input size is read off the first input; afterwards the
layer has the eager layer's parameters, buffers and state_dict (PyTorch's names and
shapes) and computes what PyTorch's eager layer computes.  Also: mode and hooks survive
materialisation, bad arguments and inputs raise errors naming the layer."""
import inspect

import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from tests.nn.layers.layer_parity import check_buffers, check_layer, rand

# (lazy layer name, its arguments, the input shape, the eager layer's arguments).
CASES = [
    ("LazyLinear", (3,), {}, (2, 7), (7, 3)),
    ("LazyLinear", (4,), {"bias": False}, (2, 3, 5), (5, 4)),
    ("LazyConv1d", (4, 3), {"padding": 1}, (2, 3, 7), (3, 4, 3)),
    ("LazyConv2d", (4, 3), {"stride": 2, "groups": 2}, (1, 6, 7, 7), (6, 4, 3)),
    ("LazyConv3d", (3, 2), {"bias": False}, (1, 2, 3, 4, 3), (2, 3, 2)),
    ("LazyConvTranspose1d", (2, 3), {"stride": 2, "output_padding": 1}, (2, 3, 5), (3, 2, 3)),
    ("LazyConvTranspose2d", (2, 3), {"stride": 2, "padding": 1, "groups": 2}, (1, 4, 4, 3),
     (4, 2, 3)),
    ("LazyConvTranspose3d", (3, 2), {"stride": 2}, (1, 2, 2, 3, 2), (2, 3, 2)),
    ("LazyBatchNorm1d", (), {}, (8, 4), (4,)),
    ("LazyBatchNorm1d", (), {"affine": False}, (5, 4, 3), (4,)),
    ("LazyBatchNorm2d", (), {"momentum": 0.3}, (4, 3, 5, 5), (3,)),
    ("LazyBatchNorm3d", (), {"bias": False}, (2, 2, 3, 3, 3), (2,)),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 6), (3,)),
    ("LazyInstanceNorm2d", (), {"track_running_stats": False}, (2, 3, 4, 5), (3,)),
    ("LazyInstanceNorm3d", (), {"affine": False}, (2, 2, 3, 3, 3), (2,)),
]
IDS = [f"{name}-{'-'.join(kwargs) or 'default'}" for name, _, kwargs, _, _ in CASES]


def _eager(name, eager_args, kwargs):
    """PyTorch's eager layer that ``name`` becomes (with the lazy layer's defaults)."""
    lazy = getattr(torch.nn, name)(*eager_args[1:], **kwargs)
    return lazy.cls_to_become(*eager_args, **{**_lazy_defaults(lazy), **kwargs})


def _lazy_defaults(lazy):
    # PyTorch's lazy instance norms default to affine/track_running_stats=True.
    return ({"affine": lazy.affine, "track_running_stats": lazy.track_running_stats}
            if hasattr(lazy, "track_running_stats") else {})


@pytest.mark.parametrize("name,args,kwargs,shape,eager_args", CASES, ids=IDS)
def test_materialises_from_the_first_input_as_torchs_eager_layer(name, args, kwargs, shape,
                                                                 eager_args):
    ours = getattr(nn, name)(*args, **kwargs)
    assert ours.has_uninitialized_params() and ours.weight is None
    assert list(ours.parameters()) == [] and list(ours.state_dict()) == []
    ours(lz.Variable(rand(*shape)))
    assert not ours.has_uninitialized_params()

    theirs = _eager(name, eager_args, kwargs)
    t_lazy = getattr(torch.nn, name)(*args, **kwargs)
    becomes = t_lazy.cls_to_become
    t_lazy(torch.tensor(rand(*shape)))
    for reference in (theirs, t_lazy):       # PyTorch's eager layer, and its lazy one used
        want = {k: tuple(v.shape) for k, v in reference.state_dict().items()}
        assert {k: v.shape for k, v in ours.state_dict().items()} == want
        assert list(ours.state_dict()) == list(want)
    assert isinstance(ours, getattr(nn, becomes.__name__)) and type(t_lazy) is becomes
    check_layer(ours, theirs, rand(*shape, seed=1))                  # loads torch's state
    if list(ours.buffers()):
        check_buffers(ours, theirs)
    check_layer(ours, theirs, rand(*shape, seed=2), train=False, load=False)


@pytest.mark.parametrize("name,args,kwargs,shape,eager_args", CASES, ids=IDS)
def test_after_the_first_call_it_is_the_eager_layer(name, args, kwargs, shape, eager_args):
    """Same seed, same draws: the materialised layer equals the eager one built directly,
    attribute for attribute."""
    lz.manual_seed(5)
    lazy = getattr(nn, name)(*args, **kwargs)
    lazy(rand(*shape))
    lz.manual_seed(5)
    eager_name = name[len("Lazy"):]
    eager = getattr(nn, eager_name)(*eager_args, **{**_lazy_defaults(lazy), **kwargs})
    eager(rand(*shape))           # the same call, so that the running statistics agree
    ours, want = lazy.state_dict(), eager.state_dict()
    assert list(ours) == list(want)
    for key in want:
        np.testing.assert_array_equal(ours[key], want[key], err_msg=key)
    state = {k: v for k, v in vars(eager).items() if not k.startswith("_")}
    assert {k: v for k, v in vars(lazy).items() if not k.startswith("_")} == state
    assert repr(lazy) == repr(eager).replace(eager_name, name, 1)


@pytest.mark.parametrize("name", sorted({case[0] for case in CASES}))
def test_signature_is_torchs(name):
    ours = inspect.signature(getattr(nn, name)).parameters
    theirs = inspect.signature(getattr(torch.nn, name)).parameters
    theirs = {k: p for k, p in theirs.items() if k not in ("device", "dtype")}
    assert list(ours) == list(theirs)
    assert [(p.default, p.kind) for p in ours.values()] == \
        [(p.default, p.kind) for p in theirs.values()]


def test_mode_and_hooks_survive_materialisation():
    layer = nn.LazyBatchNorm1d()
    layer.eval()
    seen = []
    layer.register_forward_pre_hook(lambda m, args: seen.append("pre"))
    layer.register_forward_hook(lambda m, args, out: seen.append(out.shape))
    layer(rand(4, 3))
    layer(rand(4, 3))
    assert not layer.training and seen == ["pre", (4, 3), "pre", (4, 3)]
    np.testing.assert_array_equal(layer.running_mean, 0)        # eval: no statistics kept
    assert int(layer.num_batches_tracked) == 0


def test_initialize_parameters_without_a_forward_and_repr():
    layer = nn.LazyConv2d(4, 3, padding=1)
    assert repr(layer).startswith("LazyConv2d(out_channels=4, kernel_size=3, stride=1")
    layer.initialize_parameters(np.zeros((1, 5, 6, 6), np.float32))
    assert layer.in_channels == 5 and layer.weight.shape == (4, 5, 3, 3)
    assert repr(layer).startswith("LazyConv2d(5, 4, kernel_size=(3, 3)")
    layer.initialize_parameters(np.zeros((1, 2, 6, 6), np.float32))   # already done
    assert layer.in_channels == 5


def test_unbatched_instance_norm_reads_the_channel_axis():
    layer = nn.LazyInstanceNorm1d()
    layer(rand(3, 6))                                  # (C, L)
    assert layer.num_features == 3 and layer.weight.shape == (3,)
    check_layer(layer, torch.nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
                rand(3, 6, seed=1))


@pytest.mark.parametrize("layer,shape,match", [
    (lambda: nn.LazyLinear(3), (), r"^LazyLinear: expected input of shape \(\*, in_features\)"),
    (lambda: nn.LazyConv1d(4, 3), (2, 3, 4, 5), r"^LazyConv1d: expected input .* 1 spatial"),
    (lambda: nn.LazyConv3d(4, 3), (2, 3, 4, 5), r"^LazyConv3d: expected input .* 3 spatial"),
    (lambda: nn.LazyConvTranspose2d(4, 3), (2, 3, 4), r"^LazyConvTranspose2d: expected"),
    (lambda: nn.LazyBatchNorm2d(), (2, 3, 4), r"^LazyBatchNorm2d: expected \(N, C, H, W\)"),
    (lambda: nn.LazyBatchNorm1d(), (5,), r"^LazyBatchNorm1d: expected \(N, C\) or"),
    (lambda: nn.LazyInstanceNorm3d(), (2, 3, 4), r"^LazyInstanceNorm3d: expected"),
], ids=["linear", "conv1d", "conv3d", "convT2d", "bn2d", "bn1d", "in3d"])
def test_an_input_of_the_wrong_rank_raises_naming_the_layer(layer, shape, match):
    layer = layer()
    with pytest.raises(ValueError, match=match):
        layer(rand(*shape))
    assert layer.has_uninitialized_params()


def test_later_inputs_are_checked_as_by_the_eager_layer():
    conv, norm, linear = nn.LazyConv1d(4, 3), nn.LazyBatchNorm1d(), nn.LazyLinear(2)
    conv(rand(2, 3, 7))
    norm(rand(4, 3))
    linear(rand(2, 5))
    with pytest.raises(ValueError, match=r"^LazyConv1d: expected input of shape \(N, 3,"):
        conv(rand(2, 5, 7))
    with pytest.raises(ValueError, match=r"^LazyBatchNorm1d: expected 3 channels"):
        norm(rand(4, 5))
    with pytest.raises(ValueError, match=r"^LazyLinear: expected input with 5 features"):
        linear(rand(2, 4))


def test_bad_arguments_raise_naming_the_layer_and_leave_it_lazy():
    with pytest.raises(TypeError, match=r"^LazyConv2d: .*padding_mod"):
        nn.LazyConv2d(4, 3, padding_mod="zeros")
    with pytest.raises(TypeError, match=r"^LazyBatchNorm1d: "):
        nn.LazyBatchNorm1d(num_features=4)             # not an argument: it is inferred
    conv = nn.LazyConv2d(4, 3, groups=2)               # checked when the size is known
    with pytest.raises(ValueError, match=r"^LazyConv2d: in_channels \(3\) .* groups \(2\)"):
        conv(rand(1, 3, 5, 5))
    assert conv.has_uninitialized_params() and conv.weight is None
    conv(rand(1, 4, 5, 5))
    assert conv.weight.shape == (4, 2, 3, 3)
    with pytest.raises(ValueError, match=r"^LazyLinear: out_features must be a positive"):
        nn.LazyLinear(0)(rand(2, 3))


def test_optimizer_before_the_first_call_explains_the_empty_parameter_list():
    from lezero import optim
    model = nn.Sequential(nn.LazyLinear(3))
    with pytest.raises(ValueError, match="lazy layers has no parameters until its first forward call"):
        optim.SGD(model.parameters(), lr=0.1)
    model(np.zeros((2, 5), np.float32))
    assert len(optim.SGD(model.parameters(), lr=0.1).param_groups[0]["params"]) == 2
