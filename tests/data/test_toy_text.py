"""Toy datasets, the character corpus and the progress bar."""
import io

import numpy as np
import pytest

from lezero.data import DataLoader, progress
from lezero.data.datasets import CharDataset, SinCurve, Spiral, get_spiral, load_corpus


def test_spiral_is_fixed_balanced_and_split():
    ds = Spiral()
    x, t = ds[0]
    assert len(ds) == 300 and x.shape == (2,) and x.dtype == np.float32
    assert np.bincount(ds.targets).tolist() == [100, 100, 100]
    np.testing.assert_array_equal(get_spiral(True)[0], Spiral().data)   # deterministic
    assert not np.array_equal(Spiral(train=False).data, ds.data)
    assert np.abs(ds.data).max() <= 1.0 + 1e-6


def test_sin_curve_pairs_are_consecutive():
    ds = SinCurve(train=False)
    x0, y0 = ds[10]
    x1, _ = ds[11]
    assert len(ds) == 1000 and x0.shape == (1,)
    assert y0 == x1
    np.testing.assert_allclose(ds.data[:, 0], np.sin(np.linspace(0, 2 * np.pi, 1001))[:-1],
                               atol=1e-6)
    noisy = SinCurve(train=True)
    assert 0 < np.abs(noisy.data - ds.data).max() <= 0.05 + 1e-6


def test_char_dataset_windows_and_codec():
    text = load_corpus()
    assert len(text) > 5000 and "lamp" in text
    ds = CharDataset(seq_len=20, stride=5)
    x, y = ds[3]
    assert x.dtype == np.int64 and x.shape == y.shape == (20,)
    assert ds.decode(x) == text[15:35] and ds.decode(y) == text[16:36]
    assert ds.decode(ds.encode("the lamp")) == "the lamp"
    last_x, last_y = ds[len(ds) - 1]
    assert ds.decode(last_y)[-1] in text[-6:]
    with pytest.raises(IndexError):
        ds[len(ds)]
    with pytest.raises(ValueError, match="'#' is not in the vocabulary"):
        ds.encode("#")
    with pytest.raises(FileNotFoundError, match="shipped: \\['tiny_corpus'\\]"):
        load_corpus("nope")
    batches = list(DataLoader(CharDataset("abcabcabcabc", seq_len=3), batch_size=4))
    assert batches[0][0].shape == (4, 3)


def test_progress_wraps_and_counts():
    out = io.StringIO()
    items = list(progress(range(5), desc="x", file=out, mininterval=0))
    assert items == [0, 1, 2, 3, 4]
    assert "5/5" in out.getvalue()
    loader = DataLoader(list(range(7)), batch_size=2)
    bar = progress(loader, file=io.StringIO())
    assert bar.total == 4 and sum(len(b) for b in bar) == 7


def test_progress_without_tqdm_falls_back_to_a_counter(monkeypatch, capsys):
    import sys
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)       # import tqdm.auto fails
    bar = progress(range(4), desc="epoch")
    assert list(bar) == [0, 1, 2, 3] and len(bar) == 4
    assert "epoch: 4/4" in capsys.readouterr().err
    with pytest.raises(TypeError, match="no length"):
        len(progress(iter(range(3))))
