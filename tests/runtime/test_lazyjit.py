"""Kernels compile on first use by binding their whole module; a kernel of a module whose
binding another thread has begun waits for it to finish (the parts of a split kernel
call the same kernels from several threads at once)."""
import sys
import textwrap
import threading
import uuid

import pytest

from lezero.runtime import lazyjit

pytestmark = pytest.mark.skipif(not lazyjit.numba_available(), reason="needs Numba")

SOURCE = textwrap.dedent('''
    from lezero.kernels import jit

    @jit()
    def inner(x):
        return x + 1

    @jit(nogil=True)
    def outer(x):
        return inner(x) * 2
''')


@pytest.fixture
def module(tmp_path, monkeypatch):
    name = f"_lezero_binding_{uuid.uuid4().hex}"    # binding is per module name: a new one
    (tmp_path / f"{name}.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = __import__(name)
    yield mod
    sys.modules.pop(name, None)


def test_a_kernel_waits_while_its_module_is_being_bound(module):
    outer = module.outer
    results = []
    with lazyjit._bind_lock:                 # as a thread in the middle of binding holds it
        lazyjit._bound.add(module.__name__)  # ... its module marked, names not yet replaced
        t = threading.Thread(target=lambda: results.append(outer(3)))
        t.start()
        t.join(0.3)
        assert t.is_alive() and not results  # it did not compile against half-bound names
        lazyjit._bound.discard(module.__name__)
    t.join(60)
    assert results == [8]
    assert module.__name__ in lazyjit._complete
    assert not isinstance(module.inner, lazyjit.Kernel)    # names replaced by compiled ones


def test_kernels_of_one_module_called_from_many_threads_at_once(module):
    results, errors = [], []

    def call(i):
        try:
            results.append(module.outer(i))
        except Exception as e:               # a half-bound module fails to type
            errors.append(e)
    ts = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors and sorted(results) == [2, 4, 6, 8]
