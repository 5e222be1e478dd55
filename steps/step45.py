"""Step 45: mixed precision: float16 where it is safe, float32 where it matters.

float16 keeps 11 significant bits and tops out at 65504; a product of two such numbers
is accurate enough for a matmul, but a sum of a thousand of them, an exp, or a loss is
not.  ``amp.autocast()`` decides per operator (``print(amp.cast_policy)``): matmuls,
linear layers and convolutions get float16 inputs, softmax, losses and reductions get
float32, binary ops take the wider of their inputs.  The decision is a ``Cast`` Function
in the graph, so the float32 parameters ("master weights") receive float32 gradients.
Small gradients would flush to zero in float16: ``GradScaler`` multiplies the loss by a
large scale, divides the gradients back before the step, and skips the step (halving the
scale) when a gradient overflowed.  On NumPy float16 arithmetic runs in float32 and is
rounded (NumPy has no float16 BLAS): the saving is memory, measured here.
Run: python steps/step45.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import amp, nn, optim
from lezero.data.datasets import Digits
from lezero.nn.models import LeNet5

lz.manual_seed(0)
lin = nn.Linear(4, 3)
x = lz.Variable(np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32))
with amp.autocast():
    h = lin(x)                      # lower precision
    p = F.softmax(h, axis=1)        # float32
    s = h + lin.bias                # widest of float16 and float32
print(f"linear -> {h.dtype}, softmax -> {p.dtype}, float16 + float32 -> {s.dtype}")
print("the linear layer's inputs were cast:", [type(v.creator).__name__ for v in h.creator.inputs])
p.sum().backward()
print(f"the weight stays {lin.weight.dtype} and its gradient is {lin.weight.grad.dtype}")

# Why a loss scale: a gradient of 1e-8 is zero in float16, 1e-8 * 2**16 is not.
print("1e-8 in float16:", np.float16(1e-8), "| scaled by 2**16:", np.float16(1e-8 * 2 ** 16))

# Train LeNet on the digits in float32 and in mixed precision from the same seed.
train, test = Digits(train=True), Digits(train=False)
x_tr, t_tr, x_te, t_te = train.data[:, None], train.targets, test.data[:, None], test.targets


def train_lenet(mixed, epochs=4):
    lz.manual_seed(0)
    model = LeNet5(10, 1, 8)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    scaler = amp.GradScaler(enabled=mixed)
    order = np.random.default_rng(0)
    skipped = 0
    for _ in range(epochs):
        perm = order.permutation(len(x_tr))
        for i in range(0, len(perm), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            with amp.autocast(enabled=mixed):
                loss = F.cross_entropy(model(x_tr[idx]), t_tr[idx])
            scaler.scale(loss).backward()
            skipped += not scaler.step(opt).stepped
            scaler.update()
    model.eval()
    with lz.no_grad():
        acc = float((model(x_te).data.argmax(axis=1) == t_te).mean())
    return acc, skipped, scaler.get_scale()


acc32, _, _ = train_lenet(False)
acc16, skipped, scale = train_lenet(True)
print(f"LeNet test accuracy: float32 {acc32:.1%}, mixed precision {acc16:.1%} "
      f"({skipped} steps skipped, final loss scale {scale:g})")

# What the graph keeps for backward: float16 activations take half the bytes.
model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(256, 256), nn.ReLU())])
batch = lz.Variable(np.ones((128, 256), np.float32), requires_grad=False)
for mixed in (False, True):
    with lz.memory.profile() as prof:
        with amp.autocast(enabled=mixed):
            loss = model(batch).mean()
        loss.backward()
    print(f"{'mixed' if mixed else 'float32':>8}: {prof.peak_activation_bytes / 2 ** 10:.0f} KiB "
          "of activations saved for backward")
