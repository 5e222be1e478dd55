"""Every parity test starts from the same torch and LeZero seeds, so the references'
random initialisations (and so the compared numbers) do not depend on test order."""
import pytest
import torch

import lezero as lz


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)
    lz.manual_seed(0)
