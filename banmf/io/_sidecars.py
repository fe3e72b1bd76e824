"""Sidecars: the JSON file beside an .mtx, .npz or .dat file (formats with ``sidecar`` in the
registry) that keeps what the format cannot, its labels, shape, unknown cells and provenance.

A sidecar belongs to one file: its full name + ``.json`` (``a.mtx.json``). The shared
``NAME.json`` of older versions (and of the bundled data) is read when it can only be that
file's, and never rewritten.
"""

from __future__ import annotations

import contextlib
import glob
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import scipy.sparse as sp

from ..data.dataset import Dataset
from ..exceptions import InputError
from ..runtime.files import atomic_path
from ..runtime.files import reason_of as _reason
from ._common import quote, warn_data
from ._formats import REGISTRY, format_of
from ._matrices import read_dataset, write_matrix


def sidecar_path(path: Path) -> Path:
    """The sidecar that belongs to ``path`` alone: its full name + ``.json`` (``a.mtx.json``)."""
    return path.with_name(path.name + ".json")


def legacy_sidecar_path(path: Path) -> Path:
    """The sidecar name of banmf before 0.x: the name without its data extensions + ``.json``
    (``a.json`` for ``a.mtx``, ``a.dat`` and ``a.npz`` alike), as the bundled data use."""
    return path.with_name(legacy_stem(path.name) + ".json")


def legacy_stem(name: str) -> str:
    """The name without a ``.gz`` and the extensions of the formats that have sidecars."""
    suffixes = [s for spec in REGISTRY.values() if spec.sidecar for s in spec.suffixes]
    for ext in (".gz", *suffixes):
        if name.lower().endswith(ext):
            name = name[: -len(ext)]
    return name


#: Sidecar keys that describe one file's content: a new file by that name does not inherit them.
_CONTENT_KEYS = (
    "row_labels",
    "col_labels",
    "shape",
    "missing",
    "nnz",
    "density",
    "sha256",
    "file",
    "format",
)


@dataclass(frozen=True)
class Sidecar:
    """The sidecar of a data file: where it is (None: there is none), its JSON object, and
    whether it is an old-style shared one (``NAME.json``)."""

    path: Path | None = None
    meta: dict = field(default_factory=dict)
    legacy: bool = False


def _legacy_owner(path: Path) -> str | None:
    """Why the old-style sidecar beside ``path`` may not be ``path``'s: "" when it is, None
    when it names another file.

    It is when it names ``path`` (key ``file``, as the bundled data's do), or else when no
    other data file shares it: a file with a sidecar of its own, or of a format that has none,
    does not count."""
    legacy = legacy_sidecar_path(path)
    named = _raw_sidecar(legacy).get("file")
    if isinstance(named, str):
        return "" if named == path.name else None
    others = []
    with contextlib.suppress(OSError):
        for other in sorted(path.parent.glob(glob.escape(legacy_stem(path.name)) + ".*")):
            if other.name == path.name or other == legacy:
                continue
            if legacy_sidecar_path(other) != legacy or sidecar_path(other).exists():
                continue
            with contextlib.suppress(ValueError):
                if REGISTRY[format_of(other, None)].sidecar and other.is_file():
                    others.append(other.name)
    return f"it may describe {', '.join(others)} as well" if others else ""


def find_sidecar(path: Path, *, quiet: bool = False) -> Sidecar:
    """The sidecar describing ``path``: its own (``a.mtx.json``), else the old shared
    ``a.json`` when that can only be ``path``'s (:func:`_legacy_owner`; a DataWarning says
    why not otherwise, unless ``quiet``)."""
    own = sidecar_path(path)
    if own.exists():
        return Sidecar(own, _label_lists(_raw_sidecar(own)))
    legacy = legacy_sidecar_path(path)
    if not legacy.exists():
        return Sidecar()
    why = _legacy_owner(path)
    if why is None:
        return Sidecar()
    if why:
        if not quiet:
            warn_data(
                f"{legacy}: not read for {path.name} ({why}); rename it to {own.name} if it "
                f"describes {path.name}"
            )
        return Sidecar()
    return Sidecar(legacy, _label_lists(_raw_sidecar(legacy)), legacy=True)


def _raw_sidecar(side: Path) -> dict:
    """The sidecar's JSON object as stored, or {} when there is none."""
    if not side.exists():
        return {}
    try:
        meta = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise InputError(f"{side}: unreadable sidecar ({_reason(exc)})") from None
    if not isinstance(meta, dict):
        raise InputError(f"{side}: unreadable sidecar (not a JSON object)")
    return meta


def _label_lists(meta: dict) -> dict:
    for key in ("row_labels", "col_labels"):
        if isinstance(meta.get(key), str):  # some sidecars store the list as its repr
            meta[key] = _parse_label_list(meta[key])
    return meta


