"""lezero.nn.utils: re-exported clipping and packed sequences, parameter/vector conversion."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero import nn, optim
from tests.nn.layers.layer_parity import load_from_torch, rand


def test_reexports_are_the_real_functions():
    assert nn.utils.clip_grad_norm_ is optim.clip_grad_norm_
    assert nn.utils.clip_grad_value_ is optim.clip_grad_value_
    assert nn.utils.rnn.pack_padded_sequence is F.pack_padded_sequence
    assert nn.utils.rnn.pad_packed_sequence is F.pad_packed_sequence
    assert nn.utils.rnn.PackedSequence is F.PackedSequence


def test_parameters_to_vector_matches_torch_and_is_differentiable():
    ours = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    load_from_torch(ours, theirs)
    vec = nn.utils.parameters_to_vector(ours.parameters())
    t_vec = torch.nn.utils.parameters_to_vector(theirs.parameters())
    np.testing.assert_array_equal(vec.data, t_vec.detach().numpy())
    (vec * vec).sum().backward()                   # d/dp sum(p^2) = 2p, back to each one
    for p in ours.parameters():
        np.testing.assert_allclose(p.grad.data, 2 * p.data)


def test_vector_to_parameters_round_trip_and_checks():
    model = nn.Linear(3, 2)
    new = rand(8)
    nn.utils.vector_to_parameters(lz.Variable(new), model.parameters())
    np.testing.assert_array_equal(model.weight.data, new[:6].reshape(2, 3))
    np.testing.assert_array_equal(model.bias.data, new[6:])
    np.testing.assert_array_equal(nn.utils.parameters_to_vector(model.parameters()).data, new)
    with pytest.raises(ValueError, match="vec has 7 values, the parameters hold 8"):
        nn.utils.vector_to_parameters(new[:7], model.parameters())
    with pytest.raises(TypeError, match="vec must be a 1-D"):
        nn.utils.vector_to_parameters(new.reshape(2, 4), model.parameters())
    with pytest.raises(TypeError, match=r"parameters\[0\] must be a Parameter"):
        nn.utils.parameters_to_vector([np.ones(2)])


def test_clip_grad_norm_through_nn_utils_matches_torch():
    ours, theirs = nn.Linear(5, 3), torch.nn.Linear(5, 3)
    load_from_torch(ours, theirs)
    x = rand(4, 5) * 10
    (ours(lz.Variable(x)) ** 2).sum().backward()
    (theirs(torch.tensor(x)) ** 2).sum().backward()
    norm = nn.utils.clip_grad_norm_(ours.parameters(), 1.0)
    t_norm = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
    assert float(norm.data) == pytest.approx(t_norm.item(), rel=1e-5)
    np.testing.assert_allclose(ours.weight.grad.data, theirs.weight.grad.numpy(), rtol=1e-5)
