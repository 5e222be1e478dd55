"""Step 22: reductions.

A reduction combines the elements along some axes into one.  Its backward does the
opposite: it spreads the output gradient back over every element that was combined, each
weighted by how much it contributed (1 for sum, 1/n for mean, the winner for max, the
product of the others for prod).  Arguments follow NumPy: ``axis`` (int, tuple or None)
and ``keepdims``.
Run: python steps/step22.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F

x = lz.Variable(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))

# 1. sum and mean over an axis; keepdims keeps the reduced axis as size 1 so the result
#    still broadcasts against x (here: centring each row).
print("sum over axis 1:", F.sum(x, axis=1).data, " mean, keepdims:", F.mean(x, 1, True).shape)
centred = x - F.mean(x, axis=1, keepdims=True)
print("rows centred:", centred.data.tolist())
F.mean(x, axis=1).sum().backward()
print("grad of mean: each element gets 1/n =", x.grad.data[0])    # [1/3 1/3 1/3]

# 2. max: the gradient goes to the winner; tied winners share it evenly (torch.amax).
t = lz.Variable(np.array([3.0, 1.0, 3.0]))
F.max(t).backward()
print("max grad with a tie:", t.grad.data)                        # [.5 0 .5]

# 3. var uses NumPy's ddof=0 (divide by n); PyTorch's default is the sample variance
#    (divide by n - 1), which is ddof=1 here.
v = np.array([1.0, 2.0, 3.0, 4.0])
print("var ddof=0:", F.var(v).item(), " ddof=1:", F.var(v, ddof=1).item())  # 1.25 1.667

# 4. logsumexp: log(sum(exp(x))) overflows for large x when computed naively; shifting
#    by the maximum first gives the exact answer.  Its gradient is the softmax.
big = lz.Variable(np.array([1000.0, 1000.0, 990.0], np.float32))
with np.errstate(over="ignore"):
    naive = np.log(np.exp(big.data).sum())
stable = F.logsumexp(big)
stable.backward()
print("naive:", naive, " stable:", stable.item(), " grad (softmax):", big.grad.data)

# 5. prod: d/dx_i of x_0 x_1 ... is the product of the *other* elements.  Dividing y by
#    x_i fails at zeros; prefix and suffix products give the exact answer there.
z = lz.Variable(np.array([2.0, 0.0, 5.0]))
F.prod(z).backward()
print("prod grad with a zero:", z.grad.data)                      # [0 10 0]

# 6. norm: the 2-norm's gradient is x / ||x||, a unit vector.  Computing on x / max|x|
#    avoids overflow of the squares, even in float32.
w = lz.Variable(np.array([3e20, 4e20], np.float32))
n = F.norm(w)
n.backward()
print("norm:", n.item(), " grad:", w.grad.data)                   # 5e20 [0.6 0.8]

# 7. cumsum: element k is used by every later running total, so its gradient is the
#    running total of the gradients taken from the end.
c = lz.Variable(np.array([1.0, 1.0, 1.0, 1.0]))
F.cumsum(c).sum().backward()
print("cumsum grad:", c.grad.data)                                # [4 3 2 1]

# 8. topk returns values (differentiable) and indices (constants); argmax is a constant.
scores = lz.Variable(np.array([[0.1, 0.7, 0.2], [0.5, 0.3, 0.9]]))
values, indices = F.topk(scores, 2)
values.sum().backward()
print("top-2 values:", values.data.tolist(), " indices:", indices.data.tolist())
print("topk grad:", scores.grad.data.tolist(), " argmax:", F.argmax(scores, axis=1).data)
