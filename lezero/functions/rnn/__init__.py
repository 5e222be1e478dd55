"""Recurrence, re-exported here:

* ``cells``   lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell (LeZero operators, any order)
* ``fused``   lstm gru rnn_tanh rnn_relu: whole sequences, layers and directions, each
              (layer, direction) one fused Function from ``layers``
* ``packed``  PackedSequence, pack_padded_sequence, pad_packed_sequence, pack_sequence,
              pad_sequence
"""
from lezero.functions.rnn import cells as _cells, fused as _fused, packed as _packed
from lezero.functions.rnn.cells import *    # noqa: F401,F403
from lezero.functions.rnn.fused import *    # noqa: F401,F403
from lezero.functions.rnn.packed import *   # noqa: F401,F403

__all__ = _cells.__all__ + _fused.__all__ + _packed.__all__
