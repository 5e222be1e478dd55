"""Step 16: hooks. Watch and change gradients; time every operator.

* ``v.register_hook(fn)`` calls ``fn(grad)`` when v's gradient is known; returning a value
  replaces it (here: gradient clipping on one tensor).  ``handle.remove()`` undoes it.
* ``p.register_post_accumulate_grad_hook(fn)`` runs once ``p.grad`` is complete (data
  parallelism starts each bucket's allreduce there).
* ``lz.TimerHook`` records calls and time per Function class.
Run: python steps/step16.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F

x = lz.Variable(np.array([1.0, -2.0, 3.0]))
h = x * 10
handle = h.register_hook(lambda g: F.tanh(g))        # squash this gradient
(h * h).sum().backward()
print("gradient through a squashing hook:", np.round(x.grad.data, 4))
handle.remove()

w = lz.Parameter(np.ones(3))
w.register_post_accumulate_grad_hook(lambda p: print("w.grad is complete:", p.grad.data))
(F.exp(w) * 2 + w).sum().backward()

a = lz.Variable(np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32))
with lz.TimerHook() as timer:
    for _ in range(5):
        y = F.tanh(a @ a).sum()
        y.backward()
timer.print_report()
