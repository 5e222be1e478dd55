"""Step 18: configuration is per thread.

``lz.Config`` lives in a context variable: a serving thread running under ``no_grad`` or
``test_mode`` does not change what the training thread sees.
Run: python steps/step18.py
"""
import threading

import numpy as np

import lezero as lz

results = {}


def serve():
    with lz.no_grad(), lz.test_mode():
        results["server sees enable_backprop"] = lz.Config.enable_backprop
        results["server sees train"] = lz.Config.train


t = threading.Thread(target=serve)
t.start()
t.join()
x = lz.Variable(np.array(1.0))
y = x * 2
results["trainer sees enable_backprop"] = lz.Config.enable_backprop
results["trainer still records graphs"] = y.creator is not None
for k, v in results.items():
    print(f"{k:<32} {v}")
