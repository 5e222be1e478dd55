"""Activation layers against torch.nn: forward and input/parameter gradients, bad args."""
import numpy as np
import pytest
import torch

from lezero import nn
from tests.nn.layers.layer_parity import check_layer, rand

CASES = [
    ("ReLU", ()), ("ReLU6", ()), ("LeakyReLU", (0.2,)), ("ELU", (0.7,)), ("SELU", ()),
    ("CELU", (1.5,)), ("GELU", ()), ("GELU", ("tanh",)), ("SiLU", ()), ("Mish", ()),
    ("Softplus", (2.0, 1.0)), ("Softsign", ()), ("Hardtanh", (-0.5, 2.0)),
    ("Hardsigmoid", ()), ("Hardswish", ()), ("Sigmoid", ()), ("LogSigmoid", ()), ("Tanh", ()),
    ("Tanhshrink", ()), ("Softmax", (1,)), ("Softmax", (-1,)), ("LogSoftmax", (2,)),
    ("Softmin", (0,)), ("Softmax2d", ()), ("GLU", ()), ("GLU", (1,)), ("PReLU", ()),
    ("PReLU", (4, 0.1)), ("LeakyReLU", ()),
]


@pytest.mark.parametrize("name,args", CASES, ids=[f"{n}{a}" for n, a in CASES])
def test_activation_matches_torch(name, args):
    x = rand(2, 4, 3, 6, low=-4, high=4)
    check_layer(getattr(nn, name)(*args), getattr(torch.nn, name)(*args), x)


@pytest.mark.filterwarnings("ignore:Implicit dimension")
@pytest.mark.parametrize("shape", [(5,), (3, 5), (2, 3, 4), (2, 3, 2, 2)])
def test_softmax_without_dim_uses_torchs_implicit_choice(shape):
    check_layer(nn.Softmax(), torch.nn.Softmax(), rand(*shape))
    check_layer(nn.LogSoftmax(), torch.nn.LogSoftmax(), rand(*shape))


def test_inplace_is_accepted_and_shown():
    layer = nn.ReLU(inplace=True)
    assert layer.inplace and repr(layer) == "ReLU(inplace=True)"
    assert repr(nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"
    check_layer(nn.ELU(inplace=True), torch.nn.ELU(inplace=False), rand(3, 4))


def test_prelu_state_dict_and_initial_value():
    layer = nn.PReLU(3, init=0.3)
    assert list(layer.state_dict()) == ["weight"]
    np.testing.assert_allclose(layer.weight.data, np.full(3, 0.3, np.float32))
    assert layer.weight.dtype == np.float32


@pytest.mark.parametrize("build,error,match", [
    (lambda: nn.LeakyReLU("big"), TypeError, "LeakyReLU: negative_slope must be a number"),
    (lambda: nn.Hardtanh(1.0, -1.0), ValueError, r"Hardtanh: max_val \(-1.0\)"),
    (lambda: nn.GELU("exact"), ValueError, "GELU: approximate must be one of"),
    (lambda: nn.Softmax(dim=1.5), TypeError, "Softmax: dim must be an int or None"),
    (lambda: nn.GLU(None), TypeError, "GLU: dim must be an int, got None"),
    (lambda: nn.ReLU(True, 3), TypeError, "ReLU: too many positional arguments"),
    (lambda: nn.SiLU(inplace="yes"), TypeError, "SiLU: inplace must be a bool"),
    (lambda: nn.CELU(0.0), ValueError, "CELU: alpha must not be 0"),
    (lambda: nn.PReLU(0), ValueError, "PReLU: num_parameters must be a positive int"),
    (lambda: nn.PReLU(2, init="x"), TypeError, "PReLU: init must be a number"),
])
def test_bad_constructor_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_bad_inputs_name_the_layer():
    import lezero as lz
    odd = lz.Variable(rand(2, 3))
    with pytest.raises(ValueError, match="GLU: glu: .*even"):
        nn.GLU()(odd)
    with pytest.raises(ValueError, match="PReLU: num_parameters=4 needs 4 channels"):
        nn.PReLU(4)(odd)
    with pytest.raises(ValueError, match="Softmax2d: .*got shape \\(2, 3\\)"):
        nn.Softmax2d()(odd)
    with pytest.raises(TypeError, match="ReLU: forward takes 1 input"):
        nn.ReLU()(odd, odd)
