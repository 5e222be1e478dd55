"""The layers of ``lezero.nn``, one module per family; ``lezero.nn`` re-exports them all."""
from lezero.nn.layers.activation import (CELU, ELU, GELU, GLU, SELU, Hardsigmoid, Hardswish,
                                         Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish,
                                         PReLU, ReLU, ReLU6, Sigmoid, SiLU, Softmax, Softmax2d,
                                         Softmin, Softplus, Softsign, Tanh, Tanhshrink,
                                         Hardshrink, Softshrink, Threshold, RReLU)
from lezero.nn.layers.attention import MultiheadAttention
from lezero.nn.layers.moe import MixtureOfExperts
from lezero.nn.layers.conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d,
                                   ConvTranspose3d, LazyConv1d, LazyConv2d, LazyConv3d,
                                   LazyConvTranspose1d, LazyConvTranspose2d,
                                   LazyConvTranspose3d)
from lezero.nn.layers.distance import CosineSimilarity, PairwiseDistance
from lezero.nn.layers.dropout import AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d
from lezero.nn.layers.embedding import Embedding, EmbeddingBag
from lezero.nn.layers.graph import GATConv, GCNConv
from lezero.nn.layers.linear import Bilinear, Flatten, Identity, LazyLinear, Linear, Unflatten
from lezero.nn.layers.loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss,
                                   CrossEntropyLoss, CTCLoss, GaussianNLLLoss,
                                   HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss,
                                   MarginRankingLoss, MSELoss, MultiLabelMarginLoss,
                                   MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss,
                                   PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss,
                                   TripletMarginLoss)
from lezero.nn.layers.normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm,
                                            InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
                                            LayerNorm, LazyBatchNorm1d, LazyBatchNorm2d,
                                            LazyBatchNorm3d, LazyInstanceNorm1d,
                                            LazyInstanceNorm2d, LazyInstanceNorm3d,
                                            LocalResponseNorm, RMSNorm)
from lezero.nn.layers.padding import (CircularPad1d, CircularPad2d, CircularPad3d,
                                      ConstantPad1d, ConstantPad2d, ConstantPad3d,
                                      ReflectionPad1d, ReflectionPad2d, ReflectionPad3d,
                                      ReplicationPad1d, ReplicationPad2d, ReplicationPad3d,
                                      ZeroPad1d, ZeroPad2d, ZeroPad3d)
from lezero.nn.layers.pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d,
                                      AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d,
                                      AvgPool1d, AvgPool2d, AvgPool3d, Fold, LPPool1d,
                                      LPPool2d, MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d,
                                      MaxUnpool2d, PixelShuffle, PixelUnshuffle, Unfold,
                                      Upsample, UpsamplingBilinear2d, UpsamplingNearest2d,
                                      ChannelShuffle)
from lezero.nn.layers.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from lezero.nn.layers.vision import (Conv2dNormActivation, LayerNorm2d, Permute,
                                     SqueezeExcitation, StochasticDepth)
from lezero.nn.layers.transformer import (Transformer, TransformerDecoder,
                                          TransformerDecoderLayer, TransformerEncoder,
                                          TransformerEncoderLayer)

__all__ = [
    # linear and shape
    "Identity", "Linear", "LazyLinear", "Bilinear", "Flatten", "Unflatten",
    # convolution
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    # normalization
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
    "InstanceNorm3d", "LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm",
    "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
    "LazyInstanceNorm2d", "LazyInstanceNorm3d",
    # embedding and dropout
    "Embedding", "EmbeddingBag", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
    # padding
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
    "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d",
    # activations
    "ReLU", "ReLU6", "LeakyReLU", "PReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
    "Softplus", "Softsign", "Hardtanh", "Hardsigmoid", "Hardswish", "Sigmoid", "LogSigmoid",
    "Tanh", "Tanhshrink", "Softmax", "LogSoftmax", "Softmin", "Softmax2d", "GLU",
    "Hardshrink", "Softshrink", "Threshold", "RReLU",
    # distances
    "CosineSimilarity", "PairwiseDistance",
    # pooling, resizing, patches
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "LPPool1d",
    "LPPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
    "MaxUnpool1d", "MaxUnpool2d", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
    "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "Unfold", "Fold",
    # losses
    "L1Loss", "MSELoss", "CrossEntropyLoss", "NLLLoss", "SmoothL1Loss", "HuberLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss", "CTCLoss", "PoissonNLLLoss", "GaussianNLLLoss",
    "CosineEmbeddingLoss", "MarginRankingLoss", "HingeEmbeddingLoss", "TripletMarginLoss",
    "SoftMarginLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss", "MultiLabelMarginLoss",
    # recurrent
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
    # attention and transformers
    "MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer",
    "TransformerEncoder", "TransformerDecoder", "Transformer",
    # sparse layers
    "MixtureOfExperts",
    # torchvision.ops' building blocks
    "Conv2dNormActivation", "SqueezeExcitation", "StochasticDepth", "Permute", "LayerNorm2d",
    # graphs
    "GCNConv", "GATConv",
]
