"""A 0/1 matrix as row blocks: files that workers read, or slices of a matrix in memory."""

from __future__ import annotations

import glob
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...data.dataset import Dataset
from ...data.masks import csr_from_parts
from ...data.validation import check_binary_matrix
from ...exceptions import InputError, InvalidParameterError
from ...io import check_output, npz_shape, write_matrix

__all__ = ["BlockMatrix", "read_blocks", "write_blocks"]

#: Nonzeros per block that :meth:`BlockMatrix.from_matrix` and :func:`write_blocks` aim at by
#: default: a block's state on a worker (X's indices, Y, W's rows, Y Hᵀ) is then tens of MB.
BLOCK_NNZ = 2**22
#: The fewest blocks they cut by default (fewer rows than that: one block per row), so that a
#: few workers share even a small matrix.
MIN_BLOCKS = 4


@dataclass(frozen=True, eq=False)
class BlockMatrix:
    """A 0/1 matrix of shape ``(n, m)`` held as consecutive row blocks.

    Each block is a file that a worker reads when a fit begins (:func:`read_blocks`) or a
    slice of a matrix in memory (:meth:`from_matrix`), sent to its worker once. The blocks
    decide how the sums over rows are grouped, so a fit on the same blocks gives the same
    result on any number of workers.

    Attributes
    ----------
    sources : tuple
        Per block, its file (``Path``) or its rows in memory.
    offsets : ndarray of shape (n_blocks + 1,)
        Block ``b`` holds rows ``offsets[b]`` to ``offsets[b + 1]``.
    n_cols : int
    """

    sources: tuple
    offsets: np.ndarray
    n_cols: int

    @property
    def shape(self) -> tuple[int, int]:
        """``(n, m)``."""
        return int(self.offsets[-1]), int(self.n_cols)

    @property
    def n_blocks(self) -> int:
        """The number of row blocks."""
        return len(self.sources)

    def __repr__(self) -> str:
        kind = "files" if self.sources and isinstance(self.sources[0], Path) else "in memory"
        n, m = self.shape
        return f"BlockMatrix(shape=({n}, {m}), n_blocks={self.n_blocks}, {kind})"

    @classmethod
    def from_matrix(
        cls, X, *, n_blocks: int | None = None, missing=None, observed=None
    ) -> BlockMatrix:
        """Cut a matrix in memory into row blocks of about equal numbers of nonzeros.

        Parameters
        ----------
        X : array-like or sparse of shape (n, m)
            0/1 data, as :meth:`banmf.BANMF.fit` takes it.
        n_blocks : int, optional
            Default: one block per :data:`BLOCK_NNZ` nonzeros, at least :data:`MIN_BLOCKS`
            (at most one per row). It depends on the data only, never on the workers.
        missing, observed : array-like or sparse of shape (n, m), optional
            Unknown cells, as in :meth:`banmf.BANMF.fit`.
        """
        data = Dataset.of(X, missing, observed)
        X = data.X
        cuts = _cuts(X.indptr, _count(n_blocks, X.shape[0], X.nnz))
        sources = tuple(data.rows(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True))
        return cls(sources, cuts, X.shape[1])

    def gather(self) -> tuple:
        """The whole matrix in memory, as one machine's fit takes it: ``(X, missing,
        observed)``, X's observed ones and its unknown cells in the blocks' form (the other
        None; both None without unknown cells). Reads every file here: for small data (a
        copy of it kept with a result, :func:`banmf.io.save_result`)."""
        from ...io import read_dataset

        parts, forms = [], set()
        for source in self.sources:
            data = read_dataset(source) if isinstance(source, Path) else source
            parts.append((data.X, data.unknown))
            forms.add(None if data.unknown is None else data.unknown.observed)
        X = _stack([q[0] for q in parts], self.n_cols)
        if forms == {None}:
            return X, None, None
        observed = True in forms

        def cells(X, unknown):
            # A block without unknown cells: in the observed form, every cell is observed.
            if unknown is not None:
                return unknown.cells
            return _full(X.shape, X) if observed else _empty(X.shape, X)

        cells = _stack([cells(*q) for q in parts], self.n_cols)
        return (X, None, cells) if observed else (X, cells, None)


def _stack(parts: list, m: int):
    """Row blocks of canonical support masks, as one."""
    if not parts:
        return csr_from_parts(np.zeros(1, np.int64), np.zeros(0, np.int32), (0, m))
    indptr = [np.zeros(1, np.int64)]
    for M in parts:
        indptr.append(M.indptr[1:].astype(np.int64) + indptr[-1][-1])
    indices = np.concatenate([M.indices for M in parts])
    n = sum(M.shape[0] for M in parts)
    return check_binary_matrix(csr_from_parts(np.concatenate(indptr), indices, (n, m)))


def _empty(shape, like):
    """No cell of ``shape``, in ``like``'s index types."""
    return csr_from_parts(
        np.zeros(shape[0] + 1, like.indptr.dtype), np.zeros(0, like.indices.dtype), shape
    )


def _full(shape, like):
    """Every cell of ``shape``, in ``like``'s index types."""
    n, m = shape
    return csr_from_parts(
        np.arange(0, n * m + 1, m, dtype=like.indptr.dtype),
        np.tile(np.arange(m, dtype=like.indices.dtype), n),
        shape,
    )


