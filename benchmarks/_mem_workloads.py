"""The memory benchmark's workloads, built the same way in LeZero and in PyTorch.

``build(name, framework, quick=False, state=None)`` returns a ``Case``: the model, its
parameters and ``loss(dtype)``, one forward pass to the training loss under autocast
(``dtype`` None: float32; "float16" / "bfloat16": LeZero's ``amp.autocast(dtype)``,
PyTorch's ``torch.autocast("cpu", dtype=...)``).  Backward is the caller's.  The batch is
drawn from a fixed NumPy seed, so both frameworks see the same inputs; ``state`` (a
PyTorch ``state_dict``) gives LeZero the PyTorch model's weights.  ``quick`` shrinks every
workload to a smoke size (the same layers, fewer and narrower).
"""
from collections import namedtuple

import numpy as np

Case = namedtuple("Case", "model params loss")
Spec = namedtuple("Spec", "title batch torch lezero")

# The LSTM language model as examples/train_char_lstm.py configures it by default.
LSTM_EMBED, LSTM_HIDDEN, LSTM_LAYERS, LSTM_BATCH, LSTM_BPTT = 32, 128, 1, 16, 32


# ----- the batches (NumPy, shared by both frameworks) -------------------------------------

def image_batch(batch, size, classes):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((batch, 3, size, size)).astype(np.float32),
            rng.integers(0, classes, batch).astype(np.int64))


def token_batch(batch, seq, vocab):
    return np.random.default_rng(0).integers(0, vocab, (batch, seq)).astype(np.int64)


def mlm_batch(batch, seq, vocab):
    """BERT's masked-LM inputs and labels (15% chosen, 80/10/10), mask id 103 as BERT's."""
    from lezero.nn.models.bert import mlm_mask
    ids = token_batch(batch, seq, vocab)
    return mlm_mask(ids, min(103, vocab - 1), vocab, np.random.default_rng(1))


def lstm_vocab():
    """The character vocabulary of LeZero's shipped story (the example's corpus)."""
    from lezero.data.datasets import load_corpus
    return len(set(load_corpus()))


# ----- sizes -------------------------------------------------------------------------------

def resnet_shape(name, quick):
    """(batch, image size, classes)."""
    if name == "resnet18":
        return (2, 32, 10) if quick else (32, 32, 10)
    return (1, 64, 1000) if quick else (8, 224, 1000)


def transformer_config(name, quick):
    """(batch, seq, HF config fields)."""
    if name == "bert":
        small = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=512)
        return (2, 16, small) if quick else (4, 128, {})
    small = dict(n_embd=128, n_layer=2, n_head=2)
    return (2, 16, small) if quick else (2, 128, {})


# ----- the forward passes --------------------------------------------------------------

def lezero_loss(model, forward):
    """``loss(dtype)``: ``forward()`` under LeZero's autocast (off for float32)."""
    from lezero import amp

    def loss(dtype):
        with amp.autocast(dtype or "float16", enabled=dtype is not None):
            return forward()
    return Case(model, list(model.parameters()), loss)


def torch_loss(model, forward):
    """``loss(dtype)``: ``forward()`` under PyTorch's CPU autocast (off for float32)."""
    import torch

    def loss(dtype):
        low = getattr(torch, dtype) if dtype else torch.bfloat16
        with torch.autocast("cpu", dtype=low, enabled=dtype is not None):
            return forward()
    return Case(model, list(model.parameters()), loss)


def load(model, state):
    if state is not None:
        model.load_state_dict({k: v.detach().numpy().copy() for k, v in state.items()})
    return model


# ----- the workloads -----------------------------------------------------------------------

def resnet_lezero(name, quick, state=None):
    import lezero as lz
    import lezero.functions as F
    from lezero.nn.models import get_model
    batch, size, classes = resnet_shape(name, quick)
    x, t = image_batch(batch, size, classes)
    lz.manual_seed(0)
    model = load(get_model(name, num_classes=classes, small_input=size == 32), state)
    xv = lz.Variable(x, requires_grad=False)
    return lezero_loss(model, lambda: F.cross_entropy(model(xv), t))


