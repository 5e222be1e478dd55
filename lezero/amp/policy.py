"""The cast policy: what autocast does to each operator's inputs, keyed by Function class name.

Five treatments (torch.autocast's three lists, plus the two that fall out of them):

* ``lower``: floating inputs are cast to the autocast dtype (float16 / bfloat16): the
  products where low precision is fast and safe (matmul, linear, conv, einsum, RNN layers,
  attention products).
* ``float32``: low-precision inputs are cast up to float32, and the result is float32:
  softmax, losses, exp/log, pow, sum, solvers: range or accuracy matters.
* ``float32_compute``: the inputs keep their dtype, the arithmetic runs in float32 and the
  result (and what the operator keeps for backward) is rounded back to the input's dtype:
  normalizations, attention's masked softmax, and the reductions torch.autocast leaves
  alone but accumulates in float32 (mean, var, logsumexp).  This is what PyTorch's own
  kernels do with half inputs; what backward keeps stays in the low dtype.
* ``widest``: when floating inputs differ, all are cast to the widest (binary elementwise
  ops, concatenation, where): so a float16 activation plus a float32 bias adds in float32;
  a 0-d input (a Python scalar) takes the others' dtype, as in torch.
* ``passthrough``: left alone (activations, pooling, shape ops, dropout...): the output
  has the input's dtype.  Any operator the table does not know is passed through.

Lookup order for a Function class: a user override (``cast_policy["Softmax"] = "lower"``),
then the class's own ``autocast_policy`` attribute (set directly or by ``custom_fwd``),
then this table, then ``passthrough``.  ``print(amp.cast_policy)`` shows the table.
"""
import threading

from lezero.utils.checks import check_choice, check_type

__all__ = ["TREATMENTS", "CastPolicy", "cast_policy", "policy", "custom_fwd", "custom_bwd"]

LOWER, FLOAT32, FLOAT32_COMPUTE, WIDEST, PASSTHROUGH = (
    "lower", "float32", "float32_compute", "widest", "passthrough")
TREATMENTS = (LOWER, FLOAT32, FLOAT32_COMPUTE, WIDEST, PASSTHROUGH)

