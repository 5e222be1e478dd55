"""``python -m lezero.serving`` on bad input (issue 32): a file that is missing, of an
unknown kind, corrupt or hostile, a busy port or a bad option ends with status 2 and one
line on stderr naming the problem, never a traceback; a ``.lzg`` that names a class to
run (``subprocess.Popen``) is refused without running anything."""
import io
import json
import os
import socket
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

from lezero.serving.__main__ import main

pytestmark = pytest.mark.timeout(60)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_main(capsys, *argv):
    """``main(argv)`` in this process: (status, stderr); argparse's exits included."""
    try:
        status = main(list(argv))
    except SystemExit as exc:
        status = exc.code
    return status, capsys.readouterr().err


def assert_one_line(err, *needles):
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("python -m lezero.serving: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, err)


@pytest.mark.parametrize("name, content, options, match", [
    ("bad.onnx", b"not a protobuf", "", "onnxruntime cannot load"),
    ("bad.lzg", b"not a zip archive", "", "bad.lzg"),
    ("bad.npz", b"PK\x03\x04 truncated", ":model=mlp:in_channels=4:hidden_channels=[2]", ""),
    ("bad.pt", b"\x80\x02garbage", ":model=mlp:in_channels=4:hidden_channels=[2]", ""),
    ("bad.h5", b"\x89HDF\r\n\x1a\n" + b"\x00" * 40, ":model=mlp:in_channels=4:"
     "hidden_channels=[2]", ""),
    ("weights.npz", None, "", "holds weights only"),
    ("model.txt", b"hello", "", "no loader for"),
    ("missing.onnx", None, "", "does not exist"),
])
def test_bad_model_files_exit_2_with_one_line(tmp_path, capsys, name, content, options,
                                              match):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    elif name == "weights.npz":
        from lezero import nn
        nn.Linear(4, 2).save(str(path))
    status, err = run_main(capsys, "--model", f"m={path}{options}", "--port", "0")
    assert status == 2
    assert_one_line(err, f"--model m: cannot load {path}", match)


def test_a_busy_port_exits_2_with_one_line(tmp_path, capsys):
    from tests.serving.test_loaders import make_onnx
    make_onnx(tmp_path / "lin.onnx")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        status, err = run_main(capsys, "--model", f"m={tmp_path / 'lin.onnx'}", "--port",
                               str(port))
    assert status == 2
    assert_one_line(err, f"cannot listen on 127.0.0.1:{port}")


@pytest.mark.parametrize("argv, match", [
    (["--model", "m=x.onnx", "--port", "abc"], "argument --port: invalid int value"),
    (["--model", "m=x.onnx", "--max-body-mb", "inf"], "must be a positive number"),
    (["--model", "m=x.onnx", "--header-timeout", "0"], "must be a positive number"),
    (["--model", "m=x.onnx", "--max-connections", "0", "--port", "0"], "max_connections"),
    (["--model", "m=x.onnx", "--port", "70000"], "port must be <= 65535"),
    (["--port", "0"], "the following arguments are required: --model"),
    (["--model", "no-equals-sign"], "expected NAME=PATH"),
])
def test_bad_options_exit_2_with_one_line(tmp_path, capsys, argv, match):
    from tests.serving.test_loaders import make_onnx
    make_onnx(tmp_path / "x.onnx")
    argv = [a.replace("x.onnx", str(tmp_path / "x.onnx")) for a in argv]
    status, err = run_main(capsys, *argv)
    assert status == 2
    assert_one_line(err, match)


def test_the_same_name_twice_is_refused(tmp_path, capsys):
    from tests.serving.test_loaders import make_onnx
    make_onnx(tmp_path / "x.onnx")
    status, err = run_main(capsys, "--model", f"m={tmp_path / 'x.onnx'}", "--model",
                           f"m={tmp_path / 'x.onnx'}")
    assert status == 2
    assert_one_line(err, "the name 'm' is given twice")


def evil_graph(path, marker):
    """A real ``.lzg`` whose ``out_tree`` names ``subprocess.Popen`` with a command that
    creates ``marker`` (the probe's exploit)."""
    from lezero import jit
    jit.trace(lambda x: x * 2, np.ones((2, 3), np.float32)).save(str(path))
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    doc = json.loads(members["graph.json"])
    doc["out_tree"] = {"$namedtuple": "Popen", "module": "subprocess",
                       "fields": {"args": ["touch", str(marker)]}}
    members["graph.json"] = json.dumps(doc).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    path.write_bytes(buffer.getvalue())


def test_a_graph_file_naming_popen_is_refused_without_running_it(tmp_path):
    """Runs the real command line: the file must be refused (GraphFormatError, from
    ``jit.load``) with one line, and the command it names must never run."""
    marker = tmp_path / "pwned"
    evil_graph(tmp_path / "evil.lzg", marker)
    proc = subprocess.Popen([sys.executable, "-m", "lezero.serving", "--model",
                             f"m={tmp_path / 'evil.lzg'}", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        out, err = proc.communicate(timeout=40)
    except subprocess.TimeoutExpired:         # it loaded the file and is serving it
        proc.kill()
        out, err = proc.communicate()
    time.sleep(0.3)                          # a spawned `touch` would be done by now
    assert not marker.exists(), "the .lzg file ran a command"
    assert proc.returncode == 2, out + err
    assert_one_line(err, "evil.lzg")


def test_an_onnx_file_whose_weights_point_outside_its_folder_is_refused(tmp_path, capsys):
    """External data may not name a file outside the model's folder (here the system
    password file, which the HDF5 probe read): refused, nothing of it served."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    weight = numpy_helper.from_array(np.zeros((4, 3), np.float32), "W")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in {"location": "../" * 12 + "etc/passwd", "length": "48"}.items():
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "leak",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (tmp_path / "leak.onnx").write_bytes(model.SerializeToString())
    status, err = run_main(capsys, "--model", f"m={tmp_path / 'leak.onnx'}", "--port", "0")
    assert status == 2
    assert_one_line(err, "onnxruntime cannot load", "escapes model directory")
