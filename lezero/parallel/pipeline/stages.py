"""Pipeline stages: cut an ``nn.Sequential`` into consecutive pieces, or take modules.

A stage cut from a Sequential keeps its layers under their original names ("3", "4"...),
so its ``state_dict`` keys are the whole model's keys: the stages' state dicts together
are the model's, and a dense checkpoint loads into the stages key by key.

``balance``: the number of layers in each stage; by default layers are spread so the
stages' parameter counts are as even as a contiguous cut allows (each stage at least one
layer).
"""
from lezero.nn.module import Module
from lezero.utils.checks import check_int


class SequentialStage(Module):
    """Layers of a Sequential run in order, registered under their original names."""

    def __init__(self, named_layers):
        super().__init__()
        for name, layer in named_layers:
            self.add_module(name, layer)

    def forward(self, x):
        for layer in self._modules.values():
            x = layer(x)
        return x


def _even_cut(sizes, n):
    """Boundaries of ``n`` contiguous non-empty groups of ``sizes`` whose sums are as
    near ``total / n`` as a cut allows (each boundary placed nearest its share)."""
    prefix = [0]
    for s in sizes:
        prefix.append(prefix[-1] + s)
    total, bounds = prefix[-1], [0]
    for k in range(1, n):
        lo, hi = bounds[-1] + 1, len(sizes) - (n - k)
        target = total * k / n
        bounds.append(min(range(lo, hi + 1), key=lambda b: (abs(prefix[b] - target), b)))
    bounds.append(len(sizes))
    return bounds


def split_sequential(model, n, balance=None):
    """``n`` SequentialStages cut from the Sequential ``model``."""
    where = "Pipeline"
    layers = list(model._modules.items())
    if len(layers) < n:
        raise ValueError(f"{where}: cannot cut a Sequential of {len(layers)} layers into {n} "
                         "stages (each stage needs at least one layer)")
    if balance is not None:
        if not isinstance(balance, (list, tuple)) or len(balance) != n:
            raise ValueError(f"{where}: balance must list the layer count of each of the {n} "
                             f"stages, got {balance!r}")
        counts = [check_int(where, f"balance[{i}]", b, 1) for i, b in enumerate(balance)]
        if sum(counts) != len(layers):
            raise ValueError(f"{where}: balance {list(counts)} covers {sum(counts)} layers, "
                             f"the Sequential has {len(layers)}")
        bounds = [0]
        for c in counts:
            bounds.append(bounds[-1] + c)
    else:
        sizes = [sum(p.size for p in layer.parameters()) for _, layer in layers]
        bounds = _even_cut(sizes, n)
    return [SequentialStage(layers[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def as_stages(stages, n, balance=None):
    """The list of ``n`` stage modules from a Sequential (cut) or a list of modules."""
    from lezero.nn import Sequential
    if isinstance(stages, Sequential):
        return split_sequential(stages, n, balance)
    if balance is not None:
        raise ValueError("Pipeline: balance applies when stages is an nn.Sequential to cut")
    if not isinstance(stages, (list, tuple)) or not all(isinstance(s, Module) for s in stages):
        raise TypeError("Pipeline: stages must be an nn.Sequential (cut into stages) or a "
                        f"list of Modules, got {type(stages).__name__}")
    if len(stages) != n:
        raise ValueError(f"Pipeline: got {len(stages)} stages for {n} pipeline stages "
                         "(ranks x chunks)")
    return list(stages)
