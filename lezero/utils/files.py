"""``atomic_write``: the one way LeZero writes a file.

A crash, a full disk or an exception half-way through a save must never leave a torn
file where a good one was.  So every writer in LeZero (checkpoints, safetensors, the
operator table, the autotune cache, graph drawings, generated C++ sources, dataset files)
goes through ``atomic_write``:

1. the bytes go to a temporary file in the target's own folder (a rename is atomic only
   within one file system),
2. the file is flushed and ``fsync``'d, given the usual permissions, and
3. renamed over the target; the folder is fsync'd so the rename itself survives a crash.

If anything fails before the rename, the temporary file is removed and the old target is
untouched.  A target whose folder does not exist is refused up front with an error that
names the user's path and the missing folder (not the hidden temporary file).
"""
import os
import tempfile

__all__ = ["atomic_write"]


def _default_mode():
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_NEW_FILE_MODE = _default_mode()


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
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.",
                               suffix=".tmp")
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
