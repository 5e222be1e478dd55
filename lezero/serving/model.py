"""``ServedModel``: a model with its tensor names, types and shapes, and its batcher.

The server turns each request into single samples for the model's ``DynamicBatcher``
and the answers back into output tensors.  What the protocol needs to know (input and
output names, datatypes, per-sample shapes with -1 for any size) comes from:

* ``inputs=``/``outputs=`` given explicitly (a list of ``TensorSpec`` or of
  ``(name, datatype, shape)``);
* the file when it says (an ONNX graph's inputs and outputs);
* otherwise a guess from the module's first layer (``Linear(64, ...)`` -> FP32 [64],
  ``Conv2d(3, ...)`` -> FP32 [3, -1, -1], ``Embedding`` -> INT64 [-1]), and the outputs
  from one warm-up run on zeros when the input shapes are fully known (else from the
  first request).  A single input is called ``input__0``, outputs ``output__0``, ... as
  Triton's PyTorch backend names them; a model returning a dict names its outputs.
"""
import dataclasses

import numpy as np

from lezero import cuda
from lezero.backends import get_backend
from lezero.core import no_grad, test_mode
from lezero.serving.batcher import DynamicBatcher
from lezero.serving.worker import split_outputs
from lezero.serving.protocol import ProtocolError, datatype_of, numpy_dtype
from lezero.utils.checks import check_bool, check_callable, check_type

__all__ = ["TensorSpec", "ServedModel"]


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One input or output: ``shape`` is per sample (no batch axis), -1 for any size,
    None when unknown."""

    name: str
    datatype: str = "FP32"
    shape: tuple = None

    def __post_init__(self):
        check_type("TensorSpec", "name", self.name, str)
        numpy_dtype(self.datatype)           # a known datatype name
        if self.shape is not None:
            object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    def metadata(self):
        """The protocol's tensor metadata: the batch axis is the leading -1."""
        return {"name": self.name, "datatype": self.datatype,
                "shape": [-1] + list(self.shape if self.shape is not None else [-1])}

    @property
    def known(self):
        """True when every dimension is fixed (a zero sample can be built)."""
        return self.shape is not None and all(d >= 0 for d in self.shape)


def _as_specs(specs, what):
    if specs is None:
        return None
    check_type("ServedModel", what, specs, (list, tuple), "a list of TensorSpec")
    out = [s if isinstance(s, TensorSpec) else TensorSpec(*s) for s in specs]
    if len({s.name for s in out}) != len(out):
        raise ValueError(f"ServedModel: {what} names must be unique, got "
                         f"{[s.name for s in out]}")
    return out


def guess_input(model):
    """The input spec a module's first layer implies (see the module docstring)."""
    from lezero import nn
    unknown = TensorSpec("input__0", "FP32", None)
    if not isinstance(model, nn.Module):
        return unknown
    for m in model.modules():
        if isinstance(m, nn.Linear):
            return TensorSpec("input__0", "FP32", (m.in_features,))
        if isinstance(m, (nn.Conv1d, nn.Conv2d)):
            return TensorSpec("input__0", "FP32", (m.in_channels,) + (-1,) * m.n)
        if isinstance(m, nn.Embedding):
            return TensorSpec("input__0", "INT64", (-1,))
        leaf = next(m.children(), None) is None
        if isinstance(m, nn.Flatten) or (leaf and next(m.parameters(False), None)):
            return unknown           # reshaped first, or a layer we cannot read
    return unknown


def _on_device(module):
    """The module, or for one whose parameters live on the GPU a function that moves
    each (NumPy) input batch there first; answers come back through ``join``."""
    first = next(iter(module.parameters()), None)
    backend = get_backend(first.data) if first is not None else None
    if backend is None or backend.is_host:
        return module

    def on_gpu(*batches):
        return module(*(backend.asarray(b) for b in batches))
    return on_gpu


