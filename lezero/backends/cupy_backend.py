"""The ``cupy`` backend (CuPy >= 13), imported only when a CuPy array or device is used.

Nothing here imports CuPy at module import: ``xp`` imports it on first use, and
``array_types`` is empty until CuPy is in ``sys.modules`` (so an array a user made with
CuPy is recognised, and ``import lezero`` never loads CuPy).
"""
import sys

from lezero.backends.base import Backend, Capabilities

__all__ = ["CupyBackend", "GPU_HINT"]

GPU_HINT = "CuPy is required for GPU arrays: pip install -e '.[gpu]'"

# cupy.random.Generator's methods (CuPy 13): no normal/uniform/choice/permutation/shuffle.
GENERATOR_METHODS = frozenset({"random", "integers", "standard_normal",
                               "standard_exponential", "exponential", "poisson", "beta",
                               "gamma", "standard_gamma"})


def import_cupy():
    try:
        import cupy
    except ImportError as e:
        raise ImportError(f"{GPU_HINT} ({e})") from None
    return cupy


class CupyBackend(Backend):
    """NVIDIA (and ROCm) GPUs through CuPy."""

    rng_methods = GENERATOR_METHODS

    def __init__(self):
        super().__init__("cupy", None, (), Capabilities(float16=True))

    @property
    def xp(self):
        return import_cupy()

    @property
    def array_types(self):
        cp = sys.modules.get("cupy")
        return () if cp is None else (cp.ndarray,)

    def has_namespace(self, xp):
        return xp is not None and xp is sys.modules.get("cupy")

    def is_available(self):
        try:
            return bool(import_cupy().cuda.is_available())
        except Exception:   # ImportError, or a CUDA runtime error on a machine without a driver
            return False

    def from_host(self, array, device=None):
        cp = self.xp
        if device is None:
            return cp.asarray(array)
        with cp.cuda.Device(device):
            return cp.asarray(array)

    def to_host(self, array):
        return self.xp.asnumpy(array)

    def device_of(self, array):
        return f"cuda:{array.device.id}"

    def device(self, index=0):
        return self.xp.cuda.Device(index)

    def scatter_add(self, target, index, values):
        import cupyx
        cupyx.scatter_add(target, index, values)
        return target

    def rng(self, seed=None):
        return self.xp.random.default_rng(seed)

    @property
    def special(self):
        import cupyx.scipy.special
        return cupyx.scipy.special

    def synchronize(self):
        self.xp.cuda.get_current_stream().synchronize()

    def memory_stats(self):
        pool = self.xp.get_default_memory_pool()
        return {"used_bytes": pool.used_bytes(), "total_bytes": pool.total_bytes(),
                "free_blocks": pool.n_free_blocks()}
