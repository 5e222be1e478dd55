"""``ParamCopy``: autocast's low-precision copy of a parameter, rematerialized in backward.

A float16 copy of every weight kept from forward to backward costs half the parameters'
float32 bytes again (208 MiB for BERT-base), more than a float16 activation saves.  So when
an autocast region ends, each copy it made of a parameter drops its array; the first read
in backward (the consuming matmul's weight gradient) casts the parameter again.  The copy
lives from that read to the cast's own backward, which autocast orders right after the
copy's last consumer (``place``), so at most a few layers' copies exist at once.

The parameter's array object is the one read in forward (the cast keeps its input), so
the recomputed copy is the forward's copy bit for bit unless the parameter was changed in
place in between -- which PyTorch reports as an error and LeZero does not check.
"""
from lezero.amp.convert import convert
from lezero.core import Variable

__all__ = ["ParamCopy", "place", "drop"]

_SLOT = Variable.data          # the slot holding the array, under the property below


def _source(copy):
    return copy.creator.inputs[0]


class ParamCopy(Variable):
    """A Cast's output whose array may be dropped and recast from the parameter."""

    __slots__ = ()

    @property
    def data(self):
        array = _SLOT.__get__(self, Variable)
        if array is None and self.creator is not None:
            array = convert(_source(self).data, self.creator.dtype)
            _SLOT.__set__(self, array)
        return array

    @data.setter
    def data(self, array):
        _SLOT.__set__(self, array)

    # The shape and dtype without recasting a dropped array.
    shape = property(lambda self: _source(self).shape if self.creator else self.data.shape)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: _source(self).size if self.creator else self.data.size)
    dtype = property(lambda self: self.creator.dtype if self.creator else self.data.dtype)


def place(copy, inputs):
    """Make the recorded cast ``copy`` a ``ParamCopy`` and give its cast the generation just
    below the consumer's other ``inputs``: backward then runs the cast (float32 gradient
    into the parameter, the copy freed) right after the copy's last consumer instead of at
    the very end of the pass, where every layer's copy and low-precision gradient would be
    alive at once.  Any generation below the copy's consumers is a valid order."""
    cast = copy.creator
    if cast is None:
        return copy
    copy.__class__ = ParamCopy
    generation = max((x.generation for x in inputs), default=1)
    cast.generation = max(generation - 1, 0)
    copy.generation = cast.generation + 1
    return copy


def drop(copy):
    """Forget ``copy``'s array (the region that made it has ended)."""
    if type(copy) is ParamCopy and copy.creator is not None:
        _SLOT.__set__(copy, None)
