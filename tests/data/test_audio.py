"""Audio features: the STFT against torch.stft, the mel filterbank by hand, the log-mel
spectrogram of pure tones, resampling, and the error messages."""
import numpy as np
import pytest
import torch

from lezero.data.audio import (hann_window, hz_to_mel, log_mel_spectrogram, mel_filterbank,
                               mel_to_hz, resample, stft)


def test_hann_window_matches_torch():
    for n in (1, 4, 25, 400):
        np.testing.assert_allclose(hann_window(n), torch.hann_window(n, dtype=torch.float64),
                                   atol=1e-12)
    np.testing.assert_allclose(hann_window(5, periodic=False), [0, 0.5, 1, 0.5, 0], atol=1e-12)


@pytest.mark.parametrize("n_fft,hop,win,center,pad_mode", [
    (64, 16, None, True, "reflect"), (400, 160, 400, True, "reflect"),
    (64, 10, 48, True, "constant"), (32, 8, None, False, "reflect")])
def test_stft_matches_torch(n_fft, hop, win, center, pad_mode):
    x = np.random.default_rng(0).standard_normal((2, 3, 1000))
    got = stft(x, n_fft, hop, win, center=center, pad_mode=pad_mode)
    window = torch.hann_window(win or n_fft, dtype=torch.float64)
    want = torch.stft(torch.from_numpy(x.reshape(6, 1000)), n_fft, hop, win, window,
                      center=center, pad_mode=pad_mode, return_complex=True).numpy()
    assert got.shape == (2, 3) + want.shape[1:]
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-10, atol=1e-9)


def test_mel_scale_and_a_one_filter_bank_by_hand():
    assert hz_to_mel(1000.0) == pytest.approx(1000.0, abs=0.02)      # HTK's anchor point
    np.testing.assert_allclose(mel_to_hz(hz_to_mel([0.0, 440.0, 7000.0])), [0, 440, 7000],
                               atol=1e-9)
    # 5 bins at 0, 1 k, 2 k, 3 k, 4 kHz; one filter from 0 to 4 kHz peaking at the
    # frequency halfway in mel: 700 (10^(m(4000)/2/2595) - 1) = 1113.8 Hz
    centre = 700 * (10 ** (2595 * np.log10(1 + 4000 / 700) / 2 / 2595) - 1)
    assert centre == pytest.approx(1113.8, abs=0.1)
    fb = mel_filterbank(5, 0.0, 4000.0, 1, 8000)
    want = [0.0, 1000 / centre, (4000 - 2000) / (4000 - centre),
            (4000 - 3000) / (4000 - centre), 0.0]
    np.testing.assert_allclose(fb[:, 0], want, rtol=1e-12)


def test_mel_filters_are_triangles_between_neighbouring_points():
    fb = mel_filterbank(201, 0.0, 8000.0, 40, 16000)
    assert fb.shape == (201, 40)
    assert fb.min() == 0.0 and fb.max() <= 1.0
    peaks = fb.argmax(axis=0)
    assert np.all(np.diff(peaks) >= 0)                 # centres rise with the filter index
    # inside its support each filter is piecewise linear in Hz: constant second difference
    # away from the peak, so check the rising edge of a wide high filter
    col = fb[:, 35]
    rising = col[:peaks[35]][col[:peaks[35]] > 0]
    assert len(rising) > 3 and np.allclose(np.diff(rising, 2), 0, atol=1e-12)


def test_log_mel_of_pure_tones_peaks_in_the_right_band():
    sr, t = 16000, np.arange(16000) / 16000
    fb = mel_filterbank(201, 0.0, 8000.0, 40, sr)
    for f in (300.0, 1200.0, 4000.0):
        feats = log_mel_spectrogram(np.sin(2 * np.pi * f * t), sr)
        assert feats.shape == (40, 101) and feats.dtype == np.float32
        band = int(np.argmax(feats[:, 50]))
        # the band whose triangle weighs the tone's bin most
        assert band == int(np.argmax(fb[int(round(f / 40))]))
    silence = log_mel_spectrogram(np.zeros(1600), sr)
    np.testing.assert_allclose(silence, np.log(1e-6), rtol=1e-6)


def test_resample_keeps_a_tone_and_changes_the_length():
    t = np.arange(22050) / 22050
    y = resample(np.sin(2 * np.pi * 440 * t), 22050, 16000)
    assert y.shape == (16000,)
    spectrum = np.abs(np.fft.rfft(y))
    assert abs(int(np.argmax(spectrum)) - 440) <= 1     # 1 Hz bins over one second


def test_errors_name_the_function_and_argument():
    with pytest.raises(ValueError, match="stft: hop_length must be a positive int"):
        stft(np.zeros(100), 16, 0)
    with pytest.raises(ValueError, match="stft: win_length must be <= 16"):
        stft(np.zeros(100), 16, 4, 32)
    with pytest.raises(TypeError, match="stft: x must be a real signal array"):
        stft(np.zeros(100, dtype=complex))
    with pytest.raises(ValueError, match="stft: the signal has 10 samples"):
        stft(np.zeros(10), 32, center=False)
    with pytest.raises(ValueError,
                       match=r"mel_filterbank: f_max must be in \(0.0, 4000.0\], got 5000"):
        mel_filterbank(5, 0.0, 5000.0, 2, 8000)
