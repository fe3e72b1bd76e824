"""The one registry of file formats: name → what a format is (suffixes, reader, writer, the
options its reader takes, where it keeps labels and unknown cells, whether it has a sidecar and
whether factors export to it).

Each format's module defines its :class:`Format`; :mod:`banmf.io` fills :data:`REGISTRY` with
them in the order shown everywhere (``FORMATS``, ``--format``, the docs). This module imports no
reader, so that those below the registry (the sidecars, which read a mask of any format) can
read it.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import InputError, InvalidParameterError


@dataclass(frozen=True)
class Format:
    """A file format of 0/1 matrices.

    Attributes
    ----------
    name : str
        What ``format=`` and ``--format`` take.
    suffixes : tuple of str
        The extensions that name the format (lower case, with the dot; a ``.gz`` after them is
        looked through), the usual one first.
    read : callable
        ``read(path, **options) -> Dataset``, the whole file with its labels and unknown cells.
    write : callable
        ``write(X, path, labels, missing)``: a canonical support mask, a dict of
        ``row_labels`` / ``col_labels`` (lists of str) and a mask of unknown cells or None,
        written atomically with whatever the format keeps beside the file.
    options : tuple of str
        The keyword options of :func:`banmf.io.read_matrix` that apply to the format.
    labels : str
        Where the row and column labels are kept (as the docs say it).
    missing : str
        Where the unknown cells are kept (as the docs say it).
    sidecar : bool
        Labels, the shape and the unknown cells live in the sidecar ``PATH.json``.
    gzip : bool
        Text: a ``.gz`` after the extension compresses the file written.
    export : bool
        :func:`banmf.io.export_factors` writes factors in this format.
    """

    name: str
    suffixes: tuple[str, ...]
    read: Callable
    write: Callable
    options: tuple[str, ...] = ()
    labels: str = ""
    missing: str = ""
    sidecar: bool = False
    gzip: bool = False
    export: bool = False


#: Every format by name, filled by :mod:`banmf.io` (the order is the one shown to users).
REGISTRY: dict[str, Format] = {}

#: Extensions that many kinds of file share: one names the format it is read as by default
#: (``.txt``: FIMI transactions), a guess that the file's first line may overrule.
GENERIC_SUFFIXES = (".txt",)
#: The first line of every Matrix Market file starts so (case aside, as scipy reads it).
_MTX_BANNER = b"%%matrixmarket"
#: How the messages name a format read on a guess.
_TITLES = {"dat": "FIMI transactions", "mtx": "Matrix Market"}


def export_formats() -> tuple[str, ...]:
    """The formats :func:`banmf.io.export_factors` writes, in alphabetical order (the default,
    csv, first)."""
    return tuple(sorted(name for name, spec in REGISTRY.items() if spec.export))


def output_suffixes() -> tuple[str, ...]:
    """The endings of the files :func:`banmf.io.write_matrix` writes: each format's usual
    extension, then those of the text formats with ``.gz``."""
    usual = [spec.suffixes[0] for spec in REGISTRY.values()]
    return (*usual, *(spec.suffixes[0] + ".gz" for spec in REGISTRY.values() if spec.gzip))


def format_of(path: Path, fmt: str | None) -> str:
    """The name of the format of ``path``: ``fmt`` when given (checked), else the one its
    extension names, a ``.gz`` looked through.

    Parameters
    ----------
    path : Path
    fmt : str or None
        A name of :data:`REGISTRY` (``format=``), or None to go by the extension.

    Returns
    -------
    str

    Raises
    ------
    InvalidParameterError
        ``fmt`` is not a format's name.
    InputError
        The extension names no format.
    """
    if fmt is not None:
        if fmt not in REGISTRY:
            raise InvalidParameterError(
                f"unknown format {fmt!r}; choose one of {', '.join(REGISTRY)}"
            )
        return fmt
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    for spec in REGISTRY.values():
        if ext in spec.suffixes:
            return spec.name
    known = ", ".join(s for spec in REGISTRY.values() for s in spec.suffixes)
    raise InputError(
        f"{path}: cannot tell the format from the extension {ext.lstrip('.') or '(none)'!r}; "
        f"use one of {known} (a .gz looked through) or pass format="
    )


def content_format(path: Path) -> str | None:
    """The format the first bytes of the file at ``path`` show (gzip looked through), or None:
    "mtx" for a Matrix Market banner, the one format that says what it is in its text."""
    try:
        opener = gzip.open if path.suffix.lower() == ".gz" else open
        with opener(path, "rb") as fh:
            head = fh.read(len(_MTX_BANNER) + 3)
    except (OSError, EOFError, zlib.error):
        return None  # the reader says what is wrong with the file
    if head.removeprefix(b"\xef\xbb\xbf").lower().startswith(_MTX_BANNER):
        return "mtx"
    return None


def reading_format(path: Path, fmt: str | None) -> tuple[str, str]:
    """``(name, guess)``: the format to read ``path`` as, and, when that is a guess, how it was
    made, in words for an error message ("" when ``fmt`` or a definite extension named it).

    A Matrix Market banner in the first line makes the file ``mtx`` whatever its extension says
    when ``fmt`` is None and the extension is generic (:data:`GENERIC_SUFFIXES`) or names no
    format; a generic extension without it is read as the format it names, a guess."""
    if fmt is not None:
        return format_of(path, fmt), ""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    try:
        name = format_of(path, None)
    except InputError:
        if content_format(path) == "mtx":
            return "mtx", ""
        raise
    if ext in GENERIC_SUFFIXES:
        if content_format(path) == "mtx":
            return "mtx", ""
        title = _TITLES.get(name, name)
        return name, (
            f"read as {title} ({name}), as the extension {ext} suggests; for another format "
            "pass --format, or format= in Python"
        )
    return name, ""
