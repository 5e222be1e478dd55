"""Gradient buckets: parameters grouped so one all-reduce carries many gradients.

Parameters are taken in *reverse* registration order -- roughly the order backward
produces their gradients, last layer first -- and cut into buckets of about
``bucket_bytes`` (a bucket never mixes dtypes or devices).  After the first step the
Reducer rebuilds them in the order the gradients actually arrived (as PyTorch DDP does).  Each bucket owns one flat
buffer; a gradient is copied into its slot the moment it is complete, and the bucket's
all-reduce runs in place on the buffer.
"""

from lezero import cuda
from lezero.backends import get_backend
from lezero.core import Variable


class Bucket:
    """Parameters ``params`` (with qualified ``names``) sharing one flat buffer."""

    def __init__(self, index, params, names):
        self.index, self.params, self.names = index, params, names
        self.dtype = params[0].data.dtype
        self.offsets, total = [], 0
        for p in params:
            self.offsets.append(total)
            total += p.data.size
        self.numel = total
        self.nbytes = total * self.dtype.itemsize
        xp = cuda.get_array_module(params[0].data)
        self.buffer = xp.zeros(total, self.dtype)

    def info(self):
        return {"index": self.index, "params": len(self.params), "bytes": int(self.nbytes),
                "names": list(self.names)}

    def _slot(self, k):
        p = self.params[k]
        return self.buffer[self.offsets[k]:self.offsets[k] + p.data.size]

    def copy_in(self, k):
        """Copy parameter ``k``'s gradient (zeros when it has none) into its slot."""
        p = self.params[k]
        slot = self._slot(k)
        if p.grad is None:
            slot[...] = 0
        else:
            slot[...] = p.grad.data.reshape(-1)

    def zero(self, k):
        self._slot(k)[...] = 0

    def copy_out(self, k, scale, keep_none=False):
        """Write the reduced slot, times ``scale``, back into parameter ``k``'s ``.grad``
        (a parameter with no gradient gets one, unless ``keep_none``)."""
        p = self.params[k]
        value = self._slot(k).reshape(p.data.shape)
        if p.grad is None:
            if not keep_none:
                p.grad = Variable(value * scale, requires_grad=False)
            return
        g = p.grad.data
        if p.grad.creator is None and getattr(g.flags, "writeable", True) and g.shape == value.shape:
            xp = cuda.get_array_module(g)
            xp.multiply(value, scale, out=g, casting="unsafe")
        else:       # a gradient we must not write into: replace it
            p.grad = Variable((value * scale).astype(g.dtype), requires_grad=False)


def build_buckets(named_params, bucket_bytes, reverse=True):
    """Buckets over ``named_params`` ((name, Parameter) pairs), taken in reverse order
    (registration order given: last layer first), or as given with ``reverse=False``."""
    buckets, current, names, size, key = [], [], [], 0, None
    ordered = list(named_params)
    for name, p in (reversed(ordered) if reverse else ordered):
        this_key = (p.data.dtype, get_backend(p.data).name)
        nbytes = p.data.size * p.data.dtype.itemsize
        if current and (this_key != key or size + nbytes > bucket_bytes):
            buckets.append(Bucket(len(buckets), current, names))
            current, names, size = [], [], 0
        current.append(p)
        names.append(name)
        size += nbytes
        key = this_key
    if current:
        buckets.append(Bucket(len(buckets), current, names))
    return buckets
