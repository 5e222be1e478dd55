"""benchmarks/bench_checkpoint.py's pure helpers: the fitted exponent and PyTorch's
kept / peak bytes read from its allocator."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import bench_checkpoint as bench  # noqa: E402


def test_the_fitted_exponent_is_the_slope_of_memory_against_depth_in_log_log():
    depths = [16, 64, 256]
    assert bench.fitted_exponent(depths, [3 * d ** 0.5 for d in depths]) == pytest.approx(0.5)
    assert bench.fitted_exponent(depths, [2 * d for d in depths]) == pytest.approx(1.0)


@pytest.mark.parametrize("checkpointed", [False, True])
def test_torch_allocator_counts_what_a_step_keeps_and_its_peak(checkpointed):
    depth, width, batch = 16, 32, 256                 # one activation: 32 KiB
    model, x, params = bench.torch_mlp(depth, width, batch, shared=True)
    got = bench.torch_memory(bench.torch_mlp_loss(model, x, checkpointed), params)
    act = width * batch * 4
    if checkpointed:      # 5 segments of 5 modules checkpointed, the last 7 modules not
        assert 8 * act <= got["kept"] <= 13 * act
    else:                 # one activation per layer (ReLU's output is the next input)
        assert depth * act <= got["kept"] <= (depth + 3) * act
    assert got["kept"] < got["peak"]
    assert all(p.grad is None for p in params)
