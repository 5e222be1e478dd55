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


def test_symmetric_weight_zero_points_are_not_saved_affine_ones_are(tmp_path):
    """Symmetric per-channel weights have zero points 0 by definition: the kernels keep
    them, the state dict does not; an affine weight scheme saves its own."""
    lz.manual_seed(4)
    x, _ = data(16)
    model = warm(small_cnn(), x)
    _, int8 = ptq(model, x)
    assert "module.0.weight_zero_point" not in int8.state_dict()
    assert int8.module[0].weight_zero_point.shape == (6,)
    np.testing.assert_array_equal(int8.module[0].weight_zero_point, 0)

    affine = Q.QConfig(Q.qconfig.default_activation_observer,
                       Q.observers.PerChannelMinMaxObserver.with_args(
                           dtype="qint8", qscheme="per_channel_affine", ch_axis=0))
    prepared = Q.prepare(Q.fuse(model.eval()), qconfig=affine)
    Q.calibrate(prepared, [x])
    int8_affine = Q.convert(prepared)
    state = int8_affine.state_dict()
    assert state["module.0.weight_zero_point"].shape == (6,)
    assert np.any(state["module.0.weight_zero_point"] != 0)
    path = os.path.join(tmp_path, "affine.npz")
    lz.save(state, path)
    loaded = Q.load_quantized(Q.fuse(small_cnn().eval()), path,
                              prepare_fn=lambda m: Q.prepare(m, qconfig=affine))
    np.testing.assert_array_equal(run(loaded, x), run(int8_affine, x))
