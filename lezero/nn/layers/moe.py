"""``MixtureOfExperts``: a sparsely gated feed-forward layer (Shazeer 2017, GShard, Switch).

A router (``gate``, a bias-free linear map) gives each token a softmax over
``num_experts`` feed-forward networks (``experts.i.fc1`` -> activation -> ``fc2``).  Each
token goes to its ``top_k`` experts, and its output is the sum of their outputs weighted
by the router probabilities -- renormalised over the chosen k when ``top_k > 1``
(GShard, Mixtral), the raw probability for ``top_k == 1`` (Switch: otherwise the gate
would be 1 and the router would get no gradient).

Load balancing (Switch Transformer's auxiliary loss): with f_i the fraction of the N*k
routing assignments that go to expert i and P_i the mean router probability of expert i,

    aux_loss = num_experts * sum_i f_i * P_i

which is 1 when the load is uniform and grows as it concentrates (f is counted, P
carries the gradient).  Add ``coef * layer.aux_loss`` (Switch uses 0.01) to the loss.

Capacity (optional): with ``capacity_factor`` c, expert i takes at most
ceil(c * N * k / num_experts) assignments; the rest are dropped (the token's output from
that expert is zero -- inside a residual block the token passes through unchanged).
First choices have priority over second choices, then earlier tokens over later ones.
Without ``capacity_factor`` nothing is dropped.  c is read as the nearest fraction with a
denominator up to 10**6 (0.1 is 1/10), so that the count is exact integer arithmetic here
and in an exported ONNX file alike.

Two forms of one computation.  Eager runs (training and eval) take the sparse path:
tokens sorted by expert, each expert on its own tokens (NumPy routing; the gates carry the
gradient).  While ``jit.trace`` or ``onnx.export`` records (``lezero.jit.is_tracing()``),
the layer takes the dense path, made of LeZero operators only, so that routing follows
the input in a traced graph: ``RouteTopK`` gives
the one-hot of each token's k choices, ``RouteCapacity`` drops the overflow, and every
expert runs on every token, weighted by an (N, E) gate matrix that is zero off the kept
choices (E/k times the expert work; the outputs agree with the sparse path to rounding).
"""
from fractions import Fraction

import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.core import Variable, get_config
from lezero.functions.shape import RouteCapacity, RouteTopK, capacity_of, fits_capacity
from lezero.nn.layers.dropout import Dropout
from lezero.nn.layers.linear import Linear
from lezero.nn.containers import ModuleList
from lezero.nn.module import Module
from lezero.utils.checks import check_choice, check_int, check_number

__all__ = ["MixtureOfExperts", "RouteTopK", "RouteCapacity"]

_ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}


class _Expert(Module):
    """One expert: fc1 -> activation -> dropout -> fc2."""

    def __init__(self, d_model, d_ff, activation, dropout):
        super().__init__()
        self.fc1 = Linear(d_model, d_ff)
        self.fc2 = Linear(d_ff, d_model)
        self.act = _ACTIVATIONS[activation]
        self.dropout = Dropout(dropout)

    def forward(self, x):
        return self.fc2(self.dropout(self.act(self.fc1(x))))