# class name -> (treatment, the LeZero operators it serves, torch.autocast's decision)
_TABLE = {
    # ----- lower precision: the expensive products
    "Linear": (LOWER, "linear", "lower (linear)"),
    "MatMul": (LOWER, "matmul, @, sdpa, adaptive_avg_pool", "lower (matmul, bmm, mm)"),
    "Tensordot": (LOWER, "tensordot, dot", "widest (tensordot, dot)"),
    "Einsum": (LOWER, "einsum, bilinear", "lower (einsum runs as bmm); bilinear: widest"),
    "Conv": (LOWER, "conv1d/2d/3d", "lower (conv*)"),
    "ConvGradInput": (LOWER, "conv_transpose1d/2d/3d", "lower (conv_transpose*)"),
    "LSTMLayer": (LOWER, "lstm, nn.LSTM", "lower (lstm cells, cudnn rnn)"),
    "GRULayer": (LOWER, "gru, nn.GRU", "lower (gru cells, cudnn rnn)"),
    "ElmanLayer": (LOWER, "rnn_tanh, rnn_relu, nn.RNN", "lower (rnn cells)"),
    "ChunkedAttention": (LOWER, "scaled_dot_product_attention(chunk_size=...)",
                         "lower (scaled_dot_product_attention)"),
    "FusedAttention": (LOWER, "scaled_dot_product_attention (float32, causal or no mask)",
                       "lower (scaled_dot_product_attention)"),
    "PReLU": (LOWER, "prelu", "lower (prelu)"),
    # ----- float32: range or accuracy matters
    "Softmax": (FLOAT32, "softmax, gumbel_softmax", "float32 (softmax)"),
    "LogSoftmax": (FLOAT32, "log_softmax, ctc_loss", "float32 (log_softmax)"),
    # computed in float32, a float32 loss; keeps the low-precision logits
    "SoftmaxCrossEntropy": (FLOAT32_COMPUTE, "cross_entropy", "float32 (cross_entropy)"),
    "NLLLoss": (FLOAT32, "nll_loss", "float32 (nll_loss)"),
    "BinaryCrossEntropy": (FLOAT32, "binary_cross_entropy", "float32 on CPU; CUDA refuses it"),
    "LogSigmoid": (FLOAT32, "logsigmoid, binary_cross_entropy_with_logits",
                   "float32 (binary_cross_entropy_with_logits)"),
    "XLogX": (FLOAT32, "kl_div", "float32 (kl_div)"),
    "SmoothL1": (FLOAT32, "smooth_l1_loss, huber_loss", "float32 (smooth_l1_loss, huber_loss)"),
    "CTCLoss": (FLOAT32, "ctc_loss", "float32 (ctc_loss)"),
    "Exp": (FLOAT32, "exp, poisson_nll_loss", "float32 (exp)"),
    "Expm1": (FLOAT32, "expm1", "float32 (expm1)"),
    "Log": (FLOAT32, "log", "float32 (log)"),
    "Log1p": (FLOAT32, "log1p", "float32 (log1p)"),
    "Log2": (FLOAT32, "log2", "float32 (log2)"),
    "Log10": (FLOAT32, "log10", "float32 (log10)"),
    "Pow": (FLOAT32, "pow, **", "float32 (pow)"),
    "Square": (FLOAT32, "square", "float32 (square is pow)"),
    "Reciprocal": (FLOAT32, "reciprocal", "float32 (reciprocal)"),
    "Rsqrt": (FLOAT32, "rsqrt", "float32 (rsqrt)"),
    "Softplus": (FLOAT32, "softplus", "float32 (softplus)"),
    "Arccos": (FLOAT32, "arccos", "float32 (acos)"),
    "Arcsin": (FLOAT32, "arcsin", "float32 (asin)"),
    "Cosh": (FLOAT32, "cosh", "float32 (cosh)"),
    "Sinh": (FLOAT32, "sinh", "float32 (sinh)"),
    "Tan": (FLOAT32, "tan", "float32 (tan)"),
    "Sum": (FLOAT32, "sum, every mean-reduced loss", "float32 (sum)"),
    "Prod": (FLOAT32, "prod", "float32 (prod)"),
    "CumSum": (FLOAT32, "cumsum", "float32 (cumsum)"),
    "CumProd": (FLOAT32, "cumprod", "float32 (cumprod)"),
    "PNorm": (FLOAT32, "norm, normalize, cosine_similarity", "float32 (norm, normalize)"),
    "Inv": (FLOAT32, "inv", "float32 on CPU (inverse)"),
    "Det": (FLOAT32, "det", "float32 on CPU (linalg_*)"),
    "Solve": (FLOAT32, "solve", "float32 on CPU (linalg_*)"),
    "Cholesky": (FLOAT32, "cholesky", "float32 on CPU (cholesky)"),
    # ----- float32 arithmetic, activation dtype kept
    "Normalize": (FLOAT32_COMPUTE, "batch_norm, layer_norm, group_norm, instance_norm, "
                  "rms_norm", "batch_norm: passthrough (fp32 inside); layer/group_norm: "
                  "float32"),
    "LogSumExp": (FLOAT32_COMPUTE, "logsumexp", "passthrough (fp32 accumulation inside)"),
    "Mean": (FLOAT32_COMPUTE, "mean", "passthrough (fp32 accumulation inside)"),
    "Var": (FLOAT32_COMPUTE, "var, std", "passthrough (fp32 accumulation inside)"),
    "ChannelWindowSum": (FLOAT32_COMPUTE, "local_response_norm", "passthrough"),
    "MaskedSoftmax": (FLOAT32_COMPUTE, "scaled_dot_product_attention's softmax",
                      "part of scaled_dot_product_attention: lower (fp32 inside)"),
    # ----- widest input type
    "Add": (WIDEST, "add, +", "widest (type promotion)"),
    "Sub": (WIDEST, "sub, -", "widest (type promotion)"),
    "Mul": (WIDEST, "mul, *", "widest (type promotion)"),
    "Div": (WIDEST, "div, /", "widest (type promotion)"),
    "Extremum": (WIDEST, "maximum, minimum", "widest (type promotion)"),
    "Arctan2": (WIDEST, "arctan2", "widest (atan2)"),
    "Hypot": (WIDEST, "hypot", "widest (type promotion)"),
    "Where": (WIDEST, "where", "widest (type promotion)"),
    "Concatenate": (WIDEST, "concatenate, stack", "widest (cat, stack)"),
    "ScatterAdd": (WIDEST, "scatter_add", "widest (scatter_add)"),
}


