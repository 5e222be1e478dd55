"""pack_sequence under the three operator checks: its ``.data`` (the packed rows) against
central differences, PyTorch's pack_sequence and, fed through tanh so the second
derivative is not vacuous for this linear gather, double backward."""
import numpy as np
from torch.nn.utils.rnn import pack_sequence

import lezero.functions as F
from lezero.testing import check_double_backward, check_gradient, check_torch, rand

SEQS = [rand(4, 2, seed=1), rand(2, 2, seed=2), rand(3, 2, seed=3)]


def packed(*seqs):
    return F.pack_sequence(list(seqs), enforce_sorted=False).data


def test_pack_sequence_gradient_torch_and_double_backward():
    check_gradient(packed, *SEQS)
    check_torch(packed, lambda *s: pack_sequence(list(s), enforce_sorted=False).data,
                *[s.astype(np.float32) for s in SEQS])
    check_double_backward(lambda *s: F.tanh(packed(*s)), *SEQS)
