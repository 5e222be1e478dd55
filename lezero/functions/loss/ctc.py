"""Connectionist temporal classification: ``ctc_loss`` (Graves et al., 2006).

The loss of one sequence is ``-log p(target | log_probs)``, the probability summed over
every alignment of the target (with blanks and repeats) to the T input frames.  The sum is
computed with the forward-backward algorithm in log space, vectorised over the batch and
the extended label sequence ``blank, l1, blank, l2, ..., blank`` (length 2S+1):

    alpha[t, s] = logsumexp(alpha[t-1, s], alpha[t-1, s-1], alpha[t-1, s-2] if allowed)
                  + log_probs[t, label[s]]

and ``beta`` the same way from the end.  ``alpha + beta - log_probs`` is the log of the
probability mass of the alignments that pass through (t, s); the gradient with respect to
``log_probs[t, c]`` is minus that mass, summed over the positions s labelled c, divided by
the total.

This is the true gradient with respect to ``log_probs``.  PyTorch instead returns the
gradient with respect to the logits *before* a log_softmax (it adds ``exp(log_probs)``);
after a log_softmax both give the same logit gradient.  Double backward is not supported.
"""
import numpy as np

from lezero import cuda
from lezero.backends import get_backend, of_namespace
from lezero.core import Function, Variable
from lezero.functions.common import as_variable, data_of, xp_of
from lezero.functions.loss.common import check_reduction
from lezero.functions.reduction import sum as _sum
from lezero.functions.registry import register
from lezero.functions.shape import reshape
from lezero.utils.checks import check_array, check_bool, check_float_array

__all__ = ["ctc_loss"]


def _logsumexp(*arrays):
    """Elementwise log(sum(exp(a))) of same-shape arrays, -inf where all are -inf."""
    xp = xp_of(arrays[0])
    m = arrays[0]
    for a in arrays[1:]:
        m = xp.maximum(m, a)
    safe = xp.where(m == -np.inf, 0, m)
    total = sum(xp.exp(a - safe) for a in arrays)
    with np.errstate(divide="ignore"):
        return xp.log(total) + safe


def _shift(a, k, fill):
    """a[..., s - k] along the last axis (k > 0: from the left; k < 0: from the right)."""
    xp = xp_of(a)
    out = xp.full(a.shape, fill, dtype=a.dtype)
    if k > 0:
        out[..., k:] = a[..., :-k]
    else:
        out[..., :k] = a[..., -k:]
    return out


