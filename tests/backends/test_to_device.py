"""Moving Variables and modules to a backend by name: ``Variable.to_device``,
``Module.to_device`` and torch's ``to("strict")`` / ``to("strict:1")`` forms."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import backends, cuda, nn
from lezero.functions.tensor_methods import parse_device

STRICT = backends.get("strict")


def test_variable_to_device_moves_data_and_grad_in_place():
    x = lz.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    F.sum(x * x).backward()
    assert x.to_device("strict") is x
    assert isinstance(x.data, STRICT.array_types) and isinstance(x.grad.data, STRICT.array_types)
    np.testing.assert_array_equal(cuda.as_numpy(x.grad), 2 * np.arange(6).reshape(2, 3))
    x.to_device("strict", 1)
    assert x.device == "strict:1" and x.grad.device == "strict:1"
    x.to_device("numpy")
    assert type(x.data) is np.ndarray and x.device == "cpu"


def test_to_gpu_is_to_device_of_the_default_device(monkeypatch):
    monkeypatch.setenv("LEZERO_BACKEND", "strict")
    x = lz.Variable(np.ones(2, np.float32)).to_gpu(1)
    assert x.device == "strict:1"


def test_module_to_device_moves_parameters_and_buffers():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    assert model.to_device("strict") is model
    assert all(isinstance(p.data, STRICT.array_types) for p in model.parameters())
    assert all(isinstance(b, STRICT.array_types) for _, b in model.named_buffers())
    y = model(STRICT.from_host(np.ones((2, 3), np.float32)))
    assert cuda.device_of(y) == "strict:0" and y.shape == (2, 4)
    model.to("cpu")
    assert all(type(p.data) is np.ndarray for p in model.parameters())
    model.to("strict:1")
    assert {cuda.device_of(p) for p in model.parameters()} == {"strict:1"}


@pytest.mark.parametrize("spec, want", [
    ("cpu", "cpu"), ("numpy", "cpu"), ("cuda", 0), ("cuda:2", 2), (1, 1),
    ("strict", ("strict", 0)), ("strict:3", ("strict", 3))])
def test_parse_device_accepts_backend_names(spec, want):
    assert parse_device("to", spec) == want


@pytest.mark.parametrize("spec", ["strict:x", "tpu:0", "cpu:0", "numpy:"])
def test_parse_device_names_the_known_backends_when_it_refuses(spec):
    with pytest.raises(ValueError, match=r"Variable.to: device must be .*strict.*got"):
        parse_device("Variable.to", spec)


def test_variable_to_a_backend_name_is_differentiable_and_returns_home():
    x = lz.Variable(np.array([1.0, 2.0], np.float32))
    y = x.to("strict")
    assert y.device == "strict:0" and y.to("strict") is y and x.device == "cpu"
    F.sum(y * y).backward()
    assert x.grad.device == "cpu"
    np.testing.assert_array_equal(x.grad.data, [2.0, 4.0])
    z = x.to("strict").to("strict:1")            # device to device: the gradient goes back
    assert z.device == "strict:1"
    F.sum(z * 3.0).backward()                    # through strict:1 -> strict:0 -> cpu
    assert x.grad.device == "cpu"
    np.testing.assert_array_equal(x.grad.data, [5.0, 7.0])
    assert x.to(y).device == "strict:0"          # to(other): other's device
