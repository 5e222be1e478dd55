"""``assert_results_match``: one operator's results (outputs or gradients) on a backend
against the reference's, as the operator contract table and the backend conformance suite
compare them: shapes exact, integers exact, floats to a tolerance scaled by the result's size."""
import numpy as np

__all__ = ["assert_results_match"]


def assert_results_match(where, got, want, rtol, atol, shapes_only=False):
    """``got`` and ``want``: sequences of arrays (or None); ``where`` names the case."""
    assert len(got) == len(want), f"{where}: {len(got)} results, expected {len(want)}"
    for k, (a, b) in enumerate(zip(got, want)):
        at = f"{where} #{k}"
        if b is None:
            assert a is None, at
            continue
        assert a.shape == b.shape, f"{at}: shape {a.shape} vs {b.shape}"
        if shapes_only:
            continue
        if b.dtype.kind != "f":
            np.testing.assert_array_equal(a, b, err_msg=at)
        else:
            scale = max(1.0, float(np.nanmax(np.abs(b))) if b.size else 1.0)
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * scale, err_msg=at)
