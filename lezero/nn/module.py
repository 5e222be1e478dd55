"""``nn.Module``: the base class of layers and models, with PyTorch's semantics.

Attributes are registered in assignment order: a ``Parameter`` becomes a parameter, a
``Module`` a child, and ``register_buffer`` adds non-trainable state (plain arrays that
operators such as ``F.batch_norm`` update in place).  ``state_dict`` keys and layouts are
PyTorch's, so a PyTorch ``state_dict`` (as NumPy arrays) loads without renaming.
"""
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

import numpy as np

from lezero import cuda
from lezero.backends import get_backend
from lezero.core import Parameter, Variable
from lezero.nn import module_manners

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class _Handle:
    """Returned by hook registration; ``remove()`` unregisters the hook."""

    def __init__(self, table, key):
        self._table, self._key = table, key

    def remove(self):
        self._table.pop(self._key, None)


class Module:
    """Base class for all layers and models.  Subclasses define ``forward``."""

    _hook_ids = 0

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "training", True)

    # ----- attribute registration ------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() before "
                                 f"assigning {name!r}")
        if isinstance(value, Parameter):
            self._forget(name, keep=self._parameters)
            self._parameters[name] = value       # an existing name keeps its place
        elif isinstance(value, Module):
            self._forget(name, keep=self._modules)
            self._modules[name] = value
        elif name in self._buffers:
            if value is not None and not isinstance(value, cuda.array_types()):
                raise TypeError(f"cannot assign {type(value).__name__} to buffer {name!r} "
                                "(an array or None expected)")
            self._buffers[name] = value
        elif name in self._parameters or name in self._modules:
            if value is not None:
                kind = "parameter" if name in self._parameters else "module"
                raise TypeError(f"cannot assign {type(value).__name__} to {kind} {name!r} "
                                f"(a {kind.capitalize()} or None expected)")
            (self._parameters if name in self._parameters else self._modules)[name] = None
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name, keep=None):
        """Remove ``name`` from every table but ``keep`` (where it is about to be set)."""
        for table in (self._parameters, self._modules, self._buffers):
            if table is not keep:
                table.pop(name, None)
        self._non_persistent.discard(name)
        self.__dict__.pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        """Add a parameter (or None, a declared-but-absent parameter such as a bias)."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be a Parameter or None, got "
                            f"{type(param).__name__}")
        self.__dict__.pop(name, None)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add non-trainable state (an array, or None); persistent buffers are saved."""
        if tensor is not None and not isinstance(tensor, cuda.array_types()):
            raise TypeError(f"register_buffer: {name!r} must be an array or None, got "
                            f"{type(tensor).__name__}")
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        (self._non_persistent.discard if persistent else self._non_persistent.add)(name)

    def add_module(self, name, module):
        """Add a child module under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {name!r} must be a Module, got {type(module).__name__}")
        self.__dict__.pop(name, None)
        self._modules[name] = module

    register_module = add_module

    # ----- calling ---------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        # Number lists become arrays; float64 data meets float32 weights as float32.
        args = module_manners.prepare_inputs(self, args)
        for hook in list(self._forward_pre_hooks.values()):
            out = hook(self, args)
            if out is not None:
                args = out if isinstance(out, tuple) else (out,)
        result = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            out = hook(self, args, result)
            if out is not None:
                result = out
        return result

    def _add_hook(self, table, hook):
        if not callable(hook):
            raise TypeError(f"hook must be callable, got {type(hook).__name__}")
        Module._hook_ids += 1
        table[Module._hook_ids] = hook
        return _Handle(table, Module._hook_ids)

    def register_forward_hook(self, hook):
        """``hook(module, args, output)``; a returned value replaces the output."""
        return self._add_hook(self._forward_hooks, hook)

    def register_forward_pre_hook(self, hook):
        """``hook(module, args)``; a returned value replaces the positional arguments."""
        return self._add_hook(self._forward_pre_hooks, hook)

    # ----- traversal -------------------------------------------------------------------
    def named_modules(self, prefix="", memo=None):
        """(name, module) for this module and every descendant, each once."""
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(f"{prefix}.{name}" if prefix else name, memo)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self):
        for _, child in self.named_children():
            yield child

    def _named_members(self, table, prefix, recurse):
        seen = set()
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mod_prefix, module in modules:
            for name, value in getattr(module, table).items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), value

    def named_parameters(self, prefix="", recurse=True):
        """(qualified name, Parameter), each shared parameter once."""
        return self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        return self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        """Call ``fn(module)`` on every child (depth first), then on self; returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def num_parameters(self):
        """The number of trainable scalars."""
        return int(sum(p.size for p in self.parameters()))

    # ----- state -----------------------------------------------------------------------
    def _state_entries(self, prefix=""):
        """(key, module, name, value) for every parameter and persistent buffer, walking
        the tree as PyTorch's ``state_dict`` does: ``prefix`` is prepended as given, and a
        module or parameter reachable by two paths appears under both keys."""
        for name, p in self._parameters.items():
            if p is not None:
                yield prefix + name, self, name, p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                yield prefix + name, self, name, b
        for name, child in self._modules.items():
            if child is not None:
                yield from child._state_entries(f"{prefix}{name}.")

    def state_dict(self, prefix="", keep_vars=False):
        """An ordered dict of parameter and persistent-buffer arrays, PyTorch's keys.

        ``keep_vars=True`` gives the Parameters themselves instead of their arrays."""
        return OrderedDict((key, value if keep_vars or not isinstance(value, Variable)
                            else value.data)
                           for key, _, _, value in self._state_entries(prefix))

    def load_state_dict(self, state_dict, strict=True):
        """Copy arrays into parameters and buffers (in place, cast to their dtype).

        Returns ``(missing_keys, unexpected_keys)``.  Nothing is changed when a check
        fails: with ``strict`` a missing or unexpected key raises KeyError; a shape
        mismatch (even with ``strict=False``) raises ValueError naming the key and both
        shapes, and a value that is not numeric (strings, objects, complex into a real
        parameter) raises TypeError naming the key.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict: expected a dict of name -> array, got "
                            f"{type(state_dict).__name__}")
        entries = {key: (module, name, target)
                   for key, module, name, target in self._state_entries()}
        missing = [k for k in entries if k not in state_dict]
        unexpected = [k for k in state_dict if k not in entries]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys "
                           f"{unexpected}")
        updates = []
        for key, (module, name, target) in entries.items():
            if key in state_dict:
                updates.append((module, name, target, _converted(key, state_dict[key], target)))
        for module, name, target, new in updates:      # checked all: now change the model
            if isinstance(target, Variable):
                target.data = new
            else:
                module._buffers[name] = new
        return IncompatibleKeys(missing, unexpected)

    def save(self, path):
        """Save ``state_dict()`` atomically (format from the extension: .npz, .h5, ...)."""
        from lezero.utils.serialization import save
        save(self.state_dict(), path)

    def load(self, path, strict=True):
        """Load a file written by ``save`` (or a PyTorch .pt state_dict)."""
        from lezero.utils.serialization import load
        return self.load_state_dict(load(path), strict=strict)

    # ----- modes and devices -----------------------------------------------------------
    def train(self, mode=True):
        """Set training mode on this module and every descendant; returns self."""
        if not isinstance(mode, bool):
            raise TypeError(f"train: mode must be a bool, got {type(mode).__name__}")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        """Evaluation mode (dropout off, batch norm uses running statistics)."""
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        """Clear every parameter's gradient."""
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad.data[...] = 0

    cleargrads = zero_grad

    def _move(self, convert):
        for m in self.modules():
            for p in m._parameters.values():
                if p is not None:
                    p.data = convert(p.data)
                    if p.grad is not None:
                        p.grad.data = convert(p.grad.data)
            for name, b in m._buffers.items():
                if b is not None:
                    m._buffers[name] = convert(b)
        return self

    def to_gpu(self, device=None):
        """Move parameters and buffers to the default device (``LEZERO_BACKEND``, else
        CuPy); returns self."""
        return self._move(lambda a: cuda.as_cupy(a, device))

    def to_device(self, name=None, device=None):
        """Move parameters and buffers to backend ``name`` (``'strict'``, ``'cupy'``, a
        plugin's; default: the default device), device ``device`` (an int id) when given;
        returns self."""
        return self._move(lambda a: cuda.to_device(a, name, device))

    def to_cpu(self):
        """Move parameters and buffers to NumPy; returns self."""
        return self._move(cuda.as_numpy)

    # PyTorch's names: in place, returning self, like torch.nn.Module.
    def to(self, *args, device=None, dtype=None):
        """Move and/or cast in place: ``m.to("cuda")``, ``m.to(np.float16)``,
        ``m.to("cpu", "float64")``; only floating parameters and buffers change dtype."""
        from lezero.functions.tensor_methods import parse_to
        device, dtype = parse_to(f"{type(self).__name__}.to", args, device, dtype)
        if device is not None:
            from lezero.functions.tensor_methods import move_array
            self._move(lambda a: move_array(a, device))
        if dtype is not None:
            module_manners.cast_floating(self, dtype, f"{type(self).__name__}.to")
        return self

    def cpu(self):
        """``to_cpu()``."""
        return self.to_cpu()

    def cuda(self, device=None):
        """``to_gpu(device)`` (CUDA device 0 by default)."""
        return self.to_gpu(device)

    def half(self):
        """Cast floating parameters and buffers to float16; returns self."""
        return self.to(dtype=np.float16)

    def float(self):
        """Cast floating parameters and buffers to float32; returns self."""
        return self.to(dtype=np.float32)

    def double(self):
        """Cast floating parameters and buffers to float64; returns self."""
        return self.to(dtype=np.float64)

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` on every parameter (freeze with False); returns self."""
        if not isinstance(requires_grad, bool):
            raise TypeError(f"requires_grad_: requires_grad must be a bool, got "
                            f"{type(requires_grad).__name__}")
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    # ----- printing --------------------------------------------------------------------
    def extra_repr(self):
        """Override to show a layer's configuration inside its repr."""
        return ""

    def __repr__(self):
        """torch's layout (the configuration from ``extra_repr``, then one line per
        child), plus a ``# N params`` comment on modules that hold parameters."""
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + repr(child).replace("\n", "\n  ")
                       for name, child in self._modules.items()]
        lines = extra_lines + child_lines
        own = sum(p.size for p in self._parameters.values() if p is not None)
        count = self.num_parameters()
        tag = f"  # {count:,} params" if count and (child_lines or own) else ""
        head = type(self).__name__
        if len(extra_lines) == 1 and not child_lines:
            return f"{head}({extra_lines[0]}){tag}"
        if not lines:
            return f"{head}(){tag}"
        return f"{head}({tag}\n  " + "\n  ".join(lines) + "\n)"


def _converted(key, value, target):
    """``value`` as a new array on ``target``'s device with its dtype; shapes must match,
    and the value must be numbers (no strings or objects; complex only into complex)."""
    from lezero.utils.safetensors import numeric_dtype
    value = value.data if isinstance(value, Variable) else value
    current = target.data if isinstance(target, Variable) else target
    value = get_backend(current).asarray(value)
    if not numeric_dtype(value.dtype) or (value.dtype.kind == "c" and current.dtype.kind != "c"):
        raise TypeError(f"load_state_dict: cannot copy {value.dtype} values into {key!r} "
                        f"({current.dtype}): only numeric arrays load (complex only into "
                        "complex)")
    if value.shape != current.shape:
        raise ValueError(f"load_state_dict: size mismatch for {key!r}: checkpoint has "
                         f"shape {value.shape}, the model has {current.shape}")
    return value.astype(current.dtype, copy=True)
