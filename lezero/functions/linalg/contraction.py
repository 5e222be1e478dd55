"""``einsum``: Einstein summation with NumPy's subscripts (explicit ``->``, implicit output,
``...`` broadcasting, repeated labels).

The wrapper first rewrites the call into a *canonical* one that the ``Einsum`` Function
can differentiate simply: ``...`` becomes fresh letters, a label repeated inside one
operand becomes a ``diagonal`` of it, and axes of length one that ``...`` broadcasts are
``broadcast_to`` their full length.  After that every operand has distinct labels with one
length each, and the gradient of operand ``i`` is again an einsum: the other operands and
the output gradient, summed to operand ``i``'s labels.
"""
import string

from lezero.core import Function
from lezero.functions.common import xp_of
from lezero.functions.registry import register
from lezero.functions.shape import broadcast_to, diagonal, reshape
from lezero.utils.checks import check_array

__all__ = ["einsum"]


class Einsum(Function):
    """Canonical einsum: ``terms`` (one label string per operand, no repeats inside a term)
    and ``out`` (the output labels)."""

    def __init__(self, terms, out):
        self.terms = terms
        self.out = out

    def forward(self, *xs):
        spec = ",".join(self.terms) + "->" + self.out
        # optimize lets NumPy/CuPy use BLAS (tensordot) and a good contraction order.
        return xp_of(*xs).einsum(spec, *xs, optimize=len(xs) > 1)

    def backward(self, gy):
        grads = []
        for i, (x, need) in enumerate(zip(self.inputs, self.needs_input_grad)):
            if not need:
                grads.append(None)
                continue
            terms = [t for j, t in enumerate(self.terms) if j != i] + [self.out]
            ops = [v for j, v in enumerate(self.inputs) if j != i] + [gy]
            seen = set("".join(terms))
            kept = "".join(c for c in self.terms[i] if c in seen)
            g = Einsum(terms, kept)(*ops)
            if kept != self.terms[i]:
                # A label summed inside operand i alone: its gradient is constant along it.
                g = reshape(g, tuple(n if c in seen else 1
                                     for c, n in zip(self.terms[i], x.shape)))
                g = broadcast_to(g, x.shape)
            grads.append(g)
        return tuple(grads)


def _parse(subscripts, shapes):
    """Split and check ``subscripts``; return (terms, out, ellipsis letters)."""
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: subscripts must be a str, got {type(subscripts).__name__}")
    spec = subscripts.replace(" ", "")
    if spec.count("->") > 1:
        raise ValueError(f"einsum: subscripts {subscripts!r} have more than one '->'")
    lhs, arrow, out = spec.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: subscripts {subscripts!r} name {len(terms)} operands, "
                         f"got {len(shapes)}")
    for part in terms + ([out] if arrow else []):
        if part.count("...") > 1 or any(c not in string.ascii_letters
                                        for c in part.replace("...", "")):
            raise ValueError(f"einsum: bad subscript term {part!r} in {subscripts!r} "
                             "(use letters and at most one '...')")
    ell = []
    for t, shape in zip(terms, shapes):
        named = len(t.replace("...", ""))
        if ("..." in t and named > len(shape)) or ("..." not in t and named != len(shape)):
            raise ValueError(f"einsum: term {t!r} does not fit an operand of shape {shape}")
        ell.append(len(shape) - named if "..." in t else 0)
    fresh = [c for c in string.ascii_letters if c not in spec][:max(ell, default=0)]
    if len(fresh) < max(ell, default=0):
        raise ValueError(f"einsum: not enough free letters for the '...' axes in "
                         f"{subscripts!r}")
    # '...' in operand i covers the last ell[i] of the broadcast axes (right-aligned).
    terms = [t.replace("...", "".join(fresh[len(fresh) - k:])) for t, k in zip(terms, ell)]
    if arrow:
        out = out.replace("...", "".join(fresh))
        if len(set(out)) != len(out):
            raise ValueError(f"einsum: output subscripts {out!r} repeat a label")
        missing = [c for c in out if c not in "".join(terms)]
        if missing:
            raise ValueError(f"einsum: output label {missing[0]!r} appears in no operand")
    else:   # implicit: broadcast axes, then labels seen exactly once, alphabetically
        joined = "".join(terms)
        out = "".join(fresh) + "".join(sorted(c for c in set(joined)
                                              if joined.count(c) == 1 and c not in fresh))
    return terms, out, fresh


def _label_sizes(terms, shapes, fresh, subscripts):
    """The length of each label; '...' axes of length one broadcast, named labels must match."""
    sizes = {}
    for t, shape in zip(terms, shapes):
        for c, n in zip(t, shape):
            prev = sizes.get(c)
            if prev is None or (prev == 1 and c in fresh):
                sizes[c] = n
            elif n != prev and not (n == 1 and c in fresh):
                what = "a '...' axis" if c in fresh else f"label {c!r}"
                raise ValueError(f"einsum: {what} has length {prev} in one operand and {n} in "
                                 f"another ({subscripts!r}, shapes {list(shapes)})")
    return sizes


@register("linalg")
def einsum(subscripts, *operands):
    """Einstein summation, as ``numpy.einsum``: ``einsum("ij,jk->ik", a, b)`` is a matrix
    product, ``einsum("ii", a)`` a trace, ``einsum("...ij->...ji", a)`` a batched transpose.

    Without ``->`` the output holds the ``...`` axes, then the labels that appear exactly
    once, in alphabetical order.  ``...`` axes broadcast as in NumPy; named labels must
    have the same length everywhere.
    """
    arrays = [check_array("einsum", f"operands[{i}]", x) for i, x in enumerate(operands)]
    if not arrays:
        raise ValueError("einsum: need at least one operand")
    shapes = [a.shape for a in arrays]
    terms, out, fresh = _parse(subscripts, shapes)
    sizes = _label_sizes(terms, shapes, fresh, subscripts)
    ops = list(operands)
    for i, t in enumerate(terms):
        for c in t:                   # a label repeated inside one operand: its diagonal
            while t.count(c) > 1:
                p = t.index(c)
                q = t.index(c, p + 1)
                ops[i] = diagonal(ops[i], 0, p, q)
                t = t[:p] + t[p + 1:q] + t[q + 1:] + c
        full = tuple(sizes[c] for c in t)
        if check_array("einsum", "operand", ops[i]).shape != full:
            ops[i] = broadcast_to(ops[i], full)
        terms[i] = t
    return Einsum(terms, out)(*ops)
