"""Audio features in NumPy: the short-time Fourier transform, a mel filterbank and the
log-mel spectrogram that speech models read.

The conventions are PyTorch's so that results can be compared with it: ``stft`` equals
``torch.stft(x, n_fft, hop_length, win_length, torch.hann_window(win_length),
center=True, pad_mode="reflect", return_complex=True)`` (a periodic Hann window,
centred frames, shape (..., n_fft // 2 + 1, frames)); ``mel_filterbank`` follows
torchaudio's ``melscale_fbanks`` (HTK mel scale, triangles in Hz between neighbouring
mel points, no area normalisation), shape (n_freqs, n_mels).
"""
import numpy as np

from lezero.utils.checks import check_choice, check_int, check_number

__all__ = ["hann_window", "stft", "hz_to_mel", "mel_to_hz", "mel_filterbank",
           "log_mel_spectrogram", "resample"]


def hann_window(n, periodic=True):
    """The Hann window of length ``n`` (periodic, as ``torch.hann_window``, by default)."""
    n = check_int("hann_window", "n", n, low=1)
    if n == 1:
        return np.ones(1)
    denom = n if periodic else n - 1
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / denom)


def stft(x, n_fft=400, hop_length=None, win_length=None, center=True, pad_mode="reflect"):
    """Complex STFT of signals ``x`` (..., time): (..., n_fft // 2 + 1, frames).

    Frames of ``n_fft`` samples every ``hop_length`` (default ``n_fft // 4``), each
    multiplied by a Hann window of ``win_length`` (default ``n_fft``) samples centred in
    the frame; ``center`` pads ``n_fft // 2`` samples on both sides (``pad_mode``
    ``"reflect"`` or ``"constant"``) so frame ``t`` is centred on sample ``t * hop``."""
    where = "stft"
    x = np.asarray(x)
    if x.ndim < 1 or x.dtype.kind not in "fiu":
        raise TypeError(f"{where}: x must be a real signal array, got dtype {x.dtype} with "
                        f"shape {x.shape}")
    n_fft = check_int(where, "n_fft", n_fft, low=2)
    hop = check_int(where, "hop_length", n_fft // 4 if hop_length is None else hop_length,
                    low=1)
    win = check_int(where, "win_length", n_fft if win_length is None else win_length,
                    low=1, high=n_fft)
    check_choice(where, "pad_mode", pad_mode, ("reflect", "constant"))
    window = np.zeros(n_fft)
    left = (n_fft - win) // 2
    window[left:left + win] = hann_window(win)
    if center:
        pad = [(0, 0)] * (x.ndim - 1) + [(n_fft // 2, n_fft // 2)]
        x = np.pad(x, pad, mode=pad_mode)
    if x.shape[-1] < n_fft:
        raise ValueError(f"{where}: the signal has {x.shape[-1]} samples (after padding), "
                         f"fewer than n_fft={n_fft}")
    frames = np.lib.stride_tricks.sliding_window_view(x, n_fft, axis=-1)[..., ::hop, :]
    spec = np.fft.rfft(frames * window, axis=-1)          # (..., frames, freqs)
    return np.swapaxes(spec, -1, -2)


def hz_to_mel(f):
    """HTK's mel scale: ``2595 log10(1 + f / 700)``."""
    return 2595.0 * np.log10(1.0 + np.asarray(f, dtype=np.float64) / 700.0)


def mel_to_hz(m):
    """The inverse of ``hz_to_mel``."""
    return 700.0 * (10.0 ** (np.asarray(m, dtype=np.float64) / 2595.0) - 1.0)


def mel_filterbank(n_freqs, f_min, f_max, n_mels, sample_rate):
    """Triangular filters (n_freqs, n_mels): filter ``m`` rises linearly (in Hz) from mel
    point ``m`` to ``m + 1`` and falls to ``m + 2``, the ``n_mels + 2`` points evenly
    spaced in mel between ``f_min`` and ``f_max``; ``n_freqs`` STFT bins span 0 ..
    sample_rate / 2."""
    where = "mel_filterbank"
    n_freqs = check_int(where, "n_freqs", n_freqs, low=2)
    n_mels = check_int(where, "n_mels", n_mels, low=1)
    sample_rate = check_number(where, "sample_rate", sample_rate, low=0, low_open=True)
    f_min = check_number(where, "f_min", f_min, low=0)
    f_max = check_number(where, "f_max", f_max, low=f_min, low_open=True, high=sample_rate / 2)
    freqs = np.linspace(0, sample_rate / 2, n_freqs)
    points = mel_to_hz(np.linspace(hz_to_mel(f_min), hz_to_mel(f_max), n_mels + 2))
    lower, centre, upper = points[:-2], points[1:-1], points[2:]
    rising = (freqs[:, None] - lower) / (centre - lower)
    falling = (upper - freqs[:, None]) / (upper - centre)
    return np.maximum(0.0, np.minimum(rising, falling))


def log_mel_spectrogram(x, sample_rate, n_fft=400, hop_length=160, n_mels=40, f_min=0.0,
                        f_max=None, eps=1e-6):
    """``log(mel_filterbank^T |stft(x)|^2 + eps)``: float32 (..., n_mels, frames).

    Defaults suit 16 kHz speech: 25 ms windows every 10 ms, 40 mel bands."""
    spec = np.abs(stft(x, n_fft, hop_length)) ** 2                  # (..., freqs, frames)
    fb = mel_filterbank(n_fft // 2 + 1, f_min, sample_rate / 2 if f_max is None else f_max,
                        n_mels, sample_rate)
    mel = np.einsum("...ft,fm->...mt", spec, fb)
    return np.log(mel + eps).astype(np.float32)


def resample(x, orig_rate, new_rate):
    """Polyphase resampling (SciPy's ``resample_poly``, which low-passes first) from
    ``orig_rate`` to ``new_rate`` Hz along the last axis."""
    from math import gcd
    from scipy.signal import resample_poly
    orig_rate = check_int("resample", "orig_rate", orig_rate, low=1)
    new_rate = check_int("resample", "new_rate", new_rate, low=1)
    g = gcd(orig_rate, new_rate)
    return resample_poly(np.asarray(x, dtype=np.float64), new_rate // g, orig_rate // g,
                         axis=-1)
