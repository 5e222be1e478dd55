"""A character-level LSTM language model, laid out as PyTorch's ``word_language_model``
example (``encoder`` embedding, ``rnn``, ``drop``, ``decoder``), batch first."""
import numpy as np

import lezero as lz
from lezero import cuda, nn


class CharLSTM(nn.Module):
    """Embedding -> ``num_layers`` LSTM layers -> linear head over the vocabulary.

    ``forward(idx, hidden=None)`` maps int ids (B, T) to ``(logits (B, T, vocab),
    hidden)``; pass ``hidden`` back in (after ``detach_hidden``) to carry state across
    windows of a long text (truncated backpropagation through time).  ``tie_weights``
    shares the embedding with the head (needs ``embed_dim == hidden_size``).
    """

    def __init__(self, vocab_size, embed_dim=64, hidden_size=256, num_layers=1, dropout=0.0,
                 tie_weights=False):
        super().__init__()
        self.vocab_size, self.hidden_size, self.num_layers = vocab_size, hidden_size, num_layers
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocab_size, embed_dim)
        self.rnn = nn.LSTM(embed_dim, hidden_size, num_layers, batch_first=True,
                           dropout=dropout if num_layers > 1 else 0.0)
        self.decoder = nn.Linear(hidden_size, vocab_size)
        if tie_weights:
            if embed_dim != hidden_size:
                raise ValueError(f"CharLSTM: tie_weights needs embed_dim == hidden_size, got "
                                 f"{embed_dim} and {hidden_size}")
            self.decoder.weight = self.encoder.weight
        # The example's initialisation: small uniform embedding and head, zero head bias.
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, idx, hidden=None):
        emb = self.drop(self.encoder(idx))
        out, hidden = self.rnn(emb, hidden)
        return self.decoder(self.drop(out)), hidden

    def init_hidden(self, batch_size):
        """Zero (h, c) states, each (num_layers, batch_size, hidden_size)."""
        xp = cuda.get_array_module(self.decoder.weight.data)
        shape = (self.num_layers, batch_size, self.hidden_size)
        return (lz.Variable(xp.zeros(shape, np.float32), requires_grad=False),
                lz.Variable(xp.zeros(shape, np.float32), requires_grad=False))

    @staticmethod
    def detach_hidden(hidden):
        """The state without its history: the next window's graph starts here."""
        return tuple(h.detach() for h in hidden)

    def generate(self, prime, max_new_tokens, temperature=1.0):
        """Continue the int ids ``prime`` (T,) by ``max_new_tokens`` samples drawn from
        LeZero's process generator; returns the ids (T + max_new_tokens,)."""
        if temperature <= 0:
            raise ValueError(f"CharLSTM.generate: temperature must be positive, got "
                             f"{temperature}")
        xp = cuda.get_array_module(self.decoder.weight.data)
        ids = [int(i) for i in np.asarray(cuda.as_numpy(prime)).reshape(-1)]
        if not ids:
            raise ValueError("CharLSTM.generate: prime must hold at least one id")
        rng = lz.get_rng()
        was_training = self.training
        self.eval()
        try:
            with lz.no_grad():
                logits, hidden = self(xp.asarray([ids], dtype=np.int64))
                for _ in range(max_new_tokens):
                    last = cuda.as_numpy(logits.data[0, -1]).astype(np.float64) / temperature
                    p = np.exp(last - last.max())
                    ids.append(int(rng.choice(len(p), p=p / p.sum())))
                    logits, hidden = self(xp.asarray([[ids[-1]]], dtype=np.int64), hidden)
        finally:
            self.train(was_training)
        return np.array(ids, dtype=np.int64)
