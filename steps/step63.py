"""Step 63: a file is data, never code.

A model file you download may have been written by anyone.  LeZero's loaders therefore:

* name what they accept (an allow-list of classes and dtypes) and refuse the rest, so a
  pickle that asks for ``os.system`` is an error, not a command;
* check every declared size and shape against what is really there *before* using it, so
  a saved optimizer state or a packed sequence that lies about its shape is refused
  instead of letting a kernel read memory it does not own;
* raise one error type per format, all ``lz.FileFormatError`` (a ``ValueError``), naming
  the file and what is wrong.

This step builds four hostile inputs by hand and watches each one be refused.
Run: python steps/step63.py
"""
import os
import pickle
import tempfile
import zipfile

import numpy as np

import lezero as lz
from lezero import nn, optim
from lezero.nn.utils.rnn import PackedSequence

folder = tempfile.mkdtemp()
marker = os.path.join(folder, "ran")


class Payload:
    """Pickles as a call of ``os.system``: what a malicious ``.pt`` file holds."""

    def __reduce__(self):
        return os.system, (f"touch {marker}",)


# 1. A ".pt" whose pickle calls os.system: PyTorch's zip layout, with our payload inside.
evil_pt = os.path.join(folder, "weights.pt")
with zipfile.ZipFile(evil_pt, "w") as z:
    z.writestr("archive/data.pkl", pickle.dumps({"weight": Payload()}, protocol=2))
try:
    lz.load(evil_pt)
except lz.FileFormatError as e:
    print("1. refused:", type(e).__name__, "-", str(e)[:110])
print("   the command ran:", os.path.exists(marker))

# 2. A compressed member that would inflate far past the file's size (a "zip bomb").
bomb = os.path.join(folder, "bomb.npz")
with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
    with z.open("w.npy", "w") as member:
        np.lib.format.write_array_header_1_0(
            member, {"descr": "<f4", "fortran_order": False, "shape": (8 << 20,)})
        member.write(bytes(32 << 20))          # 32 MB of zeros: a few KB compressed
print(f"2. {os.path.getsize(bomb)} bytes on disk, declaring {32 << 20} bytes")
try:
    lz.load(bomb)
except lz.FileFormatError as e:
    print("   refused:", type(e).__name__, "-", str(e)[:110])

# 3. A resumed optimizer state whose buffer does not have its parameter's shape: the
#    Adam kernel would walk the (300, 300) parameter over a (1, 300) buffer.
w = lz.Parameter(np.zeros((300, 300), np.float32))
w.grad = lz.Variable(np.ones((300, 300), np.float32))
opt = optim.Adam([w], lr=1e-3)
opt.step()
state = opt.state_dict()
state["state"][0]["exp_avg"] = np.zeros((1, 300), np.float32)
try:
    optim.Adam([w], lr=1e-3).load_state_dict(state)
except ValueError as e:
    print("3. refused:", str(e)[:120])

# 4. A packed sequence whose batch sizes claim more rows than its data holds.
lstm = nn.LSTM(4, 8)
data = np.zeros((5, 4), np.float32)
try:
    lstm(PackedSequence(lz.Variable(data), np.array([3, 3, 3])))
except ValueError as e:
    print("4. refused:", str(e)[:120])

for name in os.listdir(folder):
    os.remove(os.path.join(folder, name))
os.rmdir(folder)
