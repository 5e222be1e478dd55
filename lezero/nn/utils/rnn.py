"""Packed sequences for the recurrent layers, as ``torch.nn.utils.rnn``.

The operators live in ``lezero.functions`` (``rnn/packed.py``); this module gives them
PyTorch's import path: ``from lezero.nn.utils.rnn import pack_padded_sequence``.
"""
from lezero.functions import (PackedSequence, pack_padded_sequence, pack_sequence,
                              pad_packed_sequence, pad_sequence)

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "pack_sequence"]