class ServedModel:
    """A model as the server serves it (see the module docstring).

    model: an ``nn.Module`` (put in eval mode) or any callable taking batches.
    inputs, outputs: tensor specs (see above); ``version``/``platform`` for metadata.
    warmup: run the model once on zeros at ``start`` when the input shapes are fixed.
    The batcher settings (``max_batch_size``, ``max_delay_ms``, ``max_queue_size``,
    ``preferred_batch_sizes``, ``timeout_ms``, ``padding``) default to the server's.
    """

    def __init__(self, model, inputs=None, outputs=None, *, version="1", platform=None,
                 warmup=True, **batcher_options):
        from lezero import nn
        self.model = check_callable("ServedModel", "model", model)
        self.fn = model
        if isinstance(model, nn.Module):
            model.eval()
            self.fn = _on_device(model)
        self.inputs = _as_specs(inputs, "inputs") or [guess_input(model)]
        self.outputs = _as_specs(outputs, "outputs")
        self.version = check_type("ServedModel", "version", version, str)
        self.platform = platform or ("lezero" if isinstance(model, nn.Module) else
                                     type(model).__name__.lower())
        self.warmup_on_start = check_bool("ServedModel", "warmup", warmup)
        self.options = batcher_options
        self.batcher = None

    # ----- life cycle ------------------------------------------------------------------
    def start(self, name, on_batch=None, **defaults):
        """Warm up (when the inputs are fully known) and start the batcher."""
        if self.batcher is not None and not self.batcher.closed:
            return self
        if self.warmup_on_start:
            self.warmup()
        options = dict(defaults, **{k: v for k, v in self.options.items() if v is not None})
        self.batcher = DynamicBatcher(self.fn, on_batch=on_batch, name=name, **options)
        return self

    def stop(self, drain=True, timeout=None):
        if self.batcher is not None:
            self.batcher.close(drain=drain, timeout=timeout)

    def warmup(self):
        """One run on a zero sample: compiles kernels and learns the outputs."""
        if not all(s.known for s in self.inputs) or self.options.get("padding"):
            return False
        zeros = [np.zeros((1,) + s.shape, numpy_dtype(s.datatype)) for s in self.inputs]
        with no_grad(), test_mode():
            result = self.fn(*zeros)
        arrays, rebuild = split_outputs(result, 1, "ServedModel.warmup")
        self._learn([rebuild([a[0] for a in arrays])])
        return True

    # ----- requests --------------------------------------------------------------------
    def metadata(self, name):
        """The protocol's model metadata object."""
        outputs = self.outputs or [TensorSpec("output__0", "FP32", None)]
        return {"name": name, "versions": [self.version], "platform": self.platform,
                "inputs": [s.metadata() for s in self.inputs],
                "outputs": [s.metadata() for s in outputs]}

    def config(self, name):
        """The batching settings, in the shape of Triton's model configuration."""
        b = self.batcher

        def tensors(specs):
            return [{"name": s.name, "dims": s.metadata()["shape"][1:],
                     "data_type": "TYPE_" + ("STRING" if s.datatype == "BYTES" else
                                             s.datatype)} for s in specs or []]
        return {"name": name, "platform": self.platform,
                "max_batch_size": b.max_batch_size if b else 0,
                "input": tensors(self.inputs), "output": tensors(self.outputs),
                "dynamic_batching": {} if b is None else {
                    "preferred_batch_size": list(b.preferred_batch_sizes),
                    "max_queue_delay_microseconds": int(b.max_delay_ms * 1000),
                    "default_queue_policy": {
                        "max_queue_size": b.max_queue_size,
                        "default_timeout_microseconds": int((b.timeout_ms or 0) * 1000)},
                    "padding": repr(b.padding) if b.padding else None}}

    def _check_input(self, spec, array):
        if datatype_of(array.dtype) != spec.datatype:
            raise ProtocolError(f"input {spec.name!r}: expected datatype {spec.datatype}, "
                                f"got {datatype_of(array.dtype)}")
        if array.ndim == 0:
            raise ProtocolError(f"input {spec.name!r}: needs a batch axis, got shape []")
        if spec.shape is None:
            return
        sample = array.shape[1:]
        if len(sample) != len(spec.shape) or any(
                d >= 0 and d != g for d, g in zip(spec.shape, sample)):
            raise ProtocolError(f"input {spec.name!r}: expected shape "
                                f"{spec.metadata()['shape']}, got {list(array.shape)}")

    def split(self, arrays, max_rows=None):
        """Check the request's tensors against the inputs; returns one sample per row
        (an array, or a tuple for several inputs).  A request of more than ``max_rows``
        rows is refused before any per-row work (a row may be of size zero)."""
        names = [s.name for s in self.inputs]
        if set(arrays) != set(names):
            raise ProtocolError(f"expected input(s) {names}, got {list(arrays)[:8]}")
        for spec in self.inputs:
            self._check_input(spec, arrays[spec.name])
        sizes = {arrays[n].shape[0] for n in names}
        if len(sizes) != 1:
            raise ProtocolError(f"the inputs disagree on the batch size: {sorted(sizes)}")
        n = sizes.pop()
        if n == 0:
            raise ProtocolError("the batch is empty (shape[0] == 0)")
        if max_rows is not None and n > max_rows:
            raise ProtocolError(f"the request has {n} rows, more than the queue holds "
                                f"({max_rows}); send smaller batches")
        if len(names) == 1:
            return list(arrays[names[0]])
        return [tuple(arrays[name][i] for name in names) for i in range(n)]

    def _learn(self, results):
        """Output names (and, if not given, datatypes and shapes) from results."""
        first = results[0]
        if isinstance(first, dict):
            names, parts = list(first), list(first.values())
        else:
            parts = list(first) if isinstance(first, tuple) else [first]
            names = [s.name for s in self.outputs] if self.outputs else \
                [f"output__{i}" for i in range(len(parts))]
        if len(names) != len(parts):
            raise ValueError(f"ServedModel: the model returned {len(parts)} outputs for "
                             f"{len(names)} output specs")
        if self.outputs is None:
            self.outputs = [TensorSpec(nm, datatype_of(p.dtype), p.shape)
                            for nm, p in zip(names, parts)]
        return names

    def join(self, results):
        """Per-sample results back into ``[(name, batch array)]`` (NumPy)."""
        names = self._learn(results)
        if isinstance(results[0], dict):
            columns = [[r[k] for r in results] for k in names]
        elif isinstance(results[0], tuple):
            columns = [list(c) for c in zip(*results)]
        else:
            columns = [results]
        return [(nm, np.stack([cuda.as_numpy(x) for x in col]))
                for nm, col in zip(names, columns)]
