"""Step 20: tensors, elementwise math and broadcasting.

A Variable holds an n-dimensional array, and the math operators work element by element.
When the two operands of a binary operator have different shapes, NumPy's broadcasting
rule lines them up from the right and stretches axes of size 1.  Stretching copies a
value to many places, so on the way back its gradient is the *sum* of the gradients of
all the copies: every binary backward ends with ``sum_to(grad, input.shape)``.
Run: python steps/step20.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F

# 1. Elementwise math on a 2-D tensor.  Python numbers adopt the tensor's dtype, so a
#    float32 model stays float32 (no silent float64).
x = lz.Variable(np.array([[0.5, 1.0, 2.0], [-1.0, 0.0, 3.0]], np.float32))
y = F.exp(-x * x) * 2.0 + 1
print("dtype kept:", y.dtype)                                     # float32

# 2. Broadcasting: (2, 3) + (3,) adds the row b to both rows of a.
a = lz.Variable(np.ones((2, 3)))
b = lz.Variable(np.array([10.0, 20.0, 30.0]))
c = a * b                        # shape (2, 3): b is used twice
c.sum().backward()
print("a * b shape:", c.shape)
print("grad of b (summed over the 2 rows it was copied to):", b.grad.data)   # [2 2 2]
print("grad of a:", a.grad.data.tolist())                          # b in both rows

# 3. Each elementwise function knows its derivative; compare with central differences.
for name in ["sin", "tanh", "log1p", "sqrt", "arctan", "erf"]:
    f = getattr(F, name)
    v = lz.Variable(np.array([0.3, 0.7, 1.5]))
    f(v).sum().backward()
    numeric = lz.utils.numerical_grad(lambda t: f(t).sum(), v.data)[0]
    print(f"d {name:6s}/dx = {np.round(v.grad.data, 4)}  (numeric {np.round(numeric, 4)})")

# 4. Selections route the gradient.  maximum sends it to the larger input, and splits it
#    half/half on a tie, as PyTorch does; clip passes it only inside [a_min, a_max].
p = lz.Variable(np.array([1.0, 2.0, 3.0]))
q = lz.Variable(np.array([3.0, 2.0, 1.0]))
F.maximum(p, q).sum().backward()
print("maximum grads:", p.grad.data, q.grad.data)                 # [0 .5 1] [1 .5 0]
p.cleargrad()
F.clip(p, 1.5, 2.5).sum().backward()
print("clip(1.5, 2.5) grad:", p.grad.data)                        # [0 1 0]
p.cleargrad()
F.where(p.data > 1.5, p * 10.0, p).sum().backward()
print("where grad:", p.grad.data)                                 # [1 10 10]

# 5. Step functions have zero derivative almost everywhere: they return constants, and
#    nothing flows back through them.
s = F.sign(p)
print("sign(p):", s.data, "requires_grad:", s.requires_grad)

# 6. Backward is itself built from operators, so derivatives of any order are available:
#    tanh' = 1 - tanh^2, tanh'' = -2 tanh (1 - tanh^2).
t = lz.Variable(np.array(0.5))
(g1,) = lz.grad(F.tanh(t), [t], create_graph=True)
(g2,) = lz.grad(g1, [t], create_graph=True)
th = np.tanh(0.5)
print(f"tanh'(0.5) = {g1.item():.6f} (exact {1 - th ** 2:.6f}), "
      f"tanh''(0.5) = {g2.item():.6f} (exact {-2 * th * (1 - th ** 2):.6f})")
