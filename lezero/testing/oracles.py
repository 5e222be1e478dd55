"""Importing the test-only oracles (torchvision, transformers) beside the CPU build of torch.

PyPI's torchvision 0.28.0, the release for torch 2.13.0, registers "fake" (meta) kernels
for C++ operators such as ``torchvision::nms`` at import.  Its C++ library links the CUDA
build of torch, so beside the CPU build those operators do not exist, the registrations
raise ``RuntimeError: operator torchvision::nms does not exist`` and ``import
torchvision`` fails -- and with it ``transformers``, which imports torchvision when it
is installed.  The model definitions LeZero compares against are pure Python and never
call those operators, so ``import_torchvision`` lets just those registrations fail.
"""
import contextlib
import sys

__all__ = ["import_torchvision", "import_transformers"]


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
                return fn
        return decorate if func is None else decorate(func)

    library.register_fake = register_fake
    try:
        yield
    finally:
        library.register_fake = original


def import_torchvision():
    """``torchvision``, imported so that its missing C++ operators do not stop it."""
    if "torchvision" not in sys.modules:
        with _tolerant_fake_registrations():
            import torchvision  # noqa: F401
    return sys.modules["torchvision"]


def import_transformers():
    """``transformers``, after torchvision (which it imports when installed)."""
    try:
        import_torchvision()
    except ImportError:
        pass
    import transformers
    return transformers
