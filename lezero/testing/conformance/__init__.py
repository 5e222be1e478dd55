"""The conformance suite a backend must pass (docs/backends.md).

    LEZERO_BACKEND=strict pytest --pyargs lezero.testing.conformance

runs every check on the backend ``LEZERO_BACKEND`` names (``strict`` when unset):

* ``test_hooks``: bitwise round trip of every declared dtype (undeclared ones refused),
  ``scatter_add`` with repeated indices equal to ``np.add.at``, seeded determinism, the
  generator's method set exactly as declared, device, synchronize and memory hooks;
* ``test_operators``: every registered operator, forward and backward, on the backend
  against NumPy's float64 result (the operator table of the LeZero repository);
* ``test_host_escape``: a steady-state training step of LeNet, an LSTM language model
  and GPT-mini makes no host round trip apart from ``loss.item()`` (on backends that can
  count them: ``Backend.count_transfers``);
* ``test_checkpoint``: a model saved from the device and loaded back gives the same
  outputs, bit for bit.
"""
import os

__all__ = ["backend_name"]


def backend_name():
    """The backend under test: ``LEZERO_BACKEND``, else ``strict``."""
    return os.environ.get("LEZERO_BACKEND") or "strict"
