"""What every torchvision-style builder shares: ``weights=None`` and ``progress``.

torchvision's builders (``resnext50_32x4d(weights=..., progress=True, **kwargs)``) can
download pretrained weights.  LeZero never downloads: ``weights`` must be None, and
pretrained weights come in through ``python -m lezero.convert`` (docs/model_zoo.md).
"""
from lezero.utils.checks import check_bool

__all__ = ["check_weights"]


def check_weights(builder, weights, progress=True):
    """Accept ``weights=None`` (and any bool ``progress``); refuse anything else with a
    message that says how pretrained weights come in instead."""
    check_bool(builder, "progress", progress)
    if weights is not None:
        raise ValueError(
            f"{builder}: weights={weights!r}: LeZero downloads no weights, so only "
            f"weights=None is accepted; convert a checkpoint you have with `python -m "
            f"lezero.convert SRC.pth --model {builder} -o OUT.npz` and load it with "
            f"model.load_state_dict(lz.load('OUT.npz'))")
