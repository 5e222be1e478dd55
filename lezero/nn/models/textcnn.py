"""TextCNN (Kim, 2014): a sentence classifier from n-gram detectors.

Token ids -> ``embedding`` (vocab, embed_dim) -> for each kernel size k in
``kernel_sizes`` a ``Conv1d(embed_dim, num_filters, k)`` over the sequence (``convs.i``),
ReLU and max over time (the strongest match of each n-gram filter anywhere in the
sentence) -> the concatenated features -> ``dropout`` -> ``fc`` onto the classes.
Sequences are padded with ``padding_idx`` (a zero row of the embedding), at least to the
largest kernel.
"""
import lezero as lz
import lezero.functions as F
from lezero import nn
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number, check_type, describe

__all__ = ["TextCNN"]


@register_model("textcnn")
class TextCNN(nn.Module):
    """``TextCNN(vocab_size, num_classes, embed_dim=64, kernel_sizes=(3, 4, 5),
    num_filters=64, dropout=0.5, padding_idx=0)``; ``forward(ids)`` maps int ids (B, T)
    to logits (B, num_classes)."""

    def __init__(self, vocab_size, num_classes, embed_dim=64, kernel_sizes=(3, 4, 5),
                 num_filters=64, dropout=0.5, padding_idx=0):
        super().__init__()
        name = "TextCNN"
        for arg, value in (("vocab_size", vocab_size), ("num_classes", num_classes),
                           ("embed_dim", embed_dim), ("num_filters", num_filters)):
            check_int(name, arg, value, low=1)
        check_type(name, "kernel_sizes", kernel_sizes, (tuple, list),
                   "a tuple of kernel widths")
        if not kernel_sizes:
            raise ValueError(f"{name}: kernel_sizes must not be empty")
        self.kernel_sizes = tuple(check_int(name, "kernel_sizes[i]", k, low=1)
                                  for k in kernel_sizes)
        check_number(name, "dropout", dropout, low=0.0, high=1.0, high_open=True)
        check_int(name, "padding_idx", padding_idx, low=0, high=vocab_size - 1,
                  allow_none=True)
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=padding_idx)
        self.convs = nn.ModuleList([nn.Conv1d(embed_dim, num_filters, k)
                                    for k in self.kernel_sizes])
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(num_filters * len(self.kernel_sizes), num_classes)

    def forward(self, ids):
        data = ids.data if isinstance(ids, lz.Variable) else ids
        if getattr(data, "ndim", None) != 2 or data.dtype.kind not in "iu":
            raise TypeError(f"TextCNN: ids must be an int array (batch, seq), got "
                            f"{describe(ids)}")
        if data.shape[1] < max(self.kernel_sizes):
            raise ValueError(f"TextCNN: sequences of length {data.shape[1]} are shorter "
                             f"than the widest kernel {max(self.kernel_sizes)}; pad them")
        x = self.embedding(data).transpose(0, 2, 1)                # (B, embed, T)
        feats = [F.max(F.relu(conv(x)), axis=2) for conv in self.convs]
        return self.fc(self.dropout(F.concatenate(feats, axis=1)))
