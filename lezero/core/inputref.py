"""``InputRef``: how a Function holds an input whose array its backward never reads.

DeZero's graph keeps every input Variable, and so every input's array, until the graph
dies.  A Function that declares ``save_inputs`` (the positions its backward reads) holds
its other inputs as ``InputRef``s instead: the graph edge (the input's creator and its
position among the creator's outputs), shape, dtype and ``requires_grad``, no array.  An
intermediate result that nothing else holds (``relu(bn(x))``'s batch-norm output) is then
freed when forward returns, as in PyTorch.

After a backward that does not retain the graph (``retain_graph=False``, PyTorch's
default), ``free_saved`` drops what each Function kept, as soon as its backward has run.

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

    def __init__(self, x, creator, array):
        """The edge to ``x``, an output of ``creator``; ``array``: what ``x`` holds (its
        shape and dtype read without ``Variable``'s properties), or ``x`` itself."""
        self.creator, self.index = creator, 0
        if creator is not None and len(creator.outputs) > 1:
            self.index = next(i for i, r in enumerate(creator.outputs) if r() is x)
        self.generation, self.requires_grad, self.name = x.generation, x.requires_grad, x.name
        self.shape, self.dtype = array.shape, array.dtype

    ndim = property(lambda self: len(self.shape))

    @property
    def data(self):
        raise RuntimeError(f"this input ({self.shape}, {self.dtype}) was released after "
                           "forward: its Function's save_inputs says backward does not read it")

    def variable(self):
        if self.creator is None:        # cut by unchain_backward: a throwaway leaf
            return Variable(None, self.name, False)
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
_HELD = Variable.data.__get__      # the array a Variable holds (amp's copies may hold none)


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


def release_inputs(f, keep=None):
    """Replace the inputs of ``f`` (but those in ``keep``, default ``f.save_inputs``) by
    ``InputRef``s where the rules above allow; return how many."""
    keep, inputs, count = f.save_inputs if keep is None else keep, f.inputs, 0
    for i, x in enumerate(inputs):
        if i in keep or x._hooks or type(x) is InputRef:
            continue
        c, held = x.creator, _HELD(x)
        if x.requires_grad if c is None else held is None or _reads_outputs(type(c)):
            continue    # a leaf gets .grad; no data; a creator reading its outputs needs them
        inputs[i] = InputRef(x, c, x if held is None else held)
        count += 1
    return count


def free_saved(f, arrays):
    """``f``'s backward ran in a pass that does not retain the graph: release every input
    that may be released and drop the arrays (of types ``arrays``, or containers of them)
    ``f`` kept, as PyTorch frees saved tensors.  A Function that kept something is marked
    ``freed`` (a later backward through it raises); one that kept nothing (a cast of a
    parameter, shared by several graphs) may be differentiated again."""
    state = f.__dict__
    dropped = [k for k, v in state.items() if isinstance(v, arrays) or (
        type(v) in (list, tuple, dict) and _holds(v.values() if type(v) is dict else v, arrays))]
    for key in dropped:
        del state[key]
    if release_inputs(f, ()) or dropped:
        f.freed = True


def _holds(items, arrays):
    return any(isinstance(v, arrays) for v in items)
