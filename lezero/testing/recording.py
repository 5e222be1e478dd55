"""Which registered operators the checks of ``lezero.testing`` exercised: the recording mode.

With ``LEZERO_CHECK_LOG=DIR`` in the environment, every check that *passes*
(``check_gradient``, ``check_torch``, ``check_double_backward``, and so ``check_all``;
``check_torch(..., grad=False)`` is logged as ``torch_forward``)
runs its function once more on the same inputs under ``sys.setprofile`` and notes the
registered operators (``lezero.functions.registry``) whose wrapper was entered, outermost
calls only: ``F.softmax`` credits ``softmax``, not the ``exp`` it uses inside.  Each
process keeps ``DIR/checks-<pid>.json``: ``{kind: {operator: first test}}``.  Without the
variable nothing is recorded and the checks cost what they always did.

``python -m lezero.functions --coverage`` turns those files into the table of which
operator has which check (``lezero.testing.check_table``).
"""
import json
import os
import sys

from lezero.utils.files import atomic_write

ENV = "LEZERO_CHECK_LOG"
KINDS = ("gradient", "torch", "torch_forward", "double")

_seen = {}          # {kind: {operator: test id}} for this process
_codes = None       # {code object: [(operator, {free variable: value})]}


def enabled():
    """True when the environment asks for a check log."""
    return bool(os.environ.get(ENV))


def _wrapper_codes():
    """Map each registered wrapper's code to its operators.  Factories share one code
    object across operators (``exp``, ``sin``...), so each carries its closure values,
    which tell the operators apart when the code runs."""
    global _codes
    if _codes is None:
        from lezero.functions.registry import operators
        _codes = {}
        for op in operators():
            fn = op.fn
            cells = dict(zip(fn.__code__.co_freevars,
                             (c.cell_contents for c in fn.__closure__ or ())))
            _codes.setdefault(fn.__code__, []).append((op.name, cells))
    return _codes


def _which(frame, candidates):
    if len(candidates) == 1:
        return candidates[0][0]
    local = frame.f_locals
    for name, cells in candidates:
        if all(local.get(k) is v for k, v in cells.items()):
            return name
    return None


def operators_called(fn, *args):
    """The registered operators ``fn(*args)`` calls directly (outermost calls, in order)."""
    codes = _wrapper_codes()
    found, active = [], []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            if not active:
                name = _which(frame, codes[frame.f_code])
                if name and name not in found:
                    found.append(name)
            active.append(frame)
        elif event == "return" and active and active[-1] is frame:
            active.pop()

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(previous)
    return found


def record(kind, fn, *args):
    """Log the operators a passed ``kind`` check of ``fn`` covered (when enabled)."""
    if not enabled():
        return
    if kind not in KINDS:
        raise ValueError(f"record: kind must be one of {KINDS}, got {kind!r}")
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    seen = _seen.setdefault(kind, {})
    new = [op for op in operators_called(fn, *args) if op not in seen]
    for op in new:
        seen[op] = test
    if new:     # rewrite this process's file only when it learns something
        folder = os.environ[ENV]
        os.makedirs(folder, exist_ok=True)
        atomic_write(os.path.join(folder, f"checks-{os.getpid()}.json"),
                     json.dumps(_seen, indent=0, sort_keys=True), where="lezero.testing")


def load(folder):
    """Merge every process's log in ``folder``: ``{kind: {operator: first test}}``."""
    merged = {kind: {} for kind in KINDS}
    for name in sorted(os.listdir(folder)):
        if name.startswith("checks-") and name.endswith(".json"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                for kind, ops in json.load(f).items():
                    for op, test in ops.items():
                        merged.setdefault(kind, {}).setdefault(op, test)
    return merged
