"""Inference fusion: Conv2d + BatchNorm2d (+ ReLU / ReLU6) run as one convolution when
nothing can tell the difference, i.e. the modules are in ``eval()`` mode and no graph is
recorded (``lz.no_grad()`` / ``lz.inference_mode()``).

    out = conv_bn(self.conv1, self.bn1, x, self.relu)   # in a block's forward
    out = sequential(self.features, x)                  # a Sequential, runs fused inside
    return run_children(self, x)                        # as a Sequential's own forward

In every other case (training mode, gradients recorded, a forward hook on one of the
modules, a norm that is not a BatchNorm2d with running statistics, ``disabled()``) the
modules are simply called one after another, so training is untouched.

The batch norm's running statistics and affine parameters are folded into the
convolution's weight and bias (in float64, stored in the weight's dtype):

    w' = w * gamma / sqrt(var + eps),   b' = (b - mean) * gamma / sqrt(var + eps) + beta

computed once per (conv, bn) pair and cached until a parameter or statistic changes: a
replaced array (``load_state_dict``, ``.to()``) or changed values (an optimizer's step;
checked on a sample of each array at every call, so a few microseconds) refold, and any
call that runs unfused (training, gradients on) drops the cache.  ``clear(model)`` drops
it by hand, e.g. after editing a few weights in place.  The ResNet and MobileNetV2 zoo
models use it, so their inference runs one convolution per conv-bn-activation run.
"""
import contextlib
import weakref

import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.core.config import get_config
from lezero.core.variable import Variable
from lezero.functions.conv import conv_geometry, declare_fixed, forward_product
from lezero.kernels.bias_act import bias_act_
from lezero.nn import module_manners
from lezero.nn.layers.activation import ReLU, ReLU6
from lezero.nn.layers.conv import Conv2d
from lezero.nn.layers.normalization import BatchNorm2d
from lezero.nn.containers import Sequential

__all__ = ["conv_bn", "sequential", "run_children", "fold_batch_norm", "clear", "disabled",
           "is_active"]

_CACHE = weakref.WeakKeyDictionary()      # conv -> (bn, fingerprint, weight, bias)
_STATE = {"enabled": True}
_PROBES = 8                               # values sampled from each array per check


def fold_batch_norm(weight, bias, bn):
    """``(w', b')`` arrays (NumPy or CuPy, as ``weight``; in its dtype): the convolution
    ``weight`` (out, ...) and ``bias`` (or None) with ``bn``'s running statistics and
    affine parameters folded in."""
    xp = cuda.get_array_module(weight)
    f64 = xp.float64
    std = xp.sqrt(bn.running_var.astype(f64) + bn.eps)
    gamma = bn.weight.data.astype(f64) if bn.weight is not None else 1.0
    beta = bn.bias.data.astype(f64) if bn.bias is not None else 0.0
    factor = gamma / std
    b = xp.zeros(weight.shape[0], f64) if bias is None else bias.astype(f64)
    w2 = weight.astype(f64) * factor.reshape((-1,) + (1,) * (weight.ndim - 1))
    b2 = (b - bn.running_mean.astype(f64)) * factor + beta
    return w2.astype(weight.dtype), b2.astype(weight.dtype)


def is_active(*modules):
    """True when ``modules`` may run fused: fusion enabled, no graph recorded, every
    module in eval mode and without forward hooks."""
    return (_STATE["enabled"] and not get_config().enable_backprop
            and not any(m.training or m._forward_hooks or m._forward_pre_hooks
                        for m in modules))


@contextlib.contextmanager
def disabled():
    """Within the block, every conv-bn run is called unfused (for A/B comparisons)."""
    before = _STATE["enabled"]
    _STATE["enabled"] = False
    try:
        yield
    finally:
        _STATE["enabled"] = before


def clear(model=None):
    """Drop the folded weights of ``model``'s convolutions (of every model: None)."""
    if model is None:
        _CACHE.clear()
        return
    for m in model.modules():
        _CACHE.pop(m, None)


def _foldable(conv, bn):
    return (type(conv) is Conv2d and isinstance(bn, BatchNorm2d)
            and bn.running_mean is not None and bn.num_features == conv.out_channels)


def _sources(conv, bn):
    """The arrays folded.  (Read from the modules' tables: ``Module.__getattr__`` costs
    a microsecond a name, and this runs at every call.)"""
    cp, bp, bb = conv._parameters, bn._parameters, bn._buffers
    arrays = [cp["weight"].data, bb["running_mean"], bb["running_var"]]
    arrays += [p.data for p in (cp.get("bias"), bp.get("weight"), bp.get("bias"))
               if p is not None]
    return arrays


