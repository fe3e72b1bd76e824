"""Text data files: read whole (gzip looked through, within the memory budget) and split into
lines lazily; written through a stream that compresses when the name ends in ``.gz``."""

from __future__ import annotations

import contextlib
import gzip
import io as _io
import stat
import zlib
from pathlib import Path

from ..exceptions import InputError
from ..runtime.files import check_readable as _check_readable
from ..runtime.files import reason_of as _reason
from ..runtime.memory import check_memory

#: Parsing text holds at most one 8-byte number per 2 characters ("1 " or "1\n").
PARSE_BYTES_PER_CHAR = 4


def read_text(path: Path) -> str:
    """The file's text (gzip looked through, a UTF-8 byte-order mark dropped, line ends made
    ``\\n``), after checking that the memory can hold it."""
    _check_readable(path)
    try:
        gz = path.suffix.lower() == ".gz"
        if gz or not stat.S_ISREG(path.stat().st_mode):
            # The size is unknown up front (compressed data, a pipe, a device): check as it grows.
            data = bytearray()
            with (gzip.open if gz else open)(path, "rb") as fh:
                while chunk := fh.read(1 << 24):
                    data += chunk
                    check_memory(
                        2 * len(data), f"{path}: {'decompressing' if gz else 'reading'} it"
                    )
        else:
            check_memory(2 * path.stat().st_size, f"{path}: reading it")
            data = path.read_bytes()
    except PermissionError:
        raise PermissionError(f"{path}: cannot read it (permission denied)") from None
    except gzip.BadGzipFile:
        raise InputError(f"{path}: unreadable (not a gzip file)") from None
    except (EOFError, zlib.error):
        raise InputError(f"{path}: unreadable (truncated or damaged gzip data)") from None
    except OSError as exc:
        raise InputError(f"{path}: unreadable ({exc.strerror or _reason(exc)})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{path}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x})"
        ) from None
    del data
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def text_lines(text: str, start: int = 0, line_no: int = 1):
    """(line number, offset, line) from ``start``, split at ``\\n`` only, one at a time (a list
    of all lines would cost ~50 bytes a line)."""
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        yield line_no, start, text[start:end]
        start, line_no = end + 1, line_no + 1


@contextlib.contextmanager
def open_text_output(tmp: Path, path: Path):
    """Text stream to ``tmp``, gzip-compressed when ``path`` ends in .gz (the gzip header names
    ``path``, not the temporary file)."""
    with open(tmp, "wb") as raw:
        if path.suffix.lower() == ".gz":
            with (
                gzip.GzipFile(filename=path.name, mode="wb", fileobj=raw) as gz,
                _io.TextIOWrapper(gz, encoding="utf-8", newline="\n") as fh,
            ):
                yield fh
        else:
            with _io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as fh:
                yield fh
