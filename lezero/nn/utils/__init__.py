"""``lezero.nn.utils``: gradient clipping, parameter/vector conversion and, in
``lezero.nn.utils.rnn``, packed sequences -- PyTorch's ``torch.nn.utils`` names."""
from lezero.nn.utils import rnn
from lezero.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from lezero.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector",
           "vector_to_parameters", "rnn"]
