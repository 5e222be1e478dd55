"""Importing the test-only oracles (torchvision, transformers) beside the CPU build of torch.

``make install-test`` pins ``torch==2.13.0`` (the CPU build, ``2.13.0+cpu``) and
``torchvision==0.28.0``, its release.  PyPI has no CPU build of torchvision for x86_64:
its 0.28.0 wheel links the CUDA build of torch, so beside the CPU build its C++ operators
(``torchvision::nms``, ...) do not exist: its version reads ``0.28.0+cu130``.  ``import torchvision``
registers "fake" (meta) kernels for them and fails with ``RuntimeError: operator
torchvision::nms does not exist`` -- and with it ``transformers``, which imports
torchvision when it is installed.

The model definitions and box functions LeZero compares against are pure Python and never
call those operators, so ``import_torchvision`` lets just those registrations fail, and
says so: a ``TorchvisionMismatchWarning`` naming both builds (once per process), and
``torchvision_mismatch()`` for a test that needs the C++ operators to skip with that
reason.  How to get a matching pair instead: docs/testing.md.
"""
import contextlib
import sys
import warnings

__all__ = ["import_torchvision", "import_transformers", "torchvision_mismatch",
           "TorchvisionMismatchWarning"]

_missing_ops = []              # the C++ operators whose fake registrations failed


class TorchvisionMismatchWarning(UserWarning):
    """torchvision's C++ operators did not load beside this build of torch."""


@contextlib.contextmanager
def _tolerant_fake_registrations():
    import torch.library as library
    original = library.register_fake

    def register_fake(op, func=None, /, **kwargs):
        def decorate(fn):
            try:
                return original(op, **kwargs)(fn)
            except RuntimeError as e:    # only the missing C++ operator is tolerated
                if "does not exist" not in str(e):
                    raise
                _missing_ops.append(str(op))
                return fn
        return decorate if func is None else decorate(func)

    library.register_fake = register_fake
    try:
        yield
    finally:
        library.register_fake = original


def torchvision_mismatch():
    """Why torchvision's C++ operators are missing (one sentence), or None when they
    loaded (or torchvision was not imported through ``import_torchvision``)."""
    if not _missing_ops:
        return None
    import torch
    return (f"torchvision {sys.modules['torchvision'].__version__} does not match torch "
            f"{torch.__version__}: its C++ operators ({', '.join(_missing_ops[:3])}"
            f"{', ...' if len(_missing_ops) > 3 else ''}) did not load (PyPI's torchvision "
            "links the CUDA build of torch); the pure-Python models and box functions "
            "work. For a matching pair see docs/testing.md")


def import_torchvision():
    """``torchvision``, imported so that its missing C++ operators do not stop it (with a
    ``TorchvisionMismatchWarning`` when they are missing)."""
    if "torchvision" not in sys.modules:
        with _tolerant_fake_registrations():
            import torchvision  # noqa: F401
        if _missing_ops:
            warnings.warn(torchvision_mismatch(), TorchvisionMismatchWarning, stacklevel=2)
    return sys.modules["torchvision"]


def import_transformers():
    """``transformers``, after torchvision (which it imports when installed)."""
    try:
        import_torchvision()
    except ImportError:
        pass
    import transformers
    return transformers
