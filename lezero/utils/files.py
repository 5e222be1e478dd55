"""How LeZero writes and reads files: ``atomic_write``, bounded reads, ``FileFormatError``.

Writing.  A crash, a full disk or an exception half-way through a save must never leave a
torn file where a good one was.  So every writer in LeZero (checkpoints, safetensors, the
operator table, the autotune cache, graph drawings, generated C++ sources, dataset files)
goes through ``atomic_write``:

1. the bytes go to a temporary file ``.<name>.<host>.<pid>.<random>.tmp`` in the target's
   own folder (a rename is atomic only within one file system),
2. the file is flushed and ``fsync``'d, given the usual permissions, and
3. renamed over the target; the folder is fsync'd so the rename itself survives a crash.

If anything fails before the rename, the temporary file is removed and the old target is
untouched.  A process killed outright cannot clean up, so each save first removes the
temporaries *of the same target* that a dead process left: those naming this host and a
process id that no longer runs, and those of other hosts (or older LeZero versions, whose
names carry no process id) untouched for ``STALE_SECONDS``.  A temporary that a running
save of the same target is writing is kept.  A target whose folder does not exist is
refused up front with an error that names the user's path and the missing folder.

Reading.  Files come from strangers.  ``FileFormatError`` (a ``ValueError``) is the family
of the loaders' errors, one subclass per format, each naming the file and what is wrong.
``ReadBudget`` bounds what a small file may expand to (a zip bomb, an HDF5 dataset of fill
values): at most ``MAX_INFLATION`` times the file's size (plus ``INFLATION_SLACK``),
charged *before* anything is allocated or inflated.
"""
import lzma
import os
import re
import socket
import stat
import struct
import tempfile
import time
import zipfile
import zlib

import numpy as np

__all__ = ["atomic_write", "FileFormatError", "MissingKeyError", "ReadBudget",
           "check_regular_file", "open_zip", "read_zip_member", "ZIP_ERRORS",
           "MAX_INFLATION", "MAX_DEPTH", "STALE_SECONDS"]

MAX_INFLATION = 100           # bytes a loader may produce per byte of the file it reads
MAX_DEPTH = 100               # nesting (containers, groups) that a loader follows
INFLATION_SLACK = 1 << 20     # ... plus this much, so tiny files of zeros still load
STALE_SECONDS = 24 * 3600     # age after which a temporary nobody can vouch for is removed


class FileFormatError(ValueError):
    """A file is malformed, unsafe or not what its extension says; the message names the
    file and what is wrong.  Each format raises its own subclass."""


class MissingKeyError(KeyError):
    """Mixed into a format's error for a key the file lacks (``NpzKeyError``,
    ``HDF5KeyError``), so code catching ``KeyError`` still works; printed as a plain
    message rather than ``KeyError``'s quoted repr."""

    __str__ = BaseException.__str__


# ----- reading ------------------------------------------------------------------------------
def check_regular_file(path, error):
    """Raise ``error`` unless ``path`` is a regular file: a pipe would block the loader
    forever and a device never ends.  A missing path or a folder raises the usual OSError."""
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"{os.fspath(path)}: is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise error(f"{os.fspath(path)}: not a regular file (a pipe, socket or device)")


class ReadBudget:
    """The bytes a loader may still produce from ``path``: ``ratio`` (default
    ``MAX_INFLATION``) times its size plus ``INFLATION_SLACK``.  ``charge`` is called with
    each declared size before it is read, so a bomb is refused before it inflates."""

    def __init__(self, path, error, ratio=None):
        ratio = MAX_INFLATION if ratio is None else ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not ratio >= 1:
            raise ValueError(f"max_inflation must be a number >= 1, got {ratio!r}")
        check_regular_file(path, error)
        self.where, self.error, self.ratio = os.fspath(path), error, ratio
        self.size = os.path.getsize(path)
        self.left = ratio * self.size + INFLATION_SLACK

    def charge(self, nbytes, what):
        """Account for ``nbytes`` more bytes of ``what``; raise ``error`` past the budget."""
        if nbytes > self.left:
            raise self.error(
                f"{self.where}: {what} would expand to {nbytes} bytes, more than "
                f"{self.ratio:g} times the file's {self.size} bytes allow (a compression "
                "bomb or a corrupt size field; if you trust the file, pass max_inflation=...)")
        self.left -= nbytes


# what a damaged zip archive makes ``zipfile`` (and its decompressors) raise
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, OSError, struct.error,
               RuntimeError, NotImplementedError, ValueError, OverflowError)


