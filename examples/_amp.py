"""``--amp`` and ``--checkpoint`` for the examples: mixed precision and recomputation.

    p = make_parser(...); add_memory_flags(p)
    mp = Precision(args, model)           # applies --checkpoint to the model's blocks
    with mp.autocast():
        loss = ...
    mp.backward(loss)                      # scaler.scale(loss).backward() under float16
    mp.step(opt, scheduler=sched, clip=1.0)   # unscale_, clip, step (skipped on inf/NaN)

``--amp`` (float16, or ``--amp bfloat16``) runs the forward pass and the loss under
``lezero.amp.autocast`` with a ``GradScaler`` for float16.  ``--checkpoint`` recomputes
the model's repeated blocks in backward: the largest Sequential (in sqrt(n) segments) or
every block of the largest ModuleList.  See docs/amp.md and docs/checkpoint.md.
"""
import lezero as lz
from lezero import amp, nn, optim


def add_memory_flags(parser):
    parser.add_argument("--amp", nargs="?", const="float16", default=None,
                        choices=("float16", "bfloat16"),
                        help="mixed precision: autocast to this dtype (float16 when given "
                             "alone) with loss scaling for float16")
    parser.add_argument("--checkpoint", action="store_true",
                        help="gradient checkpointing: recompute the repeated blocks in "
                             "backward instead of keeping their activations")
    return parser


def _containers(model):
    """The outermost Sequential/ModuleList containers with the most children."""
    found = [(name, m) for name, m in model.named_modules()
             if isinstance(m, (nn.Sequential, nn.ModuleList)) and len(list(m.children())) > 1]
    if not found:
        return []
    most = max(len(list(m.children())) for _, m in found)
    top = [(n, m) for n, m in found if len(list(m.children())) == most]
    return [(n, m) for n, m in top
            if not any(n != o and n.startswith(o + ".") for o, _ in top)]


def checkpoint_blocks(model):
    """Checkpoint ``model``'s repeated blocks in place; returns their names."""
    names = []
    for name, container in _containers(model):
        children = list(container.children())
        if isinstance(container, nn.Sequential):
            container.forward = lz.checkpoint_sequential(children, "sqrt")
        else:
            for child in children:
                child.forward = lz.checkpoint(child.forward)
        names.append(name or type(model).__name__)
    return names


class Precision:
    """What ``--amp`` and ``--checkpoint`` change in a training step."""

    def __init__(self, args, model):
        self.dtype = getattr(args, "amp", None)
        self.scaler = amp.GradScaler(enabled=self.dtype == "float16")
        self.skipped = 0
        if getattr(args, "checkpoint", False):
            print("checkpointing:", ", ".join(checkpoint_blocks(model)))
        if self.dtype:
            print(f"mixed precision: autocast({self.dtype})"
                  + (" with loss scaling" if self.scaler.is_enabled() else ""))

    def autocast(self):
        return amp.autocast(self.dtype or "float16", enabled=self.dtype is not None)

    def backward(self, loss):
        self.scaler.scale(loss).backward()

    def step(self, optimizer, scheduler=None, clip=None, parameters=None):
        """Unscale, clip (``clip``: max norm of ``parameters``), step and update."""
        if clip is not None:
            self.scaler.unscale_(optimizer)
            optim.clip_grad_norm_(parameters, clip)
        result = self.scaler.step(optimizer, scheduler=scheduler)
        self.scaler.update()
        self.skipped += not result.stepped
        return result

    def state(self):
        """{name: object} for the checkpointed state (the scaler, under float16)."""
        return {"grad_scaler": self.scaler} if self.scaler.is_enabled() else {}
