"""The runtime's policy: every threshold, constant and thread setting in one object, each
with its value and where it came from.

``policy.<name>`` is a plain attribute (read on hot paths); assigning one is a change
"in code" and shows as such.  ``show()`` prints every entry, the thread and BLAS settings
of ``lz.Config`` (per thread: ``using_config("conv_threads", 1)``) and the environment
variables LeZero reads.  ``use_profile("serial")`` runs everything on the calling thread
(no split, no Numba pool, BLAS held to one thread); ``use_profile("default")`` restores
the measured policy.  ``LEZERO_PROFILE=serial`` applies the serial profile at import.

Why each value is what it is: docs/performance.md (the measurements, with their dates).
"""
import contextlib
import os

from lezero.core import get_config, register_setting
from lezero.runtime import variables

__all__ = ["policy", "Policy", "show", "rows", "use_profile", "PROFILES", "SETTINGS"]

PROFILES = ("default", "serial")

# The thread and BLAS settings of lz.Config: per thread, set with using_config.
SETTINGS = (
    ("use_numba", True, "run the Numba kernels (False: the NumPy references)"),
    ("conv_threads", 0, "threads of a split kernel (0: the policy's threads)"),
    ("split_when_faster", True, "optimizer updates may split when measured faster"),
    ("pair_gemms", True, "run linear's two backward products at once"),
    ("small_gemm_one_thread", True, "run products below small_flops on one BLAS thread"),
    ("release_inputs", True, "graphs hold inputs backward never reads as edges, no array"),
)
for _name, _default, _ in SETTINGS:
    register_setting(_name, _default)


class Policy:
    """Named values with a default, a meaning and a source ("default", "env: NAME" or
    "code"); ``policy.name = value`` sets one (a number >= 0 where the default is one)."""

    def __init__(self):
        object.__setattr__(self, "_entries", {})

    def define(self, name, default, meaning, source="default"):
        """Add an entry (its value is ``default`` until set)."""
        self._entries[name] = {"default": default, "meaning": meaning, "source": source}
        object.__setattr__(self, name, default)

    def __setattr__(self, name, value):
        entry = self._entries.get(name)
        if entry is None:
            raise AttributeError(f"lezero.runtime.policy has no entry {name!r}")
        default = entry["default"]
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"lezero.runtime.policy.{name} must be a number, got "
                                f"{type(value).__name__}")
            if not value >= 0:
                raise ValueError(f"lezero.runtime.policy.{name} must be >= 0, got {value!r}")
        object.__setattr__(self, name, value)
        entry["source"] = "code"

    def reset(self, name):
        """Back to the entry's default (and its source to "default")."""
        entry = self._entries[name]
        object.__setattr__(self, name, entry["default"])
        entry["source"] = "default"

    @contextlib.contextmanager
    def using(self, **values):
        """Set entries inside a ``with`` block; their values and sources come back after."""
        saved = {name: (getattr(self, name), self.source(name)) for name in values}
        try:
            for name, value in values.items():
                setattr(self, name, value)
            yield self
        finally:
            for name, (value, source) in saved.items():
                object.__setattr__(self, name, value)
                self._entries[name]["source"] = source

    def source(self, name):
        """Where the entry's value came from."""
        return self._entries[name]["source"]

    def entries(self):
        """(name, value, source, meaning) of every entry, in definition order."""
        return [(name, getattr(self, name), entry["source"], entry["meaning"])
                for name, entry in self._entries.items()]

    def machine(self, key):
        """The machine profile's ``key`` (an entry ``machine_<key>``)."""
        return getattr(self, "machine_" + key)


def _environment_threads():
    """(count, source): NUMBA_NUM_THREADS, else OMP_NUM_THREADS, else the CPU count."""
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
        text = variables.getenv(name)
        if text and text.strip().isdigit() and int(text) > 0:
            return int(text), f"env: {name}"
    return os.cpu_count() or 1, "default"


