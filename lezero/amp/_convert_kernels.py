"""Numba kernels of ``lezero.amp.convert`` (imported on first use; NumPy's astype is their
reference)."""
import numba
import numpy as np


@numba.njit(cache=True)
def float32_bits_to_float16(src, bits, out):
    """Round float32 values (``src``, and ``bits``: the same memory as uint32) to float16
    bit patterns (``out``, uint16), half to even, as ``astype`` does."""
    for i in range(src.size):
        u = bits[i]
        sign = (u >> 16) & 0x8000
        a = u & 0x7FFFFFFF
        if a >= 0x7F800000:                       # inf or NaN (payload kept)
            h = 0x7C00 | ((a & 0x7FFFFF) >> 13)
            if a > 0x7F800000 and h == 0x7C00:
                h = 0x7C01
        elif a >= 0x477FF000:                     # rounds past 65504: inf
            h = 0x7C00
        elif a >= 0x38800000:                     # a normal float16
            a += 0xFFF + ((a >> 13) & 1)          # round half to even
            h = (a - 0x38000000) >> 13
        else:                                     # subnormal or zero: exact in float64
            h = np.uint32(np.rint(abs(src[i]) * 16777216.0))
        out[i] = np.uint16(h | sign)


@numba.njit(cache=True)
def lookup(bits, table, out):
    """``out[i] = table[bits[i]]`` (float16 -> float32 through the table of all 65536)."""
    for i in range(bits.size):
        out[i] = table[bits[i]]
