"""A converted model saves with lz.save and loads into a converted skeleton."""
import os

import numpy as np

import lezero as lz
from lezero import quantization as Q

from tests.quantization._models import data, ptq, run, small_cnn, warm


def test_save_load_into_skeleton(tmp_path):
    lz.manual_seed(4)
    x, _ = data(24)
    model = warm(small_cnn(), x)
    _, int8 = ptq(model, x)
    state = int8.state_dict()
    assert state["module.0.weight"].dtype == np.int8
    assert state["module.0.weight_scale"].shape == (6,)
    assert {"quant.scale", "quant.zero_point", "module.10.scale"} <= set(state)
    path = os.path.join(tmp_path, "int8.npz")
    lz.save(state, path)
    # another model of the same architecture, never calibrated, becomes the skeleton
    lz.manual_seed(99)
    skeleton = Q.convert(Q.prepare(Q.fuse(small_cnn().eval())), warn=False)
    assert not np.array_equal(run(skeleton, x), run(int8, x))
    skeleton.load_state_dict(lz.load(path))
    np.testing.assert_array_equal(run(skeleton, x), run(int8, x))
    loaded = Q.load_quantized(Q.fuse(small_cnn().eval()), path)
    np.testing.assert_array_equal(run(loaded, x), run(int8, x))
    assert Q.model_size(int8) < 0.4 * Q.model_size(model)   # tiny model: biases weigh in
