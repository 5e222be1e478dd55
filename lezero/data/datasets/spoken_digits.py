"""Spoken digit sequences synthesized offline with espeak-ng, generated once and cached.

Each utterance says 1 to ``max_digits`` digits ("three one four") in one of several
espeak-ng voices (accents and voice variants) at a random speed and pitch, resampled to
16 kHz; the test split's 5 voices are not among the training split's 20.  The set is
deterministic by ``seed``; the first use runs espeak-ng (about 0.05 s per utterance) and
writes ``spoken_digits/<split>-<n>-<max_digits>-<seed>-v<version>.npz`` under
``$LEZERO_DATA`` (default ``~/.cache/lezero/datasets``) atomically; later uses read it.

espeak-ng is a system package (Debian/Ubuntu: ``apt-get install espeak-ng``); without it
``SpokenDigits`` raises a ``RuntimeError`` saying so.  ``synthetic_digits`` makes a
stand-in without espeak-ng: each digit a short two-tone chord, so code paths can be
exercised anywhere (it is not speech).
"""
import os
import shutil
import subprocess

import numpy as np

from lezero.data.audio import resample
from lezero.data.dataset import Dataset
from lezero.data.datasets.download import default_root
from lezero.data.datasets.errors import NpzFileError
from lezero.utils.checks import check_int
from lezero.utils.files import atomic_write
from lezero.utils.npy import read_npz

__all__ = ["DIGIT_WORDS", "VOICES", "TRAIN_VOICES", "TEST_VOICES", "espeak_available",
           "synthesize", "SpokenDigits", "synthetic_digits"]

DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
               "nine")
# 5 accents x 5 voice variants; one variant per accent is held out for the test split,
# so the test measures recognition of speakers never heard in training
_ACCENTS = ("en-us", "en", "en-gb-scotland", "en-029", "en-us-nyc")
_VARIANTS = ("m1", "m3", "m7", "f2", "f4")
VOICES = tuple(f"{a}+{v}" for a in _ACCENTS for v in _VARIANTS)
TEST_VOICES = tuple(f"{a}+{v}" for a, v in zip(_ACCENTS, _VARIANTS))
TRAIN_VOICES = tuple(v for v in VOICES if v not in TEST_VOICES)
_VERSION = 2            # bump when what a (split, n, seed) file holds changes
SAMPLE_RATE = 16000
_INSTALL = ("espeak-ng is not installed; install it (Debian/Ubuntu: apt-get install "
            "espeak-ng) to synthesize the spoken digits")


def espeak_available():
    """True when the ``espeak-ng`` program is on the PATH."""
    return shutil.which("espeak-ng") is not None


