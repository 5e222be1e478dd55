"""Export coverage: which registered operators (``lezero.functions.registry``) export.

Each public operator is *probed*: one small call (``PROBES``) is traced, which shows the
Function classes it runs; the operator exports when every one of them has a rule in
``lezero.onnx.registry.RULES``.  The table in ``docs/onnx.md`` is generated here:

    python -m lezero.onnx.coverage_table --markdown docs/onnx.md

(it rewrites the part between the ``coverage:start`` and ``coverage:end`` markers).  The
tests export every probe marked exportable and compare onnxruntime with LeZero.
"""
import argparse
import re

import numpy as np

import lezero.functions as F

__all__ = ["PROBES", "probe_ops", "coverage_rows", "markdown_table", "update_markdown"]


def u(*shape, lo=-1.0, hi=1.0, seed=0):
    """A deterministic float32 array uniform in [lo, hi)."""
    rng = np.random.default_rng(seed + len(shape) * 7 + sum(shape))
    return rng.uniform(lo, hi, shape).astype(np.float32)


def _spd(n):
    a = u(n, n)
    return (a @ a.T + n * np.eye(n)).astype(np.float32)


_X, _MASK = (3, 4), np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 0, 1]], dtype=bool)
_IDX = np.array([[0, 1], [3, 2], [1, 1]])

