"""SpokenDigits: espeak-ng's streamed WAV parsed, the set generated once into the cache and
read back from it, voices held out for the test split, and a clear message without
espeak-ng; the synthetic stand-in is deterministic."""
import os
import struct

import numpy as np
import pytest

from lezero.data.datasets import spoken_digits as sd

needs_espeak = pytest.mark.skipif(not sd.espeak_available(),
                                  reason="espeak-ng is not installed (apt-get install espeak-ng)")


def test_parse_wav_reads_to_the_end_despite_placeholder_sizes():
    samples = np.array([0, 1000, -1000, 32767], dtype="<i2")
    header = (b"RIFF" + struct.pack("<I", 0x7FFFFFFF) + b"WAVEfmt " + struct.pack("<I", 16)
              + struct.pack("<HHIIHH", 1, 1, 22050, 44100, 2, 16) + b"data"
              + struct.pack("<I", 0x7FFFFFFF))
    got, rate = sd._parse_wav(header + samples.tobytes() + b"\x01")   # a stray odd byte
    assert rate == 22050 and got.tolist() == samples.tolist()
    with pytest.raises(RuntimeError, match="did not return WAV"):
        sd._parse_wav(b"nonsense" * 8)


def test_voices_are_split_between_train_and_test():
    assert len(sd.TRAIN_VOICES) == 20 and len(sd.TEST_VOICES) == 5
    assert not set(sd.TRAIN_VOICES) & set(sd.TEST_VOICES)
    # every accent and every variant is heard in both splits
    for voices in (sd.TRAIN_VOICES, sd.TEST_VOICES):
        assert len({v.split("+")[0] for v in voices}) == 5
        assert len({v.split("+")[1] for v in voices}) == 5


def test_missing_espeak_raises_a_message_saying_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(sd, "espeak_available", lambda: False)
    with pytest.raises(RuntimeError, match="apt-get install espeak-ng"):
        sd.SpokenDigits(train=True, n=3, root=str(tmp_path))
    with pytest.raises(RuntimeError, match="espeak-ng is not installed"):
        sd.synthesize("one")


@needs_espeak
def test_spoken_digits_are_generated_once_and_cached(tmp_path, monkeypatch):
    ds = sd.SpokenDigits(train=False, n=4, max_digits=3, root=str(tmp_path), progress=False)
    assert len(ds) == 4 and os.path.isfile(ds.path)
    assert set(ds.voices) <= set(sd.TEST_VOICES)
    for wave, digits in (ds[i] for i in range(4)):
        assert wave.dtype == np.float32 and 1 <= len(digits) <= 3
        # at least ~0.2 s of sound per spoken digit, and not silence
        assert len(wave) > 0.2 * 16000 * len(digits) and np.abs(wave).max() > 0.1
    monkeypatch.setattr(sd, "espeak_available", lambda: False)   # the cache suffices now
    again = sd.SpokenDigits(train=False, n=4, max_digits=3, root=str(tmp_path))
    assert all(np.array_equal(a, b) for a, b in zip(ds.waves, again.waves))
    assert [d.tolist() for d in again.labels] == [d.tolist() for d in ds.labels]


def test_synthetic_digits_are_deterministic_tone_sequences():
    waves, labels = sd.synthetic_digits(5, max_digits=2, seed=3)
    waves2, labels2 = sd.synthetic_digits(5, max_digits=2, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(waves, waves2))
    for w, d in zip(waves, labels):
        assert 1 <= len(d) <= 2
        assert len(w) == int(0.05 * 16000) * (len(d) + 1) + int(0.15 * 16000) * len(d)