def _count(n_blocks, n: int, nnz: int) -> int:
    """The number of blocks: checked, or the default for n rows and nnz nonzeros."""
    if n_blocks is None:
        return max(1, min(n, max(MIN_BLOCKS, math.ceil(nnz / BLOCK_NNZ))))
    if isinstance(n_blocks, bool) or not isinstance(n_blocks, (int, np.integer)) or n_blocks < 1:
        raise InvalidParameterError(f"n_blocks must be a positive integer, got {n_blocks!r}")
    if n_blocks > max(1, n):
        raise InvalidParameterError(f"n_blocks={n_blocks} exceeds the {n} rows of X")
    return int(n_blocks)


def _cuts(indptr: np.ndarray, n_blocks: int) -> np.ndarray:
    """Row offsets of ``n_blocks`` blocks of about equal nonzeros (each at least one row
    while there are rows)."""
    n = len(indptr) - 1
    targets = np.linspace(0, indptr[-1], n_blocks + 1)[1:-1]
    if n == 0:
        return np.zeros(2, np.int64)
    inner = np.searchsorted(indptr, targets, side="left")
    # Every block keeps a row (there are at least n_blocks): the cuts rise strictly.
    step = np.arange(1, n_blocks)
    inner = np.maximum.accumulate(np.clip(inner, step, n - n_blocks + step) - step) + step
    return np.concatenate([[0], inner, [n]]).astype(np.int64)


def _natural(path: Path) -> list:
    """A sort key in which ``part-10`` follows ``part-9``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]


def read_blocks(source) -> BlockMatrix:
    """Row blocks stored as ``.npz`` files, read lazily: workers read them when a fit begins.

    Only each file's shape is read here, to lay the blocks out (the rows of block b follow
    those of block b - 1, in the natural order of the file names: ``part-10`` after
    ``part-9``). Each file is a sparse matrix as :func:`banmf.io.write_matrix` writes it (its
    unknown cells, if any, beside it), and all have the same number of columns.

    Parameters
    ----------
    source : str, Path or sequence of them
        A glob pattern (``"big/part-*.npz"``), a folder (every ``.npz`` in it) or the files.

    Returns
    -------
    BlockMatrix

    Raises
    ------
    FileNotFoundError
        Nothing matches.
    ValueError
        A file is not a sparse ``.npz`` matrix, or the files disagree on the number of columns.
    """
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_dir():
            paths = sorted(path.glob("*.npz"), key=_natural)
        elif path.exists():
            paths = [path]
        else:
            paths = sorted((Path(p) for p in glob.glob(str(source))), key=_natural)
    else:
        paths = [Path(p) for p in source]
    if not paths:
        raise FileNotFoundError(f"no row-block files match {str(source)!r}")
    for path in paths:
        if path.suffix.lower() != ".npz":
            raise InputError(
                f"{path}: row blocks are .npz files (banmf.distributed.write_blocks writes them)"
            )
    offsets, n_cols = [0], None
    for path in paths:
        n, m = npz_shape(path)
        if n_cols is not None and m != n_cols:
            raise InputError(
                f"{path} has {m} columns but {paths[0]} has {n_cols}: row blocks of one "
                "matrix have the same columns"
            )
        n_cols = m
        offsets.append(offsets[-1] + n)
    return BlockMatrix(tuple(paths), np.array(offsets, dtype=np.int64), int(n_cols))


def write_blocks(
    X, folder, *, n_blocks: int | None = None, missing=None, prefix: str = "part"
) -> list[Path]:
    """Write a 0/1 matrix as row-block files that :func:`read_blocks` reads back.

    The blocks hold about equal numbers of nonzeros (:meth:`BlockMatrix.from_matrix`); each
    file is written atomically. The folder is checked before anything is written: it may not
    hold files of this prefix already.

    Parameters
    ----------
    X : array-like or sparse of shape (n, m), 0/1
    folder : str or Path
        Created if needed.
    n_blocks : int, optional
        As in :meth:`BlockMatrix.from_matrix`.
    missing : array-like or sparse of shape (n, m), optional
        Unknown cells, stored with each block.
    prefix : str, default "part"
        Files are ``{prefix}-00000.npz``, ``{prefix}-00001.npz``, ...

    Returns
    -------
    list of Path
        The files, in row order.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} exists and is not a folder")
    if folder.is_dir() and any(folder.glob(f"{prefix}-*.npz")):
        raise FileExistsError(
            f"{folder} already holds {prefix}-*.npz files; write to an empty folder"
        )
    blocks = BlockMatrix.from_matrix(X, n_blocks=n_blocks, missing=missing)
    folder.mkdir(parents=True, exist_ok=True)
    width = max(5, len(str(blocks.n_blocks - 1)))
    paths = [folder / f"{prefix}-{b:0{width}d}.npz" for b in range(blocks.n_blocks)]
    check_output(paths[0])
    for path, rows in zip(paths, blocks.sources, strict=True):
        write_matrix(rows.X, path, missing=None if rows.unknown is None else rows.unknown.cells)
    return paths