# name -> (function of the array inputs, inputs); the unary default is (F.<name>, [x])
PROBES = {
    "arccosh": (F.arccosh, [u(*_X, lo=1.5, hi=3)]),
    "arccos": (F.arccos, [u(*_X, lo=-.9, hi=.9)]), "arcsin": (F.arcsin, [u(*_X, lo=-.9, hi=.9)]),
    "arctanh": (F.arctanh, [u(*_X, lo=-.9, hi=.9)]),
    **{k: (getattr(F, k), [u(*_X, lo=0.2, hi=2)]) for k in
       ("log", "log2", "log10", "sqrt", "rsqrt", "reciprocal")},
    **{k: (getattr(F, k), [u(*_X), u(4, seed=1)]) for k in
       ("add", "sub", "mul", "maximum", "minimum", "arctan2", "hypot")},
    "div": (F.div, [u(*_X), u(4, lo=0.5, hi=2)]), "pow": (F.pow, [u(*_X, lo=.2, hi=2), u(4)]),
    "round": (lambda x: F.round(x, 1), [u(*_X, lo=-3, hi=3)]),
    "clip": (lambda x: F.clip(x, -0.5, 0.4), [u(*_X)]),
    "where": (lambda a, b: F.where(_MASK, a, b), [u(*_X), u(*_X, seed=2)]),
    **{k: (lambda x, k=k: getattr(F, k)(x, axis=1), [u(*_X)]) for k in
       ("sum", "mean", "prod", "max", "min", "logsumexp", "cumsum", "cumprod", "argmax",
        "argmin", "all", "any", "var", "std")},
    "norm": (lambda x: F.norm(x, axis=1), [u(*_X)]),
    "topk": (lambda x: F.topk(x, 2, axis=1), [u(*_X)]),
    "broadcast_to": (lambda x: F.broadcast_to(x, (3, 4)), [u(1, 4)]),
    "chunk": (lambda x: F.chunk(x, 2, axis=0), [u(4, 3)]),
    "concatenate": (lambda a, b: F.concatenate([a, b], axis=0), [u(2, 3), u(1, 3)]),
    "stack": (lambda a, b: F.stack([a, b], axis=1), [u(*_X), u(*_X, seed=3)]),
    "diagonal": (lambda x: F.diagonal(x), [u(3, 3)]),
    "expand_dims": (lambda x: F.expand_dims(x, 1), [u(*_X)]),
    "flatten": (lambda x: F.flatten(x, 1), [u(2, 3, 4)]),
    "flip": (lambda x: F.flip(x, 1), [u(*_X)]),
    "gather": (lambda x: F.gather(x, 1, _IDX), [u(*_X)]),
    "get_item": (lambda x: x[1:, ::2], [u(*_X)]),
    "index_select": (lambda x: F.index_select(x, 1, np.array([0, 2, 2])), [u(*_X)]),
    "masked_fill": (lambda x: F.masked_fill(x, _MASK, 0.5), [u(*_X)]),
    "moveaxis": (lambda x: F.moveaxis(x, 0, 2), [u(2, 3, 4)]),
    "swapaxes": (lambda x: F.swapaxes(x, 0, 2), [u(2, 3, 4)]),
    "one_hot": (lambda i: F.one_hot(i, 4), [np.array([0, 2, 1])]),
    "pad": (lambda x: F.pad(x, ((1, 0), (0, 2)), constant_values=0.5), [u(*_X)]),
    "repeat": (lambda x: F.repeat(x, 2, axis=1), [u(*_X)]),
    "reshape": (lambda x: F.reshape(x, (4, 3)), [u(*_X)]),
    "roll": (lambda x: F.roll(x, 1, axis=1), [u(*_X)]),
    "scatter_add": (lambda x, s: F.scatter_add(x, 1, _IDX, s), [u(*_X), u(3, 2)]),
    "scatter": (lambda x, s: F.scatter(x, 1, _IDX[:, :1], s), [u(*_X), u(3, 1)]),
    "split": (lambda x: F.split(x, [1, 3], axis=0), [u(4, 3)]),
    "squeeze": (lambda x: F.squeeze(x, 1), [u(3, 1, 4)]),
    "sum_to": (lambda x: F.sum_to(x, (1, 4)), [u(*_X)]),
    "take": (lambda x: F.take(x, np.array([0, 3, 3]), axis=1), [u(*_X)]),
    "tile": (lambda x: F.tile(x, (2, 1)), [u(*_X)]),
    "transpose": (lambda x: F.transpose(x, (2, 0, 1)), [u(2, 3, 4)]),
    "tril": (lambda x: F.tril(x, 1), [u(*_X)]), "triu": (lambda x: F.triu(x, 1), [u(*_X)]),
    "channel_shuffle": (lambda x: F.channel_shuffle(x, 3), [u(2, 6, 3)]),
    "bilinear": (F.bilinear, [u(2, 3), u(2, 4), u(5, 3, 4), u(5)]),
    "cholesky": (F.cholesky, [_spd(3)]), "det": (F.det, [_spd(3)]), "inv": (F.inv, [_spd(3)]),
    "solve": (F.solve, [_spd(3), u(3, 2)]), "dot": (F.dot, [u(*_X), u(4, 2)]),
    "einsum": (lambda a, b: F.einsum("ij,jk->ik", a, b), [u(*_X), u(4, 2)]),
    "linear": (F.linear, [u(2, 4), u(3, 4), u(3)]), "matmul": (F.matmul, [u(2, 3, 4), u(4, 2)]),
    "outer": (F.outer, [u(3), u(4)]), "tensordot": (lambda a, b: F.tensordot(a, b, 2),
                                                    [u(2, 3, 4), u(3, 4, 5)]),
    "cosine_similarity": (lambda a, b: F.cosine_similarity(a, b, axis=1), [u(*_X), u(*_X, seed=4)]),
    "pairwise_distance": (F.pairwise_distance, [u(*_X), u(*_X, seed=5)]),
    "glu": (lambda x: F.glu(x, axis=1), [u(*_X)]),
    "gumbel_softmax": (lambda x: F.gumbel_softmax(x, axis=1), [u(*_X)]),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 0.5), [u(*_X)]),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), [u(*_X)]),
    "prelu": (F.prelu, [u(2, 3, 4), u(3)]),
    "relu6": (F.relu6, [u(*_X, lo=-2, hi=8)]),
    "softplus": (lambda x: F.softplus(x, 2.0, 1.0), [u(*_X)]),
    "hardshrink": (lambda x: F.hardshrink(x, 0.3), [u(*_X)]),
    "softshrink": (lambda x: F.softshrink(x, 0.3), [u(*_X)]),
    "threshold": (lambda x: F.threshold(x, 0.1, -0.5), [u(*_X)]),
    "softmax": (lambda x: F.softmax(x, axis=0), [u(*_X)]),
    "log_softmax": (lambda x: F.log_softmax(x, axis=0), [u(*_X)]),
    "conv1d": (lambda x, w, b: F.conv1d(x, w, b, padding=1), [u(2, 3, 8), u(4, 3, 3), u(4)]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, padding=1), [u(2, 3, 6, 6), u(4, 3, 3, 3), u(4)]),
    "conv3d": (lambda x, w, b: F.conv3d(x, w, b, padding=1),
               [u(1, 2, 4, 4, 4), u(3, 2, 3, 3, 3), u(3)]),
    "conv_transpose1d": (lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2),
                         [u(2, 3, 5), u(3, 4, 3), u(4)]),
    "conv_transpose2d": (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2),
                         [u(2, 3, 4, 4), u(3, 4, 3, 3), u(4)]),
    "conv_transpose3d": (lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2),
                         [u(1, 2, 3, 3, 3), u(2, 3, 2, 2, 2), u(3)]),
    "fold": (lambda x: F.fold(x, (4, 4), 2), [u(2, 12, 9)]),
    "unfold": (lambda x: F.unfold(x, 2), [u(2, 3, 4, 4)]),
    "adaptive_avg_pool1d": (lambda x: F.adaptive_avg_pool1d(x, 1), [u(2, 3, 7)]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, 1), [u(2, 3, 6, 6)]),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, 1), [u(2, 3, 4, 4, 4)]),
    "adaptive_max_pool1d": (lambda x: F.adaptive_max_pool1d(x, 1), [u(2, 3, 8)]),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, (2, 3)), [u(2, 3, 4, 6)]),
    "adaptive_max_pool3d": (lambda x: F.adaptive_max_pool3d(x, 1), [u(2, 3, 4, 4, 4)]),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 2), [u(2, 3, 8)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), [u(2, 3, 6, 6)]),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2), [u(2, 3, 4, 4, 4)]),
    "max_pool1d": (lambda x: F.max_pool1d(x, 2), [u(2, 3, 8)]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1), [u(2, 3, 7, 7)]),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2), [u(2, 3, 4, 4, 4)]),
    "lp_pool1d": (lambda x: F.lp_pool1d(x, 2, 2), [u(2, 3, 8, lo=.1)]),
    "lp_pool2d": (lambda x: F.lp_pool2d(x, 2, 2), [u(2, 3, 6, 6, lo=.1)]),
    "interpolate": (lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), [u(2, 3, 4, 4)]),
    "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), [u(1, 8, 2, 3)]),
    "pixel_unshuffle": (lambda x: F.pixel_unshuffle(x, 2), [u(1, 2, 4, 6)]),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, u(3), u(3, lo=.5, hi=2), w, b),
                   [u(4, 3, 2), u(3), u(3)]),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), [u(2, 4, 3), u(4), u(4)]),
    "instance_norm": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
                      [u(2, 3, 4), u(3), u(3)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (3, 4), w, b), [u(2, 3, 4), u(3, 4), u(3, 4)]),
    "local_response_norm": (lambda x: F.local_response_norm(x, 3), [u(2, 5, 3)]),
    "normalize": (lambda x: F.normalize(x, axis=1), [u(*_X)]),
    "rms_norm": (lambda x, w: F.rms_norm(x, (4,), w), [u(2, 3, 4), u(4)]),
    "embedding": (lambda w: F.embedding(np.array([[0, 2], [4, 1]]), w), [u(5, 3)]),
    "scaled_dot_product_attention": (F.scaled_dot_product_attention,
                                     [u(2, 3, 5, 4), u(2, 3, 6, 4), u(2, 3, 6, 4)]),
    "lstm_cell": (F.lstm_cell, [u(2, 3), u(2, 4), u(2, 4), u(16, 3), u(16, 4), u(16), u(16)]),
    "gru_cell": (F.gru_cell, [u(2, 3), u(2, 4), u(12, 3), u(12, 4), u(12), u(12)]),
    "rnn_tanh_cell": (F.rnn_tanh_cell, [u(2, 3), u(2, 4), u(4, 3), u(4, 4), u(4), u(4)]),
    "rnn_relu_cell": (F.rnn_relu_cell, [u(2, 3), u(2, 4), u(4, 3), u(4, 4), u(4), u(4)]),
    "lstm": (lambda x, a, b, c, d: F.lstm(x, None, [a, b, c, d], training=False),
             [u(5, 2, 3), u(16, 3), u(16, 4), u(16), u(16)]),
    "gru": (lambda x, a, b, c, d: F.gru(x, None, [a, b, c, d], training=False),
            [u(5, 2, 3), u(12, 3), u(12, 4), u(12), u(12)]),
    "rnn_tanh": (lambda x, a, b, c, d: F.rnn_tanh(x, None, [a, b, c, d], training=False),
                 [u(5, 2, 3), u(4, 3), u(4, 4), u(4), u(4)]),
    "rnn_relu": (lambda x, a, b, c, d: F.rnn_relu(x, None, [a, b, c, d], training=False),
                 [u(5, 2, 3), u(4, 3), u(4, 4), u(4), u(4)]),
    "mse_loss": (F.mse_loss, [u(*_X), u(*_X, seed=6)]),
    "l1_loss": (F.l1_loss, [u(*_X), u(*_X, seed=6)]),
    "smooth_l1_loss": (F.smooth_l1_loss, [u(*_X), u(*_X, seed=6)]),
    "huber_loss": (F.huber_loss, [u(*_X), u(*_X, seed=6)]),
    "binary_cross_entropy_with_logits": (F.binary_cross_entropy_with_logits,
                                         [u(*_X), u(*_X, lo=0, hi=1, seed=6)]),
    "binary_cross_entropy": (F.binary_cross_entropy, [u(*_X, lo=.1, hi=.9),
                                                      u(*_X, lo=0, hi=1, seed=6)]),
    "kl_div": (F.kl_div, [u(*_X, lo=-2, hi=-.1), u(*_X, lo=.1, hi=1, seed=6)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, np.array([0, 3, 1])), [u(*_X)]),
    "nll_loss": (lambda x: F.nll_loss(x, np.array([0, 3, 1])), [u(*_X)]),
    "accuracy": (lambda x: F.accuracy(x, np.array([0, 3, 1])), [u(*_X)]),
    **{k: (getattr(F, k), [u(*_X), u(*_X, seed=6)]) for k in
       ("soft_margin_loss", "multilabel_soft_margin_loss")},
    **{k: (lambda a, b, c, k=k: getattr(F, k)(a, b, c), [u(*_X), u(*_X, seed=6), u(*_X, seed=7)])
       for k in ("triplet_margin_loss",)},
    "cosine_embedding_loss": (lambda a, b: F.cosine_embedding_loss(a, b, np.array([1, -1, 1])),
                              [u(*_X), u(*_X, seed=6)]),
    "margin_ranking_loss": (F.margin_ranking_loss, [u(5), u(5, seed=6), np.sign(u(5, seed=7))]),
    "hinge_embedding_loss": (lambda x: F.hinge_embedding_loss(x, np.sign(u(*_X, seed=8))),
                             [u(*_X)]),
    "poisson_nll_loss": (F.poisson_nll_loss, [u(*_X), u(*_X, lo=0, hi=3, seed=6)]),
    "gaussian_nll_loss": (F.gaussian_nll_loss, [u(*_X), u(*_X, seed=6), u(*_X, lo=.5, hi=2)]),
    "multi_margin_loss": (lambda x: F.multi_margin_loss(x, np.array([0, 3, 1])), [u(*_X)]),
    "multilabel_margin_loss": (lambda x: F.multilabel_margin_loss(
        x, np.array([[3, 0, -1, 1], [1, 1, -1, 2], [2, -1, 0, 0]])), [u(*_X)]),
    "dropout2d": (F.dropout2d, [u(2, 4, 3, 3)]), "dropout3d": (F.dropout3d, [u(2, 3, 2, 2, 2)]),
    "dropout1d": (F.dropout1d, [u(2, 4, 5)]),
}
_SKIP = {"pack_padded_sequence": "returns a PackedSequence",
         "pack_sequence": "returns a PackedSequence", "pad_packed_sequence":
         "takes a PackedSequence", "pad_sequence": "takes a list of sequences",
         "multi_head_attention_forward": "covered by nn.MultiheadAttention models",
         "embedding_bag": "bags of variable size", "rrelu": "random (training only)",
         "ctc_loss": "alignment computed outside operators", "max_unpool1d":
         "indices from max pooling", "max_unpool2d": "indices from max pooling",
         "grid_sample": "its pixel indices come from the grid's values, which a trace would "
                        "freeze (ONNX GridSample is not mapped)"}


