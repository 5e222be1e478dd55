"""Builders of hostile ``.pt`` files for the tests: pickles that name allowed globals but
abuse them (BUILD on them, crafted NumPy states, shared references), written into the zip
layout ``torch.save`` uses or into its legacy layout.  Nothing here is run by LeZero."""
import collections
import io
import pickle
import struct
import zipfile

import numpy as np


class Reduce:
    """Pickles as ``fn(*args)`` followed by BUILD with ``state`` (when given)."""

    def __init__(self, fn, args, state=None):
        self.fn, self.args, self.state = fn, args, state

    def __reduce__(self):
        return (self.fn, self.args) if self.state is None else (self.fn, self.args, self.state)


def archive(path, payload, storages=None, compress=zipfile.ZIP_STORED):
    """A torch-style zip whose data.pkl is ``payload`` (bytes, or an object to pickle)."""
    if not isinstance(payload, bytes):
        payload = pickle.dumps(payload, protocol=2)
    with zipfile.ZipFile(path, "w", compression=compress) as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/byteorder", "little")
        for key, data in (storages or {}).items():
            z.writestr(f"archive/data/{key}", data)
    return path


def unicode(text):
    """The BINUNICODE opcode for ``text``."""
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def global_then_build(module, name, state_opcodes):
    """A pickle that loads the global ``module.name`` and BUILDs ``state`` into it."""
    return (b"\x80\x02c" + f"{module}\n{name}\n".encode() + state_opcodes + b"b.")


def dict_opcodes(items):
    """Opcodes pushing ``{key: value}`` for str keys and str values."""
    body = b"".join(unicode(k) + unicode(v) for k, v in items.items())
    return b"}(" + body + b"u"


def structured_dtype(offset=100_000):
    """numpy's own dtype pickle, with a field placed ``offset`` bytes into a 4-byte item."""
    return Reduce(np.dtype, ("V4", False, True),
                  (3, "|", None, ("a",), {"a": (np.dtype("float64"), offset)}, 4, 1, 16))


def numpy_array(state):
    """numpy's ``_reconstruct`` pickle of an ndarray, BUILT with ``state``."""
    from numpy._core.multiarray import _reconstruct
    return Reduce(_reconstruct, (np.ndarray, (0,), b"b"), state)


def shared_references(levels):
    """``x = [x, x]`` ``levels`` times: a pickle of ~4 bytes per level."""
    x = []
    for _ in range(levels):
        x = [x, x]
    return x


def nested_lists(depth):
    """A pickle of ``depth`` nested empty lists, written by hand (pickle.dumps recurses)."""
    return b"\x80\x02" + b"(" * depth + b"]" + b"l" * depth + b"."


class FakeStorage:
    pass


def tensor_pickle(offset, size, stride, numel=4, key="0", dtype=None, version=2, state=None):
    """data.pkl for one float tensor on storage ``key``, bypassing torch's own checks
    (then BUILT with ``state``, if given)."""
    import torch
    storage = FakeStorage()

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if obj is storage:
                return ("storage", torch.FloatStorage, key, "cpu", numel)
            return None

    if version == 2:
        tensor = Reduce(torch._utils._rebuild_tensor_v2,
                        (storage, offset, size, stride, False, collections.OrderedDict()), state)
    else:
        tensor = Reduce(torch._utils._rebuild_tensor_v3,
                        (storage, offset, size, stride, False, collections.OrderedDict(), dtype))
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump({"t": tensor})
    return buf.getvalue()


def legacy_file(path, obj_with_storage, numel, data=b""):
    """A legacy-format ``.pt``: magic, protocol, system info, the object (whose storage
    declares ``numel`` floats), the key list, then ``data`` as the storage's bytes."""
    import torch
    storage = FakeStorage()

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if obj is storage:
                return ("storage", torch.FloatStorage, "0", "cpu", numel, None)
            return None

    buf = io.BytesIO()
    for header in (0x1950A86A20F9469CFC6C, 1001, {"little_endian": True}):
        pickle.dump(header, buf, protocol=2)
    Pickler(buf, protocol=2).dump(obj_with_storage(storage))
    pickle.dump(["0"], buf, protocol=2)
    buf.write(struct.pack("<q", numel) + data)
    with open(path, "wb") as f:
        f.write(buf.getvalue())
    return path