def resnet_torch(name, quick):
    import torch
    from lezero.testing.oracles import import_torchvision
    batch, size, classes = resnet_shape(name, quick)
    x, t = (torch.from_numpy(a) for a in image_batch(batch, size, classes))
    torch.manual_seed(0)
    model = getattr(import_torchvision().models, name)(num_classes=classes)
    if size == 32:                      # the CIFAR stem, as LeZero's small_input
        model.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        model.maxpool = torch.nn.Identity()
    return torch_loss(model, lambda: torch.nn.functional.cross_entropy(model(x), t))


def hf_lezero(name, quick, state=None):
    import lezero as lz
    from lezero.nn.models import get_model
    batch, seq, fields = transformer_config(name, quick)
    lz.manual_seed(0)
    model = load(get_model(name, **fields), state)
    vocab = model.config.vocab_size
    if name == "bert":
        ids, labels = mlm_batch(batch, seq, vocab)
        return lezero_loss(model, lambda: model.loss(ids, labels))
    ids = token_batch(batch, seq, vocab)
    return lezero_loss(model, lambda: model.loss(ids))


def hf_torch(name, quick):
    import torch
    from lezero.testing.oracles import import_transformers
    transformers = import_transformers()
    transformers.logging.set_verbosity_error()
    batch, seq, fields = transformer_config(name, quick)
    torch.manual_seed(0)
    if name == "bert":
        model = transformers.BertForMaskedLM(transformers.BertConfig(**fields))
        ids, labels = (torch.from_numpy(a) for a in mlm_batch(batch, seq,
                                                               model.config.vocab_size))
        return torch_loss(model, lambda: model(input_ids=ids, labels=labels).loss)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**fields))
    ids = torch.from_numpy(token_batch(batch, seq, model.config.vocab_size))
    return torch_loss(model, lambda: model(input_ids=ids, labels=ids).loss)


def lstm_lezero(name, quick, state=None):
    import lezero as lz
    import lezero.functions as F
    from lezero.nn.models import CharLSTM
    vocab = lstm_vocab()
    ids = token_batch(LSTM_BATCH, LSTM_BPTT + 1, vocab)
    lz.manual_seed(0)
    model = load(CharLSTM(vocab, LSTM_EMBED, LSTM_HIDDEN, LSTM_LAYERS), state)

    def forward():
        logits, _ = model(ids[:, :-1])
        return F.cross_entropy(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1))
    return lezero_loss(model, forward)


def torch_char_lstm(vocab):
    """PyTorch's twin of LeZero's CharLSTM (the same names: encoder, rnn, decoder)."""
    import torch
    model = torch.nn.Module()
    model.encoder = torch.nn.Embedding(vocab, LSTM_EMBED)
    model.rnn = torch.nn.LSTM(LSTM_EMBED, LSTM_HIDDEN, LSTM_LAYERS, batch_first=True)
    model.decoder = torch.nn.Linear(LSTM_HIDDEN, vocab)
    return model


def lstm_torch(name, quick):
    import torch
    vocab = lstm_vocab()
    ids = torch.from_numpy(token_batch(LSTM_BATCH, LSTM_BPTT + 1, vocab))
    torch.manual_seed(0)
    model = torch_char_lstm(vocab)

    def forward():
        out, _ = model.rnn(model.encoder(ids[:, :-1]))
        logits = model.decoder(out)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, vocab),
                                                 ids[:, 1:].reshape(-1))
    return torch_loss(model, forward)


WORKLOADS = {
    "resnet18": Spec("ResNet-18, CIFAR stem", "b32 3x32x32", resnet_torch, resnet_lezero),
    "resnet50": Spec("ResNet-50", "b8 3x224x224", resnet_torch, resnet_lezero),
    "bert": Spec("BERT-base MLM", "b4 seq128", hf_torch, hf_lezero),
    "gpt2": Spec("GPT-2 small LM", "b2 seq128", hf_torch, hf_lezero),
    "lstm": Spec("char LSTM (zoo)", f"b{LSTM_BATCH} bptt{LSTM_BPTT}", lstm_torch,
                 lstm_lezero),
}


def build(name, framework, quick=False, state=None):
    """The ``Case`` of workload ``name`` in ``framework`` ("lezero" or "torch")."""
    spec = WORKLOADS[name]
    if framework == "torch":
        return spec.torch(name, quick)
    return spec.lezero(name, quick, state)


def build_pair(name, quick=False):
    """(PyTorch case, LeZero case) with the same weights."""
    theirs = build(name, "torch", quick)
    ours = build(name, "lezero", quick, theirs.model.state_dict())
    return theirs, ours
