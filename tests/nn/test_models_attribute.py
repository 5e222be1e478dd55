"""``nn.models`` (and ``nn.functional``) are attributes of ``lezero.nn`` without an extra
import, as the README and the contract use them, yet ``import lezero`` stays lean.

Each check runs in a fresh interpreter: in this test process the submodules are usually
imported already, which would hide the defect."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.timeout(120)


def _run(code):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=100)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_nn_models_get_model_after_from_lezero_import_nn():
    code = ("from lezero import nn; "
            "print(nn.models.get_model('resnet18').__class__.__name__)")
    assert _run(code) == "ResNet"


def test_nn_functional_is_an_attribute_too():
    code = ("import lezero; from lezero import nn; "
            "print(nn.functional.relu is lezero.functions.relu, 'models' in dir(nn))")
    assert _run(code) == "True True"


def test_import_lezero_does_not_import_the_model_zoo():
    code = ("import sys, lezero; from lezero import nn; "
            "print('lezero.nn.models' in sys.modules)")
    assert _run(code) == "False"


def test_unknown_nn_attribute_is_an_attribute_error():
    code = ("from lezero import nn\n"
            "try:\n    nn.no_such_thing\nexcept AttributeError as e:\n    print(e)")
    assert _run(code) == "module 'lezero.nn' has no attribute 'no_such_thing'"
