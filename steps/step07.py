"""Step 7: memory. Weak references, dropped intermediate gradients, and no_grad.

From here on the steps use the real package (``lezero.core`` holds these ideas):
  * a Function holds its outputs through ``weakref``: the graph has no reference cycle,
    so it is freed by reference counting the moment the output is dropped;
  * backward forgets intermediate gradients unless ``retain_grad=True``;
  * ``lz.no_grad()`` skips recording the graph altogether (inference).
Run: python steps/step07.py
"""
import gc
import tracemalloc

import numpy as np

import lezero as lz
import lezero.functions as F

x = lz.Variable(np.random.default_rng(0).standard_normal(1_000_000).astype(np.float32))

gc.disable()          # prove that reference counting alone frees every graph
tracemalloc.start()
for i in range(10):
    y = F.exp(F.tanh(x) * 2).sum()
    y.backward()
    x.cleargrad()
    if i in (1, 9):
        print(f"iteration {i}: traced memory {tracemalloc.get_traced_memory()[0] / 1e6:.1f} MB")
tracemalloc.stop()
gc.enable()

h = x * 2
y = (h * h).sum()
y.backward()
print("intermediate h.grad after backward:", h.grad, "(dropped)")
y = ((x * 2) ** 2).sum()
y.backward(retain_grad=True)
print("with retain_grad=True the output keeps y.grad =", y.grad)

with lz.no_grad():
    z = x * 2
print("under no_grad, z.creator =", z.creator)
