"""The FunctionHooks a checkpointed block runs under."""
import weakref

from lezero.core import FunctionHook


class Discover(FunctionHook):
    """No-grad forward: collect the outside Variables that need a gradient (anything that
    requires grad there comes from outside, since nothing inside is recorded), and keep
    the outputs the policy selects."""


    def __init__(self, policy):
        self.found = {}
        self.policy = policy
        self.kept = []

    def note(self, x):
        if x.requires_grad and id(x) not in self.found:
            self.found[id(x)] = x

    def transform_inputs(self, function, inputs):
        for x in inputs:
            self.note(x)
        if self.policy is not None and self.policy(function):
            capture(function, self.kept)
        return inputs


def capture(function, kept):
    """Wrap ``function.forward`` to store its outputs and the state it sets."""
    # No closure over the instance (a reference cycle would delay freeing the graph).
    own, unbound = vars(function).get("forward"), type(function).forward
    ref = weakref.ref(function)

    def run(*xs):
        function = ref()
        before = dict(vars(function))
        ys = own(*xs) if own is not None else unbound(function, *xs)
        state = {k: v for k, v in vars(function).items()
                 if k != "forward" and before.get(k) is not v}
        kept.append((type(function).__name__, [x.shape for x in xs], ys, state))
        return ys
    function.forward = run


class Replay(FunctionHook):
    """Recomputation: hand the kept outputs back to the Functions that made them."""


    def __init__(self, kept, policy):
        self.kept = list(kept)
        self.policy = policy

    def transform_inputs(self, function, inputs):
        if self.policy(function):
            name, shapes, ys, state = self.kept.pop(0)
            if name != type(function).__name__ or shapes != [x.shape for x in inputs]:
                raise RuntimeError(f"checkpoint: the recomputation called {type(function).__name__}"
                                   f" where the forward called {name}; a checkpointed block "
                                   "must run the same operators each time")
            vars(function).update(state)
            function.forward = lambda *xs: ys
        return inputs


class Substitute(FunctionHook):
    """Recomputation: outside Variables enter the block's Functions as leaf stand-ins."""


    def __init__(self, mapping):
        self.mapping = mapping

    def transform_inputs(self, function, inputs):
        get = self.mapping.get
        return [get(id(x), x) for x in inputs]
