"""``Function``: the base class of every operator.

Subclass it and write ``forward(*arrays) -> array(s)`` on raw NumPy/CuPy arrays and
``backward(*grad_outputs) -> gradient(s)`` with LeZero operators on Variables, so the
backward pass is itself a graph and can be differentiated again.

A Function may also define ``backward_arrays(*grad_outputs)``: the same gradients computed
on raw arrays (arrays in, arrays or None out), with no graph.  The engine, not the
Function, chooses: a first-order pass calls ``backward_arrays`` where it exists, a
``create_graph`` pass always calls ``backward``.
"""
import weakref

import numpy as np

from lezero import cuda
from lezero.core.config import get_config
from lezero.core.inputref import release_inputs
from lezero.core.variable import Variable
from lezero.cuda import as_array

_ref = weakref.ref
_new, _ndarray = object.__new__, np.ndarray


class Function:
    """Base class of operators; an instance is used for exactly one call.

    After a recorded call the instance holds:
      ``inputs`` (Variables), ``outputs`` (weak references to Variables),
      ``generation`` (for backward ordering) and ``needs_input_grad`` (a tuple of bools,
      available already in ``forward`` to skip work for constants).
    """

    generation = 0
    inputs = ()
    outputs = ()
    needs_input_grad = ()
    output_meta = ()      # (shape, dtype) per output, kept when there are several
    # What backward reads (``lezero.core.inputref``): ``save_inputs`` the positions of the
    # inputs whose data it reads (True: all); ``reads_outputs`` whether it reads
    # ``self.outputs``, which must then stay alive (None: seen in the code of backward).
    save_inputs = True
    reads_outputs = None
    freed = False         # its backward ran without retain_graph: what it kept is gone

    def __call__(self, *inputs):
        if self.inputs:
            # A recorded instance is a node of a graph; calling it again would rewire that
            # node and silently give the first call's inputs wrong (or no) gradients.
            raise RuntimeError(f"{type(self).__name__}: this Function instance was already "
                               "called and is part of a graph; create a new instance for "
                               f"each call ({type(self).__name__}()(x), not op(x1); op(x2))")
        cfg = get_config()
        hooks = cfg.function_hooks
        if not hooks and len(inputs) == 2 and isinstance(inputs[0], Variable) \
                and isinstance(inputs[1], Variable):
            return self.call2(inputs[0], inputs[1])
        if not hooks and len(inputs) == 1 and isinstance(inputs[0], Variable):
            return self.call1(inputs[0])
        for x in inputs:
            if not isinstance(x, Variable):
                inputs = _as_variables(inputs)
                break
        for h in hooks:     # hooks may replace the inputs first (autocast inserts casts here)
            inputs = h.transform_inputs(self, inputs)
        xs, needs = [x.data for x in inputs], tuple([x.requires_grad for x in inputs])
        record = cfg.enable_backprop and True in needs      # record only if a grad is wanted
        self.needs_input_grad = needs if record else (False,) * len(xs)
        for h in hooks:
            h.forward_preprocess(self, xs)
        ys = self.forward(*xs)
        for h in hooks:
            h.forward_postprocess(self, xs)
        return self._link(cfg, list(inputs), ys, record,
                          max([x.generation for x in inputs], default=0))

    def call1(self, x):
        """``self(x)`` for a Variable ``x`` without ``__call__``'s argument tuple and checks:
        where ``__call__`` sends one Variable, and what an operator that checked its
        input may call itself.  Hooks and a reused instance are handed to ``__call__``."""
        cfg = get_config()
        if cfg.function_hooks or self.inputs:
            return self(x)
        record = cfg.enable_backprop and x.requires_grad
        self.needs_input_grad = (True,) if record else (False,)
        return self._link(cfg, [x], self.forward(x.data), record, x.generation)

    def call2(self, x0, x1):
        """``self(x0, x1)`` for two Variables, as ``call1`` is ``self(x)``."""
        cfg = get_config()
        if cfg.function_hooks or self.inputs:
            return self(x0, x1)
        needs = (x0.requires_grad, x1.requires_grad)
        record = cfg.enable_backprop and True in needs
        self.needs_input_grad = needs if record else (False, False)
        g0, g1 = x0.generation, x1.generation
        return self._link(cfg, [x0, x1], self.forward(x0.data, x1.data), record,
                          g0 if g0 > g1 else g1)

    def _link(self, cfg, inputs, ys, record, generation):
        """Wrap ``forward``'s outputs as Variables and, when recording, make ``self`` their
        creator; return them (one, or a list)."""
        if type(ys) is _ndarray and ys.dtype.kind in "biufc":
            # One NumPy array of a plain numeric dtype, the common case: Variable(ys, None,
            # record) with what its __init__ would check and set written out here (its
            # class call and __init__ frame were half of this method's time).
            y = _new(Variable)
            y.data, y.requires_grad, y.generation = ys, record, 0
            y.name = y.grad = y.creator = y._hooks = y._post_hooks = None
            if record:
                self.generation, y.creator, y.generation = generation, self, generation + 1
                self.inputs, self.outputs = inputs, [_ref(y)]
                # generation 0: leaves and constants only, nothing worth releasing
                if generation and self.save_inputs is not True and cfg.release_inputs:
                    release_inputs(self)
            return y
        # several outputs, or one of another array type (CuPy) or dtype
        outputs = [Variable(y, None, record) for y in (ys if type(ys) is tuple else (ys,))]
        if record:
            self.generation = generation
            for out in outputs:
                out.creator, out.generation = self, generation + 1
            self.inputs, self.outputs = inputs, list(map(_ref, outputs))
            if len(outputs) > 1:   # kept so a dropped output's gradient can be zero-filled
                self.output_meta = [(y.shape, y.dtype) for y in ys]
            if generation and self.save_inputs is not True and cfg.release_inputs:
                release_inputs(self)
        return outputs if len(outputs) > 1 else outputs[0]

    def forward(self, *xs):
        """Compute the outputs from raw arrays. Override in subclasses."""
        raise NotImplementedError(f"{type(self).__name__}.forward is not implemented")

    def backward(self, *gys):
        """Return the gradient for each input from the outputs' gradients (Variables).

        Return one value per input (a Variable, an array or None for no gradient);
        a single input may return a bare value.  Write it with LeZero operators, so that
        under ``create_graph`` the gradient is differentiable.  Override in subclasses.
        """
        raise NotImplementedError(f"{type(self).__name__}.backward is not implemented; "
                                  "this operator is not differentiable")

    # Optional ``backward_arrays(*gys)``: ``backward`` on raw arrays for a first-order pass
    # (no graph is built, so it may use kernels and in-place arithmetic); it returns one
    # array or None per input, as ``backward`` does.  None: the engine calls ``backward``.
    # A subclass that overrides ``backward`` of a class with one must override it too.
    backward_arrays = None

    def __repr__(self):
        return f"<{type(self).__name__} generation={self.generation}>"


def _as_variables(inputs):
    """Wrap arrays and Python scalars as constant Variables.

    Python scalars take the dtype NumPy gives them next to the first array input, so
    ``x * 2.0`` keeps a float32 ``x`` in float32.
    """
    arrays = cuda.array_types()
    # the first array among the inputs sets scalars' dtype
    like = next((v.data if isinstance(v, Variable) else v for v in inputs
                 if isinstance(v, (Variable,) + arrays)), None)
    out = []
    for x in inputs:
        if not isinstance(x, Variable):
            if not isinstance(x, (bool, int, float, np.generic) + arrays):
                raise TypeError(f"lezero operator got an input of type {type(x).__name__}; "
                                "expected a Variable, an ndarray or a Python number")
            x = Variable(as_array(x, like), requires_grad=False)
        out.append(x)
    return out
