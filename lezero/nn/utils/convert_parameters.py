"""``parameters_to_vector`` / ``vector_to_parameters``, as in ``torch.nn.utils``."""
import lezero.functions as F
from lezero import cuda
from lezero.core import Variable


def _parameter_list(parameters, op):
    params = [parameters] if isinstance(parameters, Variable) else list(parameters)
    for i, p in enumerate(params):
        if not isinstance(p, Variable):
            raise TypeError(f"{op}: parameters[{i}] must be a Parameter or Variable, got "
                            f"{type(p).__name__}")
    if not params:
        raise ValueError(f"{op}: got no parameters")
    return params


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated into one 1-D Variable, in order.

    The result is differentiable: a loss on it sends gradients back to the parameters.
    """
    params = _parameter_list(parameters, "parameters_to_vector")
    return F.concatenate([F.reshape(p, (p.size,)) for p in params], axis=0)


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-D ``vec`` into the parameters' data, in place.

    The reverse of ``parameters_to_vector``; ``vec`` must hold exactly as many values as
    the parameters together.  No graph is recorded.
    """
    params = _parameter_list(parameters, "vector_to_parameters")
    data = vec.data if isinstance(vec, Variable) else vec
    if not isinstance(data, cuda.array_types()) or data.ndim != 1:
        raise TypeError(f"vector_to_parameters: vec must be a 1-D array or Variable, got "
                        f"{getattr(data, 'shape', type(data).__name__)}")
    total = sum(p.size for p in params)
    if data.size != total:
        raise ValueError(f"vector_to_parameters: vec has {data.size} values, the parameters "
                         f"hold {total}")
    start = 0
    for p in params:
        p.data[...] = data[start:start + p.size].reshape(p.shape)
        start += p.size