class _Alignment:
    """The extended label sequences of a batch and which transitions they allow."""

    def __init__(self, labels, input_lengths, blank, xp):
        n = len(labels)
        self.lengths = np.array([2 * len(l) + 1 for l in labels])
        width = int(self.lengths.max())
        ext = np.full((n, width), blank, dtype=np.int64)
        for i, l in enumerate(labels):
            ext[i, 1:2 * len(l):2] = l
        prev2 = np.full_like(ext, blank)
        prev2[:, 2:] = ext[:, :-2]
        skip = (ext != blank) & (ext != prev2)       # s-2 -> s may jump over one blank
        skip[:, :2] = False
        inside = np.arange(width)[None, :] < self.lengths[:, None]
        to_xp = of_namespace(xp).asarray
        self.ext, self.skip, self.inside = to_xp(ext), to_xp(skip), to_xp(inside)
        self.skip_next = to_xp(np.pad(skip[:, 2:], ((0, 0), (0, 2))))   # s+2 -> s allowed
        self.t_len = to_xp(np.asarray(input_lengths))
        self.s_len = to_xp(self.lengths)
        self.xp = xp

    def gather(self, lp):
        """lp_ext[t, n, s] = lp[t, n, ext[n, s]]."""
        t = lp.shape[0]
        idx = self.xp.broadcast_to(self.ext[None], (t,) + self.ext.shape)
        return self.xp.take_along_axis(lp, idx, axis=2)

    def forward(self, lp_ext):
        xp, neg = self.xp, -np.inf
        alpha = xp.full(lp_ext.shape, neg, dtype=lp_ext.dtype)
        alpha[0, :, :2] = lp_ext[0, :, :2]
        alpha[0] = xp.where(self.inside, alpha[0], neg)
        for t in range(1, lp_ext.shape[0]):
            a = alpha[t - 1]
            a2 = xp.where(self.skip, _shift(a, 2, neg), neg)
            alpha[t] = xp.where(self.inside, _logsumexp(a, _shift(a, 1, neg), a2) + lp_ext[t],
                                neg)
        return alpha

    def backward(self, lp_ext):
        xp, neg = self.xp, -np.inf
        n_t = lp_ext.shape[0]
        beta = xp.full(lp_ext.shape, neg, dtype=lp_ext.dtype)
        s = xp.arange(lp_ext.shape[2])[None, :]
        ends = (s == self.s_len[:, None] - 1) | (s == self.s_len[:, None] - 2)
        for t in range(n_t - 1, -1, -1):
            start = xp.where(ends, lp_ext[t], neg)
            if t + 1 < n_t:
                b = beta[t + 1]
                b2 = xp.where(self.skip_next, _shift(b, -2, neg), neg)
                step = _logsumexp(b, _shift(b, -1, neg), b2) + lp_ext[t]
            else:
                step = start
            last = (self.t_len - 1 == t)[:, None]
            before = (self.t_len - 1 > t)[:, None]
            beta[t] = xp.where(self.inside & last, start,
                               xp.where(self.inside & before, step, neg))
        return beta

    def nll(self, alpha):
        """-log p(target) per sample, from alpha at each sample's last frame."""
        xp = self.xp
        n = alpha.shape[1]
        rows = xp.arange(n)
        t_last = xp.maximum(self.t_len - 1, 0)
        a_last = alpha[t_last, rows]                        # (N, width)
        end = a_last[rows, self.s_len - 1]
        before = xp.where(self.s_len > 1, a_last[rows, xp.maximum(self.s_len - 2, 0)], -np.inf)
        ll = xp.logaddexp(end, before)
        # No frames: only the empty target has an alignment.
        zero, minus_inf = ll.dtype.type(0), ll.dtype.type(-np.inf)
        ll = xp.where(self.t_len == 0, xp.where(self.s_len == 1, zero, minus_inf), ll)
        return -ll


class CTCLoss(Function):
    """Per-sample CTC losses of (T, N, C) log-probabilities; saves the gradient."""

    def __init__(self, labels, input_lengths, blank, zero_infinity):
        self.labels = labels
        self.input_lengths = input_lengths
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs):
        xp = xp_of(log_probs)
        lp = log_probs.astype(get_backend(log_probs).capabilities.widest_float)
        align = _Alignment(self.labels, self.input_lengths, self.blank, xp)
        lp_ext = align.gather(lp)
        alpha = align.forward(lp_ext)
        nll = align.nll(alpha)
        infinite = xp.isinf(nll)
        if self.needs_input_grad[0]:
            beta = align.backward(lp_ext)
            with np.errstate(invalid="ignore"):
                mass = xp.exp(alpha + beta - lp_ext + nll[None, :, None])
            grad = xp.zeros(lp.shape, dtype=lp.dtype)
            rows = xp.arange(lp.shape[1])
            for s in range(lp_ext.shape[2]):     # one label per (n, s): no collisions
                grad[:, rows, align.ext[:, s]] -= mass[:, :, s]
            if self.zero_infinity:
                grad[:, infinite] = 0
            self.grad = grad.astype(log_probs.dtype)
        if self.zero_infinity:
            nll = xp.where(infinite, 0.0, nll)
        return nll.astype(log_probs.dtype)

    def backward(self, gy):
        return CTCLossGrad(self.grad)(self.inputs[0], gy)


class CTCLossGrad(Function):
    """gy times the saved gradient; not differentiable again (ctc_loss has no double
    backward), which the inputs (log_probs, gy) make explicit in the graph."""

    def __init__(self, grad):
        self.grad = grad

    def forward(self, log_probs, gy):
        return self.grad * gy[None, :, None]

    def backward(self, ggx):
        raise NotImplementedError("ctc_loss: double backward is not supported")


