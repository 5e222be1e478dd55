"""Helpers shared by the detection, segmentation, speech, diffusion, graph, RL and
contrastive examples (on top of ``_common``): a progress bar, a one-cycle schedule and
weight averaging."""
import time

import numpy as np

from lezero import optim

import _common


def progress(iterable=None, total=None, desc=None):
    """A bar on stderr, on a terminal only and never under --smoke (``_common.bar``)."""
    return _common.bar(iterable, total=total, desc=desc, leave=False)


def one_cycle(opt, total_steps, warmup=0.05):
    """Linear warm-up over ``warmup`` of the steps, then cosine decay to zero; stepped
    once per batch."""
    warm = max(1, int(total_steps * warmup))

    def factor(step):
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + np.cos(np.pi * min(1.0, (step - warm) / max(1, total_steps - warm))))
    return optim.lr_scheduler.LambdaLR(opt, factor)


class EMA:
    """An exponential moving average of a model's parameters and buffers (YOLOv5's
    ``ModelEMA``): ``decay`` ramps up from 0 over the first ~``ramp`` updates, so early
    weights do not linger.  ``swap()`` exchanges the averaged and the live weights (call
    it before and after evaluating)."""

    def __init__(self, model, decay=0.999, ramp=200):
        self.model, self.decay, self.ramp, self.updates = model, decay, ramp, 0
        self.shadow = {k: v.copy() for k, v in model.state_dict().items()}

    def update(self):
        self.updates += 1
        d = self.decay * (1 - np.exp(-self.updates / self.ramp))
        for k, v in self.model.state_dict().items():
            if v.dtype.kind == "f":
                self.shadow[k] *= d
                self.shadow[k] += (1 - d) * v
            else:
                self.shadow[k] = v.copy()

    def swap(self):
        live = {k: v.copy() for k, v in self.model.state_dict().items()}
        self.model.load_state_dict(self.shadow)
        self.shadow = live

    # saved with the schedulers by ``fit``, so --resume continues the average too
    def state_dict(self):
        return {"updates": self.updates, "shadow": dict(self.shadow)}

    def load_state_dict(self, state):
        self.updates = int(state["updates"])
        self.shadow = {k: np.array(v) for k, v in state["shadow"].items()}


def train_step(opt, loss, scheduler=None, clip=None, ema=None):
    """One optimisation step on ``loss``: zero the gradients, backpropagate, clip their
    global norm to ``clip`` (if given), step the optimizer, then the per-batch scheduler
    and the weight average; returns the loss as a float."""
    opt.zero_grad()
    loss.backward()
    if clip is not None:
        optim.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], clip)
    opt.step()
    if scheduler is not None:
        scheduler.step()
    if ema is not None:
        ema.update()
    return loss.item()


def timed_fit(args, model, opt, train_epoch, evaluate=None, schedulers=None):
    """``_common.fit`` for one model and one optimizer; returns ``(history, seconds)``."""
    t0 = time.perf_counter()
    history = _common.fit(args, {"model": model}, {"optimizer": opt}, train_epoch, evaluate,
                          schedulers)
    return history, time.perf_counter() - t0


def shapes_parser(name, description, epochs, batch_size, lr, train_images, test_images):
    """The flags of the generated-shapes examples (image size and set sizes added)."""
    p = _common.make_parser(name, description, epochs, batch_size, lr)
    p.add_argument("--image-size", type=int, default=64, help="image side (a multiple of 16)")
    p.add_argument("--train-images", type=int, default=train_images)
    p.add_argument("--test-images", type=int, default=test_images)
    return p
