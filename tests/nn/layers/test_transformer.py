"""MultiheadAttention and the Transformer family against torch.nn (dropout 0 for parity):
state_dict keys and order, forward and every gradient, with masks."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from tests.nn.layers.layer_parity import check_layer, rand

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")   # torch's nested-tensor notes

E, HEADS, L, S, N = 8, 2, 4, 5, 3


def _mha(**kwargs):
    return nn.MultiheadAttention(E, HEADS, **kwargs), torch.nn.MultiheadAttention(E, HEADS,
                                                                                    **kwargs)


MHA_CASES = [
    ({}, {}),
    ({}, {"need_weights": False}),
    ({}, {"average_attn_weights": False}),
    ({"batch_first": True}, {}),
    ({"bias": False}, {}),
    ({"add_bias_kv": True, "add_zero_attn": True}, {}),
    ({"kdim": 3, "vdim": 5}, {}),
]


@pytest.mark.parametrize("build,call", MHA_CASES, ids=[str(i) for i in range(len(MHA_CASES))])
def test_multihead_attention_matches_torch(build, call):
    ours, theirs = _mha(**build)
    bf = build.get("batch_first", False)
    kdim, vdim = build.get("kdim", E), build.get("vdim", E)
    shape = (lambda s, d: (N, s, d)) if bf else (lambda s, d: (s, N, d))
    check_layer(ours, theirs, rand(*shape(L, E)), rand(*shape(S, kdim), seed=1),
                rand(*shape(S, vdim), seed=2), kwargs=call)


def test_multihead_attention_masks_match_torch():
    ours, theirs = _mha()
    q, k = rand(L, N, E), rand(S, N, E, seed=1)
    padding = np.zeros((N, S), bool)
    padding[0, 3:] = True
    padding[2, 1] = True
    blocked = np.triu(np.ones((L, S), bool), k=2)
    float_mask = rand(N * HEADS, L, S, seed=3)
    for kwargs in ({"key_padding_mask": padding}, {"attn_mask": blocked},
                   {"attn_mask": float_mask, "key_padding_mask": padding},
                   {"attn_mask": blocked, "need_weights": False}):
        t_kwargs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v
                    for k, v in kwargs.items()}
        check_layer(ours, theirs, q, k, k, kwargs=kwargs, torch_kwargs=t_kwargs)


def test_multihead_attention_causal_flag_and_unbatched_input():
    ours, theirs = _mha()
    causal = nn.Transformer.generate_square_subsequent_mask(L)
    # with is_causal and no mask, the causal mask is made (torch needs it passed)
    check_layer(ours, theirs, rand(L, N, E), rand(L, N, E, seed=1), rand(L, N, E, seed=2),
                kwargs={"is_causal": True, "need_weights": False},
                torch_kwargs={"is_causal": True, "attn_mask": torch.tensor(causal),
                              "need_weights": False})
    check_layer(ours, theirs, rand(L, E), rand(S, E, seed=1), rand(S, E, seed=2))


def test_multihead_attention_dropout_is_off_in_eval():
    ours, theirs = _mha(dropout=0.5)
    x = rand(L, N, E)
    check_layer(ours, theirs, x, x, x, train=False)


def test_multihead_attention_state_dict_order():
    for kwargs in ({}, {"add_bias_kv": True}, {"kdim": 3, "vdim": 5}, {"bias": False}):
        ours, theirs = _mha(**kwargs)
        assert list(ours.state_dict()) == list(theirs.state_dict()), kwargs


LAYER_CASES = [
    {}, {"norm_first": True}, {"activation": "gelu", "batch_first": True},
    {"bias": False, "layer_norm_eps": 1e-3},
]


def _layer(kind, **kwargs):
    args = dict(d_model=E, nhead=HEADS, dim_feedforward=16, dropout=0.0, **kwargs)
    return getattr(nn, kind)(**args), getattr(torch.nn, kind)(**args)


@pytest.mark.parametrize("kwargs", LAYER_CASES, ids=[str(i) for i in range(len(LAYER_CASES))])
def test_encoder_layer_matches_torch(kwargs):
    ours, theirs = _layer("TransformerEncoderLayer", **kwargs)
    shape = (N, S, E) if kwargs.get("batch_first") else (S, N, E)
    padding = np.zeros((N, S), bool)
    padding[1, -2:] = True
    check_layer(ours, theirs, rand(*shape), kwargs={"src_key_padding_mask": padding},
                torch_kwargs={"src_key_padding_mask": torch.tensor(padding)})


@pytest.mark.parametrize("kwargs", LAYER_CASES, ids=[str(i) for i in range(len(LAYER_CASES))])
def test_decoder_layer_matches_torch(kwargs):
    ours, theirs = _layer("TransformerDecoderLayer", **kwargs)
    bf = kwargs.get("batch_first")
    tgt = rand(*((N, L, E) if bf else (L, N, E)))
    memory = rand(*((N, S, E) if bf else (S, N, E)), seed=1)
    causal = nn.Transformer.generate_square_subsequent_mask(L)
    padding = np.zeros((N, S), bool)
    padding[0, :2] = True
    check_layer(ours, theirs, tgt, memory,
                kwargs={"tgt_mask": causal, "memory_key_padding_mask": padding},
                torch_kwargs={"tgt_mask": torch.tensor(causal),
                              "memory_key_padding_mask": torch.tensor(padding)})


def test_encoder_layer_causal_flag_without_mask():
    ours, theirs = _layer("TransformerEncoderLayer")
    causal = torch.tensor(nn.Transformer.generate_square_subsequent_mask(S))
    check_layer(ours, theirs, rand(S, N, E), kwargs={"is_causal": True},
                torch_kwargs={"src_mask": causal, "is_causal": True})


def test_stacks_match_torch():
    enc_o, enc_t = _layer("TransformerEncoderLayer")
    ours = nn.TransformerEncoder(enc_o, 2, norm=nn.LayerNorm(E))
    theirs = torch.nn.TransformerEncoder(enc_t, 2, norm=torch.nn.LayerNorm(E))
    check_layer(ours, theirs, rand(S, N, E))
    dec_o, dec_t = _layer("TransformerDecoderLayer", norm_first=True)
    ours, theirs = nn.TransformerDecoder(dec_o, 2), torch.nn.TransformerDecoder(dec_t, 2)
    check_layer(ours, theirs, rand(L, N, E), rand(S, N, E, seed=1))
    assert ours.layers[0] is not ours.layers[1] and ours.layers[0] is not dec_o


@pytest.mark.parametrize("batch_first", [False, True])
def test_full_transformer_matches_torch(batch_first):
    kwargs = dict(d_model=E, nhead=HEADS, num_encoder_layers=2, num_decoder_layers=1,
                  dim_feedforward=16, dropout=0.0, batch_first=batch_first)
    ours, theirs = nn.Transformer(**kwargs), torch.nn.Transformer(**kwargs)
    src = rand(*((N, S, E) if batch_first else (S, N, E)))
    tgt = rand(*((N, L, E) if batch_first else (L, N, E)), seed=1)
    causal = nn.Transformer.generate_square_subsequent_mask(L)
    src_pad = np.zeros((N, S), bool)
    src_pad[2, 3:] = True
    masks = {"tgt_mask": causal, "src_key_padding_mask": src_pad,
             "memory_key_padding_mask": src_pad}
    check_layer(ours, theirs, src, tgt, kwargs=masks,
                torch_kwargs={k: torch.tensor(v) for k, v in masks.items()})


def test_transformer_default_sizes_and_keys():
    lz.manual_seed(0)
    ours, theirs = nn.Transformer(), torch.nn.Transformer()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.num_parameters() == sum(p.numel() for p in theirs.parameters())
    w = ours.encoder.layers[0].linear1.weight.data          # re-initialised Xavier-uniform
    assert np.abs(w).max() <= np.sqrt(6 / (512 + 2048))


def test_generate_square_subsequent_mask_equals_torchs():
    ours = nn.Transformer.generate_square_subsequent_mask(5)
    theirs = torch.nn.Transformer.generate_square_subsequent_mask(5).numpy()
    assert ours.dtype == np.float32
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("build,error,match", [
    (lambda: nn.MultiheadAttention(10, 3), ValueError, r"embed_dim \(10\) must be divisible"),
    (lambda: nn.MultiheadAttention(8, 2, dropout=2), ValueError, "MultiheadAttention: dropout"),
    (lambda: nn.MultiheadAttention(8, 2, kdim=0), ValueError, "MultiheadAttention: kdim"),
    (lambda: nn.TransformerEncoderLayer(8, 2, activation="swish"), ValueError,
     "TransformerEncoderLayer: activation must be"),
    (lambda: nn.TransformerDecoderLayer(8, 0), ValueError, "TransformerDecoderLayer: nhead"),
    (lambda: nn.TransformerEncoder("layer", 2), TypeError, "TransformerEncoder: encoder_layer"),
    (lambda: nn.TransformerDecoder(nn.Linear(2, 2), 0), ValueError, "num_layers"),
])
def test_bad_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_bad_inputs_name_the_layer():
    mha = nn.MultiheadAttention(E, HEADS)
    with pytest.raises(ValueError, match=r"MultiheadAttention: key must be \(L, N, 8\)"):
        mha(lz.Variable(rand(L, N, E)), lz.Variable(rand(S, N, 4)), lz.Variable(rand(S, N, E)))
    with pytest.raises(ValueError, match="MultiheadAttention: .*key_padding_mask"):
        x = lz.Variable(rand(L, N, E))
        mha(x, x, x, key_padding_mask=np.zeros((N, L + 1), bool))
    layer = nn.TransformerEncoderLayer(E, HEADS, dim_feedforward=4)
    with pytest.raises(ValueError, match="TransformerEncoderLayer: src must be"):
        layer(lz.Variable(rand(S, N, E + 1)))
    model = nn.Transformer(E, HEADS, 1, 1, 4)
    with pytest.raises(ValueError, match="Transformer: src and tgt must have the same batch"):
        model(lz.Variable(rand(S, N, E)), lz.Variable(rand(L, N + 1, E)))
