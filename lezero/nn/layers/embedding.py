"""``Embedding`` and ``EmbeddingBag``: lookup tables of learnt vectors, as in ``torch.nn``."""
import numpy as np

from lezero import cuda
from lezero.core import Parameter, Variable
import lezero.functions as F
from lezero.nn import init
from lezero.nn.layers._utils import empty_parameter
from lezero.nn.module import Module
from lezero.utils.checks import check_bools, check_int, check_number, check_positive_ints


class _LookupTable(Module):
    """What Embedding and EmbeddingBag share: a (num_embeddings, embedding_dim) ``weight``
    initialised N(0, 1), with an optional all-zero ``padding_idx`` row and ``max_norm``."""

    takes_indices = True      # Module.__call__ leaves float inputs alone (module_manners)

    def _setup(self, name, num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
               _weight):
        check_positive_ints(name, num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= check_int(name, "padding_idx", padding_idx) \
                    < num_embeddings:
                raise ValueError(f"{name}: padding_idx must be an int in "
                                 f"[-{num_embeddings}, {num_embeddings}), got {padding_idx!r}")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        self.max_norm = None if max_norm is None else check_number(name, "max_norm",
                                                                   max_norm, 0.0)
        self.norm_type = check_number(name, "norm_type", norm_type)
        if _weight is None:
            self.weight = empty_parameter(num_embeddings, embedding_dim)
            self.reset_parameters()
        else:
            data = _weight.data if isinstance(_weight, Variable) else _weight
            if tuple(data.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"{name}: _weight must have shape "
                                 f"{(num_embeddings, embedding_dim)}, got {tuple(data.shape)}")
            # Converted data becomes float32 (LeZero's default), other floats are kept.
            keep = data.dtype.kind == "f" and data.dtype != np.float64
            xp = cuda.get_array_module(data)
            self.weight = Parameter(xp.array(data, dtype=data.dtype if keep else np.float32))

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0

    @staticmethod
    def _pretrained(name, embeddings):
        """The 2-D array behind ``from_pretrained``'s ``embeddings``."""
        data = embeddings.data if isinstance(embeddings, Variable) else embeddings
        if getattr(data, "ndim", None) != 2:
            raise ValueError(f"{name}.from_pretrained: embeddings must be 2-D, got shape "
                             f"{getattr(data, 'shape', type(data).__name__)}")
        return data


class Embedding(_LookupTable):
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
        check_bools("Embedding", scale_grad_by_freq=scale_grad_by_freq, sparse=sparse,
                    _freeze=_freeze)
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        self._setup("Embedding", num_embeddings, embedding_dim, padding_idx, max_norm,
                    norm_type, _weight)
        self.weight.requires_grad = not _freeze

    def forward(self, input):
        data = _index_array("Embedding", "input", input)
        return F.embedding(data, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding holding a copy of the 2-D ``embeddings``; ``freeze`` (default)
        makes its weight receive no gradient."""
        data = cls._pretrained("Embedding", embeddings)
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


def _index_array(layer, name, x):
    """An integer index argument (Variable, array or list) as an array of ints."""
    data = x.data if isinstance(x, Variable) else x
    if not isinstance(data, cuda.array_types()):
        data = np.asarray(data)
    if data.dtype.kind not in "iu":
        raise TypeError(f"{layer}: {name} must hold integer indices, got dtype {data.dtype}")
    return data


class EmbeddingBag(_LookupTable):
    """Sums, means or maxima of bags of rows of ``weight`` (num_embeddings, embedding_dim),
    initialised N(0, 1), as ``torch.nn.EmbeddingBag``; see ``F.embedding_bag``.

    ``forward(input, offsets=None, per_sample_weights=None)``: a 2-D input (B, N) is B
    bags of N indices; a 1-D input needs ``offsets`` marking where each bag starts
    (``include_last_offset``: the last offset ends the last bag).  ``mode``: "sum",
    "mean" or "max"; ``per_sample_weights`` only with "sum".  ``padding_idx``: that row
    starts at zero and its entries are left out of their bags.  ``sparse`` is accepted
    for PyTorch compatibility, but only False works (gradients are dense).
    """

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None):
        super().__init__()
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        self.mode = mode
        check_bools("EmbeddingBag", scale_grad_by_freq=scale_grad_by_freq, sparse=sparse,
                    include_last_offset=include_last_offset)
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        self.include_last_offset = include_last_offset
        self._setup("EmbeddingBag", num_embeddings, embedding_dim, padding_idx, max_norm,
                    norm_type, _weight)

    def forward(self, input, offsets=None, per_sample_weights=None):
        data = _index_array("EmbeddingBag", "input", input)
        if offsets is not None:
            offsets = _index_array("EmbeddingBag", "offsets", offsets)
        return F.embedding_bag(data, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False,
                        include_last_offset=False, padding_idx=None):
        """An EmbeddingBag holding a copy of the 2-D ``embeddings``; ``freeze`` (default)
        makes its weight receive no gradient."""
        data = cls._pretrained("EmbeddingBag", embeddings)
        check_bools("EmbeddingBag.from_pretrained", freeze=freeze)
        rows, dim = data.shape
        bag = cls(rows, dim, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  _weight=data, include_last_offset=include_last_offset,
                  padding_idx=padding_idx)
        bag.weight.requires_grad = not freeze
        return bag

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        s += f", mode={self.mode!r}"
        if self.include_last_offset:
            s += ", include_last_offset=True"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
