"""Step 65: a backend for a new chip.

Operators never name NumPy or CuPy: they ask ``lezero.backends`` for the backend of their
inputs and use its array namespace ``xp`` and a few hooks (``from_host``, ``to_host``,
``rng``, ``scatter_add``, ...).  So a new chip plugs in as one ``Backend`` object:

1. the least a chip needs is three hooks -- its array type, ``from_host`` and ``to_host``;
   every NumPy function it lacks then runs on the host (device -> NumPy -> device), with
   a warning once and a count, so the whole framework runs before one kernel is written;
2. a chip built on the strict device's memory (a ``StrictArray`` subclass) gets a full
   device namespace, and here a policy of its own: it has no float64 units, so a float64
   array is refused wherever it would appear;
3. LeNet-5 trains on it (``model.to_device("tinychip")``), and one steady-state step
   goes to the host exactly once: ``loss.item()``.

Packaged, a backend is found through the entry-point group ``lezero.backends``
(examples/backend_plugin, docs/backends.md).
Run: python steps/step65.py
"""
import warnings

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import backends, cuda, optim
from lezero.backends.strict import StrictArray, StrictBackend
from lezero.nn.models import LeNet5

# ----- 1. three hooks: everything else on the host ------------------------------------------


class BoxArray:
    """A 'device' array: the chip's memory, here a private NumPy copy."""

    def __init__(self, host):
        self.memory = np.array(host)
        self.shape, self.dtype = self.memory.shape, self.memory.dtype


class Box(backends.Backend):
    def __init__(self):
        super().__init__("box", xp=None, array_types=(BoxArray,))

    def from_host(self, array, device=None):
        return BoxArray(array)

    def to_host(self, array):
        return array.memory.copy()


box = backends.register(Box())
a = box.from_host(np.linspace(0.0, 1.0, 4))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    y = box.xp.exp(box.xp.multiply(a, 2.0))
print("box: exp(2a) =", np.round(box.to_host(y), 4), "| host fallbacks:", box.fallback_counts)
print("  warning:", caught[0].message)

# ----- 2. a float32-only chip on the strict device's memory ----------------------------------


class TinyArray(StrictArray):
    """Refuses float64 at creation: uploads and results alike."""

    __slots__ = ()

    def __init__(self, array):
        if array.dtype == np.float64:
            raise TypeError("tinychip: no float64 on this device")
        super().__init__(array)


chip = backends.register(StrictBackend(
    "tinychip", kind=TinyArray,
    capabilities=backends.Capabilities(dtypes=("bool", "int64", "float16", "float32"))))
print("\nbackends now:", backends.available())
try:
    chip.from_host(np.ones(2))
except TypeError as e:
    print("float64 upload refused:", e)

# ----- 3. LeNet-5 on the chip ------------------------------------------------------------------
lz.manual_seed(0)
rng = np.random.default_rng(0)
model = LeNet5(input_size=28).to_device("tinychip")
x = cuda.to_device(rng.standard_normal((16, 1, 28, 28)).astype(np.float32), "tinychip")
t = cuda.to_device(rng.integers(0, 10, 16), "tinychip")
opt = optim.Adam(model.parameters(), lr=3e-3)


def step():
    loss = F.cross_entropy(model(x), t)
    model.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


losses = [step()]
with chip.count_transfers() as counts:
    losses.append(step())
losses += [step() for _ in range(6)]
weight = next(model.parameters())
print("\nLeNet-5 on", cuda.device_of(weight), "| parameters:", type(weight.data).__name__)
print("loss:", " -> ".join(f"{v:.3f}" for v in losses))
print("host round trips in one step:", counts, "at", [s.split(" at ")[0] for s in counts.sites])
