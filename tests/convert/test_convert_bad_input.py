"""``python -m lezero.convert`` on bad input (issue 32): it printed Python tracebacks; now
each failure is one line on stderr naming the file, with the documented exit status
(2: bad usage or input, 1: refused by the key/shape checks, 3: OUT not writable)."""
import json
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import lezero as lz
from lezero.convert.__main__ import main


def _model_file(tmp_path):
    """A safetensors state_dict of a small zoo model (SqueezeNet 1.1, 1.2 M parameters)."""
    from lezero.nn.models import get_model
    lz.save(get_model("squeezenet1_1").state_dict(), tmp_path / "sq.safetensors")
    return tmp_path / "sq.safetensors"


def _bad_files(tmp_path):
    """name -> a hostile or broken checkpoint, each of another kind of defect."""
    files = {}
    files["truncated.pt"] = b"PK\x03\x04" + b"\0" * 40
    files["junk.pth"] = b"not a checkpoint at all"
    with zipfile.ZipFile(tmp_path / "build.pt", "w") as z:     # BUILD on an allowed global
        z.writestr("a/data.pkl", b"\x80\x02ctorch\nFloatStorage\n}X\x04\x00\x00\x00specX"
                                 b"\x03\x00\x00\x00<f8sb.")
    files["deep.safetensors"] = struct.pack("<Q", 200_000) + b"[" * 100_000 + b"]" * 100_000
    header = json.dumps({"w": {"dtype": "F32", "shape": [1] * 70,
                               "data_offsets": [0, 4]}}).encode()
    files["dims.safetensors"] = struct.pack("<Q", len(header)) + header + b"\0" * 4
    files["text.npz"] = b"hello"
    files["text.h5"] = b"\x89HDF\r\n\x1a\n" + b"\0" * 50
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return sorted(files) + ["build.pt"]


def test_bad_files_exit_2_with_one_line_naming_the_file(tmp_path, capsys):
    for name in _bad_files(tmp_path):
        rc = main([str(tmp_path / name), "--model", "squeezenet1_1", "-o",
                   str(tmp_path / "out.npz")])
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert rc == 2, (name, captured.err)
        assert len(lines) == 1 and lines[0].startswith("error: "), (name, captured.err)
        assert str(tmp_path / name) in lines[0], (name, lines[0])
        assert not (tmp_path / "out.npz").exists()


def test_missing_inputs_models_and_outputs_have_their_statuses(tmp_path, capsys):
    src = _model_file(tmp_path)
    out = str(tmp_path / "x.npz")
    cases = [
        ([str(tmp_path / "none.pt"), "--model", "squeezenet1_1", "-o", out], 2, "none.pt"),
        ([str(tmp_path / "empty"), "--model", "squeezenet1_1", "-o", out], 2,
         "without model.safetensors"),
        ([str(src), "--model", "resnet5", "-o", str(tmp_path / "o.npz")], 2,
         "unknown model 'resnet5'"),
        ([str(src), "--model", "squeezenet1_1", "--arg", "wings=2", "-o",
          str(tmp_path / "o.npz")], 2, "--model squeezenet1_1"),
        ([str(src), "--model", "squeezenet1_1", "-o", str(tmp_path / "o.pt")], 2,
         "the extension must be one of"),
        ([str(src), "--model", "squeezenet1_1", "-o", str(tmp_path / "no" / "o.npz")], 3,
         "does not exist"),
        ([str(src), "--model", "squeezenet1_1", "--key", "model", "-o", out], 2,
         "no entry 'model'"),
    ]
    (tmp_path / "empty").mkdir()
    for argv, status, text in cases:
        rc = main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == status and len(err) == 1 and text in err[0], (argv, rc, err)
    assert not (tmp_path / "x.npz").exists()
    from lezero.convert import convert
    with pytest.raises(ValueError, match=r"out .*o\.pt' must end in one of \.npz"):
        convert(src, "squeezenet1_1", tmp_path / "o.pt")      # before reading SRC
    assert main([str(src), "--model", "squeezenet1_1", "-o", str(tmp_path / "ok.npz")]) == 0
    np.testing.assert_array_equal(lz.load(tmp_path / "ok.npz")["features.0.weight"],
                                  lz.load(src)["features.0.weight"])


@pytest.mark.timeout(120)
def test_the_command_line_prints_no_traceback(tmp_path):
    _bad_files(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "lezero.convert", str(tmp_path / "build.pt"),
                           "--model", "squeezenet1_1", "-o", str(tmp_path / "o.npz")],
                          capture_output=True, text=True, timeout=100)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "refusing to change torch.FloatStorage" in proc.stderr
