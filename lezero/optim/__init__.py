"""Optimizers and learning-rate schedulers with PyTorch's names, arguments and updates.

    opt = optim.Adam(model.parameters(), lr=1e-3)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
    for x, t in loader:
        opt.zero_grad(); loss = F.cross_entropy(model(x), t); loss.backward(); opt.step()
    sched.step()
"""
from lezero.optim import lr_scheduler
from lezero.optim.adam import Adam, Adamax, AdamW, NAdam
from lezero.optim.adaptive import Adadelta, Adagrad, RMSprop
from lezero.optim.lbfgs import LBFGS
from lezero.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_
from lezero.optim.lion import Lion
from lezero.optim.optimizer import Optimizer
from lezero.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "NAdam", "Lion", "LBFGS", "lr_scheduler", "clip_grad_norm_", "clip_grad_value_"]
