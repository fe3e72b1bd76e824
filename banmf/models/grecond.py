"""GreConD (Belohlavek & Vychodil, JCSS 2010): factors as formal concepts, from below."""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from .._kernels.boolean import pack_csr_rows
from .._kernels.cover import grecond_gains, intent_of
from .._threads import pick
from .._validation import check_binary_matrix, check_n_components
from ..booleanize import _error
from ._base import BaseFactorization, budgeted

__all__ = ["GreConD"]


def packed_rows(X: sp.csr_array) -> np.ndarray:
    """The rows of a support mask as bitsets, shape (n, ceil(m / 64))."""
    out = np.empty((X.shape[0], max(1, -(-X.shape[1] // 64))), dtype=np.uint64)
    pick(pack_csr_rows, X.nnz + out.size)(X.indptr, X.indices, out)
    return out


class GreConD(BaseFactorization):
    """Greedy Boolean factorization by formal concepts; never covers a 0 of X.

    Each factor is a formal concept (C, D): the rows C that have every column of D, and D the
    columns shared by every row of C. A factor grows D one column at a time (closing it
    each time) while the number of still-uncovered ones in C × D rises. Since every factor lies
    inside the ones of X, the error is only missed ones; with ``n_components=None`` it stops
    when everything is covered, an exact factorization.

    Cost per added column is O(m² · n/64) word operations: fine for thousands of columns.

    Parameters
    ----------
    n_components : int or None, default None
        Maximum number of factors; None: until X is covered exactly.
    polish : bool or {"auto", "exact", "flip"}, default False
        Polish the Boolean factors with :func:`banmf.polish` after the method (off by default
        so that this stays the published baseline; ``unpolished_err_`` keeps its own error).
    n_jobs : int or None, default None
        Thread budget, as for :class:`BANMF`.
    random_state : ignored
        Deterministic (ties go to the lowest column index); kept for the common interface.
    verbose : int, default 0

    Attributes
    ----------
    W_ : ndarray (n, k'), bool
    components_ : ndarray (k', m), bool
        ``k' ≤ n_components`` factors found; with a fixed ``n_components`` the arrays are padded
        with empty factors to exactly that many.
    reconstruction_err_, relative_error_, n_iter_ (factors found)

    References
    ----------
    Belohlavek & Vychodil, "Discovery of optimal factors in binary data via a novel method of
    matrix decomposition", JCSS 76(1), 2010.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1]])
    >>> GreConD().fit(X).reconstruction_err_
    0
    """

    def __init__(self, n_components=None, *, polish=False, n_jobs=None, random_state=None, verbose=0):
        self.n_components = n_components
        self.polish = polish
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    @budgeted
    def fit(self, X, y=None) -> GreConD:
        """Fit to the 0/1 matrix X (dense or sparse, (n, m))."""
        start = time.perf_counter()
        X = check_binary_matrix(X)
        n, m = X.shape
        limit = None if self.n_components is None else check_n_components(self.n_components, X.shape)
        self._polish_method(limit or 1)  # validate before the work
        colbits = packed_rows(X.T.tocsr())  # column j's rows as bits, (m, ceil(n/64))
        uncovered = colbits.copy()
        all_rows = np.zeros(colbits.shape[1], dtype=np.uint64)
        for i in range(n):
            all_rows[i >> 6] |= np.uint64(1) << np.uint64(i & 63)
        values = np.empty(m, dtype=np.int64)
        # Each step compares every column with every other over the extent's words.
        gains = pick(grecond_gains, m * m * colbits.shape[1])
        extents, intents = [], []
        while uncovered.any() and (limit is None or len(extents) < limit):
            extent, intent = all_rows.copy(), np.zeros(m, dtype=bool)
            intent_of(extent, colbits, intent)
            best = 0
            while True:
                gains(extent, intent, colbits, uncovered, values)
                j = int(np.argmax(values))
                if values[j] <= best:
                    break
                best = int(values[j])
                extent = extent & colbits[j]
                intent_of(extent, colbits, intent)
            if best == 0:
                break
            extents.append(extent)
            intents.append(intent.copy())
            uncovered[intent] &= ~extent
        k = len(extents) if limit is None else limit
        W = np.zeros((n, k), dtype=bool)
        H = np.zeros((k, m), dtype=bool)
        for l, (extent, intent) in enumerate(zip(extents, intents)):
            bits = np.unpackbits(extent.view(np.uint8), bitorder="little")[:n]
            W[:, l] = bits.astype(bool)
            H[l] = intent
        err = _error(X, W, H)
        self._finish(X, W, H, err, len(extents), start, self._polish_method(W.shape[1]))
        return self