class CastPolicy:
    """The table autocast reads; overridable per operator (process-wide, thread-safe)."""

    def __init__(self, table=_TABLE):
        self._table = dict(table)
        self._overrides = {}
        self._lock = threading.Lock()

    @staticmethod
    def _name(op):
        if isinstance(op, type):
            return op.__name__
        return check_type("amp.cast_policy", "operator", op, str,
                          "a Function class or its name")

    def lookup(self, cls):
        """``(treatment, rule)`` for a Function class; ``rule`` says what decided."""
        name = cls.__name__
        treatment = self._overrides.get(name)
        if treatment is not None:
            return treatment, "user override"
        own = cls.__dict__.get("autocast_policy") or getattr(cls.forward, "autocast_policy", None)
        if own is None:
            own = getattr(cls, "autocast_policy", None)   # inherited from a base class
        if own is not None:
            return own, "class attribute"
        row = self._table.get(name)
        if row is not None:
            return row[0], "table"
        return PASSTHROUGH, "default (not in the table)"

    def __getitem__(self, op):
        name = self._name(op)
        if name in self._overrides:
            return self._overrides[name]
        return self._table[name][0] if name in self._table else PASSTHROUGH

    def __setitem__(self, op, treatment):
        self.set(op, treatment)

    def set(self, op, treatment):
        """Override the treatment of one operator (a Function class or its name)."""
        name = self._name(op)
        check_choice("amp.cast_policy", "treatment", treatment, TREATMENTS)
        with self._lock:
            self._overrides[name] = treatment

    def reset(self, op=None):
        """Drop the override of ``op`` (of every operator when None)."""
        with self._lock:
            if op is None:
                self._overrides.clear()
            else:
                self._overrides.pop(self._name(op), None)

    def rows(self):
        """[(class name, treatment, source, LeZero operators, torch.autocast)] sorted by
        treatment then name; overrides included."""
        names = set(self._table) | set(self._overrides)
        out = []
        for name in names:
            ops, torch = self._table.get(name, (None, "", ""))[1:]
            source = "override" if name in self._overrides else "table"
            out.append((name, self[name], source, ops, torch))
        return sorted(out, key=lambda r: (TREATMENTS.index(r[1]), r[0]))

    def markdown(self):
        """The table as Markdown (docs/amp.md embeds it)."""
        lines = ["| Function | treatment | LeZero operators | torch.autocast (CUDA) |",
                 "|---|---|---|---|"]
        for name, treatment, source, ops, torch in self.rows():
            mark = " (override)" if source == "override" else ""
            lines.append(f"| `{name}` | {treatment}{mark} | {ops} | {torch} |")
        return "\n".join(lines)

    def __str__(self):
        lines = [f"{'Function':<22}{'treatment':<17}LeZero operators"]
        for name, treatment, source, ops, _ in self.rows():
            mark = "*" if source == "override" else ""
            lines.append(f"{name:<22}{treatment + mark:<17}{ops}")
        lines.append("anything else: passthrough;  * = user override")
        return "\n".join(lines)

    __repr__ = __str__


cast_policy = CastPolicy()


def policy(op=None):
    """The cast policy (printable); with ``op`` (a class or name), that operator's treatment."""
    return cast_policy if op is None else cast_policy[op]


def custom_fwd(cls_or_fn=None, *, cast_inputs=None):
    """Declare how autocast treats a custom Function, as torch's ``custom_fwd``.

    ``@custom_fwd(cast_inputs="float32")`` on the class (or its ``forward``) casts the
    floating inputs to float32 under autocast; ``cast_inputs="lower"`` (or the autocast
    dtype's name, "float16"/"bfloat16") casts them down; ``cast_inputs=None`` leaves them
    alone.  Any treatment name of ``TREATMENTS`` is accepted too.  Same as setting the
    class attribute ``autocast_policy``."""
    aliases = {None: PASSTHROUGH, "float16": LOWER, "bfloat16": LOWER, "half": LOWER}
    treatment = aliases.get(cast_inputs, cast_inputs)
    if not isinstance(treatment, str):
        treatment = getattr(treatment, "__name__", str(treatment))    # np.float32 and kin
        treatment = {"float32": FLOAT32, "float16": LOWER}.get(treatment, treatment)
    check_choice("custom_fwd", "cast_inputs", treatment, TREATMENTS)

    def deco(target):
        target.autocast_policy = treatment
        return target
    return deco if cls_or_fn is None else deco(cls_or_fn)


def custom_bwd(cls_or_fn):
    """Run this Function's backward under the autocast its forward ran under (torch's
    ``custom_bwd``); by default backward runs with autocast off, in the dtypes forward
    chose."""
    cls_or_fn.autocast_backward = True
    return cls_or_fn
