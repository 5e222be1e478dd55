"""Train a speech recognizer (conv front end + bidirectional GRU + CTC) on spoken digit
sequences synthesized with espeak-ng, and report the digit error rate on utterances by
voices the model never heard.

The utterances ("three one four": 1 to 4 digits, random speed and pitch; 20 voices for
training, 5 others for the test) are synthesized once and cached
(``lezero.data.datasets.SpokenDigits``; needs the espeak-ng program:
``apt-get install espeak-ng``).  Features are 40-band log-mel spectrograms
(25 ms windows every 10 ms), normalised per utterance; training masks random bands and
frames (SpecAugment) and decodes greedily.

    python examples/train_speech_ctc.py            # a few minutes on one core
    python examples/train_speech_ctc.py --rnn lstm --hidden 192

``--smoke`` without espeak-ng falls back to synthetic two-tone "digits" so the script and
model still run (the figure it prints then means nothing).
"""
import os
import sys

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.data.audio import log_mel_spectrogram
from lezero.data.datasets.spoken_digits import (SpokenDigits, espeak_available,
                                                synthetic_digits)
from lezero.nn.models import SpeechCTC
from lezero.nn.models.speech_ctc import error_rate, greedy_decode

from _common import check_args, make_parser, mean, smoke_limit, write_summary
from _zoo import one_cycle, progress, timed_fit, train_step

N_MELS = 40


def load(args):
    """((train waves, labels), (test waves, labels), source name)."""
    if args.smoke and not espeak_available():
        print("espeak-ng is missing: the smoke run uses synthetic two-tone digits instead")
        return synthetic_digits(24, seed=0), synthetic_digits(8, seed=1), "synthetic tones"
    root = os.path.join(args.out, "data") if args.smoke else None   # smoke: no cache writes
    os.makedirs(args.out, exist_ok=True)
    try:
        train = SpokenDigits(True, n=24 if args.smoke else args.train_size, root=root)
        test = SpokenDigits(False, n=8 if args.smoke else args.test_size, root=root)
    except RuntimeError as e:            # no espeak-ng and nothing cached: say what to do
        sys.exit(f"train_speech_ctc.py: {e}")
    return (train.waves, train.labels), (test.waves, test.labels), "espeak-ng digits"


def features(waves):
    """Per-utterance normalised log-mel frames (n_mels, T) as float32."""
    out = []
    for w in waves:
        f = log_mel_spectrogram(w, 16000, n_mels=N_MELS)
        out.append((f - f.mean(axis=1, keepdims=True)) / (f.std(axis=1, keepdims=True) + 1e-5))
    return out


def length_batches(lengths, batch_size, seed, epoch, shuffle=True):
    """Index batches of similar lengths (little padding); batch order shuffled."""
    order = np.argsort(lengths, kind="stable")
    groups = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    if shuffle:
        groups = [groups[i] for i in np.random.default_rng([seed, epoch]).permutation(len(groups))]
    return list(smoke_limit(groups))


def pad_batch(feats, labels, idx, rng=None):
    """(N, n_mels, T) zero-padded features, CTC targets (labels + 1; 0 is blank) and
    lengths; with ``rng``, one band mask and two time masks per utterance."""
    t_max = max(feats[i].shape[1] for i in idx)
    x = np.zeros((len(idx), N_MELS, t_max), dtype=np.float32)
    for row, i in enumerate(idx):
        f = feats[i].copy()
        if rng is not None:
            b, w = rng.integers(0, N_MELS - 8), rng.integers(0, 9)
            f[b:b + w] = 0
            for _ in range(2):
                t, w = rng.integers(0, f.shape[1]), rng.integers(0, 11)
                f[:, t:t + w] = 0
        x[row, :, :f.shape[1]] = f
    s_max = max(len(labels[i]) for i in idx)
    targets = np.zeros((len(idx), s_max), dtype=np.int64)
    for row, i in enumerate(idx):
        targets[row, :len(labels[i])] = labels[i] + 1
    return (x, targets, np.array([feats[i].shape[1] for i in idx]),
            np.array([len(labels[i]) for i in idx]))


def main():
    p = make_parser("speech_ctc", __doc__, epochs=25, batch_size=32, lr=3e-3)
    p.add_argument("--train-size", type=int, default=2000, help="training utterances")
    p.add_argument("--test-size", type=int, default=300, help="test utterances")
    p.add_argument("--hidden", type=int, default=128, help="GRU/LSTM units per direction")
    p.add_argument("--rnn", choices=("gru", "lstm"), default="gru")
    args = check_args(p, p.parse_args())
    lz.manual_seed(args.seed)
    (train_w, train_y), (test_w, test_y), source = load(args)
    train_f, test_f = features(train_w), features(test_w)
    model = SpeechCTC(N_MELS, 11, hidden_size=args.hidden, rnn=args.rnn)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    train_len = np.array([f.shape[1] for f in train_f])
    steps_per_epoch = len(length_batches(train_len, args.batch_size, args.seed, 0))
    sched = one_cycle(opt, args.epochs * steps_per_epoch)
    print(f"SpeechCTC: {model.num_parameters():,} parameters; {len(train_f)} training "
          f"utterances ({source}), {sum(len(w) for w in train_w) / 16000 / 60:.1f} minutes")

    def train_epoch(epoch):
        rng = np.random.default_rng([args.seed, epoch, 3])
        losses = []
        bar = progress(total=steps_per_epoch, desc=f"epoch {epoch + 1}")
        for idx in length_batches(train_len, args.batch_size, args.seed, epoch):
            x, targets, lengths, target_lengths = pad_batch(train_f, train_y, idx, rng)
            log_probs = model(x)
            loss = F.ctc_loss(log_probs, targets, model.output_lengths(lengths),
                              target_lengths, zero_infinity=True)
            losses.append(train_step(opt, loss, sched, clip=5.0))
            bar.update()
            bar.set_postfix(ctc=f"{losses[-1]:.3f}")
        bar.close()
        return {"ctc_loss": mean(losses)}

    def evaluate():
        model.eval()
        refs, hyps = [], []
        with lz.no_grad():
            for idx in length_batches([f.shape[1] for f in test_f], 64, 0, 0, shuffle=False):
                x, _, lengths, _ = pad_batch(test_f, test_y, idx)
                hyps += [[k - 1 for k in h] for h in
                         greedy_decode(model(x), model.output_lengths(lengths))]
                refs += [list(test_y[i]) for i in idx]
        model.train()
        exact = mean([r == h for r, h in zip(refs, hyps)])
        return {"digit_error_rate": error_rate(refs, hyps), "sequence_acc": exact}

    history, seconds = timed_fit(args, model, opt, train_epoch, evaluate, {"scheduler": sched})
    final = history[-1]
    print(f"digit error rate on {len(test_f)} new utterances: "
          f"{final['digit_error_rate'] * 100:.2f}% (whole sequences right: "
          f"{final['sequence_acc'] * 100:.1f}%)")
    write_summary(args, "speech_ctc", "speech recognition (CTC)", source, "digit_error_rate",
                  final["digit_error_rate"], seconds, parameters=model.num_parameters(),
                  sequence_acc=final["sequence_acc"])


if __name__ == "__main__":
    main()
