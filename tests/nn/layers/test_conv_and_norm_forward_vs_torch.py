"""Forward and backward against torch.nn for the options the other layer tests leave out:
transposed convolutions with output_padding, dilation, groups and PyTorch's positional
order; 'same'/'valid' padding with the non-zero padding modes; batch norm whose tracking is
switched off after construction; instance norm's momentum=None, unbatched and
parameter-free inputs; inputs of the smallest rank each norm accepts; Bilinear and
Unflatten corner cases."""
import warnings

import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from tests.nn.layers.layer_parity import check_buffers, check_layer, load_from_torch, rand
from tests.nn.layers.test_normalization import _randomise

CASES = [
    # transposed convolutions: every option, and the positional order
    ("ConvTranspose1d", (4, 6, 3), dict(stride=2, padding=1, output_padding=1, dilation=2,
                                        groups=2, bias=False), (2, 4, 5)),
    ("ConvTranspose2d", (4, 2, (2, 3)), dict(stride=(2, 1), padding=(0, 1),
                                             output_padding=(1, 0), dilation=(1, 2), groups=2),
     (1, 4, 3, 4)),
    ("ConvTranspose2d", (4, 4, 3, 2, 1, 1, 2, False, 2), {}, (1, 4, 3, 3)),
    ("ConvTranspose2d", (2, 3, 3), {}, (1, 2, 4, 4)),
    ("ConvTranspose3d", (2, 4, 2), dict(stride=2, output_padding=1, groups=2), (1, 2, 2, 3, 2)),
    # 'same' splits the padding as torch (the odd element after), 'valid' pads nothing
    ("Conv1d", (2, 3, 4), dict(padding="same", padding_mode="reflect", dilation=2), (2, 2, 12)),
    ("Conv1d", (2, 3, 4), dict(padding="same", padding_mode="circular"), (2, 2, 9)),
    ("Conv2d", (2, 3, 3), dict(padding="valid", padding_mode="replicate"), (1, 2, 5, 5)),
    ("Conv2d", (2, 4, (3, 2)), dict(padding=(1, 2), padding_mode="reflect", groups=2,
                                    dilation=(2, 1), stride=2), (1, 2, 7, 8)),
    ("Conv3d", (2, 2, 2), dict(padding=1, dilation=2, groups=2, bias=False), (1, 2, 4, 3, 4)),
    # norms: a non-default eps, and the smallest input rank each accepts
    ("BatchNorm1d", (3,), dict(eps=0.1), (4, 3)),
    ("InstanceNorm1d", (3,), dict(eps=0.1, affine=True), (2, 3, 5)),
    ("InstanceNorm1d", (1,), dict(affine=True), (1, 5)),           # unbatched, one channel
    ("LayerNorm", (4,), dict(eps=0.1), (4,)),
    ("LayerNorm", (1,), {}, (3, 1)),
    ("RMSNorm", ((2, 3),), dict(eps=0.1), (4, 2, 3)),
    ("GroupNorm", (2, 4), dict(eps=0.1), (3, 4)),
    ("LocalResponseNorm", (3,), {}, (2, 5, 6)),
    ("LocalResponseNorm", (2,), dict(alpha=0.1, beta=0.5, k=2.0), (1, 4, 3, 3)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", CASES,
                         ids=[f"{n}{a}{k or ''}" for n, a, k, _ in CASES])
def test_forward_and_backward_match_torch(name, args, kwargs, shape):
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    scale = 5.0 if name == "LocalResponseNorm" else 1.0    # the defaults alpha, beta, k matter
    check_layer(ours, theirs, rand(*shape) * scale)


def test_batch_norm_with_tracking_switched_off_after_construction():
    """As torch: training then uses batch statistics and leaves the buffers alone, and
    evaluation still uses the running statistics the layer holds."""
    ours, theirs = nn.BatchNorm1d(3), _randomise(torch.nn.BatchNorm1d(3))
    load_from_torch(ours, theirs)
    ours.track_running_stats = theirs.track_running_stats = False
    for train in (True, False):
        check_layer(ours, theirs, rand(6, 3, seed=int(train)), train=train, load=False)
        check_buffers(ours, theirs)
    assert int(ours.num_batches_tracked) == 0


def test_instance_norm_tracks_with_momentum_none_as_torch():
    """momentum=None: torch's instance norm then leaves the running statistics as they are."""
    kwargs = dict(momentum=None, affine=True, track_running_stats=True, bias=False)
    ours, theirs = nn.InstanceNorm1d(3, **kwargs), _randomise(torch.nn.InstanceNorm1d(3, **kwargs))
    load_from_torch(ours, theirs)
    for step in range(2):
        check_layer(ours, theirs, rand(2, 3, 5, seed=step), load=False)
    check_buffers(ours, theirs)
    check_layer(ours, theirs, rand(2, 3, 5, seed=7), train=False, load=False)


def test_parameter_free_instance_norm_takes_any_channel_count():
    ours, theirs = nn.InstanceNorm1d(3), torch.nn.InstanceNorm1d(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # torch warns about the channel count
        check_layer(ours, theirs, rand(2, 5, 4))


@pytest.mark.parametrize("layer,shape,message", [
    (lambda: nn.InstanceNorm1d(3), (2, 3, 4, 5),
     "InstanceNorm1d: expected (N, C, L) or (C, L) input, got shape (2, 3, 4, 5)"),
    (lambda: nn.InstanceNorm1d(3), (2, 3, 1),
     "InstanceNorm1d: instance_norm: expected more than 1 spatial element per channel"),
    (lambda: nn.GroupNorm(2, 4), (4,), "GroupNorm: expected (N, 4, *) input, got shape (4,)"),
    (lambda: nn.GroupNorm(2, 4), (3, 5), "GroupNorm: expected (N, 4, *) input, got shape (3, 5)"),
    (lambda: nn.LocalResponseNorm(3), (2, 5),
     "LocalResponseNorm: expected (N, C, *) input with at least one spatial dim, got shape "
     "(2, 5)"),
    (lambda: nn.LayerNorm((2, 4)), (4,),
     "LayerNorm: expected input whose trailing dims are (2, 4), got shape (4,)"),
])
def test_a_bad_input_raises_naming_the_layer(layer, shape, message):
    with pytest.raises(ValueError) as info:
        layer()(lz.Variable(rand(*shape)))
    assert str(info.value).startswith(message)


def test_bilinear_takes_any_leading_dims_as_torch():
    ours, theirs = nn.Bilinear(3, 4, 2), torch.nn.Bilinear(3, 4, 2)
    check_layer(ours, theirs, rand(2, 5, 3), rand(2, 5, 4, seed=1))
    with pytest.raises(ValueError, match=r"^Bilinear: expected inputs \(\*, 3\) and \(\*, 4\) "
                                         r"with the same leading dims, got shapes \(2, 5, 3\) "
                                         r"and \(2, 6, 4\)$"):
        ours(lz.Variable(rand(2, 5, 3)), lz.Variable(rand(2, 6, 4)))


def test_unflatten_with_an_inferred_size_as_torch():
    x = rand(2, 8, 3)
    y = nn.Unflatten(1, (-1, 4))(lz.Variable(x))
    np.testing.assert_array_equal(y.data, torch.nn.Unflatten(1, (-1, 4))(torch.tensor(x)).numpy())


def test_linear_reset_parameters_draws_the_bias_again():
    layer = nn.Linear(16, 8)
    layer.bias.data[...] = 100.0
    layer.reset_parameters()
    bound = 1 / np.sqrt(16)
    assert np.all(np.abs(layer.bias.data) <= bound) and np.std(layer.bias.data) > 0


def test_lazy_linear_takes_a_one_dimensional_input():
    layer = nn.LazyLinear(3)
    x = rand(5)
    y = layer(lz.Variable(x))
    assert layer.in_features == 5 and y.shape == (3,)
    np.testing.assert_allclose(y.data, layer.weight.data @ x + layer.bias.data, rtol=1e-6)
