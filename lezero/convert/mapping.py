"""Matching a checkpoint's keys to a model's: what maps, what is missing or unexpected,
which shapes disagree.

A key maps when the model has it as it is, or after one of the harmless differences
checkpoints show in practice:

* a wrapper's prefix on every key: ``module.`` (DataParallel / DistributedDataParallel),
  ``_orig_mod.`` (``torch.compile``), or any other first component the model lacks (a
  Hugging Face base model saved inside a task model: ``bert.``, ``transformer.``);
* a prefix the model has and the checkpoint lacks (a ``GPT2Model`` checkpoint into
  ``GPT2LMHeadModel``: ``h.0...`` -> ``transformer.h.0...``);
* a legacy name the reference library itself still renames on load (``RENAMES``).

Keys the reference libraries keep as recomputed buffers (GPT-2's ``attn.bias`` causal
masks, BERT's ``position_ids``, LLaMA's ``rotary_emb.inv_freq``) are *ignored* rather than
unexpected when the model has no such key, and a model key that shares its parameter with
a mapped one (tied embeddings) is *tied*, not missing.  A batch norm's
``num_batches_tracked`` absent from a checkpoint (files older than PyTorch 0.4.1 have
none) is *defaulted* (kept at 0, as PyTorch's own loader does), not missing.
"""
import re

__all__ = ["RENAMES", "IGNORED", "Report", "match_keys"]

# (pattern, replacement, why): applied to a checkpoint key the model does not have.
RENAMES = [
    (re.compile(r"^(.*denselayer\d+\.(?:norm|relu|conv))\.([12])\.(weight|bias|running_mean|"
                r"running_var)$"), r"\1\2.\3",
     "torchvision DenseNet checkpoints name norm1 'norm.1'"),
    (re.compile(r"^(.*\.mlp)\.linear_1\.(weight|bias)$"), r"\1.0.\2",
     "torchvision ViT's MLPBlock before version 2"),
    (re.compile(r"^(.*\.mlp)\.linear_2\.(weight|bias)$"), r"\1.3.\2",
     "torchvision ViT's MLPBlock before version 2"),
]

# Buffers reference implementations store but recompute; ignored when the model lacks them.
IGNORED = [re.compile(p) for p in (r"(^|\.)attn\.(masked_)?bias$", r"(^|\.)position_ids$",
                                   r"(^|\.)rotary_emb\.inv_freq$", r"(^|\.)num_batches_tracked$")]

WRAPPER_PREFIXES = ("module.", "_orig_mod.")


class Report:
    """The outcome of matching: ``mapped`` ({checkpoint key: model key}), ``renamed``
    ({checkpoint key: why}, for the mapped keys whose names changed), ``missing`` (model
    keys nothing maps to), ``unexpected`` (checkpoint keys that map to nothing),
    ``ignored``, ``tied``, ``defaulted`` and ``mismatched`` ([(model key, checkpoint
    shape, model shape)])."""

    def __init__(self):
        self.mapped, self.renamed = {}, {}
        self.missing, self.unexpected, self.ignored, self.tied = [], [], [], []
        self.defaulted = []
        self.mismatched = []

    @property
    def ok(self):
        return not (self.missing or self.unexpected or self.mismatched)

    def as_dict(self):
        return {"mapped": len(self.mapped), "renamed": self.renamed, "missing": self.missing,
                "unexpected": self.unexpected, "ignored": self.ignored, "tied": self.tied,
                "defaulted": self.defaulted,
                "mismatched": [[k, list(a), list(b)] for k, a, b in self.mismatched]}

    def summary(self):
        """One line of counts."""
        return (f"mapped {len(self.mapped)} keys ({len(self.renamed)} renamed, "
                f"{len(self.tied)} tied, {len(self.ignored)} ignored), missing "
                f"{len(self.missing)}, unexpected {len(self.unexpected)}, shape mismatches "
                f"{len(self.mismatched)}")

    def details(self, limit=20):
        """The lines naming what did not map (at most ``limit`` per kind)."""
        lines = []
        for title, items in (("missing (kept as initialised)", self.missing),
                             ("unexpected (dropped)", self.unexpected),
                             ("shape mismatch (checkpoint vs model)",
                              [f"{k}: {tuple(a)} vs {tuple(b)}" for k, a, b in self.mismatched]),
                             ("ignored", self.ignored), ("tied", self.tied),
                             ("defaulted (num_batches_tracked kept at 0)", self.defaulted)):
            if items:
                lines.append(f"{title}: {len(items)}")
                lines += [f"  {item}" for item in items[:limit]]
                if len(items) > limit:
                    lines.append(f"  ... and {len(items) - limit} more")
        return lines + self._renames()

    def _renames(self, examples=2):
        """The renamed keys grouped by why, with a few examples each."""
        by_reason = {}
        for key, why in self.renamed.items():
            by_reason.setdefault(why, []).append(key)
        lines = [f"renamed: {len(self.renamed)}"] if self.renamed else []
        for why, keys in by_reason.items():
            shown = ", ".join(f"{k} -> {self.mapped[k]}" for k in keys[:examples])
            more = ", ..." if len(keys) > examples else ""
            lines.append(f"  {len(keys)} by {why}: {shown}{more}")
        return lines


def _strip_wrappers(keys):
    """The wrapper prefix every key carries (``module.`` ...), or ''."""
    for prefix in WRAPPER_PREFIXES:
        if keys and all(k.startswith(prefix) for k in keys):
            return prefix
    return ""


def _candidates(key, heads):
    """Model keys ``key`` may stand for, in order of preference (``heads``: the first
    components of the model's keys, for adding a missing prefix)."""
    yield key, None
    first, _, rest = key.partition(".")
    if rest:
        yield rest, f"prefix {first + '.'!r} dropped"
    for head in heads:
        yield f"{head}.{key}", f"prefix {head + '.'!r} added"
    for pattern, replacement, why in RENAMES:
        if pattern.match(key):
            yield pattern.sub(replacement, key), why


def _shared_groups(model_params):
    """Model keys grouped by the parameter object they hold (tied weights)."""
    groups = {}
    for key, value in model_params.items():
        groups.setdefault(id(value), []).append(key)
    return [keys for keys in groups.values() if len(keys) > 1]


def match_keys(source_shapes, model_shapes, model_params=None):
    """Match checkpoint keys (``{key: shape}``) to model keys (``{key: shape}``);
    ``model_params`` (``state_dict(keep_vars=True)``) reveals tied parameters.  Returns
    a ``Report``."""
    report = Report()
    wrapper = _strip_wrappers(list(source_shapes))
    heads = sorted({k.split(".", 1)[0] for k in model_shapes if "." in k})
    taken = set()
    for key, shape in source_shapes.items():
        plain = key[len(wrapper):]
        for target, why in _candidates(plain, heads):
            if target in model_shapes and target not in taken:
                taken.add(target)
                report.mapped[key] = target
                if target != key:
                    report.renamed[key] = why or f"wrapper prefix {wrapper!r} dropped"
                if tuple(model_shapes[target]) != tuple(shape):
                    report.mismatched.append((target, tuple(shape), tuple(model_shapes[target])))
                break
        else:
            (report.ignored if any(p.search(plain) for p in IGNORED)
             else report.unexpected).append(key)
    for group in _shared_groups(model_params or {}):
        if any(k in taken for k in group):
            report.tied += [k for k in group if k not in taken]
            taken.update(group)
    absent = [k for k in model_shapes if k not in taken]
    report.defaulted = [k for k in absent if k.endswith("num_batches_tracked")]
    report.missing = [k for k in absent if not k.endswith("num_batches_tracked")]
    return report
