"""SpeechCTC: a PyTorch twin (conv front end, bidirectional GRU/LSTM, linear) loads the
same keys and agrees on log-probabilities and on the gradient of the CTC loss; decoding
and error rates on hand-made cases."""
import numpy as np
import pytest
import torch

import lezero.functions as F
from lezero.nn.models import SpeechCTC, get_model
from lezero.nn.models.speech_ctc import edit_distance, error_rate, greedy_decode

from tests.nn.models._helpers import assert_grads_close, torch_state

tnn = torch.nn


class TSpeech(tnn.Module):
    def __init__(self, n_mels, classes, channels, hidden, rnn):
        super().__init__()

        def block(cin, cout, k, s):
            return tnn.Sequential(tnn.Conv1d(cin, cout, k, s, k // 2, bias=False),
                                  tnn.BatchNorm1d(cout), tnn.ReLU())
        self.front = tnn.Sequential(block(n_mels, channels, 5, 2), block(channels, channels, 5, 2),
                                    block(channels, channels, 3, 1))
        self.rnn = (tnn.GRU if rnn == "gru" else tnn.LSTM)(channels, hidden, bidirectional=True)
        self.fc = tnn.Linear(2 * hidden, classes)

    def forward(self, x):
        h, _ = self.rnn(self.front(x).permute(2, 0, 1))
        return self.fc(h).log_softmax(-1)


@pytest.mark.parametrize("rnn", ["gru", "lstm"])
def test_speech_ctc_matches_the_twin_with_ctc_gradients(rnn):
    torch.manual_seed(0)
    ref = TSpeech(8, 5, 12, 10, rnn)
    model = get_model("speech_ctc", n_mels=8, num_classes=5, channels=12, hidden_size=10,
                      rnn=rnn, dropout=0.0)
    assert list(model.state_dict()) == list(ref.state_dict())
    model.load_state_dict(torch_state(ref))
    x = np.random.default_rng(0).standard_normal((3, 8, 37)).astype(np.float32)
    lengths = np.array([37, 30, 22])
    out_lengths = model.output_lengths(lengths)
    targets = np.array([[1, 2, 2], [3, 4, 0], [1, 0, 0]])
    target_lengths = np.array([3, 2, 1])
    lp = model(x)
    tlp = ref(torch.from_numpy(x))
    assert lp.shape == (10, 3, 5) and out_lengths.tolist() == [10, 8, 6]
    np.testing.assert_allclose(lp.data, tlp.detach().numpy(), rtol=1e-4, atol=1e-5)
    loss = F.ctc_loss(lp, targets, out_lengths, target_lengths)
    tloss = tnn.functional.ctc_loss(tlp, torch.from_numpy(targets), torch.from_numpy(out_lengths),
                                    torch.from_numpy(target_lengths))
    assert loss.item() == pytest.approx(tloss.item(), rel=1e-4)
    loss.backward()
    tloss.backward()
    assert_grads_close(model, ref, ("front.0.0.weight", "rnn.weight_hh_l0_reverse",
                                    "fc.weight"), rel_atol=1e-4)
    model.eval(), ref.eval()
    np.testing.assert_allclose(model(x).data, ref(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def test_output_lengths_are_the_front_ends_frame_counts():
    model = SpeechCTC(4, 3, channels=4, hidden_size=3).eval()
    for t in (1, 2, 7, 8, 9, 40):
        assert model.front(np.zeros((1, 4, t), np.float32)).shape[2] == \
            model.output_lengths([t])[0]


def test_greedy_decode_merges_repeats_and_drops_blanks():
    # frames: 1 1 0 1 2 2 0 0 -> "1 1 2" (the blank separates the two 1s); sample 2 stops
    # after 3 frames: 2 2 0 -> "2"
    paths = np.array([[1, 1, 0, 1, 2, 2, 0, 0], [2, 2, 0, 1, 1, 1, 1, 1]]).T
    scores = np.full((8, 2, 3), -5.0)
    for t in range(8):
        for n in range(2):
            scores[t, n, paths[t, n]] = 0.0
    assert greedy_decode(scores, [8, 3]) == [[1, 1, 2], [2]]
    assert greedy_decode(scores) == [[1, 1, 2], [2, 1]]
    with pytest.raises(ValueError, match=r"greedy_decode: log_probs must be \(T, N, C\)"):
        greedy_decode(np.zeros((3, 4)))


def test_edit_distance_and_error_rate_by_hand():
    assert edit_distance([1, 2, 3], [1, 2, 3]) == 0
    assert edit_distance([1, 2, 3], [1, 3]) == 1            # one deletion
    assert edit_distance([1, 2, 3], [4, 1, 2, 3]) == 1      # one insertion
    assert edit_distance([1, 2, 3], [3, 2, 1]) == 2         # two substitutions
    assert edit_distance([], [5, 5]) == 2
    # 1 + 2 errors over 3 + 2 reference digits
    assert error_rate([[1, 2, 3], [4, 5]], [[1, 3], [6]]) == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match="error_rate: 2 references but 1 hypotheses"):
        error_rate([[1], [2]], [[1]])


def test_speech_ctc_rejects_bad_arguments():
    with pytest.raises(ValueError, match="SpeechCTC: rnn must be one of"):
        SpeechCTC(rnn="transformer")
    with pytest.raises(ValueError, match="SpeechCTC: num_classes must be >= 2"):
        SpeechCTC(num_classes=1)
