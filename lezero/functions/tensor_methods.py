"""``torch.Tensor``'s methods on ``Variable``: ``to``, ``cpu``/``cuda``, ``float``/``double``/
``half``, ``type_as``, ``view``, ``unsqueeze``, ``permute``, ``clone``, ``clamp``.

Installed by ``variable_methods.install``.  Unlike ``to_cpu``/``to_gpu`` (Chainer's, in
place), these follow PyTorch: they return a Variable (``self`` when nothing changes) and
are differentiable, so ``x.half()`` or ``x.to("cuda")`` sits in the graph and the gradient
flows back to ``x`` in its own dtype and on its own device.

``x.size`` stays DeZero's element count (a property); PyTorch's ``x.size(d)`` is
``x.shape[d]`` here, and ``x.numel()`` the count (docs/pytorch_manners.md says why).
"""
import numpy as np

from lezero import cuda
from lezero.core import Function, Variable
from lezero.utils.checks import check_int, describe


# ----- parsing ``to(...)`` -------------------------------------------------------------------

def parse_device(where, device):
    """A device spec as ``'cpu'``, a CUDA device id (an int, 0 for plain ``'cuda'``: the
    default device) or ``(backend name, id)`` for a backend named by ``lezero.backends``
    (``'strict'``, ``'strict:1'``, a plugin's name; ``'numpy'`` is the host)."""
    if isinstance(device, (int, np.integer)) and not isinstance(device, bool):
        return check_int(where, "device", device, low=0)
    if isinstance(device, str):
        kind, colon, index = device.partition(":")
        if index.isdigit() or not colon:
            if kind in ("cpu", "numpy") and not colon:
                return "cpu"
            if kind == "cuda":
                return int(index or 0)
            if kind in _backend_names():
                return (kind, int(index or 0))
        raise ValueError(f"{where}: device must be 'cpu', 'cuda' or 'cuda:N', or a "
                         f"backend's name ({', '.join(_backend_names())}; 'name:N' for its "
                         f"device N), got {device!r}")
    raise TypeError(f"{where}: device must be a str or an int, got {describe(device)}")


def _backend_names():
    from lezero.backends import available
    return available()


def _is_device(value):
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return True
    return isinstance(value, str) and value.partition(":")[0] in ("cpu", "cuda",
                                                                  *_backend_names())


def is_on(a, device):
    """True when array or Variable ``a`` is on the parsed ``device`` already."""
    if type(device) is tuple:
        return _device_of(a) == device
    return cuda.device_of(a) == (device if device == "cpu" else f"cuda:{device}")


def parse_dtype(where, dtype):
    """A NumPy dtype from a dtype, a type or a name (``'bfloat16'`` through ``lezero.amp``)."""
    if isinstance(dtype, str) and dtype == "bfloat16":
        from lezero.amp.dtypes import bfloat16
        return bfloat16(where)
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{where}: expected a dtype (np.float32, 'float16', ...), got "
                        f"{describe(dtype)}") from None


def parse_to(where, args, device=None, dtype=None):
    """``(device, dtype)`` from torch's forms: ``to(device)``, ``to(dtype)``,
    ``to(device, dtype)``, ``to(other)`` (other's device and dtype) and keywords."""
    if len(args) > 2:
        raise TypeError(f"{where}: takes at most a device and a dtype, got {len(args)} "
                        "positional arguments")
    for arg in args:
        if isinstance(arg, Variable):
            device, dtype = cuda.device_of(arg), arg.dtype
        elif _is_device(arg):
            device = arg
        else:
            try:
                dtype = parse_dtype(where, arg)
            except TypeError:
                raise TypeError(f"{where}: expected a device ('cpu', 'cuda', 'cuda:N') or a "
                                f"dtype (np.float32, 'float16', ...), got {describe(arg)}"
                                ) from None
    return (None if device is None else parse_device(where, device),
            None if dtype is None else parse_dtype(where, dtype))