def probe(name):
    """(function, inputs) for operator ``name`` (the unary default when not listed)."""
    if name in PROBES:
        return PROBES[name]
    return getattr(F, name), [u(*_X)]


def probe_ops(name):
    """The Function class names one call of operator ``name`` runs (its traced graph)."""
    from lezero.core import test_mode
    from lezero.jit.tracer import record
    fn, inputs = probe(name)
    with test_mode():
        rec = record(fn, inputs)
    g = rec.graph
    if not g.nodes and all(g.values[o].kind == "const" for o in g.outputs):
        raise _Untraceable("computed outside Functions (not differentiable)")
    return [n.op for n in g.nodes]


class _Untraceable(Exception):
    pass


def coverage_rows(verify=True):
    """One row per registered operator: {name, category, functions, status, opset,
    onnx} with status "yes", "no", "identity" (no node: dropout in eval) or "n/a".

    With ``verify`` an operator is "yes" only once its probe exported, passed the ONNX
    checker and matched onnxruntime (``onnx.export`` with validation)."""
    from lezero.functions.registry import operators
    from lezero.onnx.registry import load_rules
    rules = load_rules()
    rows = []
    for info in operators():
        row = {"name": info.name, "category": info.category, "functions": [], "opset": "",
               "onnx": [], "status": "n/a", "why": _SKIP.get(info.name, "")}
        if not row["why"]:
            try:
                ops = probe_ops(info.name)
            except _Untraceable as e:
                row["why"] = str(e)
                rows.append(row)
                continue
            except Exception as e:          # not traceable (returns no Variable ...)
                row["why"] = f"not traceable: {type(e).__name__}: {e}"[:80]
                rows.append(row)
                continue
            _fill_row(row, ops, rules)
            if verify and row["status"] == "yes":
                _verify_row(row)
        rows.append(row)
    return rows


