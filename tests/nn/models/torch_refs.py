"""PyTorch twins of LeZero's non-HF language models, written with torch.nn and the same
parameter names, so one state_dict drives both (the parity tests' references)."""
import torch
import torch.nn.functional as TF
from torch import nn


class TorchTextCNN(nn.Module):
    def __init__(self, vocab, classes, embed, kernels, filters):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed, padding_idx=0)
        self.convs = nn.ModuleList([nn.Conv1d(embed, filters, k) for k in kernels])
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(filters * len(kernels), classes)

    def forward(self, ids):
        x = self.embedding(ids).transpose(1, 2)
        feats = [TF.relu(conv(x)).max(dim=2).values for conv in self.convs]
        return self.fc(self.dropout(torch.cat(feats, dim=1)))


class TorchBahdanau(nn.Module):
    def __init__(self, q, k, a):
        super().__init__()
        self.query = nn.Linear(q, a, bias=False)
        self.key = nn.Linear(k, a)
        self.v = nn.Linear(a, 1, bias=False)


class TorchGRUSeq2Seq(nn.Module):
    """The same computation as lezero's GRUSeq2Seq, step by step in torch."""

    def __init__(self, src_vocab, tgt_vocab, embed, hidden, attn):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab, embed, padding_idx=0)
        self.encoder = nn.GRU(embed, hidden, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * hidden, hidden)
        self.attention = TorchBahdanau(hidden, 2 * hidden, attn)
        self.tgt_embed = nn.Embedding(tgt_vocab, embed, padding_idx=0)
        self.decoder = nn.GRUCell(embed + 2 * hidden, hidden)
        self.out = nn.Linear(3 * hidden + embed, tgt_vocab)

    def forward(self, src, tgt_in):
        keys, _ = self.encoder(self.src_embed(src))
        real = (src != 0).float()
        state = torch.tanh(self.bridge((keys * real[..., None]).sum(1)
                                       / real.sum(1, keepdim=True)))
        projected = self.attention.key(keys)
        outputs = []
        for t in range(tgt_in.shape[1]):
            emb = self.tgt_embed(tgt_in[:, t])
            scores = self.attention.v(torch.tanh(projected + self.attention.query(state)[:, None]))
            scores = scores.squeeze(-1).masked_fill(real == 0, torch.finfo(torch.float32).min)
            context = (keys * scores.softmax(-1)[..., None]).sum(1)
            state = self.decoder(torch.cat([emb, context], 1), state)
            outputs.append(self.out(torch.cat([state, context, emb], 1)))
        return torch.stack(outputs, 1)
