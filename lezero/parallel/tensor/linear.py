"""Megatron-LM's two tensor-parallel linear layers.

Weights keep PyTorch's (out_features, in_features) layout and are sharded as Megatron
does:

* ``ColumnParallelLinear`` holds ``out/size`` *rows* of the weight and of the bias, so
  each rank computes its slice of the output features: ``y_r = x W_r^T + b_r``.  Its input
  goes through ``copy_to_parallel_region`` (identity forward, all-reduce of the gradient
  backward: every rank's slice contributed to ``dL/dx``).  ``gather_output=True``
  all-gathers the slices into the full output; otherwise the output stays split (the
  input of a row-parallel layer, or of the vocabulary-parallel loss).
* ``RowParallelLinear`` holds ``in/size`` *columns* of the weight and the *full* bias:
  each rank multiplies its slice of the input features, and
  ``reduce_from_parallel_region`` (all-reduce forward, identity backward) sums the
  partial products; the bias is added once, after the sum.  ``input_is_parallel=False``
  scatters a full input first.

A column-parallel layer followed by a row-parallel one (an MLP, attention's projections)
needs one all-reduce forward and one backward, Megatron's whole point.

Initialisation: each layer draws the *dense* layer's weights (a temporary ``nn.Linear``,
same generator, same order) on every rank and keeps its shard, so a parallel model
seeded like a dense one holds exactly the dense model's values, whatever the tensor size
(Megatron's CPU initialisation does the same).  An ``out_features`` that does not divide
by the size is padded with zero rows (the padded outputs are trimmed by
``gather_output``, or masked by ``vocab_parallel_cross_entropy(vocab_size=...)``).
"""
import lezero.functions as F
from lezero.core import Parameter
from lezero.nn.module import Module
from lezero.parallel.collectives import (copy_to_parallel_region,
                                         gather_from_parallel_region,
                                         reduce_from_parallel_region,
                                         scatter_to_parallel_region)
from lezero.parallel.tensor.sharding import make_spec, shard, tp_comm
from lezero.utils.checks import check_bool, check_int


def _dense_linear(in_features, out_features, bias):
    from lezero import nn
    return nn.Linear(in_features, out_features, bias=bias)


def _sizes(layer, in_features, out_features, bias, flag, value):
    """Check and set the features; returns (bias, the checked bool ``flag``)."""
    where = type(layer).__name__
    layer.in_features = check_int(where, "in_features", in_features, 1)
    layer.out_features = check_int(where, "out_features", out_features, 1)
    return check_bool(where, "bias", bias), check_bool(where, flag, value)


def _check_features(where, x, expected, what):
    if x.shape[-1] != expected:
        raise ValueError(f"{where}: expected input with {expected} features in the last dim "
                         f"({what}), got shape {tuple(x.shape)}")


class ColumnParallelLinear(Module):
    """y = x W^T + b with the output features split over the ranks of ``comm`` (default:
    the current Grid's tensor group, else the world).

    ``gather_output``: all-gather the output slices (the full ``out_features``) instead of
    returning this rank's slice.  ``stride``: Megatron's partition stride (``sharding.py``):
    3 for a fused query/key/value projection, so each rank gets its heads' q, k and v.
    """

    def __init__(self, in_features, out_features, bias=True, comm=None, gather_output=False,
                 stride=1):
        super().__init__()
        where = type(self).__name__
        bias, self.gather_output = _sizes(self, in_features, out_features, bias,
                                          "gather_output", gather_output)
        self.stride = check_int(where, "stride", stride, 1)
        self.comm = tp_comm(comm, where)
        spec = make_spec(where, 0, self.out_features, self.comm.size, self.stride, pad=True)
        self.tp_shard_specs = {"weight": spec, "bias": spec}
        self.out_features_per_partition = spec.local(self.comm.size)
        dense = _dense_linear(self.in_features, self.out_features, bias)
        rank, size = self.comm.rank, self.comm.size
        self.weight = Parameter(shard(dense.weight.data, spec, rank, size))
        if bias:
            self.bias = Parameter(shard(dense.bias.data, spec, rank, size))
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        _check_features(type(self).__name__, x, self.in_features, "in_features")
        x = copy_to_parallel_region(x, self.comm)
        y = F.linear(x, self.weight, self.bias)
        if self.gather_output:
            y = self.to_dense_order(gather_from_parallel_region(y, -1, self.comm))
        return y

    def to_dense_order(self, gathered):
        """The all-gathered output in the dense layer's feature order (stride undone,
        padding trimmed)."""
        spec, size = self.tp_shard_specs["weight"], self.comm.size
        y = gathered
        if spec.stride > 1 and size > 1:
            lead = y.shape[:-1]
            c = spec.padded // (spec.stride * size)
            y = y.reshape(*lead, size, spec.stride, c).swapaxes(-3, -2).reshape(
                *lead, spec.padded)
        if spec.padded != spec.full:
            y = y[..., :spec.full]
        return y

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features} "
                f"({self.out_features_per_partition} on each of {self.comm.size} ranks), "
                f"bias={self.bias is not None}, gather_output={self.gather_output}"
                + (f", stride={self.stride}" if self.stride > 1 else ""))


class RowParallelLinear(Module):
    """y = x W^T + b with the input features split over the ranks of ``comm``.

    ``input_is_parallel``: the input is already this rank's slice of the features (the
    output of a column-parallel layer); otherwise a full input is scattered first.
    ``in_features`` must divide by the tensor size.
    """

    def __init__(self, in_features, out_features, bias=True, comm=None,
                 input_is_parallel=True):
        super().__init__()
        where = type(self).__name__
        bias, self.input_is_parallel = _sizes(self, in_features, out_features, bias,
                                              "input_is_parallel", input_is_parallel)
        self.comm = tp_comm(comm, where)
        spec = make_spec(where, 1, self.in_features, self.comm.size)
        self.tp_shard_specs = {"weight": spec}
        self.in_features_per_partition = spec.local(self.comm.size)
        dense = _dense_linear(self.in_features, self.out_features, bias)
        self.weight = Parameter(shard(dense.weight.data, spec, self.comm.rank, self.comm.size))
        if bias:
            self.bias = Parameter(dense.bias.data)
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        where = type(self).__name__
        if self.input_is_parallel:
            _check_features(where, x, self.in_features_per_partition,
                            f"this rank's {self.in_features_per_partition} of "
                            f"{self.in_features} in_features: input_is_parallel=True")
        else:
            _check_features(where, x, self.in_features, "in_features")
            x = scatter_to_parallel_region(x, -1, self.comm)
        y = reduce_from_parallel_region(F.linear(x, self.weight), self.comm)
        return y if self.bias is None else y + self.bias

    def extra_repr(self):
        return (f"in_features={self.in_features} ({self.in_features_per_partition} on each of "
                f"{self.comm.size} ranks), out_features={self.out_features}, "
                f"bias={self.bias is not None}, input_is_parallel={self.input_is_parallel}")