def _verify_row(row):
    from lezero.core import test_mode
    from lezero.onnx.exporter import export_bytes
    fn, inputs = probe(row["name"])
    with test_mode():
        try:
            export_bytes(fn, tuple(inputs))
        except Exception as e:
            text = str(e).split("\n")[0]
            row["status"], row["opset"], row["onnx"] = "no", "", []
            row["why"] = re.sub(r"^onnx.export: (node \d+ )?", "", text)[:90]


def _fill_row(row, ops, rules):
    names = list(dict.fromkeys(ops))
    row["functions"] = names
    missing = [n for n in names if n not in rules]
    if not names:
        row["status"] = "identity"
    elif missing:
        row["status"], row["why"] = "no", "no rule for " + ", ".join(missing)
    else:
        row["status"] = "yes"
        row["opset"] = max(rules[n].opset for n in names)
        row["onnx"] = sorted({t for n in names for t in rules[n].emits})


def markdown_table(rows=None):
    rows = coverage_rows() if rows is None else rows
    total = len(rows)
    yes = sum(r["status"] in ("yes", "identity") for r in rows)
    lines = [f"**{yes} of {total} registered operators export** (generated by "
             "`python -m lezero.onnx.coverage_table --markdown docs/onnx.md`).", "",
             "| operator | family | Functions run | exports | min opset | ONNX operators | note |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r['name']}` | {r['category']} | {', '.join(r['functions'])} | "
                     f"{r['status']} | {r['opset']} | {', '.join(r['onnx'])} | {r['why']} |")
    return "\n".join(lines) + "\n\n" + rules_table()