def _fingerprint(conv, bn):
    """Identities of the source arrays, the bytes of a sample of their values, ``eps``."""
    return tuple([(id(a), a.ravel()[::a.size // _PROBES or 1].tobytes())
                  for a in _sources(conv, bn)]) + (bn.eps,)


def _folded(conv, bn):
    """The cached ``(w', b')`` of the pair, refolded when a source changed."""
    key = _fingerprint(conv, bn)
    hit = _CACHE.get(conv)
    if hit is not None and hit[0] is bn and hit[1] == key:
        return hit[2], hit[3]
    w, b = fold_batch_norm(conv.weight.data, None if conv.bias is None else conv.bias.data,
                           bn)
    declare_fixed(w)            # only this cache holds it: a convolution may keep its
    _CACHE[conv] = (bn, key, w, b)      # transforms (Winograd's filters) between calls
    return w, b


# The clamp (lo, hi) after the folded bias, per activation module type (None: none).
_CLAMPS = {type(None): (-np.inf, np.inf), ReLU: (0.0, np.inf), ReLU6: (0.0, 6.0)}


def conv_bn(conv, bn, x, act=None):
    """``act(bn(conv(x)))`` (``act`` None: ``bn(conv(x))``), as one convolution with the
    folded weights when fusion is active for the three modules."""
    mods = (conv, bn) if act is None else (conv, bn, act)
    if not (_foldable(conv, bn) and is_active(*mods)):
        if conv.training or get_config().enable_backprop:
            _CACHE.pop(conv, None)
        y = bn(conv(x))
        return y if act is None else act(y)
    (x,) = module_manners.prepare_inputs(conv, (x,))
    conv._check_input(x)
    x, padding = conv._pad_explicitly(x)
    w, b = _folded(conv, bn)
    bounds = _CLAMPS.get(type(act))
    if bounds is None:                      # another activation: called as a module
        y = F.conv2d(x, w, b, conv.stride, padding, conv.dilation, conv.groups)
        return act(y)
    y = _convolve(conv, x, w, padding)
    bias_act_(y.data, b, *bounds)           # bias and clamp: one pass, in place
    return y


def _convolve(conv, x, w, padding):
    """``F.conv2d(x, w, None, ...)`` with ``conv``'s geometry.  Where nothing watches the
    call (no function hooks: no autocast, no profiler, no jit tracer) and ``x`` (a batch:
    ``Conv2d`` checked it) is of ``w``'s array type and dtype, the product runs directly:
    the Function call, which records nothing here, and its argument checks cost 40-60 us,
    as much as a small layer's product (MobileNetV2 runs 52 of them)."""
    xa = x.data if isinstance(x, Variable) else x
    if get_config().function_hooks or type(xa) is not type(w) or xa.dtype != w.dtype:
        return F.conv2d(x, w, None, conv.stride, padding, conv.dilation, conv.groups)
    geom = conv_geometry("conv2d", xa.shape, w.shape, 2, conv.stride, padding,
                         conv.dilation, conv.groups)
    return Variable(forward_product(geom, "auto", xa, w, {})[0], None, False)


def sequential(seq, x):
    """``seq(x)`` for a Sequential, with each Conv2d, BatchNorm2d[, ReLU/ReLU6] run of
    its children (and of nested Sequentials) fused when fusion is active."""
    return run_children(seq, x) if is_active(seq) else seq(x)


def run_children(seq, x):
    """What ``Sequential.forward`` computes (its children in order), with the
    conv-bn-activation runs fused when fusion is active (hooks on ``seq`` itself are its
    caller's business)."""
    children = list(seq._modules.values())
    if not _STATE["enabled"] or get_config().enable_backprop:
        for m in children:
            x = m(x)
        return x
    i = 0
    while i < len(children):
        m = children[i]
        nxt = children[i + 1] if i + 1 < len(children) else None
        if isinstance(m, Sequential):
            x, step = sequential(m, x), 1
        elif nxt is not None and _foldable(m, nxt):
            after = children[i + 2] if i + 2 < len(children) else None
            act = after if isinstance(after, (ReLU, ReLU6)) else None
            x = conv_bn(m, nxt, x, act)
            step = 2 if act is None else 3
        else:
            x, step = m(x), 1
        i += step
    return x
