"""Small configurations of every zoo model, with example inputs (shared by the jit and
onnx tests): each traces, replays and exports in well under a second."""
import numpy as np

import lezero as lz
from lezero.nn import models as M


def _f(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _ids(high, *shape, seed=0):
    return np.random.default_rng(seed).integers(0, high, shape)


# name -> (builder, example inputs, dynamic axes for ONNX export)
ZOO = {
    "mlp": (lambda: M.MLP(8, [16, 4]), lambda: [_f(2, 8)], {"input_0": {0: "batch"}}),
    "lenet5": (lambda: M.LeNet5(), lambda: [_f(2, 1, 32, 32)], {"input_0": {0: "batch"}}),
    "vgg11_bn": (lambda: M.vgg11_bn(num_classes=5, width_mult=0.125, small_input=True,
                                    hidden=32), lambda: [_f(1, 3, 32, 32)],
                 {"input_0": {0: "batch"}}),
    "resnet18": (lambda: M.resnet18(num_classes=5), lambda: [_f(1, 3, 32, 32)],
                 {"input_0": {0: "batch"}}),
    "mobilenet_v2": (lambda: M.mobilenet_v2(num_classes=5, width_mult=0.25),
                     lambda: [_f(1, 3, 32, 32)], {"input_0": {0: "batch"}}),
    "char_lstm": (lambda: M.CharLSTM(11, 8, 16), lambda: [_ids(11, 2, 5)],
                  {"input_0": {0: "batch", 1: "sequence"}}),
    "seq2seq_transformer": (
        lambda: M.Seq2SeqTransformer(11, 13, d_model=16, nhead=2, num_encoder_layers=1,
                                     num_decoder_layers=1, dim_feedforward=32),
        lambda: [_ids(11, 2, 5), _ids(13, 2, 4, seed=1)],
        {"input_0": {0: "batch"}, "input_1": {0: "batch"}}),
    "gpt": (lambda: M.GPT(M.GPTConfig(vocab_size=17, block_size=8, n_layer=1, n_head=2,
                                      d_model=16)), lambda: [_ids(17, 2, 6)],
            {"input_0": {0: "batch"}}),
    "vae": (lambda: M.VAE(16, 8, 4), lambda: [_f(2, 16)], {"input_0": {0: "batch"}}),
    "dcgan_generator": (lambda: M.DCGANGenerator(nz=4, ngf=4, nc=1, image_size=16),
                        lambda: [_f(2, 4, 1, 1)], {"input_0": {0: "batch"}}),
    "dcgan_discriminator": (lambda: M.DCGANDiscriminator(nc=1, ndf=4, image_size=16),
                            lambda: [_f(2, 1, 16, 16)], {"input_0": {0: "batch"}}),
}


def build(name, seed=0):
    """The model (eval mode) and its example inputs."""
    lz.manual_seed(seed)
    make, inputs, _ = ZOO[name]
    return make().eval(), inputs()


def leaves(out):
    """The arrays of the Variables in a (nested) output."""
    from lezero.jit.tracer import flatten_outputs
    found = []
    flatten_outputs(out, found)
    return [np.asarray(v.data) for v in found]
