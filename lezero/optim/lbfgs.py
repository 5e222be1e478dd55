"""L-BFGS: a quasi-Newton method that re-evaluates the loss itself (``step(closure)``).

It follows ``torch.optim.LBFGS`` step for step (same defaults, same stopping rules, the
same strong-Wolfe line search with cubic interpolation, Nocedal & Wright, Algorithms 3.5
and 3.6), so from the same start both produce the same iterates.  All parameters are
treated as one flat vector; the history of curvature pairs ``(s, y)`` lives in
``state`` under the first parameter, as in PyTorch.

    opt = optim.LBFGS(model.parameters(), lr=1, line_search_fn="strong_wolfe")
    def closure():
        opt.zero_grad(); loss = loss_fn(model(x), t); loss.backward(); return loss
    opt.step(closure)
"""
from lezero import cuda
from lezero.core import enable_grad
from lezero.optim.line_search import strong_wolfe
from lezero.optim.optimizer import Optimizer
from lezero.optim.state_checks import COUNT, FLAT, FLAT_LIST, REAL, REAL_LIST
from lezero.utils.checks import check_callable, check_choice, check_int

__all__ = ["LBFGS"]


class LBFGS(Optimizer):
    """``LBFGS(params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
    tolerance_change=1e-9, history_size=100, line_search_fn=None)``.

    One ``step(closure)`` runs up to ``max_iter`` iterations (and ``max_eval`` closure
    calls, default ``max_iter * 5 // 4``).  ``line_search_fn`` is None (a fixed step of
    ``lr``; the first iteration scales it by ``min(1, 1 / |g|_1)``) or ``"strong_wolfe"``
    (its trial steps count against ``max_eval``, as in torch 2.x).
    One parameter group only, as in PyTorch.
    """

    # The history lives under the first parameter; its vectors span every parameter.
    state_spec = {"func_evals": COUNT, "n_iter": COUNT, "d": FLAT, "t": REAL,
                  "old_dirs": FLAT_LIST, "old_stps": FLAT_LIST, "ro": REAL_LIST,
                  "H_diag": REAL, "prev_flat_grad": FLAT, "prev_loss": REAL}
    _HISTORY = ("d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad")

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        check_int("LBFGS", "max_iter", max_iter, low=1)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        check_int("LBFGS", "max_eval", max_eval, low=1)
        check_int("LBFGS", "history_size", history_size, low=1)
        if line_search_fn is not None:
            check_choice("LBFGS", "line_search_fn", line_search_fn, ("strong_wolfe",))
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS: does not support per-parameter options (parameter "
                             f"groups); got {len(self.param_groups)} groups")
        self._params = self.param_groups[0]["params"]

    def _check_group(self, group, index):
        super()._check_group(group, index)
        self._require_nonnegative(group, index, "tolerance_grad", "tolerance_change")
        for key in ("max_iter", "max_eval", "history_size"):
            check_int("LBFGS", key, group[key], low=1)
        if group["line_search_fn"] is not None:
            check_choice("LBFGS", "line_search_fn", group["line_search_fn"], ("strong_wolfe",))

    def _check_loaded(self, state, groups):
        """A resumed history (``n_iter`` > 0) needs every part, its three lists of one
        length, at most ``history_size``."""
        where = "LBFGS.load_state_dict: the state of parameter 0"
        for entry in state.values():
            if not entry.get("n_iter"):
                continue
            missing = [k for k in self._HISTORY if k not in entry]
            if missing:
                raise ValueError(f"{where} has n_iter={entry['n_iter']} but no {missing[0]!r}")
            sizes = {len(entry[k]) for k in ("old_dirs", "old_stps", "ro")}
            limit = groups[0]["history_size"]
            if len(sizes) != 1 or sizes.pop() > limit:
                raise ValueError(f"{where}: 'old_dirs', 'old_stps' and 'ro' must have one "
                                 f"length of at most history_size={limit}, got lengths "
                                 f"{[len(entry[k]) for k in ('old_dirs', 'old_stps', 'ro')]}")

    # ----- the parameters as one flat vector ----------------------------------------
    def _xp(self):
        return cuda.get_array_module(self._params[0].data)

    def _flat_grad(self):
        xp = self._xp()
        parts = [xp.zeros(p.size, p.dtype) if p.grad is None else
                 p.grad.data.reshape(-1).astype(p.dtype, copy=False) for p in self._params]
        return xp.concatenate(parts)

    def _add_to_params(self, t, d):
        """params += t * d (``d`` flat), in place."""
        offset = 0
        for p in self._params:
            n = p.size
            p.data += (t * d[offset:offset + n]).reshape(p.shape).astype(p.dtype, copy=False)
            offset += n

    def _clone_params(self):
        return [p.data.copy() for p in self._params]

    def _set_params(self, values):
        for p, v in zip(self._params, values):
            p.data[...] = v

    def _evaluate(self, closure):
        with enable_grad():
            return float(closure())

    def _directional_evaluate(self, closure, x, t, d):
        """The loss and flat gradient at ``x + t * d``; the parameters are left at ``x``."""
        self._add_to_params(t, d)
        loss = self._evaluate(closure)
        g = self._flat_grad()
        self._set_params(x)
        return loss, g

    # ----- the step ---------------------------------------------------------------------
    def step(self, closure):
        """Run up to ``max_iter`` L-BFGS iterations; returns the loss of the first closure
        call (as PyTorch).  ``closure`` clears the gradients, computes the loss, calls
        ``backward()`` and returns the loss."""
        check_callable("LBFGS.step", "closure", closure)
        group = self.param_groups[0]
        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if float(abs(flat_grad).max()) <= group["tolerance_grad"]:
            return orig_loss
        self._iterate(closure, group, state, loss, flat_grad)
        return orig_loss

    def _direction(self, state, flat_grad, history_size):
        """The quasi-Newton direction -H g from the two-loop recursion, after adding the
        last curvature pair to the history (skipped unless y.s > 1e-10)."""
        xp = self._xp()
        if state["n_iter"] == 1:
            state.update(old_dirs=[], old_stps=[], ro=[], H_diag=1.0)
            return -flat_grad
        dirs, stps, ro = state["old_dirs"], state["old_stps"], state["ro"]
        y = flat_grad - state["prev_flat_grad"]
        s = state["d"] * state["t"]
        ys = float(xp.dot(y, s))
        if ys > 1e-10:
            if len(dirs) == history_size:
                del dirs[0], stps[0], ro[0]
            dirs.append(y)
            stps.append(s)
            ro.append(1.0 / ys)
            state["H_diag"] = ys / float(xp.dot(y, y))
        al = [0.0] * len(dirs)
        q = -flat_grad
        for i in range(len(dirs) - 1, -1, -1):
            al[i] = float(xp.dot(stps[i], q)) * ro[i]
            q = q - al[i] * dirs[i]
        r = q * state["H_diag"]
        for i in range(len(dirs)):
            be_i = float(xp.dot(dirs[i], r)) * ro[i]
            r = r + (al[i] - be_i) * stps[i]
        return r

    def _iterate(self, closure, group, state, loss, flat_grad):
        xp = self._xp()
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        evals, n_iter = 1, 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            d = state["d"] = self._direction(state, flat_grad, group["history_size"])
            state["prev_flat_grad"] = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(abs(flat_grad).sum())) * lr
            else:
                t = lr
            state["t"] = t
            gtd = float(xp.dot(flat_grad, d))
            if gtd > -tol_change:           # not a descent direction
                break
            if group["line_search_fn"] is not None:
                x0 = self._clone_params()
                loss, flat_grad, t, ls_evals = strong_wolfe(
                    lambda x, step, direction: self._directional_evaluate(closure, x, step,
                                                                          direction),
                    x0, t, d, loss, flat_grad, gtd, max_ls=max_eval - evals)
                self._add_to_params(t, d)
            else:
                self._add_to_params(t, d)
                ls_evals = 0
                if n_iter != max_iter:
                    loss = self._evaluate(closure)
                    flat_grad = self._flat_grad()
                    ls_evals = 1
            state["t"] = t
            evals += ls_evals
            state["func_evals"] += ls_evals
            if (n_iter == max_iter or evals >= max_eval
                    or float(abs(flat_grad).max()) <= tol_grad
                    or float(abs(d * t).max()) <= tol_change
                    or abs(loss - prev_loss) < tol_change):
                break
        state["prev_loss"] = prev_loss
