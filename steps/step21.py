"""Step 21: operators that move data around (shape and indexing).

reshape, transpose, broadcast_to, concatenate, get_item ... do no arithmetic, so their
gradients do none either: each backward is the inverse move.  Two pairs are worth seeing:

* broadcast_to and sum_to are each other's gradients (a copy fans out, so its gradient
  fans in by summing);
* reading with integer indices and scatter-adding are each other's gradients, so an
  element read twice receives both gradients.
Run: python steps/step21.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F

x = lz.Variable(np.arange(6.0).reshape(2, 3))

# 1. Views: the gradient of a reshape is the upstream gradient reshaped back.
y = F.reshape(x, (3, 2)) * np.array([[1.0, 2.0]])
y.sum().backward()
print("reshape grad:\n", x.grad.data)                  # [[1 2 1] [2 1 2]]

# 2. broadcast_to copies a row to 4 rows; sum_to adds the 4 gradients back.
x.cleargrad()
row = x[0]                                             # shape (3,)
F.broadcast_to(row, (4, 3)).sum().backward()
print("broadcast grad (row 0 copied 4 times):", x.grad.data[0])   # [4 4 4]

# 3. Indexing with repeated indices: x[0, 2] is read three times.
x.cleargrad()
picked = F.take(x, [2, 2, 2, 4])                       # flattened positions
picked.sum().backward()
print("take grad:\n", x.grad.data)                     # 3 at (0, 2), 1 at (1, 1)

# 4. gather picks one element per row (as a classifier picks each target's logit);
#    its gradient scatters back into exactly those places.
x.cleargrad()
target = np.array([[2], [0]])
F.gather(x, 1, target).sum().backward()
print("gather grad:\n", x.grad.data)                   # one 1 per row

# 5. split and concatenate undo each other; a piece nobody uses gets a zero gradient.
x.cleargrad()
left, middle, right = F.split(x, 3, axis=1)
(middle * 10.0).sum().backward()
print("split grad (only the middle column was used):\n", x.grad.data)
print("concatenate(split(x)) == x:",
      np.array_equal(F.concatenate(F.split(x, [1], axis=1), axis=1).data, x.data))

# 6. pad in 'reflect' mode copies inner elements outwards: their gradients add up.
v = lz.Variable(np.array([1.0, 2.0, 3.0]))
p = F.pad(v, (2, 2), mode="reflect")
print("reflect-padded:", p.data)                       # [3 2 1 2 3 2 1]
p.sum().backward()
print("reflect-pad grad:", v.grad.data)                # [2 3 2]
