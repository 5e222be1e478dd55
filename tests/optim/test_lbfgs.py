"""LBFGS against torch.optim.LBFGS from the same start on the same problems (Rosenbrock,
a small least squares over two parameters): the same iterates, losses and evaluation
counts step by step, with and without the strong-Wolfe line search; and bad arguments."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.optim.line_search import cubic_interpolate


def _rosenbrock(p):
    return (1 - p[0]) ** 2 + 100 * (p[1] - p[0] ** 2) ** 2


def _rosenbrock_torch(p):
    return (1 - p[0]) ** 2 + 100 * (p[1] - p[0] ** 2) ** 2


RNG = np.random.default_rng(0)
A, B = RNG.standard_normal((12, 3)), RNG.standard_normal((12, 2))


def _least_squares(w, b):
    r = F.matmul(lz.Variable(A), w) + b - lz.Variable(B)
    return (r * r).sum()


def _least_squares_torch(w, b):
    r = torch.tensor(A) @ w + b - torch.tensor(B)
    return (r * r).sum()


PROBLEMS = {
    "rosenbrock": (_rosenbrock, _rosenbrock_torch, [np.array([-1.5, 2.0])]),
    "least_squares": (_least_squares, _least_squares_torch,
                      [RNG.standard_normal((3, 2)), np.zeros(2)]),
}


def _closure(opt, loss_fn, *params):
    """The closure LBFGS.step wants: clear the gradients, compute the loss, backward."""
    def closure():
        opt.zero_grad()
        loss = loss_fn(*params)
        loss.backward()
        return loss
    return closure


def _square(p):
    return (p * p).sum()


def _run_both(problem, steps, **options):
    """Step LeZero's and torch's LBFGS side by side; yield both parameter lists, losses and
    evaluation counts after each step."""
    fn, t_fn, start = PROBLEMS[problem]
    ours = [lz.Parameter(s.copy()) for s in start]
    theirs = [torch.tensor(s.copy(), requires_grad=True) for s in start]
    opt, t_opt = optim.LBFGS(ours, **options), torch.optim.LBFGS(theirs, **options)
    closure, t_closure = _closure(opt, fn, *ours), _closure(t_opt, t_fn, *theirs)
    for _ in range(steps):
        loss, t_loss = opt.step(closure), t_opt.step(t_closure)
        yield (ours, theirs, float(loss.data), float(t_loss.detach()),
               opt.state[ours[0]], t_opt.state[theirs[0]])


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("options", [
    dict(lr=1, max_iter=8, line_search_fn="strong_wolfe"),
    dict(lr=0.002, max_iter=10, history_size=4),
    dict(lr=0.5, max_iter=5, history_size=3, line_search_fn="strong_wolfe"),
    # a first step far too long: the search brackets and zooms (its safeguards run)
    dict(lr=10, max_iter=5, max_eval=100, line_search_fn="strong_wolfe"),
])
def test_same_iterates_as_torch(problem, options):
    for ours, theirs, loss, t_loss, state, t_state in _run_both(problem, 4, **options):
        for p, t in zip(ours, theirs):
            np.testing.assert_allclose(p.data, t.detach().numpy(), rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(loss, t_loss, rtol=1e-7, atol=1e-12)
        assert state["func_evals"] == t_state["func_evals"]
        assert state["n_iter"] == t_state["n_iter"]
        assert len(state["old_dirs"]) == len(t_state["old_dirs"])


def test_strong_wolfe_solves_rosenbrock_and_stops_on_tolerance():
    *_, last = _run_both("rosenbrock", 3, lr=1, max_iter=50, line_search_fn="strong_wolfe")
    ours, theirs, _, _, state, t_state = last
    np.testing.assert_allclose(ours[0].data, [1.0, 1.0], atol=1e-5)
    np.testing.assert_allclose(ours[0].data, theirs[0].detach().numpy(), rtol=1e-7)
    # it stopped on a tolerance (the loss no longer changes), not on max_iter each step
    assert state["n_iter"] == t_state["n_iter"] < 150


def test_the_returned_loss_is_the_first_evaluation():
    p = lz.Parameter(np.array([3.0]))
    opt = optim.LBFGS([p], max_iter=3)
    assert float(opt.step(_closure(opt, _square, p)).data) == 9.0
    assert abs(float(p.data[0])) < 3.0


def test_float32_parameters_stay_float32():
    p = lz.Parameter(np.array([1.0, -2.0], np.float32))
    opt = optim.LBFGS([p], line_search_fn="strong_wolfe")
    opt.step(_closure(opt, _square, p))
    assert p.dtype == np.float32 and np.abs(p.data).max() < 1e-3


def test_cubic_interpolate_finds_a_cubic_minimum():
    # f(x) = x^3 - 3x has its minimum at 1: values and slopes at 0 and 2
    assert cubic_interpolate(0.0, 0.0, -3.0, 2.0, 2.0, 9.0) == pytest.approx(1.0)
    # no real minimum: the middle of the bounds
    assert cubic_interpolate(0.0, 0.0, 1.0, 1.0, 0.8, 1.0, bounds=(0.0, 4.0)) == 2.0


P = [lz.Parameter(np.ones(2))]


@pytest.mark.parametrize("call,exc,match", [
    (lambda: optim.LBFGS(P, line_search_fn="armijo"), ValueError,
     "LBFGS: line_search_fn must be one of 'strong_wolfe', got 'armijo'"),
    (lambda: optim.LBFGS(P, max_iter=0), ValueError,
     "LBFGS: max_iter must be a positive int, got 0"),
    (lambda: optim.LBFGS(P, max_iter=2.5), TypeError, "LBFGS: max_iter must be an int"),
    (lambda: optim.LBFGS(P, history_size=0), ValueError,
     "LBFGS: history_size must be a positive int"),
    (lambda: optim.LBFGS(P, lr=-1), ValueError, "LBFGS: invalid lr=-1"),
    (lambda: optim.LBFGS(P, tolerance_grad=-1.0), ValueError, "LBFGS: invalid tolerance_grad"),
    (lambda: optim.LBFGS([{"params": P}, {"params": [lz.Parameter(np.ones(1))]}]), ValueError,
     "LBFGS: does not support per-parameter options"),
    (lambda: optim.LBFGS(P).step(None), TypeError, "LBFGS.step: closure must be callable"),
])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match="^" + match):
        call()


def test_state_dict_resume_continues_the_same_iterates():
    import copy

    def make(start):
        p = lz.Parameter(start.copy())
        opt = optim.LBFGS([p], max_iter=4, history_size=3, line_search_fn="strong_wolfe")
        return p, opt, _closure(opt, _rosenbrock, p)
    p, opt, closure = make(np.array([-1.5, 2.0]))
    opt.step(closure)
    saved = copy.deepcopy(opt.state_dict())
    q, opt2, closure2 = make(p.data)
    opt2.load_state_dict(saved)
    opt.step(closure)
    opt2.step(closure2)
    np.testing.assert_array_equal(q.data, p.data)
    for key in ("n_iter", "func_evals"):
        assert opt2.state[q][key] == opt.state[p][key]
    assert len(opt2.state[q]["old_dirs"]) == 3      # the history came back and was used
