"""Inputs a Function's backward never reads are held as InputRefs: freed with their
Variable, and gradients still reach every consumer and creator (issue 34)."""
import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero.core import InputRef


def _x(*shape, seed=0):
    return lz.Variable(np.random.default_rng(seed).standard_normal(shape))


def test_an_intermediate_only_a_releasing_function_uses_is_freed_after_forward():
    x = _x(4, 5)
    h = F.add(x, x)                       # Add keeps no array of its inputs
    ref = weakref.ref(h)
    y = F.relu(h)                         # ReLU keeps its output, not its input
    del h
    gc.collect()
    assert ref() is None
    assert type(y.creator.inputs[0]) is InputRef
    y.backward()
    np.testing.assert_array_equal(x.grad.data, 2.0 * (x.data > 0))


def test_without_release_the_graph_keeps_the_intermediate():
    x = _x(4, 5)
    with lz.using_config("release_inputs", False):
        h = F.add(x, x)
        ref = weakref.ref(h)
        y = F.relu(h)
    del h
    gc.collect()
    assert ref() is not None and y.creator.inputs[0] is ref()


def test_two_releasing_consumers_of_a_freed_variable_share_its_gradient():
    x = _x(3, 4)
    h = F.add(x, x)
    y = F.relu(h) + F.relu(h) * 3.0      # both relus release h; h is then freed
    del h
    gc.collect()
    y.backward(grad=np.ones((3, 4)))
    np.testing.assert_allclose(x.grad.data, 8.0 * (x.data > 0))


def test_a_released_input_still_held_by_the_user_gets_its_gradient():
    x = _x(3, 4)
    h = F.add(x, x)
    y = F.relu(h)
    y.backward(retain_grad=True, grad=np.ones((3, 4)))
    np.testing.assert_array_equal(h.grad.data, (h.data > 0).astype(float))


def test_a_mixed_use_keeps_the_variable_and_sums_both_paths():
    x = _x(3, 4)
    h = F.add(x, x)
    y = F.relu(h) + h * h                # Mul reads h: the Variable stays alive
    y.backward(grad=np.ones((3, 4)))
    expected = 2.0 * ((h.data > 0) + 2.0 * h.data)
    np.testing.assert_allclose(x.grad.data, expected)


def test_leaves_and_variables_with_hooks_are_never_released():
    x = _x(3, 4)
    y = F.relu(x)
    assert y.creator.inputs[0] is x                       # a leaf receives .grad
    seen = []
    h = F.add(x, x)
    h.register_hook(lambda g: seen.append(g.shape))
    z = F.relu(h)
    assert z.creator.inputs[0] is h
    del h
    z.backward(grad=np.ones((3, 4)))
    assert seen == [(3, 4)]


def test_double_backward_through_released_inputs():
    x = _x(5, seed=3)
    y = F.sum(F.relu(F.add(x, x)) ** 3)               # 8 x^3 where x > 0
    (gx,) = lz.grad(y, [x], create_graph=True)
    np.testing.assert_allclose(gx.data, 24 * x.data ** 2 * (x.data > 0))
    (ggx,) = lz.grad(F.sum(gx), [x])
    np.testing.assert_allclose(ggx.data, 48 * x.data * (x.data > 0))


def test_backward_twice_on_a_graph_whose_intermediate_was_freed():
    x = _x(3, 4)
    y = F.sum(F.relu(F.add(x, x)))
    gc.collect()
    y.backward(retain_graph=True)
    first = x.grad.data.copy()
    y.backward()
    np.testing.assert_allclose(x.grad.data, 2 * first)


def test_backward_frees_what_the_graph_kept_and_a_second_one_says_so():
    x = _x(300, 400)
    tracemalloc.start()
    try:
        y = F.sum(F.relu(F.add(x, x)) * 2.0)   # keeps the relu output (by ReLU and Mul)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        y.backward()
        x.cleargrad()
        gc.collect()
        freed = before - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert freed >= 0.99 * x.data.nbytes   # the relu output, no longer needed, is gone
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_create_graph_retains_the_graph_by_default():
    x = _x(5, seed=1)
    y = F.sum(F.relu(F.add(x, x)) ** 2)
    (gx,) = lz.grad(y, [x], create_graph=True)
    (gx2,) = lz.grad(y, [x])                      # the graph is still there
    np.testing.assert_allclose(gx.data, gx2.data)


def test_reading_a_released_input_names_what_happened():
    x = _x(3, 4)
    y = F.relu(F.add(x, x))
    ref = y.creator.inputs[0]
    assert ref.shape == (3, 4) and ref.dtype == np.float64 and ref.ndim == 2
    with pytest.raises(RuntimeError, match="released after forward"):
        ref.data


def test_a_node_that_kept_nothing_may_be_differentiated_by_two_graphs():
    """A shared node with no saved arrays (autocast's cast of a parameter, reused by every
    forward of a region) is not marked freed: each graph's backward goes through it."""
    p = _x(4)
    s = F.add(p, p)                      # kept nothing; shared by two graphs
    y1, y2 = F.sum(s * _x(4, seed=1)), F.sum(s * _x(4, seed=2))
    y1.backward()
    y2.backward()
    expected = 2 * (_x(4, seed=1).data + _x(4, seed=2).data)
    np.testing.assert_allclose(p.grad.data, expected)
