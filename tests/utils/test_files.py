"""atomic_write, the one writer: a write killed midway leaves the old file intact for every
writer users rely on, a missing folder is named (never a hidden temporary file), and no
temporary file is left behind."""
import os

import numpy as np
import pytest

import lezero as lz
from lezero import nn
from lezero.utils import safetensors
from lezero.utils.files import atomic_write


class Killed(Exception):
    """Stands for the process dying half-way through a write."""


def _dies_midway(f):
    f.write(b"half of a new file")
    raise Killed


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    path = tmp_path / "x.bin"
    atomic_write(path, b"old")
    with pytest.raises(Killed):
        atomic_write(path, _dies_midway)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["x.bin"]


def test_text_bytes_and_callables_are_written(tmp_path):
    atomic_write(tmp_path / "a.txt", "héllo")
    atomic_write(tmp_path / "b.bin", b"\x00\x01")
    atomic_write(tmp_path / "c.bin", lambda f: f.write(b"cb"))
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "héllo"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "c.bin").read_bytes() == b"cb"


def test_the_new_file_gets_the_usual_permissions_and_an_existing_one_keeps_its(tmp_path):
    atomic_write(tmp_path / "new", b"x")
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(tmp_path / "new").st_mode & 0o777 == 0o666 & ~mask
    os.chmod(tmp_path / "new", 0o600)
    atomic_write(tmp_path / "new", b"y")
    assert os.stat(tmp_path / "new").st_mode & 0o777 == 0o600


def test_bad_content_and_folders_are_named(tmp_path):
    with pytest.raises(TypeError, match="content must be bytes, str or a callable"):
        atomic_write(tmp_path / "x", 3)
    with pytest.raises(IsADirectoryError, match="it is a folder"):
        atomic_write(tmp_path, b"x")


# ----- every writer users rely on ------------------------------------------------------------

def _model():
    return nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))


WRITERS = {
    "lz.save .npz": (".npz", lambda path: lz.save({"a": np.ones(3)}, path)),
    "lz.save .safetensors": (".safetensors", lambda path: lz.save({"a": np.ones(3)}, path)),
    "lz.save .h5": (".h5", lambda path: lz.save({"a": np.ones(3)}, path)),
    "Module.save": (".npz", lambda path: _model().save(path)),
    "safetensors.save_file": (".safetensors",
                              lambda path: safetensors.save_file({"a": np.ones(2)}, path)),
    "write_idx": (".idx", lambda path: __import__(
        "lezero.data.datasets.idx", fromlist=["write_idx"]).write_idx(str(path), np.ones(3))),
    "plot_dot_graph (.dot)": (".png", lambda path: _plot(path)),
}


def _plot(path):
    y = (lz.Variable(np.ones(2)) * 2).sum()
    try:
        lz.utils.plot_dot_graph(y, to_file=str(path))
    except RuntimeError:           # no Graphviz: the .dot text is still written
        pass


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_writer_killed_midway_leaves_the_old_file_intact(name, tmp_path, monkeypatch):
    ext, write = WRITERS[name]
    path = tmp_path / f"target{ext}"
    write(path)
    written = sorted(os.listdir(tmp_path))
    before = {f: (tmp_path / f).read_bytes() for f in written}
    # Kill the write at the moment the bytes would be flushed to disk.
    import lezero.utils.files as files
    real_fsync = os.fsync

    def die(fd):
        raise Killed

    monkeypatch.setattr(files.os, "fsync", die)
    with pytest.raises(Killed):
        write(path)
    monkeypatch.setattr(files.os, "fsync", real_fsync)
    assert sorted(os.listdir(tmp_path)) == written, "a temporary file was left behind"
    for f, data in before.items():
        assert (tmp_path / f).read_bytes() == data, f"{f} was changed by a failed write"


@pytest.mark.parametrize("ext", [".npz", ".safetensors", ".h5"])
def test_saving_into_a_missing_folder_names_the_path_and_the_folder(tmp_path, ext):
    target = tmp_path / "no" / "such" / f"model{ext}"
    for save in (lambda: lz.save({"a": np.ones(2)}, target), lambda: _model().save(target)):
        with pytest.raises(FileNotFoundError) as e:
            save()
        text = str(e.value)
        assert str(target) in text and str(tmp_path / "no" / "such") in text
        assert ".tmp" not in text


def test_the_operator_table_is_written_through_atomic_write(tmp_path):
    from lezero.functions import registry
    out = tmp_path / "ops.md"
    registry.main(["--markdown", str(out)])
    assert out.read_text().startswith("# Operator coverage")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        registry.main(["--markdown", str(tmp_path / "missing" / "ops.md")])