def rules_table():
    """The mapping table itself: Function class -> lowest opset, ONNX operators."""
    from lezero.onnx.registry import load_rules
    rules = load_rules()
    lines = [f"**{len(rules)} Function classes have an ONNX rule:**", "",
             "| Function class | min opset | ONNX operators | note |", "|---|---|---|---|"]
    for name in sorted(rules):
        r = rules[name]
        lines.append(f"| `{name}` | {r.opset} | {', '.join(r.emits)} | {r.notes} |")
    return "\n".join(lines) + "\n"


_MARK = re.compile(r"(<!-- coverage:start -->\n).*?(<!-- coverage:end -->)", re.S)


def update_markdown(path, table=None):
    """Replace the table between the markers in ``path`` (atomically)."""
    from lezero.utils.files import atomic_write
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not _MARK.search(text):
        raise ValueError(f"{path}: no <!-- coverage:start --> ... <!-- coverage:end --> markers")
    table = markdown_table() if table is None else table
    atomic_write(path, _MARK.sub(lambda m: m.group(1) + table + m.group(2), text),
                 where="onnx coverage table")


def main(argv=None):
    parser = argparse.ArgumentParser(description="LeZero ONNX export coverage")
    parser.add_argument("--markdown", metavar="PATH", help="rewrite the table in PATH")
    args = parser.parse_args(argv)
    if args.markdown:
        update_markdown(args.markdown)
    rows = coverage_rows()
    for status in ("yes", "identity", "no", "n/a"):
        print(f"{status:<10}{sum(r['status'] == status for r in rows):>5}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
