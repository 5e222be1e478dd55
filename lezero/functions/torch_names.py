"""PyTorch's keyword names for axes, accepted by every registered operator.

LeZero's operators take NumPy's names (``axis``, ``keepdims``, ``axes``); a PyTorch user
types ``dim``, ``keepdim``, ``dims``.  ``register`` (``lezero.functions.registry``) passes
every operator through ``accept_torch_names``, so ``F.softmax(x, dim=1)`` and
``x.sum(dim=1, keepdim=True)`` work on every operator whose signature has the NumPy name,
including ones added later.  An operator without such a parameter is returned unchanged
(no cost); one with it gets a thin wrapper that renames the keyword and then calls it.

Giving both spellings (``axis=0, dim=1``, or ``axis`` positionally and ``dim=``) is a
``TypeError`` naming the operator, never a silent choice.
"""
import functools
import inspect

# PyTorch's keyword -> the NumPy names it may stand for, first match in the signature wins.
TORCH_NAMES = {
    "dim": ("axis",),
    "keepdim": ("keepdims",),
    "dims": ("axes", "axis"),           # torch.permute / flip / roll / tensordot
    "start_dim": ("start_axis",),       # torch.flatten
    "end_dim": ("end_axis",),
    "dim0": ("axis1",),                 # torch.transpose(x, dim0, dim1) == swapaxes
    "dim1": ("axis2",),
}


def aliases_for(fn):
    """``{torch keyword: (numpy parameter, its positional index or None)}`` for ``fn``."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    names = list(params)
    found = {}
    for alias, targets in TORCH_NAMES.items():
        if alias in params:            # the operator already speaks PyTorch here
            continue
        for target in targets:
            if target in params:
                kind = params[target].kind
                positional = kind in (inspect.Parameter.POSITIONAL_ONLY,
                                      inspect.Parameter.POSITIONAL_OR_KEYWORD)
                found[alias] = (target, names.index(target) if positional else None)
                break
    return found


def accept_torch_names(fn, op_name):
    """``fn``, or a wrapper of it that also accepts PyTorch's axis keywords."""
    aliases = aliases_for(fn)
    if not aliases:
        return fn

    @functools.wraps(fn)
    def operator(*args, **kwargs):
        if kwargs and not aliases.keys().isdisjoint(kwargs):
            _rename(op_name, aliases, args, kwargs)
        return fn(*args, **kwargs)

    operator.torch_aliases = {alias: target for alias, (target, _) in aliases.items()}
    return operator


def _rename(op_name, aliases, args, kwargs):
    """Rewrite ``kwargs`` in place from PyTorch's names to NumPy's."""
    for alias, (target, index) in aliases.items():
        if alias not in kwargs:
            continue
        if target in kwargs or (index is not None and len(args) > index):
            raise TypeError(f"{op_name}: got both {target}= and {alias}= (PyTorch's name "
                            f"for {target}); pass only one")
        kwargs[target] = kwargs.pop(alias)
