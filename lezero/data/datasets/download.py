"""Downloading and caching dataset files: checksums, mirrors, atomic writes, safe extraction.

A download streams into a temporary file beside its destination while hashing it, and is
renamed into place only when the checksum matches: a cache never holds a partial or
corrupt file.  Any URL ``urllib`` opens works, including ``file://`` (how the tests serve
fixture files without a network).
"""
import hashlib
import lzma
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zlib

from lezero.data.datasets.errors import ArchiveError
from lezero.utils.files import ReadBudget, atomic_write

__all__ = ["default_root", "file_digest", "check_integrity", "download_url",
           "download_from_mirrors", "extract_tar", "MAX_TAR_MEMBERS"]

_CHUNK = 1 << 20
MAX_TAR_MEMBERS = 100_000      # members extract_tar accepts by default


def default_root():
    """Where datasets are cached: ``$LEZERO_DATA``, else ``~/.cache/lezero/datasets``."""
    return os.environ.get("LEZERO_DATA") or os.path.join(
        os.path.expanduser("~"), ".cache", "lezero", "datasets")


def file_digest(path, algorithm="md5"):
    """The hex digest of a file, read in chunks."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _algorithm(checksum):
    """md5 (32 hex digits) or sha256 (64), recognised by length."""
    return {32: "md5", 64: "sha256"}.get(len(checksum)) if checksum else None


def check_integrity(path, checksum=None):
    """True when ``path`` exists and, if a checksum (md5 or sha256 hex) is given, matches."""
    if not os.path.isfile(path):
        return False
    if checksum is None:
        return True
    return file_digest(path, _algorithm(checksum)) == checksum.lower()


def download_url(url, root, filename=None, checksum=None, timeout=60, progress=False):
    """Download ``url`` to ``root/filename`` unless a file with the right checksum is there.

    ``checksum`` is an md5 or sha256 hex digest; a mismatch raises ``IOError`` and leaves
    nothing behind.  Returns the path.
    """
    filename = filename or os.path.basename(urllib.request.urlparse(url).path)
    if not filename:
        raise ValueError(f"download_url: cannot tell a file name from url {url!r}; pass "
                         f"filename")
    if filename in (".", "..") or "\0" in filename or os.path.basename(filename) != filename \
            or (os.altsep and os.altsep in filename):
        raise ValueError(f"download_url: filename must be a plain file name (no folders), "
                         f"got {filename!r}")
    if checksum is not None and _algorithm(checksum) is None:
        raise ValueError(f"download_url: checksum must be an md5 (32 hex digits) or sha256 "
                         f"(64) digest, got {checksum!r}")
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, filename)
    if check_integrity(path, checksum):
        return path
    digest = hashlib.new(_algorithm(checksum) or "md5")

    def fetch(out):
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            bar = _bar(progress, resp.headers.get("Content-Length"), filename)
            for chunk in iter(lambda: resp.read(_CHUNK), b""):
                out.write(chunk)
                digest.update(chunk)
                if bar is not None:
                    bar.update(len(chunk))
            if bar is not None:
                bar.close()
        # Raised before the rename: a corrupt download never takes the file's name.
        if checksum is not None and digest.hexdigest() != checksum.lower():
            raise IOError(f"download_url: checksum mismatch for {url}: expected {checksum}, "
                          f"got {digest.hexdigest()}")

    return atomic_write(path, fetch, where="download_url")


def _bar(progress, total, name):
    if not progress:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=int(total) if total else None, unit="B", unit_scale=True, desc=name)


def download_from_mirrors(mirrors, filename, root, checksum=None, progress=False):
    """Try ``mirror + filename`` for each mirror in turn; the first good copy wins.

    Raises ``IOError`` listing every mirror's failure when none works.
    """
    errors = []
    for mirror in mirrors:
        url = mirror.rstrip("/") + "/" + filename
        try:
            return download_url(url, root, filename, checksum, progress=progress)
        except (urllib.error.URLError, IOError, OSError, ValueError) as e:
            errors.append(f"  {url}: {type(e).__name__}: {e}")
    raise IOError(f"could not download {filename} from any mirror:\n" + "\n".join(errors))


def extract_tar(archive, dest, max_inflation=None, max_members=MAX_TAR_MEMBERS):
    """Extract a (compressed) tar archive into ``dest``, safely and atomically.

    Only regular files and folders whose paths stay inside ``dest`` are accepted:
    absolute paths, ``..``, symbolic and hard links, device files and FIFOs raise
    ``ArchiveError`` (an ``OSError``) naming the archive and the member, as do more than
    ``max_members`` members or members totalling more than ``max_inflation`` (default
    ``lezero.utils.files.MAX_INFLATION``) times the archive's size.  Everything is
    checked before anything is written, extracted into a temporary folder, and each
    top-level entry is then renamed into place, so a refused or interrupted extraction
    leaves no half folder.
    """
    budget = ReadBudget(archive, ArchiveError, max_inflation)
    os.makedirs(dest, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=dest, prefix=".extract-")
    try:
        try:
            with tarfile.open(archive) as tar:
                members = _checked_members(tar, archive, tmp, budget, max_members)
                if hasattr(tarfile, "data_filter"):      # Python's own checks as well
                    tar.extractall(tmp, members=members, filter="data")
                else:
                    tar.extractall(tmp, members=members)
        except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError) as e:
            if isinstance(e, ArchiveError):
                raise
            raise ArchiveError(f"extract_tar: cannot extract {archive} "
                               f"({type(e).__name__}: {e})") from None
        for entry in os.listdir(tmp):
            final = os.path.join(dest, entry)
            if os.path.isdir(final) and not os.path.islink(final):
                shutil.rmtree(final)
            elif os.path.lexists(final) and not os.path.isdir(os.path.join(tmp, entry)):
                os.unlink(final)
            os.replace(os.path.join(tmp, entry), final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _checked_members(tar, archive, tmp, budget, max_members):
    """The archive's members, each checked (kind, path, size) as it is read."""
    root = os.path.realpath(tmp) + os.sep
    members = []
    for member in tar:
        if len(members) >= max_members:
            raise ArchiveError(f"extract_tar: {archive} has more than {max_members} "
                               f"members")
        target = os.path.realpath(os.path.join(tmp, member.name)) + (
            os.sep if member.isdir() else "")        # "./" itself is a folder inside
        if not (member.isfile() or member.isdir()) or not target.startswith(root) \
                or os.path.isabs(member.name):
            kind = "link" if member.issym() or member.islnk() else \
                "file" if member.isfile() or member.isdir() else "special file"
            raise ArchiveError(f"extract_tar: refusing unsafe member {member.name!r} "
                               f"({kind}) in {archive}")
        budget.charge(member.size, f"member {member.name!r}")
        members.append(member)
    return members