def move_array(a, device):
    """``a`` on a parsed ``device`` (``'cpu'``, a CUDA id or ``(backend, id)``); ``a``
    itself when it is there already."""
    if device == "cpu":
        return cuda.as_numpy(a)
    if type(device) is tuple:
        return a if is_on(a, device) else cuda.to_device(a, *device)
    if is_on(a, device):
        return a
    return cuda.as_cupy(a, device)


class ToDevice(Function):
    """``y`` = ``x`` copied to another device; the gradient is copied back."""

    def __init__(self, device):
        self.device = device

    def forward(self, x):
        self.src = _device_of(x)
        return move_array(x, self.device)

    def backward(self, gy):
        return ToDevice(self.src)(gy)


def _device_of(x):
    """The parsed device ``x`` is on: ``'cpu'`` or ``(backend name, id)``."""
    where = cuda.device_of(x)
    if where == "cpu":
        return "cpu"
    from lezero.backends import get_backend
    return (get_backend(x).name, int(where.rpartition(":")[2] or 0))


def _cast(x, dtype):
    from lezero.amp.cast import Cast       # deferred: amp sits above functions
    return Cast(dtype)(x)


# ----- the methods ---------------------------------------------------------------------------

def to(self, *args, device=None, dtype=None):
    """A Variable on ``device`` and/or with ``dtype`` (``self`` when both already match),
    differentiable: ``x.to("cuda")``, ``x.to(np.float16)``, ``x.to("cpu", "float64")``,
    ``x.to(other)``."""
    device, dtype = parse_to("Variable.to", args, device, dtype)
    y = self
    if device is not None and not is_on(y, device):
        y = ToDevice(device)(y)
    if dtype is not None and y.dtype != dtype:
        y = _cast(y, dtype)
    return y


def cpu(self):
    """This Variable on the host (``self`` when it is there already)."""
    return to(self, "cpu")


def cuda_(self, device=None):
    """This Variable on a CUDA device (default 0; needs CuPy: ``pip install -e ".[gpu]"``)."""
    return to(self, 0 if device is None else device)


def _dtype_method(name):
    def method(self):
        return to(self, dtype=name)
    method.__name__ = name
    method.__doc__ = f"This Variable as {name} (differentiable; ``self`` if it is {name})."
    return method


def type_as(self, other):
    """This Variable with ``other``'s dtype (differentiable)."""
    if not isinstance(other, Variable):
        raise TypeError(f"type_as: other must be a Variable, got {describe(other)}")
    return to(self, dtype=other.dtype)


def view(self, *shape):
    """torch's name for ``reshape`` (``x.view(2, -1)``); the data is shared when NumPy can
    reshape without a copy."""
    from lezero.functions import reshape
    return reshape(self, *shape)


def unsqueeze(self, dim):
    """A new axis of length 1 at ``dim`` (``F.expand_dims``)."""
    from lezero.functions import expand_dims
    return expand_dims(self, dim)


def permute(self, *dims):
    """The axes in the order ``dims`` (``x.permute(2, 0, 1)`` or ``x.permute((2, 0, 1))``)."""
    from lezero.functions import transpose
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    if not dims:
        raise TypeError("permute: give the order of all the axes, e.g. x.permute(1, 0)")
    return transpose(self, tuple(dims))


def clone(self):
    """A differentiable copy: new data, and the gradient flows back to ``self``."""
    return _cast(self, self.dtype)


def clamp(self, min=None, max=None):
    """Limit to [min, max] (``F.clamp``, NumPy's ``clip``)."""
    from lezero.functions import clip
    return clip(self, min, max)


def install(V):
    """Attach the methods above to ``Variable`` (``V``)."""
    for fn in (to, cpu, type_as, view, unsqueeze, permute, clone, clamp):
        setattr(V, fn.__name__, fn)
    V.cuda = cuda_
    for name in ("float16", "float32", "float64"):
        torch_name = {"float16": "half", "float32": "float", "float64": "double"}[name]
        setattr(V, torch_name, _dtype_method(name))
