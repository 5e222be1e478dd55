"""The model zoo: classic and modern architectures with PyTorch's layouts and names.

    from lezero.nn import models
    net = models.resnet18(num_classes=10, small_input=True)

Every model's ``state_dict`` keys follow the PyTorch definition it names (torchvision for
VGG, ResNet and MobileNetV2; PyTorch's examples for the LSTM language model, VAE and
DCGAN; nanoGPT's layout for GPT), so PyTorch weights load with ``strict=True``.
"""
from lezero.nn.models.char_lstm import CharLSTM
from lezero.nn.models.dcgan import DCGANDiscriminator, DCGANGenerator, dcgan_weights_init
from lezero.nn.models.gpt import GPT, GPTConfig
from lezero.nn.models.lenet import LeNet5
from lezero.nn.models.mlp import MLP
from lezero.nn.models.mobilenet import InvertedResidual, MobileNetV2, mobilenet_v2
from lezero.nn.models.resnet import (BasicBlock, Bottleneck, ResNet, resnet18, resnet34,
                                     resnet50)
from lezero.nn.models.seq2seq import PositionalEncoding, Seq2SeqTransformer
from lezero.nn.models.vae import VAE, vae_loss
from lezero.nn.models.vgg import VGG, vgg11, vgg11_bn, vgg16, vgg16_bn
from lezero.nn.models.registry import get_model, list_models, register_model
from lezero.nn.models.a2c import ActorCritic
from lezero.nn.models.ddpm import DDPMUNet, GaussianDiffusion
from lezero.nn.models.dqn import QNetwork
from lezero.nn.models.gat import GAT
from lezero.nn.models.gcn import GCN
from lezero.nn.models.simclr import SimCLR
from lezero.nn.models.speech_ctc import SpeechCTC
from lezero.nn.models.unet import UNet
from lezero.nn.models.yolo import YOLOv5, yolov5n, yolov5s

# The models that existed before the registry, by the names torchvision and their
# references use; new model modules register themselves with @register_model.
for _name, _builder in {
        "mlp": MLP, "lenet5": LeNet5, "vgg11": vgg11, "vgg11_bn": vgg11_bn, "vgg16": vgg16,
        "vgg16_bn": vgg16_bn, "resnet18": resnet18, "resnet34": resnet34, "resnet50": resnet50,
        "mobilenet_v2": mobilenet_v2, "char_lstm": CharLSTM,
        "seq2seq_transformer": Seq2SeqTransformer,
        "gpt_mini": lambda **kw: GPT(GPTConfig(**kw)), "vae": VAE,
        "dcgan_generator": DCGANGenerator, "dcgan_discriminator": DCGANDiscriminator}.items():
    register_model(_name)(_builder)
del _name, _builder

__all__ = ["MLP", "LeNet5", "VGG", "vgg11", "vgg11_bn", "vgg16", "vgg16_bn", "ResNet",
           "BasicBlock", "Bottleneck", "resnet18", "resnet34", "resnet50", "MobileNetV2",
           "InvertedResidual", "mobilenet_v2", "CharLSTM", "Seq2SeqTransformer",
           "PositionalEncoding", "GPT", "GPTConfig", "VAE", "vae_loss", "DCGANGenerator",
           "DCGANDiscriminator", "dcgan_weights_init", "get_model", "list_models",
           "register_model", "YOLOv5", "yolov5n", "yolov5s", "UNet", "SpeechCTC", "DDPMUNet", "GaussianDiffusion", "GCN", "GAT", "QNetwork",
           "ActorCritic", "SimCLR"]
