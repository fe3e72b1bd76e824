"""The data as banmf reads it: a 0/1 matrix with its labels and unknown cells.

A leaf module (it imports nothing of banmf), so that validation below the readers can tell
banmf's own data type without importing them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import scipy.sparse as sp

__all__ = ["Dataset"]


@dataclass(frozen=True)
class Dataset:
    """A 0/1 matrix with its labels and description.

    Attributes
    ----------
    X : csr_array of shape (n, m), bool
    row_labels, col_labels : list of str or None
    name : str
    meta : dict
        Sidecar metadata (source, license, transformation, ...), when there is one.
    missing : csr_array of shape (n, m), bool, or None
        The cells whose value the file leaves unknown (``?``, ``NA`` or blank cells of a text
        table; a mask stored with the matrix or named by its sidecar), to pass as ``missing=``
        to a fit. ``X`` holds no one there.
    """

    X: sp.csr_array
    row_labels: list | None = None
    col_labels: list | None = None
    name: str = ""
    meta: dict = field(default_factory=dict)
    missing: sp.csr_array | None = None
