"""A small speech recognizer trained with CTC (Graves et al., 2006): a convolutional front
end over log-mel frames, a bidirectional recurrent encoder and a per-frame classifier, in
the style of DeepSpeech 2 (Amodei et al., 2016) at a size that trains on a CPU.

* ``front``: three Conv1d-BN-ReLU blocks over (N, n_mels, T); the first two stride 2, so
  the encoder sees one frame per 4 input frames (40 ms at a 10 ms hop);
* ``rnn``: a bidirectional GRU (or LSTM), PyTorch's ``(T, N, features)`` layout;
* ``fc``: a linear layer to ``num_classes`` (class 0 is CTC's blank).

``forward`` returns log-probabilities (T', N, num_classes), the layout ``F.ctc_loss``
takes; ``output_lengths`` maps input frame counts to T'.  ``greedy_decode`` (best path:
argmax per frame, merge repeats, drop blanks) and ``error_rate`` (Levenshtein distance
over reference length: a word or digit error rate) read the result.
"""
import numpy as np

import lezero.functions as F
from lezero import cuda, nn
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_array, check_choice, check_int, check_number

__all__ = ["SpeechCTC", "greedy_decode", "edit_distance", "error_rate"]


def _conv_block(c_in, c_out, kernel, stride):
    return nn.Sequential(nn.Conv1d(c_in, c_out, kernel, stride, kernel // 2, bias=False),
                         nn.BatchNorm1d(c_out), nn.ReLU())


@register_model("speech_ctc")
class SpeechCTC(nn.Module):
    """Conv front end + bidirectional ``rnn`` ("gru" or "lstm") + linear, for CTC."""

    def __init__(self, n_mels=40, num_classes=11, channels=128, hidden_size=128,
                 num_layers=1, rnn="gru", dropout=0.1):
        super().__init__()
        where = "SpeechCTC"
        check_int(where, "n_mels", n_mels, low=1)
        check_int(where, "num_classes", num_classes, low=2)
        check_int(where, "channels", channels, low=1)
        check_int(where, "hidden_size", hidden_size, low=1)
        check_int(where, "num_layers", num_layers, low=1)
        check_choice(where, "rnn", rnn, ("gru", "lstm"))
        self.dropout = check_number(where, "dropout", dropout, low=0, high=1, high_open=True)
        self.front = nn.Sequential(_conv_block(n_mels, channels, 5, 2),
                                   _conv_block(channels, channels, 5, 2),
                                   _conv_block(channels, channels, 3, 1))
        cls = nn.GRU if rnn == "gru" else nn.LSTM
        self.rnn = cls(channels, hidden_size, num_layers=num_layers, bidirectional=True,
                       dropout=dropout if num_layers > 1 else 0.0)
        self.fc = nn.Linear(2 * hidden_size, num_classes)

    @staticmethod
    def output_lengths(lengths):
        """Frames after the front end: two stride-2 convolutions (kernel 5, padding 2)."""
        lengths = np.asarray(cuda.as_numpy(lengths), dtype=np.int64)
        for _ in range(2):
            lengths = (lengths - 1) // 2 + 1
        return lengths

    def forward(self, features):
        """``features`` (N, n_mels, T) -> log-probabilities (T', N, num_classes)."""
        h = self.front(features)                         # (N, C, T')
        h = h.transpose(2, 0, 1)                         # (T', N, C)
        h = F.dropout(h, self.dropout, training=self.training)
        h, _ = self.rnn(h)
        h = F.dropout(h, self.dropout, training=self.training)
        return F.log_softmax(self.fc(h), axis=-1)


def greedy_decode(log_probs, lengths=None, blank=0):
    """Best-path decoding of (T, N, C) scores: per sample, the argmax labels of its first
    ``lengths[n]`` frames with repeats merged and blanks removed (a list of lists)."""
    scores = cuda.as_numpy(check_array("greedy_decode", "log_probs", log_probs))
    if scores.ndim != 3:
        raise ValueError(f"greedy_decode: log_probs must be (T, N, C), got {scores.shape}")
    best = scores.argmax(axis=2)                         # (T, N)
    t_max, n = best.shape
    lengths = np.full(n, t_max) if lengths is None else np.asarray(lengths)
    out = []
    for i in range(n):
        path = best[:lengths[i], i]
        keep = np.ones(len(path), dtype=bool)
        keep[1:] = path[1:] != path[:-1]
        out.append([int(k) for k in path[keep] if k != blank])
    return out


def edit_distance(ref, hyp):
    """Levenshtein distance (substitutions, insertions, deletions all cost 1)."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1]


def error_rate(refs, hyps):
    """Total edit distance over total reference length (WER/CER over a corpus)."""
    if len(refs) != len(hyps):
        raise ValueError(f"error_rate: {len(refs)} references but {len(hyps)} hypotheses")
    total = sum(len(r) for r in refs)
    if total == 0:
        raise ValueError("error_rate: the references are all empty")
    return sum(edit_distance(list(r), list(h)) for r, h in zip(refs, hyps)) / total
