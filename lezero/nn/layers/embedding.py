"""``Embedding``: a lookup table of learnt vectors, as ``torch.nn.Embedding``."""
import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.core import Parameter, Variable
from lezero.nn import init
from lezero.nn.layers._utils import check_bool, check_number, check_positive, empty_parameter
from lezero.nn.module import Module


class Embedding(Module):
    """Rows of ``weight`` (num_embeddings, embedding_dim), initialised N(0, 1), picked by an
    integer input of any shape; the output has shape input.shape + (embedding_dim,).

    ``padding_idx``: that row starts at zero and receives no gradient.  ``max_norm``: rows
    that are looked up and longer than it are scaled down in place.  ``sparse`` is accepted
    for PyTorch compatibility; the gradient is always a dense array.
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False):
        super().__init__()
        check_positive("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            if isinstance(padding_idx, bool) or not isinstance(padding_idx, int) \
                    or not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx must be an int in "
                                 f"[-{num_embeddings}, {num_embeddings}), got {padding_idx!r}")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        self.max_norm = None if max_norm is None else check_number("Embedding", "max_norm",
                                                                   max_norm, 0.0)
        self.norm_type = check_number("Embedding", "norm_type", norm_type)
        check_bool("Embedding", scale_grad_by_freq=scale_grad_by_freq, sparse=sparse,
                   _freeze=_freeze)
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = empty_parameter(num_embeddings, embedding_dim)
            self.reset_parameters()
        else:
            data = _weight.data if isinstance(_weight, Variable) else _weight
            if tuple(data.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"Embedding: _weight must have shape "
                                 f"{(num_embeddings, embedding_dim)}, got {tuple(data.shape)}")
            # Converted data becomes float32 (LeZero's default), other floats are kept.
            keep = data.dtype.kind == "f" and data.dtype != np.float64
            xp = cuda.get_array_module(data)
            self.weight = Parameter(xp.array(data, dtype=data.dtype if keep else np.float32))
        self.weight.requires_grad = not _freeze

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0

    def forward(self, input):
        data = input.data if isinstance(input, Variable) else input
        if not isinstance(data, cuda.array_types()):
            data = np.asarray(data)
        if data.dtype.kind not in "iu":
            raise TypeError(f"Embedding: input must hold integer indices, got dtype "
                            f"{data.dtype}")
        return F.embedding(data, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding holding a copy of the 2-D ``embeddings``; ``freeze`` (default)
        makes its weight receive no gradient."""
        data = embeddings.data if isinstance(embeddings, Variable) else embeddings
        if getattr(data, "ndim", None) != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-D, got shape "
                             f"{getattr(data, 'shape', type(data).__name__)}")
        rows, dim = data.shape
        return cls(rows, dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=data, _freeze=freeze)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        return s
