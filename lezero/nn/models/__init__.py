"""The model zoo: classic and modern architectures with PyTorch's layouts and names.

    from lezero.nn import models
    net = models.resnet18(num_classes=10, small_input=True)

Every model's ``state_dict`` keys follow the PyTorch definition it names (torchvision for
the image classifiers: VGG, ResNet/ResNeXt/wide ResNet, MobileNetV2/V3, AlexNet,
SqueezeNet, DenseNet, ShuffleNetV2, EfficientNet, ConvNeXt, ViT, Swin; PyTorch's examples
for the LSTM language model, VAE and DCGAN; nanoGPT's layout for GPT), so PyTorch weights
load with ``strict=True``.
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
# Language models (Hugging Face layouts and more); each registers itself.
from lezero.nn.models.bert import BertForMaskedLM
from lezero.nn.models.gpt2 import GPT2LMHeadModel
from lezero.nn.models.llama import LlamaForCausalLM
from lezero.nn.models.generation import KVCache
from lezero.nn.models.word2vec import SkipGram
from lezero.nn.models.textcnn import TextCNN
from lezero.nn.models.gru_seq2seq import GRUSeq2Seq
from lezero.nn.models.moe import MoETransformerLM

# torchvision's classification zoo beyond VGG/ResNet/MobileNetV2 (each module registers
# its builders with @register_model as it is imported)
from lezero.nn.models.alexnet import AlexNet, alexnet
from lezero.nn.models.convnext import ConvNeXt, convnext_base, convnext_large, convnext_small, \
    convnext_tiny
from lezero.nn.models.densenet import DenseNet, densenet121, densenet161, densenet169, \
    densenet201
from lezero.nn.models.efficientnet import EfficientNet, efficientnet_b0, efficientnet_b1, \
    efficientnet_b2, efficientnet_b3, efficientnet_b4, efficientnet_b5, efficientnet_b6, \
    efficientnet_b7, efficientnet_v2_l, efficientnet_v2_m, efficientnet_v2_s
from lezero.nn.models.mobilenet_v3 import MobileNetV3, mobilenet_v3_large, mobilenet_v3_small
from lezero.nn.models.resnext import resnet101, resnet152, resnext50_32x4d, \
    resnext101_32x8d, resnext101_64x4d, wide_resnet50_2, wide_resnet101_2
from lezero.nn.models.shufflenet import ShuffleNetV2, shufflenet_v2_x0_5, \
    shufflenet_v2_x1_0, shufflenet_v2_x1_5, shufflenet_v2_x2_0
from lezero.nn.models.squeezenet import SqueezeNet, squeezenet1_0, squeezenet1_1
from lezero.nn.models.swin import SwinTransformer, swin_b, swin_s, swin_t
from lezero.nn.models.vision_transformer import VisionTransformer, vit_b_16, vit_b_32, \
    vit_h_14, vit_l_16, vit_l_32

# Detection, segmentation, speech, diffusion, graphs, reinforcement learning and
# contrastive learning; each registers itself.
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
           "register_model", "BertForMaskedLM", "GPT2LMHeadModel", "LlamaForCausalLM",
           "KVCache", "SkipGram", "TextCNN", "GRUSeq2Seq", "MoETransformerLM",
           # torchvision's classification zoo
           "AlexNet", "alexnet", "SqueezeNet", "squeezenet1_0", "squeezenet1_1", "DenseNet",
           "densenet121", "densenet161", "densenet169", "densenet201", "resnet101",
           "resnet152", "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d",
           "wide_resnet50_2", "wide_resnet101_2", "ShuffleNetV2", "shufflenet_v2_x0_5",
           "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0", "MobileNetV3",
           "mobilenet_v3_large", "mobilenet_v3_small", "EfficientNet", "efficientnet_b0",
           "efficientnet_b1", "efficientnet_b2", "efficientnet_b3", "efficientnet_b4",
           "efficientnet_b5", "efficientnet_b6", "efficientnet_b7", "efficientnet_v2_s",
           "efficientnet_v2_m", "efficientnet_v2_l", "ConvNeXt", "convnext_tiny",
           "convnext_small", "convnext_base", "convnext_large", "VisionTransformer",
           "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14", "SwinTransformer",
           "swin_t", "swin_s", "swin_b",
           "YOLOv5", "yolov5n", "yolov5s", "UNet", "SpeechCTC", "DDPMUNet",
           "GaussianDiffusion", "GCN", "GAT", "QNetwork", "ActorCritic", "SimCLR"]
