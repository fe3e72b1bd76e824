"""The one argument group that kernels of several modules share: a sparse 0/1 matrix."""

from typing import NamedTuple

import numpy as np


class Sparse(NamedTuple):
    """The ones of a 0/1 matrix, line by line: CSR (its rows) or CSC (its columns, that is the
    CSR of its transpose).

    Attributes
    ----------
    indptr : integer array (lines + 1,)
        Line i's ones are ``indices[indptr[i]:indptr[i + 1]]``.
    indices : integer array (nnz,)
        Their positions along the other axis.
    """

    indptr: np.ndarray
    indices: np.ndarray
