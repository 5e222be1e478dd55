# %% [markdown]
# # 20. A file is data, never code
#
# This notebook follows `steps/step63.py`. Weights, saved graphs and datasets are often
# downloaded from strangers, so LeZero treats every file as hostile until checked:
#
# * a loader names what it accepts (classes, dtypes, operators, links) and refuses the rest;
# * every declared size, offset and shape is checked against the bytes that are really
#   there before anything is allocated, inflated or handed to a kernel;
# * each format raises one error type, a subclass of `lz.FileFormatError` (a `ValueError`),
#   whose message names the file.
#
# We craft four hostile files by hand and watch each one be refused. `docs/security.md`
# lists every guarantee and how to report one that does not hold.

# %%
import json
import os
import pickle
import tempfile
import zipfile

import numpy as np
import lezero as lz
import lezero.functions as F
from lezero import jit

folder = tempfile.mkdtemp()
marker = os.path.join(folder, "ran")

# %% [markdown]
# ## A `.pt` whose pickle calls `os.system`
# A PyTorch checkpoint is a zip holding a pickle, and a pickle can name any function to
# call while it loads. `lz.load` reads it with an unpickler that knows only tensors,
# containers and numbers.

# %%
class Payload:
    def __reduce__(self):
        return os.system, (f"touch {marker}",)


evil_pt = os.path.join(folder, "weights.pt")
with zipfile.ZipFile(evil_pt, "w") as z:
    z.writestr("archive/data.pkl", pickle.dumps({"fc.weight": Payload()}, protocol=2))
try:
    lz.load(evil_pt)
except lz.FileFormatError as e:
    print(type(e).__name__, ":", e)
print("the command ran:", os.path.exists(marker))

# %% [markdown]
# ## A saved graph that names `subprocess.Popen`
# A `.lzg` file (`jit.trace(...).save`) is JSON plus weights. Its JSON records Python
# values such as named tuples; a loader that imported the module a file names would run
# whatever the file asks for. `jit.load` rebuilds named tuples from their field names and
# accepts only LeZero's own operators and two geometry types.

# %%
graph = jit.trace(lambda x: F.relu(x * 2.0), np.ones((2, 3), np.float32))
good = graph.save(os.path.join(folder, "good.lzg"))
with zipfile.ZipFile(good) as z:
    doc, weights = json.loads(z.read("graph.json")), z.read("weights.safetensors")
doc["out_tree"] = {"$namedtuple": "Popen", "module": "subprocess",
                   "fields": {"args": ["touch", marker]}}
evil_lzg = os.path.join(folder, "evil.lzg")
with zipfile.ZipFile(evil_lzg, "w") as z:
    z.writestr("graph.json", json.dumps(doc))
    z.writestr("weights.safetensors", weights)
try:
    jit.load(evil_lzg)
except lz.FileFormatError as e:
    print(type(e).__name__, ":", str(e)[:200])
print("the command ran:", os.path.exists(marker))

# %% [markdown]
# ## A tiny file that declares a huge array
# A compressed `.npz` member of 32 MB of zeros takes a few kilobytes on disk. Every
# loader charges what a file declares to a budget of `MAX_INFLATION` (100) times the
# file's size plus 1 MiB before inflating anything; a trusted file that compresses
# better can pass `max_inflation=`.

# %%
bomb = os.path.join(folder, "bomb.npz")
with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
    with z.open("w.npy", "w") as member:
        np.lib.format.write_array_header_1_0(
            member, {"descr": "<f4", "fortran_order": False, "shape": (8 << 20,)})
        member.write(bytes(32 << 20))
print("bytes on disk:", os.path.getsize(bomb))
try:
    lz.load(bomb)
except lz.FileFormatError as e:
    print(type(e).__name__, ":", e)
print("with max_inflation=2000:", lz.load(bomb, max_inflation=2000)["w"].shape)

# %% [markdown]
# ## An HDF5 file whose dataset reads another file
# HDF5 can store a dataset's bytes in *external* files, any path the writer chose. A
# loader that followed it would hand you the bytes of a local file (a password file, an
# SSH key) as a weight. LeZero refuses external storage, virtual datasets and every link
# but a hard link inside the file.

# %%
import h5py

secret = os.path.join(folder, "secret.txt")
with open(secret, "w") as f:
    f.write("not for you\n" * 4)
evil_h5 = os.path.join(folder, "weights.h5")
with h5py.File(evil_h5, "w") as f:
    f.create_dataset("fc.weight", shape=(48,), dtype="u1", external=[(secret, 0, 48)])
try:
    lz.load(evil_h5)
except lz.FileFormatError as e:
    print(type(e).__name__, ":", e)

# %% [markdown]
# ## One family of errors
# Each format has its own error type, and all of them are `lz.FileFormatError`, so an
# application that loads user files can catch one class and show the message, which
# names the file.

# %%
from lezero.jit import GraphFormatError
from lezero.onnx import OnnxImportError
from lezero.utils.serialization import HDF5FormatError, NpzFormatError, SafetensorsError
from lezero.utils.torch_pickle import TorchFileError

for cls in (TorchFileError, SafetensorsError, NpzFormatError, HDF5FormatError,
            GraphFormatError, OnnxImportError):
    print(f"{cls.__name__:18s} is a FileFormatError: {issubclass(cls, lz.FileFormatError)}")

for name in os.listdir(folder):
    os.remove(os.path.join(folder, name))
os.rmdir(folder)
