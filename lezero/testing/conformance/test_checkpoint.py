"""A model's state saved from the device and loaded into a fresh model on the device gives
the same outputs, bit for bit (``lz.save``/``lz.load`` and ``state_dict`` on device
arrays), and so does an optimizer's state."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import cuda, optim
from lezero.nn.models.lenet import LeNet5


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_model_state_round_trips_through_a_file(on_device, tmp_path, suffix):
    x = cuda.as_cupy(np.random.default_rng(0).standard_normal((2, 1, 28, 28))
                     .astype(np.float32))
    model = LeNet5(input_size=28).to_gpu()
    opt = optim.SGD(model.parameters(), lr=0.1)
    F.sum(model(x)).backward()
    opt.step()                                  # trained weights, not the initial ones
    path = tmp_path / f"lenet{suffix}"
    lz.save(model.state_dict(), path)
    state = lz.load(path)
    assert all(isinstance(v, np.ndarray) for v in state.values())
    lz.manual_seed(1)                            # different initial weights
    fresh = LeNet5(input_size=28)
    fresh.load_state_dict(state)
    fresh.to_gpu()
    assert all(isinstance(p.data, on_device.array_types) for p in fresh.parameters())
    want, got = cuda.as_numpy(model(x).data), cuda.as_numpy(fresh(x).data)
    assert got.tobytes() == want.tobytes()
