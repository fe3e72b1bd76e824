"""What :mod:`banmf.io` and the result files (:mod:`banmf.result`) share: outputs written
atomically, ``.npz`` archives read without trusting them, JSON metadata.

Below both: it imports nothing of banmf above the support masks.
"""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import stat
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..data.masks import csr_from_parts
from ..exceptions import InputError, OutputNotReplaced


def reason_of(exc: BaseException) -> str:
    """The first line of an exception's message, short, for a parenthesis in ours."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= 80 else text[:80] + "…"


def check_readable(path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a file")


def npz_headers(zf: zipfile.ZipFile) -> dict[str, tuple[tuple, np.dtype]]:
    """Shape and dtype of each array of an .npz archive, from the .npy headers alone."""
    out = {}
    for info in zf.infolist():
        if not info.filename.endswith(".npy"):
            continue
        with zf.open(info) as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                raise InputError(f".npy version {version[0]}.{version[1]} is not supported")
        out[info.filename[:-4]] = (shape, dtype)
    return out


def npz_array(zf: zipfile.ZipFile, name: str) -> np.ndarray:
    with zf.open(name + ".npy") as fh:
        array_ = np.lib.format.read_array(fh, allow_pickle=False)
        if fh.read(1):
            raise InputError(f"{name}.npy has data after the array")
        fh.read()  # zipfile checks the CRC on reaching the end: damaged bytes are caught here
        return array_


def nbytes(header: tuple[tuple, np.dtype]) -> int:
    shape, dtype = header
    return int(np.prod(shape, dtype=object)) * dtype.itemsize


def open_npz(path: Path, not_ours):
    """The archive and its array headers; ``not_ours(reason)`` builds the error to raise."""
    check_readable(path)
    try:
        zf = zipfile.ZipFile(path)
    except PermissionError:
        raise PermissionError(f"{path}: cannot read it (permission denied)") from None
    except Exception:  # zipfile raises several kinds (BadZipFile, NotImplementedError, ...)
        raise not_ours("not a zip archive") from None
    try:
        return zf, npz_headers(zf)
    except Exception as exc:  # zipfile, zlib and numpy raise many kinds for a damaged archive
        zf.close()
        raise not_ours(f"damaged: {reason_of(exc)}") from None


def signed(index: np.ndarray) -> np.ndarray | None:
    """An integer array as int64 (differences of unsigned ones wrap around), or None when a
    value does not fit."""
    if index.dtype.kind == "u" and index.size and index.max() > np.iinfo(np.int64).max:
        return None
    return index.astype(np.int64, copy=False)


def csr_problem(indptr: np.ndarray, indices: np.ndarray, n: int, m: int) -> str | None:
    """What is wrong with CSR index arrays for an n×m matrix, or None."""
    if indptr.ndim != 1 or indices.ndim != 1 or len(indptr) != n + 1:
        return f"index pointers for {len(indptr) - 1 if indptr.ndim == 1 else '?'} rows, the shape says {n}"
    if indptr[0] != 0 or indptr[-1] != len(indices) or (np.diff(indptr) < 0).any():
        return "the index pointers are not a running count of the indices"
    if len(indices) and (indices.min() < 0 or indices.max() >= m):
        return f"column indices outside 0..{m - 1}"
    return None


def sorted_rows(indptr: np.ndarray, indices: np.ndarray) -> bool:
    """Column indices strictly increase within each row (sorted, no repeats)."""
    if len(indices) < 2:
        return True
    rising = np.diff(indices) > 0
    starts = indptr[1:-1]
    rising[starts[(starts > 0) & (starts < len(indices))] - 1] = True  # across a row boundary
    return bool(rising.all())


def stored_pattern(indptr, indices, shape: tuple[int, int]) -> sp.csr_array | None:
    """A canonical support mask from the row pointers and column indices an archive stored
    (``signed`` already: None for values beyond int64), or None if they are not a sorted CSR
    pattern of ``shape``."""
    n, m = shape
    if (
        indptr is None
        or indices is None
        or csr_problem(indptr, indices, n, m)
        or not sorted_rows(indptr, indices)
    ):
        return None
    idx = np.int32 if max(n, m, len(indices)) < 2**31 - 1 else np.int64
    return csr_from_parts(indptr.astype(idx), indices.astype(idx), (n, m))


def _same_file(a: Path, b: Path) -> bool:
    with contextlib.suppress(OSError):
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return a.absolute() == b.absolute()


def _output_folder(path: Path, inputs=()) -> Path:
    """The folder the output goes to, after the checks that need no file created."""
    for source in inputs:
        if _same_file(path, Path(source)):
            raise InputError(f"refusing to overwrite the input {path}")
    if path.is_dir():
        raise InputError(f"{path} is a directory")
    parent = path.parent
    if not parent.exists():
        raise FileNotFoundError(f"{parent}: no such folder for the output {path.name}")
    if not parent.is_dir():
        raise InputError(f"{parent} is not a folder (for the output {path.name})")
    return parent


def _cannot_write(parent: Path, exc: OSError) -> PermissionError:
    # The folder exists (checked); ENOENT here means it takes no new files (/proc, for one).
    reason = (
        "it takes no new files"
        if exc.errno == errno.ENOENT
        else (exc.strerror or reason_of(exc)).lower()
    )
    return PermissionError(f"{parent}: cannot write there ({reason})")


def check_output(path, *, inputs=()) -> None:
    """Check, before any work, that an output can be written to ``path``.

    Creates a temporary file in the destination folder and renames it there (permission bits
    do not tell: root writes to 0555 folders; read-only mounts refuse everyone), then removes
    it; an existing ``path`` is checked for what stops a rename over it (an immutable or
    append-only file, ``chattr +i``/``+a``; another user's file in a sticky folder) without
    touching it.

    Parameters
    ----------
    path : str or Path
        The file to write.
    inputs : iterable of str or Path, optional
        Files the command reads; writing over one of them is refused.

    Raises
    ------
    banmf.exceptions.InputError
        ``path`` is one of ``inputs`` (the same file, by any name), or is a directory (a
        ``ValueError``).
    FileNotFoundError
        The folder of ``path`` does not exist.
    PermissionError
        Files cannot be created or renamed in that folder, or ``path`` cannot be replaced.
    """
    path = Path(path)
    parent = _output_folder(path, inputs)
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".check", dir=parent)
    except OSError as exc:
        raise _cannot_write(parent, exc) from None
    os.close(fd)
    moved = probe[: -len(".check")] + ".moved"
    try:
        os.replace(probe, moved)  # what the write does last, on a name of our own
    except OSError as exc:
        raise PermissionError(
            f"{parent}: cannot rename files there ({(exc.strerror or reason_of(exc)).lower()}), "
            f"so {path.name} cannot be written atomically"
        ) from None
    finally:
        for leftover in (probe, moved):
            with contextlib.suppress(OSError):
                os.unlink(leftover)
    problem = _replace_problem(path)
    if problem:
        raise PermissionError(f"{path}: cannot replace it ({problem})")


#: Linux inode flags (``chattr``) that forbid renaming over a file: immutable, append-only.
_FS_IOC_GETFLAGS = 0x80086601
_NO_REPLACE_FLAGS = {
    0x10: "it is immutable: chattr -i to allow it",
    0x20: "it is append-only: chattr -a to allow it",
}


def _replace_problem(path: Path) -> str:
    """What stops a rename over the existing ``path`` ("" when nothing known does), found
    without changing it: its inode flags on Linux, the sticky bit of its folder."""
    try:
        st = os.lstat(path)
    except OSError:
        return ""  # nothing there (yet) to replace
    if stat.S_ISREG(st.st_mode) and sys.platform.startswith("linux"):
        import fcntl

        with contextlib.suppress(OSError):  # unreadable, or a file system without flags
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
            try:
                flags = int.from_bytes(
                    fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(8))[:4], sys.byteorder
                )
            finally:
                os.close(fd)
            for flag, why in _NO_REPLACE_FLAGS.items():
                if flags & flag:
                    return why
    with contextlib.suppress(OSError, AttributeError):
        folder = os.stat(path.parent)
        uid = os.geteuid()
        if folder.st_mode & stat.S_ISVTX and uid not in (0, st.st_uid, folder.st_uid):
            return "another user's file in a folder where only owners may replace files"
    return ""


def _umask() -> int:
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)  # the portable way sets it to read it: racy with threads, hence last
    os.umask(mask)
    return mask


def _new_file_mode(path: Path) -> int:
    """The permissions ``open(path, "w")`` would leave: the existing file's, else 0666 & ~umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; rename it over ``path`` only on success.

    The file gets the permissions a plain ``open()`` would give it (those of the file it
    replaces, else 0666 less the umask). Raises as :func:`check_output` does (without ``inputs``)
    when the destination cannot be written.
    """
    path = Path(path)
    parent = _output_folder(path)
    mode = _new_file_mode(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise _cannot_write(parent, exc) from None
    os.close(fd)
    kept = False
    try:
        yield Path(tmp)
        os.chmod(tmp, mode)
        try:
            os.replace(tmp, path)
        except OSError as exc:
            reason = _replace_problem(path) or (exc.strerror or reason_of(exc)).lower()
            saved = _keep_beside(Path(tmp), path)
            kept = saved == Path(tmp)
            raise OutputNotReplaced(
                f"{path}: cannot replace it ({reason}); the output is saved as {saved}", saved
            ) from None
    finally:
        if not kept and os.path.exists(tmp):
            os.unlink(tmp)


def _keep_beside(tmp: Path, path: Path) -> Path:
    """Give the finished output ``tmp``, which could not replace ``path``, a name of its own
    beside it, ``NAME.saved.EXT`` (``.saved-2`` ... if taken; the extension kept so that it
    still reads), and return it (``tmp`` itself if it cannot be renamed): the work that made
    it, a long fit perhaps, is not lost."""
    suffix = "".join(path.suffixes[-2:]) if path.suffix.lower() == ".gz" else path.suffix
    base = path.name[: len(path.name) - len(suffix)] if suffix != path.name else path.name
    for i in range(1, 100):
        saved = path.with_name(f"{base}.saved{'' if i == 1 else f'-{i}'}{suffix}")
        try:
            os.link(tmp, saved)  # a new name only: never over a file that is there
        except FileExistsError:
            continue
        except OSError:
            break  # no hard links here (or no new names): keep the temporary file itself
        os.unlink(tmp)
        return saved
    return tmp


def jsonable(value):
    """``value`` as plain JSON values (numpy scalars and arrays, tuples, dtypes converted)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, type) or isinstance(value, np.dtype):
        return np.dtype(value).name if _is_dtype(value) else repr(value)
    return repr(value)


def _is_dtype(value) -> bool:
    try:
        np.dtype(value)
    except TypeError:
        return False
    return True


def versions() -> dict:
    import numba
    import scipy

    from .. import __version__

    return {
        "banmf": __version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
        "python": platform.python_version(),
    }
