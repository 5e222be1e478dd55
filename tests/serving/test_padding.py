"""Variable-length samples: padding, the mask, length buckets, the cut back, waste records."""
import numpy as np
import pytest

import lezero as lz
from lezero import nn
from lezero.serving import DynamicBatcher, Padding
from lezero.serving.padding import pad_samples

pytestmark = pytest.mark.timeout(30)


def seq(n, width=2, start=1):
    return (np.arange(n * width, dtype=np.float32).reshape(n, width) + start)


def test_pad_samples_pads_with_the_value_and_marks_real_positions():
    batch, mask = pad_samples([seq(1), seq(3)], axis=0, length=4, value=-1)
    assert batch.shape == (2, 4, 2)
    np.testing.assert_array_equal(batch[0], [[1, 2], [-1, -1], [-1, -1], [-1, -1]])
    np.testing.assert_array_equal(batch[1, :3], seq(3))
    np.testing.assert_array_equal(mask, [[1, 0, 0, 0], [1, 1, 1, 0]])
    assert mask.dtype == bool


def test_padding_along_a_later_axis():
    a, b = np.ones((2, 3), np.float32), np.ones((2, 5), np.float32)
    batch, mask = pad_samples([a, b], axis=1, length=5)
    assert batch.shape == (2, 2, 5) and batch[0, :, 3:].sum() == 0
    assert mask.sum(axis=1).tolist() == [3, 5]


def test_model_receives_the_mask_and_results_are_cut_back():
    seen = []

    def fn(x, mask):
        seen.append((x.shape, mask.copy()))
        return x * mask[:, :, None]               # per position: the padded axis stays

    with DynamicBatcher(fn, max_batch_size=8, max_delay_ms=30,
                        padding=Padding(axis=0, value=7)) as b:
        futures = [b.submit(seq(n)) for n in (2, 5, 3)]
        out = [f.result(5) for f in futures]
    for n, y in zip((2, 5, 3), out):
        np.testing.assert_array_equal(y, seq(n))  # each cut back to its own length
    (shape, mask), = seen
    assert shape == (3, 5, 2) and mask.sum(axis=1).tolist() == [2, 5, 3]
    (record,) = b.records
    assert (record.padded_length, record.real_positions, record.padded_positions) == (5, 10, 15)
    assert record.waste == pytest.approx(1 / 3)


def test_buckets_keep_short_and_long_samples_apart():
    shapes = []

    def fn(x, mask):
        shapes.append(x.shape[:2])
        return x.sum(axis=(1, 2))                 # one number per sample: nothing to cut

    padding = Padding(axis=0, buckets=[4, 8], unpad_axis=None)
    with DynamicBatcher(fn, max_batch_size=8, max_delay_ms=30, padding=padding) as b:
        lengths = [1, 7, 3, 8, 12, 2, 20]
        futures = [b.submit(seq(n)) for n in lengths]
        got = [float(f.result(5)) for f in futures]
    assert got == [float(seq(n).sum()) for n in lengths]
    # bucket <=4: lengths 1, 3, 2; bucket <=8: 7, 8; overflow: 12, 20
    assert sorted(shapes) == [(2, 8), (2, 20), (3, 3)]
    assert sorted(r.bucket for r in b.records) == [0, 1, 2]
    stats = b.stats()
    assert stats["real_positions"] == sum(lengths)
    assert stats["padded_positions"] == 3 * 3 + 2 * 8 + 2 * 20


def test_pad_to_bucket_gives_the_bucket_length():
    shapes = []

    def fn(x, mask):
        shapes.append(x.shape[1])
        return x

    with DynamicBatcher(fn, max_batch_size=4, max_delay_ms=20,
                        padding=Padding(axis=0, buckets=[4, 8], pad_to_bucket=True)) as b:
        assert b.submit(seq(5)).result(5).shape == (5, 2)
        assert b.submit(seq(11)).result(5).shape == (11, 2)   # overflow: its own length
    assert shapes == [8, 11]


def test_pass_mask_false_and_a_tuple_of_unpad_axes():
    def fn(x):
        return x, x.sum(axis=1)               # per position, and one vector per sample

    with DynamicBatcher(fn, max_delay_ms=20,
                        padding=Padding(axis=0, pass_mask=False, unpad_axis=(0, None))) as b:
        per_pos, total = b.submit(seq(3)).result(5)
    assert per_pos.shape == (3, 2) and total.shape == (2,)


def test_a_wrong_unpad_axis_fails_the_batch_with_advice():
    with DynamicBatcher(lambda x, mask: x.sum(axis=1), max_delay_ms=0,
                        padding=Padding(axis=0)) as b:
        with pytest.raises(ValueError, match=r"not the padded length 3; set "
                                             r"Padding\(unpad_axis=\.\.\.\)"):
            b.submit(seq(3)).result(5)


def test_every_input_of_a_sample_must_share_the_length():
    with DynamicBatcher(lambda a, b, m: a, padding=Padding(axis=0)) as bt:
        with pytest.raises(ValueError, match=r"share their length along axis 0, got \[2, 3\]"):
            bt.submit((seq(2), seq(3)))
        with pytest.raises(ValueError, match="has no padding axis 0"):
            bt.submit(np.array(1.0, np.float32))


@pytest.mark.parametrize("kwargs, error, match", [
    ({"axis": -1}, ValueError, "axis must be >= 0"),
    ({"buckets": [8, 4]}, ValueError, "buckets must be increasing"),
    ({"buckets": [0, 4]}, ValueError, "buckets must be positive ints"),
    ({"buckets": 8}, TypeError, "buckets must be a list"),
    ({"pad_to_bucket": True}, ValueError, "pad_to_bucket=True needs buckets"),
    ({"pass_mask": 1}, TypeError, "pass_mask must be a bool"),
    ({"value": "0"}, TypeError, "value must be a number"),
])
def test_padding_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        Padding(**kwargs)


class Tagger(nn.Module):
    """An LSTM tagger: one label vector per position (it ignores the mask: an LSTM is
    causal, so padding after a sequence cannot change its outputs)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(2, 4, batch_first=True)
        self.head = nn.Linear(4, 3)

    def forward(self, x, mask=None):
        out, _ = self.lstm(x)
        return self.head(out)


def test_padded_lstm_batches_match_each_sequence_run_alone():
    lz.manual_seed(0)
    model = Tagger().eval()
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((n, 2)).astype(np.float32) for n in (3, 9, 1, 6, 9, 4)]
    with DynamicBatcher(model, max_batch_size=6, max_delay_ms=500,
                        padding=Padding(axis=0, buckets=[4, 16])) as b:
        out = [f.result(10) for f in [b.submit(x) for x in xs]]
    with lz.no_grad():
        for x, y in zip(xs, out):
            np.testing.assert_allclose(y, model(x[None]).data[0], rtol=1e-5, atol=1e-6)
    assert len(b.records) == 2                    # bucket <=4 and bucket <=16


def test_padding_and_batching_keep_the_array_module(xp):
    batch, mask = pad_samples([xp.ones((2, 3), xp.float32), xp.ones((4, 3), xp.float32)],
                              axis=0, length=4)
    assert type(batch) is type(xp.zeros(1)) and type(mask) is type(batch)
    with DynamicBatcher(lambda x, m: x * 2, max_delay_ms=20, padding=Padding(axis=0)) as b:
        futures = [b.submit(xp.ones((n, 3), xp.float32)) for n in (1, 3)]
        out = [f.result(10) for f in futures]
    assert type(out[0]) is type(batch) and [o.shape for o in out] == [(1, 3), (3, 3)]