def open_zip(path, error, what="a zip archive"):
    """``zipfile.ZipFile(path)``; a file that is not a readable zip raises ``error``."""
    check_regular_file(path, error)
    try:
        return zipfile.ZipFile(path)
    except ZIP_ERRORS as e:
        raise error(f"{os.fspath(path)}: not {what} ({type(e).__name__}: {e})") from None


def read_zip_member(archive, info, budget, limit=None):
    """The bytes of zip member ``info`` as a uint8 array, after checking its declared
    sizes (stored members: equal; at most ``limit`` bytes) and charging ``budget``."""
    error, where = budget.error, budget.where
    if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
        raise error(f"{where}: member {info.filename!r} declares {info.file_size} bytes but "
                    f"stores {info.compress_size}")
    if limit is not None and info.file_size > limit:
        raise error(f"{where}: member {info.filename!r} has {info.file_size} bytes; at most "
                    f"{limit} expected")
    budget.charge(info.file_size, f"member {info.filename!r}")
    raw = np.empty(info.file_size, np.uint8)
    try:
        with archive.open(info) as f:
            got = f.readinto(memoryview(raw)) if info.file_size else 0
    except ZIP_ERRORS as e:
        raise error(f"{where}: cannot read member {info.filename!r} ({type(e).__name__}: "
                    f"{e})") from None
    if got != info.file_size:
        raise error(f"{where}: member {info.filename!r} is truncated ({got} of "
                    f"{info.file_size} bytes)")
    return raw


# ----- writing ------------------------------------------------------------------------------
def _default_mode():
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_NEW_FILE_MODE = _default_mode()
_HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:64] or "host"


def _pid_alive(pid):
    if os.name != "posix":        # os.kill(pid, 0) is no probe on Windows: it kills
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True               # someone else's process (or an unusable pid): keep it
    return True


_OURS = re.compile(r"\.(?P<host>[A-Za-z0-9-]+)\.(?P<pid>\d{1,10})\.[a-z0-9_]+\.tmp")
_LEGACY = re.compile(r"\.[a-z0-9_]{8}\.tmp")      # mkstemp's names before pids were added


def _is_stale(rest, entry):
    """Whether the temporary ``entry`` (``rest``: its name after ``.<target>``) is a dead
    save's: this host and a pid that is gone, or too old for anyone to still be writing."""
    match = _OURS.fullmatch(rest)
    if match and match["host"] == _HOST:
        pid = int(match["pid"])
        return pid != os.getpid() and not _pid_alive(pid)
    if match or _LEGACY.fullmatch(rest):
        return time.time() - entry.stat(follow_symlinks=False).st_mtime > STALE_SECONDS
    return False                  # another target's temporary (``a.b`` beside ``a``)


def _remove_stale_temporaries(directory, base):
    """Delete the ``.<base>.*.tmp`` files that dead saves of the same target left."""
    prefix = f".{base}"
    try:
        entries = [e for e in os.scandir(directory)
                   if e.name.startswith(prefix + ".") and e.name.endswith(".tmp")]
    except OSError:
        return
    for entry in entries:
        try:
            if _is_stale(entry.name[len(prefix):], entry) and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
        except OSError:
            pass                  # removed meanwhile, or not ours to remove


def atomic_write(path, content, encoding="utf-8", where="write"):
    """Write ``content`` to ``path`` atomically.

    ``content`` is ``bytes``, a ``str`` (encoded with ``encoding``), or a callable
    ``content(f)`` that writes into the binary file object it is given.  ``where`` names
    the caller in error messages (``lz.save``, ``Module.save`` ...).  Returns ``path``.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{where}: cannot write {path!r}: the folder {directory!r} "
                                "does not exist (create it first)")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{where}: cannot write {path!r}: it is a folder")
    if isinstance(content, str):
        content = content.encode(encoding)
    if not (callable(content) or isinstance(content, (bytes, bytearray, memoryview))):
        raise TypeError(f"{where}: content must be bytes, str or a callable that writes "
                        f"into a file, got {type(content).__name__}")
    base = os.path.basename(path)
    _remove_stale_temporaries(directory, base)
    prefix = f".{base}.{_HOST}.{os.getpid()}."
    if len(os.fsencode(prefix)) + 12 > 255:      # too long a name: only the age bound cleans
        prefix = f".{base}."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "w+b") as f:
            if callable(content):
                content(f)
            else:
                f.write(content)
            f.flush()
            os.fsync(f.fileno())
        mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else _NEW_FILE_MODE
        os.chmod(tmp, mode)         # mkstemp makes files private; give the usual mode
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)
    return path


def _fsync_directory(directory):
    """Make the rename itself durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
