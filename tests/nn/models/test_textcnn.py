"""TextCNN: PyTorch parity from shared weights (logits and gradients), shapes, errors."""
import numpy as np
import pytest
import torch

from lezero.nn import models

from tests.nn.models.torch_refs import TorchTextCNN


def test_logits_and_gradients_match_torch():
    torch.manual_seed(0)
    ref = TorchTextCNN(30, 4, 12, (2, 3, 5), 6).eval()
    ours = models.get_model("textcnn", vocab_size=30, num_classes=4, embed_dim=12,
                            kernel_sizes=(2, 3, 5), num_filters=6)
    ours.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    ours.eval()
    ids = np.random.default_rng(0).integers(0, 30, (3, 9))
    ids[0, 6:] = 0                                               # padding
    labels = np.array([0, 3, 1])
    out = ours(ids)
    theirs = ref(torch.as_tensor(ids))
    np.testing.assert_allclose(out.data, theirs.detach().numpy(), rtol=1e-5, atol=1e-6)
    import lezero.functions as F
    F.cross_entropy(out, labels).backward()
    torch.nn.functional.cross_entropy(theirs, torch.as_tensor(labels)).backward()
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(dict(ours.named_parameters())[name].grad.data,
                                   p.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


def test_max_over_time_ignores_position():
    ours = models.get_model("textcnn", vocab_size=30, num_classes=2, kernel_sizes=(3,),
                            num_filters=4).eval()
    a = np.zeros((1, 12), np.int64)
    b = a.copy()
    a[0, 2:5] = [5, 6, 7]
    b[0, 7:10] = [5, 6, 7]              # the same trigram elsewhere, same padding around
    np.testing.assert_allclose(ours(a).data, ours(b).data, rtol=1e-5, atol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="kernel_sizes"):
        models.get_model("textcnn", vocab_size=30, num_classes=2, kernel_sizes=())
    with pytest.raises(TypeError, match="num_classes"):
        models.get_model("textcnn", vocab_size=30, num_classes=2.0)
    m = models.get_model("textcnn", vocab_size=30, num_classes=2)
    with pytest.raises(ValueError, match="widest kernel 5"):
        m(np.ones((2, 4), np.int64))
    with pytest.raises(TypeError, match="int array"):
        m(np.ones((2, 8)))
