"""``InputRef``: how a Function holds an input whose array its backward never reads.

DeZero's graph keeps every input Variable, and so every input's array, until the graph
dies.  A Function that declares ``save_inputs`` (the positions its backward reads) holds
its other inputs as ``InputRef``s instead: the graph edge (the input's creator and its
position among the creator's outputs), shape, dtype and ``requires_grad``, no array.  An
intermediate result that nothing else holds (``relu(bn(x))``'s batch-norm output) is then
freed when forward returns, as in PyTorch.

Kept as Variables all the same: leaves that receive ``.grad``, Variables with hooks, and
outputs of a Function whose backward reads its outputs (``reads_outputs``; when a class
does not say, its ``backward``/``backward_arrays`` code naming ``outputs`` means yes).
"""
import weakref

from lezero.core.variable import Variable


class InputRef:
    """The edge to a released input.  ``variable()`` is the Variable the engine routes the
    gradient to: the input itself while anything holds it, else a stand-in without data
    registered as its creator's output (so every consumer meets the same one)."""

    __slots__ = ("creator", "index", "generation", "requires_grad", "shape", "dtype", "name")
    _hooks = _post_hooks = grad = None

    def __init__(self, x, creator):
        self.creator = creator
        self.index = 0
        if creator is not None and len(creator.outputs) > 1:
            self.index = next(i for i, r in enumerate(creator.outputs) if r() is x)
        self.generation, self.requires_grad, self.name = x.generation, x.requires_grad, x.name
        self.shape, self.dtype = x.data.shape, x.data.dtype

    ndim = property(lambda self: len(self.shape))

    @property
    def data(self):
        raise RuntimeError(f"this input ({self.shape}, {self.dtype}) was released after "
                           "forward: its Function's save_inputs says backward does not read it")

    def variable(self):
        outputs = self.creator.outputs
        v = outputs[self.index]()
        if v is None:                   # freed: a stand-in lives while the pass holds it
            v = Variable(None, self.name, self.requires_grad)
            v.creator, v.generation = self.creator, self.generation
            outputs[self.index] = weakref.ref(v)
        return v

    def __repr__(self):
        return f"InputRef(shape={self.shape}, dtype={self.dtype})"


_READS = {}        # Function class -> whether its backward reads its outputs


def _reads_outputs(cls):
    said = cls.reads_outputs
    if said is not None:
        return said
    found = _READS.get(cls)
    if found is None:
        codes = [getattr(getattr(cls, name, None), "__code__", None)
                 for name in ("backward", "backward_arrays")]
        found = _READS[cls] = any(c is not None and "outputs" in c.co_names for c in codes)
    return found


def release_inputs(f):
    """Replace the inputs of ``f`` that its backward does not read by ``InputRef``s."""
    keep, inputs = f.save_inputs, f.inputs
    for i, x in enumerate(inputs):
        if i in keep or x._hooks:
            continue
        c = x.creator
        if x.requires_grad if c is None else _reads_outputs(type(c)):
            continue            # a leaf gets .grad; a creator reading its outputs needs them
        inputs[i] = InputRef(x, c)