def _parse_wav(data):
    """Samples and rate of espeak-ng's streamed WAV (its header sizes are placeholders,
    so the chunk is read to the end of the bytes rather than by its size)."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise RuntimeError("espeak-ng did not return WAV data")
    rate = int.from_bytes(data[24:28], "little")
    start = data.find(b"data", 12) + 8
    return np.frombuffer(data[start:len(data) - (len(data) - start) % 2], "<i2"), rate


def synthesize(text, voice="en-us", speed=160, pitch=50):
    """``text`` spoken by espeak-ng: float32 samples in [-1, 1] at 16 kHz."""
    if not espeak_available():
        raise RuntimeError(_INSTALL)
    out = subprocess.run(["espeak-ng", "--stdout", "-v", voice, "-s", str(int(speed)),
                          "-p", str(int(pitch)), text], capture_output=True, check=True,
                         timeout=60)
    samples, rate = _parse_wav(out.stdout)
    wave = resample(samples.astype(np.float64) / 32768.0, rate, SAMPLE_RATE)
    return np.clip(wave, -1, 1).astype(np.float32)


def _plan(n, max_digits, seed, pool):
    """What each utterance says and how: digit lists and (voice, speed, pitch)."""
    rng = np.random.default_rng([seed, max_digits, 7])
    digits = [rng.integers(0, 10, int(rng.integers(1, max_digits + 1))) for _ in range(n)]
    voices = [(pool[int(rng.integers(len(pool)))], int(rng.integers(120, 221)),
               int(rng.integers(25, 76))) for _ in range(n)]
    return digits, voices


def _generate(path, n, max_digits, seed, pool, progress):
    digits, voices = _plan(n, max_digits, seed, pool)
    waves = []
    for i, (d, (voice, speed, pitch)) in enumerate(zip(digits, voices)):
        waves.append(synthesize(" ".join(DIGIT_WORDS[k] for k in d), voice, speed, pitch))
        if progress and (i + 1) % 200 == 0:
            print(f"SpokenDigits: synthesized {i + 1}/{n} utterances", flush=True)
    labels = np.full((n, max_digits), -1, dtype=np.int64)
    for i, d in enumerate(digits):
        labels[i, :len(d)] = d
    pcm = np.concatenate([np.round(w * 32767).astype(np.int16) for w in waves])
    offsets = np.cumsum([0] + [len(w) for w in waves]).astype(np.int64)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, lambda f: np.savez(f, pcm=pcm, offsets=offsets, labels=labels,
                                          voices=np.array([v[0] for v in voices])),
                 where="SpokenDigits")


def _read_cache(path):
    """``(pcm, offsets, labels, voices)`` of a cache file, checked for consistency (a
    cache may be tampered with: it lives in a shared folder)."""
    arrays = read_npz(path, ("pcm", "offsets", "labels", "voices"), who="SpokenDigits: ")
    pcm, offsets, labels, voices = (arrays[k] for k in ("pcm", "offsets", "labels", "voices"))
    n = len(offsets) - 1
    ok = (pcm.ndim == 1 and pcm.dtype == np.int16 and offsets.ndim == 1 and n >= 0 and
          offsets.dtype.kind == "i" and labels.ndim == 2 and labels.dtype.kind == "i" and
          len(labels) == n and voices.ndim == 1 and len(voices) == n)
    if ok:
        ok = offsets[0] == 0 and offsets[-1] == len(pcm) and bool(np.all(np.diff(offsets) >= 0))
    if not ok:
        raise NpzFileError(f"SpokenDigits: {path} is not a consistent cache (pcm {pcm.dtype}"
                           f" {pcm.shape}, offsets {offsets.shape}, labels {labels.shape}, "
                           f"voices {voices.shape}); delete it to regenerate")
    return pcm, offsets, labels, voices


class SpokenDigits(Dataset):
    """Sample ``i`` is ``(wave float32 (samples,) at 16 kHz, digits int64 (k,))``.

    ``train`` picks the split: ``TRAIN_VOICES`` (20) or the 5 held-out ``TEST_VOICES``,
    with different seeds (new sequences, speeds and pitches);
    ``n`` utterances of 1 to ``max_digits`` digits; ``root`` overrides the cache folder.
    ``self.voices[i]`` names the voice of utterance ``i``."""

    sample_rate = SAMPLE_RATE

    def __init__(self, train=True, n=None, max_digits=4, seed=0, root=None, progress=True):
        n = check_int("SpokenDigits", "n", (2000 if train else 300) if n is None else n, low=1)
        max_digits = check_int("SpokenDigits", "max_digits", max_digits, low=1)
        seed = check_int("SpokenDigits", "seed", seed, low=0)
        split_seed = 2 * seed + (0 if train else 1)
        split = "train" if train else "test"
        self.path = os.path.join(root or default_root(), "spoken_digits",
                                 f"{split}-{n}-{max_digits}-{split_seed}-v{_VERSION}.npz")
        if not os.path.isfile(self.path):
            if not espeak_available():
                raise RuntimeError(f"SpokenDigits: {_INSTALL} (nothing is cached at "
                                   f"{self.path})")
            _generate(self.path, n, max_digits, split_seed,
                      TRAIN_VOICES if train else TEST_VOICES, progress)
        pcm, offsets, labels, voices = _read_cache(self.path)
        self.voices = [str(v) for v in voices]
        self.waves = [pcm[a:b].astype(np.float32) / 32767 for a, b in zip(offsets, offsets[1:])]
        self.labels = [row[row >= 0] for row in labels]

    def __len__(self):
        return len(self.waves)

    def __getitem__(self, index):
        return self.waves[index], self.labels[index]


def synthetic_digits(n, max_digits=4, seed=0):
    """A stand-in for ``SpokenDigits`` that needs no espeak-ng: ``(waves, labels)`` lists
    where digit ``d`` is 0.15 s of two tones (300 + 120 d Hz and 1500 + 200 d Hz) with
    short gaps and a little noise.  For smoke runs and tests, not for measuring."""
    rng = np.random.default_rng([seed, max_digits, 11])
    t = np.arange(int(0.15 * SAMPLE_RATE)) / SAMPLE_RATE
    gap = np.zeros(int(0.05 * SAMPLE_RATE))
    waves, labels = [], []
    for _ in range(n):
        d = rng.integers(0, 10, int(rng.integers(1, max_digits + 1)))
        parts = [gap]
        for k in d:
            parts += [0.3 * np.sin(2 * np.pi * (300 + 120 * k) * t)
                      + 0.2 * np.sin(2 * np.pi * (1500 + 200 * k) * t), gap]
        w = np.concatenate(parts)
        waves.append((w + rng.normal(0, 0.01, w.shape)).astype(np.float32))
        labels.append(d.astype(np.int64))
    return waves, labels
