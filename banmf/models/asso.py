"""ASSO (Miettinen et al., TKDE 2008): greedy Boolean cover with association-rule candidates."""

from __future__ import annotations

import numbers
import time

import numpy as np
import scipy.sparse as sp

from .._kernels.cover import asso_scores, asso_usage
from .._threads import blocks_for, threads_for, variant
from .._validation import check_binary_matrix, check_n_components
from ..booleanize import _error
from ._base import BaseFactorization, budgeted

__all__ = ["ASSO"]

TAU_GRID = tuple(np.round(np.arange(0.05, 1.0001, 0.05), 2))


class ASSO(BaseFactorization):
    """The ASSO algorithm for Boolean matrix factorization.

    Candidate basis vectors are the rows of the thresholded association (confidence) matrix
    ``A_ij = |col_i ∩ col_j| / |col_i| ≥ τ``, computed from the sparse XᵀX. Each of the k steps
    picks the candidate and usage column that cover the most still-uncovered ones net of the
    zeros they cover (weights ``w_pos``/``w_neg``); the factors are Boolean by construction.
    Only rows that share a column with a candidate can use it, so a step touches those rows
    alone: with a high τ (sparse candidates) ASSO scales to sparse data with many rows.

    Parameters
    ----------
    n_components : int, default 10
    tau : float in (0, 1] or None, default None
        Association threshold. None sweeps τ = 0.05, 0.10, ..., 1.0 and keeps the lowest error.
    w_pos, w_neg : float, default 1.0
        Reward for covering a one, penalty for covering a zero.
    polish : bool or {"auto", "exact", "flip"}, default False
        Polish the Boolean factors with :func:`banmf.polish` after the method (off by default
        so that this stays the published baseline; ``unpolished_err_`` keeps its own error).
    n_jobs : int or None, default None
        Thread budget, as for :class:`BANMF`.
    random_state : ignored
        ASSO is deterministic (ties go to the lowest candidate index); kept for the common
        interface.
    verbose : int, default 0

    Attributes
    ----------
    W_ : ndarray (n, k), bool
    components_ : ndarray (k, m), bool
    reconstruction_err_, relative_error_, tau_, n_iter_ (factors actually used),
    tau_errors_ : dict mapping each τ tried to its error.

    References
    ----------
    Miettinen, Mielikäinen, Gionis, Das, Mannila, "The Discrete Basis Problem", IEEE TKDE 2008.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.kron(np.eye(2, dtype=int), np.ones((3, 2), dtype=int))
    >>> ASSO(2, tau=0.5).fit(X).reconstruction_err_
    0
    """

    def __init__(self, n_components=10, *, tau=None, w_pos=1.0, w_neg=1.0, polish=False,
                 n_jobs=None, random_state=None, verbose=0):
        self.n_components = n_components
        self.polish = polish
        self.tau = tau
        self.w_pos = w_pos
        self.w_neg = w_neg
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    @budgeted
    def fit(self, X, y=None) -> ASSO:
        """Fit to the 0/1 matrix X (dense or sparse, (n, m))."""
        start = time.perf_counter()
        X = check_binary_matrix(X)
        k = check_n_components(self.n_components, X.shape)
        polish = self._polish_method(k)
        if self.tau is None:
            taus = TAU_GRID
        elif isinstance(self.tau, numbers.Real) and 0 < self.tau <= 1:
            taus = (float(self.tau),)
        else:
            raise ValueError(f"tau must be None or a number in (0, 1], got {self.tau!r}")
        for name in ("w_pos", "w_neg"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or not v > 0:
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        Xi = sp.csr_array((np.ones(X.nnz, np.int64), X.indices, X.indptr), shape=X.shape)
        gram = (Xi.T @ Xi).tocsr()  # co-occurrence counts, m × m, sparse
        gram.sort_indices()
        colsum = gram.diagonal().astype(np.float64)
        csc = X.tocsc()
        csc.sort_indices()
        best = None
        self.tau_errors_ = {}
        for tau in taus:
            W, H, used = self._greedy(X, k, tau, gram, colsum, csc)
            err = _error(X, W, H)
            self.tau_errors_[tau] = err
            if best is None or err < best[0]:
                best = (err, tau, W, H, used)
        err, tau, W, H, used = best
        self.tau_ = tau
        self._finish(X, W, H, err, used, start, polish)
        return self

    def _greedy(self, X, k, tau, gram, colsum, csc):
        n, m = X.shape
        rows = np.repeat(np.arange(m), np.diff(gram.indptr))
        keep = gram.data >= tau * colsum[rows]
        indptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows[keep], minlength=m), out=indptr[1:])
        cand = sp.csr_array((np.ones(int(keep.sum()), bool), gram.indices[keep], indptr), shape=(m, m))
        cand = cand[np.flatnonzero(np.diff(cand.indptr) > 0)]
        # within each candidate, rarest columns first (the scoring kernel prunes with them)
        cand_rows = np.repeat(np.arange(cand.shape[0]), np.diff(cand.indptr))
        cand_cols = cand.indices[np.lexsort((colsum[cand.indices], cand_rows))]
        words = max(1, -(-k // 64))
        used = np.zeros((n, words), dtype=np.uint64)  # bit l: row uses factor l
        fac_mask = np.zeros((m, words), dtype=np.uint64)  # bit l: factor l holds the column
        W = np.zeros((n, k), dtype=bool)
        H = np.zeros((k, m), dtype=bool)
        scores = np.empty(cand.shape[0])
        # A candidate's score is summed within one block: the blocks may follow the threads.
        # Work: each candidate column's rows are looked at, each against the candidate.
        threads = threads_for(cand.nnz * (X.nnz // max(1, m) + 1))
        n_blocks = blocks_for(threads, cand.shape[0])
        scores_kernel = variant(asso_scores, threads)
        n_used = 0
        for l in range(k):
            if cand.shape[0] == 0:
                break
            fac = sp.csc_array(W[:, :l]) if l else None
            fac_ptr = fac.indptr.astype(np.int64) if l else np.zeros(1, np.int64)
            fac_rows = fac.indices.astype(np.int64) if l else np.zeros(0, np.int64)
            scores_kernel(cand.indptr, cand_cols, csc.indptr, csc.indices, X.indptr, X.indices,
                        used, fac_mask, fac_ptr, fac_rows, float(self.w_pos), float(self.w_neg),
                        n_blocks, scores)
            c = int(np.argmax(scores))
            if scores[c] <= 0:
                break
            cols = np.sort(cand_cols[cand.indptr[c]:cand.indptr[c + 1]])
            usage = np.zeros(n, dtype=bool)
            asso_usage(cols, csc.indptr, csc.indices, X.indptr, X.indices, used, fac_mask,
                       float(self.w_pos), float(self.w_neg), usage)
            bit = np.uint64(1) << np.uint64(l % 64)
            used[usage, l // 64] |= bit
            fac_mask[cols, l // 64] |= bit
            W[:, l] = usage
            H[l, cols] = True
            n_used += 1
        return W, H, n_used