def _int_array(op, name, value):
    if isinstance(value, Variable):
        value = value.data
    arr = np.asarray(cuda.as_numpy(value))
    if arr.dtype.kind not in "iu" and not (arr.dtype == object and arr.size == 0):
        raise TypeError(f"{op}: {name} must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _split_targets(op, targets, target_lengths, n_classes, blank):
    """One label array per sample, from padded (N, S) or concatenated targets."""
    t = np.asarray(cuda.as_numpy(check_array(op, "targets", targets)))
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: targets must hold integer labels, got dtype {t.dtype}")
    if t.ndim == 2:
        if t.shape[0] != len(target_lengths) or target_lengths.max(initial=0) > t.shape[1]:
            raise ValueError(f"{op}: padded targets of shape {t.shape} do not fit "
                             f"target_lengths {target_lengths.tolist()}")
        labels = [t[i, :k] for i, k in enumerate(target_lengths)]
    elif t.ndim == 1:
        if t.size != target_lengths.sum():
            raise ValueError(f"{op}: concatenated targets have {t.size} labels but "
                             f"target_lengths sum to {int(target_lengths.sum())}")
        labels = np.split(t, np.cumsum(target_lengths)[:-1])
    else:
        raise ValueError(f"{op}: targets must be (N, S) padded or 1-D concatenated, got "
                         f"shape {t.shape}")
    for l in labels:
        bad = (l < 0) | (l >= n_classes) | (l == blank)
        if bad.any():
            raise ValueError(f"{op}: target label {int(l[bad][0])} is out of range: labels "
                             f"must be in [0, {n_classes}) and differ from blank={blank}")
    return labels


@register("loss", double_differentiable=False,
          notes="forward-backward in log space; true gradient w.r.t. log_probs")
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """CTC loss, as ``torch.nn.functional.ctc_loss``.

    ``log_probs``: (T, N, C) log-probabilities (or (T, C) unbatched).  ``targets``: (N, S)
    padded or the concatenation of all targets.  ``input_lengths``, ``target_lengths``: one
    int per sample.  'mean' divides each loss by its target length, then averages over the
    batch.  ``zero_infinity`` zeroes infinite losses (impossible alignments) and their
    gradients.  The gradient is the true one with respect to ``log_probs`` (see module).
    """
    op = "ctc_loss"
    check_reduction(op, reduction)
    lp = check_float_array(op, "log_probs", log_probs)
    if lp.ndim == 2:
        tgt = data_of(targets)
        lengths = [_int_array(op, "input_lengths", input_lengths).reshape(1),
                   _int_array(op, "target_lengths", target_lengths).reshape(1)]
        x = log_probs if isinstance(log_probs, Variable) else as_variable(log_probs)
        loss = ctc_loss(reshape(x, (lp.shape[0], 1, lp.shape[1])), tgt[None], *lengths,
                        blank=blank, reduction=reduction, zero_infinity=zero_infinity)
        return reshape(loss, ()) if reduction == "none" else loss
    if lp.ndim != 3:
        raise ValueError(f"{op}: log_probs must be (T, N, C) or (T, C), got shape {lp.shape}")
    n_t, n, n_classes = lp.shape
    if isinstance(blank, bool) or not isinstance(blank, (int, np.integer)) \
            or not 0 <= blank < n_classes:
        raise ValueError(f"{op}: blank must be an int in [0, {n_classes}), got {blank!r}")
    in_len = _int_array(op, "input_lengths", input_lengths).reshape(-1)
    tg_len = _int_array(op, "target_lengths", target_lengths).reshape(-1)
    for name, arr, high in (("input_lengths", in_len, n_t), ("target_lengths", tg_len, None)):
        if arr.shape != (n,):
            raise ValueError(f"{op}: {name} must have one entry per sample ({n}), got "
                             f"{arr.shape[0]}")
        if (arr < 0).any() or (high is not None and (arr > high).any()):
            raise ValueError(f"{op}: {name} must be in [0, {high if high else 'S'}], got "
                             f"{arr.tolist()}")
    labels = _split_targets(op, targets, tg_len, n_classes, blank)
    zero_infinity = check_bool(op, "zero_infinity", zero_infinity)
    losses = CTCLoss(labels, in_len, int(blank), zero_infinity)(log_probs)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return _sum(losses)
    per_label = as_variable(xp_of(lp).asarray(np.maximum(tg_len, 1), dtype=lp.dtype))
    return _sum(losses / per_label) / n