policy = Policy()
_threads, _source = _environment_threads()
policy.define("threads", _threads, "threads a split kernel may use (read once)", _source)
_DEFINITIONS = (
    # -- splitting a kernel's independent parts over threads (lezero.runtime.scheduler)
    ("min_part_items", 1 << 17, "elements per part of a split elementwise kernel (GELU)"),
    ("cheap_min_part_items", 1 << 18, "elements per part for a cheap one (ReLU)"),
    ("update_min_part_items", 1 << 18, "elements per part of an optimizer update"),
    ("pool_min_part_items", 1 << 17, "input elements per part of max pooling"),
    ("gather_min_part_items", 1 << 18, "elements per worker part of a conv gather below "
     "serial_below (im2col, Winograd tiles; x4 multiply-adds for depthwise)"),
    ("conv_min_part_flops", 4e6, "flops per batch part of a convolution product"),
    ("conv_product_min_part_flops", 3.2e7, "the same for an algorithm made of matrix "
     "products, where they split over native threads (gemm.native_threads)"),
    ("pointwise_columns_below", 512, "maps smaller than this run a batch's 1x1 "
     "convolution as one product over all its columns (conv.direct)"),
    ("conv_min_part_columns", 64, "columns per batch part of a convolution's one product "
     "(im2col's), where the whole product splits over native threads"),
    ("attention_min_part_flops", 4e6, "flops per part of the fused attention's heads"),
    ("lstm_min_part_flops", 1e6, "flops per chunk of an LSTM step's product"),
    ("serial_below", 1 << 22, "elements below which a conv kernel skips Numba's pool"),
    ("split_explore", 16, "an adaptive split tries the other way every this many calls"),
    ("split_window", 3, "timings an adaptive split keeps per way"),
    # -- BLAS (lezero.runtime.blas)
    ("small_flops", 8e6, "products below this many flops run on one BLAS thread"),
    ("few_rows", 32, "x @ W.T with 2 to this many rows of x runs as (W @ x.T).T on NumPy"),
    ("gemm_min_part_flops", 4e6, "flops per part of a product split over threads (MKL)"),
    ("stack_min_flops", 5e5, "flops per matrix from which a small stack runs on MKL"),
    ("openblas_thread_flops", 1e6, "flops from which a product on NumPy's OpenBLAS "
     "counts as split over its own threads (it threads from 2^18 multiply-adds)"),
    ("split_stacks", 1, "1: a stack of products on NumPy's BLAS is cut across the "
     "threads by its leading axis (blas.split_stack)"),
    ("gemm_team", 1, "1: a large product's blocks on native worker threads (gemm_team)"),
    ("pair_max_flops", 2.5e8, "Linear's backward runs its two products at once below "
     "this many flops each (above: one after the other, each on gemm_team)"),
    ("team_spin", 2000, "sched_yield polls of an idle gemm_team worker before it dozes"),
    ("team_doze_us", 50, "usleep of a dozing gemm_team worker between polls"),
    ("team_doze_polls", 400, "dozes of a gemm_team worker before it sleeps longer"),
    ("team_sleep_us", 1000, "first usleep of a sleeping gemm_team worker between polls"),
    ("team_sleep_max_us", 50000, "longest usleep of a sleeping gemm_team worker (doubling)"),
    ("gemm_min_part_rows", 32, "rows per part before a product is cut by columns (MKL)"),
    # -- waits (lezero.runtime.workers, lezero.runtime.waits)
    ("spin_reads", 1 << 18, "atomic reads a join spins (~0.1 ms) before it sleeps"),
    ("meet_spin_reads", 1 << 19, "reads a meeting of chunks spins (~0.2 ms) before it sleeps"),
    # -- the machine profile behind the convolution cost model (functions/conv/machine)
    ("machine_gemm_gflops", 75.0, "large sgemm, one thread, GFLOP/s"),
    ("machine_gemm_half_dim", 48.0, "smallest GEMM dim at which sgemm is at half speed"),
    ("machine_gemm_matrix_s", 1e-6, "overhead per matrix of a stacked matmul, s"),
    ("machine_stream_gbps", 6.0, "a kernel or copy streaming memory, GB/s"),
    ("machine_call_s", 15e-6, "fixed cost of one NumPy call, s"),
    ("machine_plane_s", 0.5e-6, "fixed cost per (n, c) plane of a Numba kernel, s"),
    ("machine_fft_gflops", 3.0, "pocketfft throughput, GFLOP/s"),
)
for _entry in _DEFINITIONS:
    policy.define(*_entry)
policy.define("profile", "default", "'default' (the measured policy) or 'serial'")
_gemm = (variables.getenv("LEZERO_GEMM") or "").strip().lower()
_GEMMS = ("auto", "mkl", "numpy")
policy.define("gemm", _gemm if _gemm in _GEMMS else "auto",
              "'auto': float and int8 products on Intel MKL where the mkl wheel is "
              "installed and the CPU is Intel's (elsewhere MKL's generic code ran them "
              "slower than OpenBLAS and LeZero's int8 kernel); 'mkl': on MKL on any CPU; "
              "'numpy': on NumPy's BLAS and LeZero's kernels (lezero.runtime.mkl)",
              "env: LEZERO_GEMM" if _gemm in _GEMMS else "default")


class _State:
    """What the profile switched: ``serial`` is read on every split decision."""
    serial = False
    blas_limit = None        # threadpoolctl's limit while the serial profile holds BLAS


state = _State()


def use_profile(name):
    """Switch the process to a profile: ``"serial"`` (no threads anywhere: one part per
    split, Numba's pool unused, BLAS held to one thread) or ``"default"``."""
    _apply(name, "code")


def _apply(name, source):
    if name not in PROFILES:
        raise ValueError(f"lezero.runtime.use_profile: profile must be one of {PROFILES}, "
                         f"got {name!r}")
    from lezero.runtime import blas
    state.serial = name == "serial"
    if state.serial:            # (again, when already serial: something may have raised it)
        limit = blas.limit_all(1)
        state.blas_limit = state.blas_limit or limit    # the first one restores the original
    elif state.blas_limit is not None:
        state.blas_limit.restore_original_limits()
        state.blas_limit = None
    object.__setattr__(policy, "profile", name)
    policy._entries["profile"]["source"] = source


def apply_environment():
    """The profile ``LEZERO_PROFILE`` names, once, at import."""
    name = variables.getenv("LEZERO_PROFILE")
    if name:
        _apply(name.strip().lower(), "env: LEZERO_PROFILE")


def rows():
    """(section, name, value, source, meaning) of everything ``show()`` prints."""
    out = [("policy",) + entry for entry in policy.entries()]
    config = get_config()
    for name, default, meaning in SETTINGS:
        value = getattr(config, name)
        out.append(("lz.Config", name, value, "default" if value == default else "code",
                    meaning))
    for name, meaning, reader in variables.VARIABLES:
        value = variables.getenv(name)
        out.append(("environment", name, value, "set" if value is not None else "unset",
                    f"{meaning} [{reader}]"))
    return out


def show(file=None):
    """Print every setting: its value and where it came from (default, env, code)."""
    section = None
    for sec, name, value, source, meaning in rows():
        if sec != section:
            print(f"{'' if section is None else chr(10)}[{sec}]", file=file)
            section = sec
        shown = "-" if value is None else repr(value) if isinstance(value, str) else value
        print(f"  {name:<26} {str(shown):<12} {source:<30} {meaning}", file=file)
