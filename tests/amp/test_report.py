"""amp.precision_report: decisions per operator type, float16 underflow per parameter."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import amp, nn


def _setup():
    lz.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 3))
    x = lz.Variable(np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32))
    return model, x, np.array([0, 1, 2, 0, 1, 2])


def test_report_lists_each_operator_type_with_its_rule():
    model, x, t = _setup()
    try:
        amp.cast_policy["ReLU"] = "float32"
        rep = amp.precision_report(lambda: F.cross_entropy(model(x), t))
    finally:
        amp.cast_policy.reset()
    assert rep.ops["Linear"] == {"treatment": "lower", "rule": "table",
                                 "dtypes": {"float16"}, "calls": 2}
    assert rep.ops["Normalize"]["treatment"] == "float32_compute"
    assert rep.ops["ReLU"]["rule"] == "user override"
    # cross entropy computes in float32 from the float16 logits it receives
    assert rep.ops["SoftmaxCrossEntropy"]["dtypes"] == {"float16"}
    assert rep.ops["SoftmaxCrossEntropy"]["treatment"] == "float32_compute"
    text = str(rep)
    assert "Linear" in text and "user override" in text and rep.params == {}


def test_underflow_fraction_depends_on_the_scale():
    model, x, t = _setup()
    loss = lambda: F.cross_entropy(model(x), t) * np.float32(1e-7)        # noqa: E731
    low = amp.precision_report(loss, model=model, scale=1.0)
    high = amp.precision_report(loss, model=model, scale=amp.GradScaler(init_scale=2.0 ** 16))
    w = "3.weight"
    assert low.params[w]["numel"] == 24 and high.scale == 2.0 ** 16
    assert low.params[w]["underflow"] > 0.3            # tiny gradients flush to zero ...
    assert high.params[w]["underflow"] == 0.0          # ... unless the loss is scaled
    assert 0 <= high.params[w]["subnormal"] < low.params[w]["subnormal"] + 1
    assert "underflow" in str(high)


def test_report_arguments_are_checked():
    model, x, t = _setup()
    with pytest.raises(TypeError, match="precision_report: fn must be callable"):
        amp.precision_report(3)
    with pytest.raises(ValueError, match="precision_report: scale"):
        amp.precision_report(lambda: model(x).sum(), scale=0)
    with pytest.raises(TypeError, match="must return the loss"):
        amp.precision_report(lambda: 1.0)
