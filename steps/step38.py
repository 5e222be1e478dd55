"""Step 38: classic CNNs: LeNet-5 on real handwritten digits.

A convolutional network shares one small filter across every position of the image, so
it needs far fewer weights than a fully connected one and keeps working when a stroke
moves by a pixel.  LeNet-5 (LeCun et al., 1998) is the classic: two 5x5 convolutions
with pooling, then three linear layers.  The zoo's ``LeNet5`` sizes itself for the
input: for scikit-learn's 8x8 digits both convolutions pad by 2 so the maps do not
vanish.  We trace the shapes through the network with forward hooks, train it with Adam
for a few epochs and compare it with an MLP of about the same size.  On centred 8x8
digits the MLP does as well or better: at this size a digit is a handful of pixels and
the MLP has no trouble learning where they are.  Moving every test digit by one pixel (an
eighth of its width) hurts both a lot; the CNN, whose filters do not care where a
stroke is, usually a little less.  The CNN's real gains come with larger images, where
sharing filters saves orders of magnitude of weights: see VGG, ResNet and MobileNetV2
at the end, built from the same zoo with torchvision's names.
Run: python steps/step38.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.data.datasets import Digits
from lezero.nn import models

lz.manual_seed(0)
train, test = Digits(train=True), Digits(train=False)
x_train, t_train = train.data[:, None], train.targets      # (1438, 1, 8, 8)
x_test, t_test = test.data[:, None], test.targets
print(f"digits: {len(x_train)} training and {len(x_test)} test images of 8x8")

lenet = models.LeNet5(num_classes=10, in_channels=1, input_size=8)
print(lenet)

# Forward hooks see every layer's output: watch the feature maps shrink.
shapes = []
handles = [m.register_forward_hook(lambda mod, args, out: shapes.append(
    (type(mod).__name__, out.shape))) for m in list(lenet.features) + list(lenet.classifier)]
with lz.no_grad():
    lenet(x_train[:2])
for h in handles:
    h.remove()
for name, shape in shapes:
    print(f"  {name:10s} -> {shape}")
assert shapes[2][1] == (2, 6, 4, 4) and shapes[5][1] == (2, 16, 2, 2)


def accuracy(model, x, t):
    model.eval()
    with lz.no_grad():
        acc = float((model(x).data.argmax(axis=1) == t).mean())
    model.train()
    return acc


def fit(model, epochs=16, batch=64, lr=1e-2):
    opt = optim.Adam(model.parameters(), lr=lr)
    steps = epochs * -(-len(x_train) // batch)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    rng = np.random.default_rng(0)
    for epoch in range(epochs):
        order = rng.permutation(len(x_train))
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            loss = F.cross_entropy(model(x_train[idx]), t_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        if epoch % 4 == 3:
            print(f"  epoch {epoch + 1:2d}  last batch loss {loss.item():.4f}  "
                  f"test accuracy {accuracy(model, x_test, t_test):.3f}")
    return accuracy(model, x_test, t_test)


print(f"\nLeNet-5, {lenet.num_parameters():,} parameters")
cnn_acc = fit(lenet)

# An MLP with a similar number of weights, seeing the same pixels as a flat vector.
mlp = models.MLP(64, [200, 40, 10], flatten=True)
print(f"\nMLP 64-200-40-10, {mlp.num_parameters():,} parameters")
mlp_acc = fit(mlp)
print(f"\ntest accuracy: LeNet-5 {cnn_acc:.3f}, MLP {mlp_acc:.3f}")
assert cnn_acc > 0.95 and mlp_acc > 0.95


def shifted(x, dy, dx):
    """Images moved by (dy, dx) pixels, zeros shifted in."""
    out = np.zeros_like(x)
    h, w = x.shape[-2:]
    out[..., max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
        x[..., max(-dy, 0):h + min(-dy, 0), max(-dx, 0):w + min(-dx, 0)]
    return out


print("the test digits moved by one pixel:")
results = {}
for dy, dx in [(0, 1), (1, 0), (0, -1), (-1, 0)]:
    moved = shifted(x_test, dy, dx)
    results[(dy, dx)] = (accuracy(lenet, moved, t_test), accuracy(mlp, moved, t_test))
    print(f"  shift ({dy:+d}, {dx:+d}): LeNet-5 {results[(dy, dx)][0]:.3f}  "
          f"MLP {results[(dy, dx)][1]:.3f}")
cnn_moved, mlp_moved = np.mean(list(results.values()), axis=0)
print(f"mean over the four shifts: LeNet-5 {cnn_moved:.3f}, MLP {mlp_moved:.3f}")
assert cnn_moved < cnn_acc - 0.2 and mlp_moved < mlp_acc - 0.2   # 8x8 is coarse: both fall

# The same convolution-pooling recipe, deeper: sizes of the zoo's classics.
for name, build in [("VGG-16", lambda: models.vgg16(num_classes=10, small_input=True)),
                    ("ResNet-18", lambda: models.resnet18(num_classes=10)),
                    ("MobileNetV2", lambda: models.mobilenet_v2(num_classes=10))]:
    print(f"{name:12s} {build().num_parameters():>12,} parameters (10 classes)")