class MixtureOfExperts(Module):
    """``MixtureOfExperts(d_model, d_ff, num_experts=4, top_k=2, capacity_factor=None,
    activation="gelu", dropout=0.0)``: input (..., d_model) -> output of the same shape.

    After each forward: ``aux_loss`` (a Variable: the load-balancing loss above) and
    ``last_routing`` (``load``: fraction of assignments per expert before capacity,
    ``dropped``: fraction of assignments dropped, ``experts``: the (N, k) chosen ids).
    """

    def __init__(self, d_model, d_ff, num_experts=4, top_k=2, capacity_factor=None,
                 activation="gelu", dropout=0.0):
        super().__init__()
        name = "MixtureOfExperts"
        self.d_model = check_int(name, "d_model", d_model, low=1)
        check_int(name, "d_ff", d_ff, low=1)
        self.num_experts = check_int(name, "num_experts", num_experts, low=1)
        self.top_k = check_int(name, "top_k", top_k, low=1, high=num_experts)
        self.capacity_factor = check_number(name, "capacity_factor", capacity_factor,
                                            low=0.0, low_open=True, allow_none=True)
        if capacity_factor is not None and capacity_factor < 1e-6:
            raise ValueError(f"{name}: capacity_factor must be at least 1e-6 (it is read as "
                             f"a fraction with a denominator up to 10**6), got "
                             f"{capacity_factor}")
        check_choice(name, "activation", activation, tuple(_ACTIVATIONS))
        check_number(name, "dropout", dropout, low=0.0, high=1.0, high_open=True)
        self.gate = Linear(d_model, num_experts, bias=False)
        self.experts = ModuleList([_Expert(d_model, d_ff, activation, dropout)
                                   for _ in range(num_experts)])
        self.aux_loss, self.last_routing = None, None

    def route(self, x):
        """Router output for tokens x (N, d): probabilities (N, E) (a Variable), the chosen
        experts (N, k) (an array, most probable first) and their gates (N, k)."""
        probs = F.softmax(self.gate(x), axis=-1)
        xp = cuda.get_array_module(probs.data)
        experts = xp.argsort(-probs.data, axis=-1, kind="stable")[:, :self.top_k]
        gates = probs[xp.arange(len(experts))[:, None], experts]
        if self.top_k > 1:
            gates = gates / F.sum(gates, axis=-1, keepdims=True)
        return probs, experts, gates

    def capacity_ratio(self):
        """(num, den): c * k / E as a fraction (capacity = ceil(N * num / den)), at most 1
        (a capacity of N tokens already keeps every assignment; small ints in ONNX)."""
        ratio = (Fraction(self.capacity_factor).limit_denominator(10 ** 6) * self.top_k
                 / self.num_experts)
        ratio = min(ratio, Fraction(1))
        return ratio.numerator, ratio.denominator

    def capacity_keep(self, experts):
        """Which (N, k) assignments fit in their expert's capacity (all without one)."""
        xp = cuda.get_array_module(experts)
        if self.capacity_factor is None:
            return xp.ones(experts.shape, dtype=bool)
        n, k = experts.shape
        order = experts.T.reshape(-1)                    # slot-major: first choices first
        hits = order[:, None] == xp.arange(self.num_experts)[None, :]
        keep = fits_capacity(hits, capacity_of(n, *self.capacity_ratio())).any(axis=1)
        return keep.reshape(k, n).T

    def forward(self, input):
        if input.shape[-1] != self.d_model:
            raise ValueError(f"MixtureOfExperts: expected input (..., {self.d_model}), got "
                             f"shape {input.shape}")
        shape = input.shape
        x = input.reshape(-1, self.d_model)
        if get_config().tracing:           # jit.is_tracing(): record the operator form
            return self.dense_forward(x).reshape(shape)
        return self.sparse_forward(x).reshape(shape)

    def dense_forward(self, x):
        """Tokens x (N, d) -> (N, d) with LeZero operators only (see the module docstring):
        every expert on every token, weighted by the (N, E) gates.  What a trace records."""
        probs = F.softmax(self.gate(x), axis=-1)
        hits = RouteTopK(self.top_k)(probs)                      # (k, N, E)
        chosen = F.sum(hits, axis=0)
        gates = probs * chosen
        if self.top_k > 1:
            gates = gates / F.sum(gates, axis=-1, keepdims=True)
        kept = hits
        if self.capacity_factor is not None:
            kept = RouteCapacity(*self.capacity_ratio())(hits)
            gates = gates * F.sum(kept, axis=0)
        ys = F.stack([expert(x) for expert in self.experts], axis=1)   # (N, E, d)
        out = F.sum(ys * F.expand_dims(gates, -1), axis=1)
        xp = cuda.get_array_module(hits.data)
        experts = xp.argmax(hits.data, axis=-1).T                       # (N, k)
        load = F.mean(chosen, axis=0) / self.top_k       # LeZero operators: jit.trace keeps it
        self._record(probs, experts, kept.data.sum(axis=-1).T.reshape(-1) != 0, load)
        return out

    def sparse_forward(self, x):
        """Tokens x (N, d) -> (N, d), each expert on its own tokens only (eager runs)."""
        probs, experts, gates = self.route(x)
        keep = self.capacity_keep(experts)
        xp = cuda.get_array_module(experts)
        n, k, E = len(x), self.top_k, self.num_experts
        flat_e, flat_keep = experts.reshape(-1), keep.reshape(-1)
        # Kept assignments sorted by expert, so each expert runs on one contiguous slice.
        kept = xp.flatnonzero(flat_keep)
        kept = kept[xp.argsort(flat_e[kept], kind="stable")]
        counts = cuda.as_numpy(xp.bincount(flat_e[kept], minlength=E))
        rows = x[kept // k]
        outs, start = [], 0
        for e, count in enumerate(counts):
            if count:
                outs.append(self.experts[e](rows[start:start + int(count)]))
            start += int(count)
        outs.append(xp.zeros((1, self.d_model), dtype=x.dtype))   # for dropped ones
        y = F.concatenate(outs, axis=0)
        where = xp.full(n * k, len(kept), dtype=np.int64)            # -> the zero row
        where[kept] = xp.arange(len(kept))
        out = F.sum(y[where].reshape(n, k, self.d_model) * F.expand_dims(gates, -1), axis=1)
        self._record(probs, experts, flat_keep)
        return out

    def _record(self, probs, experts, flat_keep, load=None):
        """The load-balancing loss and routing statistics of this forward (``load``: the
        fraction of assignments per expert, counted from ``experts`` when None)."""
        xp = cuda.get_array_module(experts)
        if load is None:
            load = xp.bincount(experts.reshape(-1), minlength=self.num_experts) / experts.size
            load = load.astype(probs.dtype)
        self.aux_loss = self.num_experts * F.sum(F.mean(probs, axis=0) * load)
        load = load.data if isinstance(load, Variable) else load
        self.last_routing = {"load": cuda.as_numpy(load),
                             "dropped": float(1.0 - flat_keep.mean()),
                             "experts": cuda.as_numpy(experts)}

    def extra_repr(self):
        return (f"d_model={self.d_model}, num_experts={self.num_experts}, "
                f"top_k={self.top_k}, capacity_factor={self.capacity_factor}")
