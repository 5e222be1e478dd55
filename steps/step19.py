"""Step 19: one code path for CPU and GPU.

Operators ask ``lz.cuda.get_array_module(x)`` for ``numpy`` or ``cupy`` and use ``xp.*``;
``Variable.to_gpu()`` / ``to_cpu()`` move data.  CuPy is imported only when asked for.
Run: python steps/step19.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F

print("CUDA device available:", lz.cuda.is_available())
x = lz.Variable(np.linspace(-1, 1, 5))
if lz.cuda.is_available():
    x.to_gpu()
xp = lz.cuda.get_array_module(x)
y = (F.tanh(x) ** 2).sum()
y.backward()
print("array module:", xp.__name__, "| device:", lz.cuda.device_of(x))
print("gradient:", np.round(lz.cuda.as_numpy(x.grad.data), 5))