def _parse_label_list(text: str) -> list | None:
    import ast

    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else None


def sidecar_shape(side: Sidecar) -> tuple[int, int] | None:
    shape = side.meta.get("shape")
    if shape is None:
        return None
    if not (
        isinstance(shape, list)
        and len(shape) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in shape)
    ):
        raise InputError(
            f"{side.path}: 'shape' must be two positive integers, got {quote(str(shape))}"
        )
    return shape[0], shape[1]


def _sidecar_missing(path: Path, side: Sidecar, shape: tuple[int, int]) -> sp.csr_array | None:
    """The mask of unknown cells that the sidecar names (key ``missing``: a 0/1 matrix file
    beside it, any format), or None."""
    name = side.meta.get("missing")
    if name is None:
        return None
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise InputError(
            f"{side.path}: 'missing' must name a file in the same folder, got {name!r}"
        )
    mask_path = side.path.with_name(name)
    if not mask_path.exists():
        raise InputError(f"{side.path}: the missing-cell mask {name} is not there")
    mask = read_dataset(mask_path).X
    if mask.shape != shape:
        raise InputError(
            f"{mask_path}: a {mask.shape[0]}×{mask.shape[1]} mask for {path}'s "
            f"{shape[0]}×{shape[1]} matrix"
        )
    return mask


def with_sidecar(path: Path, X: sp.csr_array, side: Sidecar | None = None, missing=None) -> Dataset:
    """The data read from ``path`` with what its sidecar (``side``, else the one found) says:
    labels, name, the unknown cells it names unless ``missing`` (the file's own) is given;
    a sidecar that records another shape is refused (an old shared one is skipped, with a
    warning)."""
    side = find_sidecar(path) if side is None else side
    recorded = sidecar_shape(side)
    if recorded is not None and recorded != X.shape:
        where = (
            f"{side.path} describes a {recorded[0]}×{recorded[1]} matrix, but {path} is "
            f"{X.shape[0]}×{X.shape[1]}"
        )
        if not side.legacy:
            raise InputError(f"{where}: the sidecar is stale; delete it or write {path} again")
        warn_data(f"{where}: not read for {path.name} (a sidecar of another file by that name)")
        side = Sidecar()
    meta = side.meta
    if missing is None and side.path is not None:
        missing = _sidecar_missing(path, side, X.shape)
    labels = []
    for key, size, what in (
        ("row_labels", X.shape[0], "rows"),
        ("col_labels", X.shape[1], "columns"),
    ):
        value = meta.get(key)
        if value is not None and (not isinstance(value, list) or len(value) != size):
            count = len(value) if isinstance(value, list) else "no list of"
            raise InputError(f"{side.path}: {count} {key.replace('_', ' ')} for {size} {what}")
        labels.append(None if value is None else [str(v) for v in value])
    name = meta.get("name")
    return Dataset(
        X,
        labels[0],
        labels[1],
        name if isinstance(name, str) else path.name,
        meta,
        missing,
    )


def write_with_sidecar(
    X: sp.csr_array,
    path: Path,
    labels: dict,
    missing,
    write: Callable[[Path], None],
    *,
    shape_needed: bool = False,
    mask_inside: bool = False,
) -> None:
    """Write a file of a format with a sidecar: ``write(tmp)`` writes its content, atomically;
    the sidecar ``PATH.json`` gets the labels, the shape and, unless the file holds them
    (``mask_inside``), the unknown cells as a mask ``PATH.missing.mtx`` that it names.

    The sidecar is written when there is something to say: labels, unknown cells, a format
    that cannot tell its own shape (``shape_needed``), or a sidecar (own or old shared) by that
    name already.
    """
    n, m = X.shape
    side, meta, mask_path = sidecar_path(path), None, None
    # Read (and check) an existing sidecar first. Its own keys (source, license, ...) carry
    # over; what described the earlier content does not. An old-style shared one that this
    # file cannot claim is left alone, and this file gets its own so that it never claims
    # it later.
    found = find_sidecar(path, quiet=True)
    legacy = legacy_sidecar_path(path).exists()
    if shape_needed or labels or missing is not None or found.path or legacy:
        meta = {k: v for k, v in found.meta.items() if k not in _CONTENT_KEYS}
        meta.update(labels, shape=[n, m])
        if missing is not None and not mask_inside:
            mask_path = path.with_name(path.name + ".missing.mtx")
            meta["missing"] = mask_path.name
    if mask_path is not None:
        write_matrix(missing, mask_path)
    with atomic_path(path) as tmp:
        write(tmp)
    if meta is not None:
        with atomic_path(side) as tmp:
            tmp.write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
