"""ASSO (Miettinen et al., TKDE 2008): greedy Boolean cover with association-rule candidates."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from .._kernels.cover import (
    AssoCandidates,
    Cover,
    RowGroups,
    Sums,
    Weights,
    asso_scores,
    asso_scores_rowwise,
    asso_threshold,
    asso_usage,
    cover_concept,
)
from .._kernels.sparse import Sparse
from ..data.masks import transpose_mask, with_cells
from ..data.params import NONE, Interval
from ..data.validation import WORK_BUDGET, check_work, work_duration
from ..runtime.memory import format_size
from ..runtime.progress import StartProgress
from ..runtime.threads import blocks_for, cancelled, threads_for, variant
from ._base import (
    COMMON_CONSTRAINTS,
    COMMON_DEFAULTS,
    BaseFactorization,
    budgeted,
    declared_init,
    refuse_observed,
)

__all__ = ["ASSO"]

TAU_GRID = tuple(np.round(np.arange(0.05, 1.0001, 0.05), 2))


class ASSO(BaseFactorization):
    """The ASSO algorithm for Boolean matrix factorization.

    Candidate basis vectors are the rows of the thresholded association (confidence) matrix
    ``A_ij = |col_i ∩ col_j| / |col_i| ≥ τ``, computed from the sparse XᵀX. Each of the k steps
    picks the candidate and usage column that cover the most still-uncovered ones net of the
    zeros they cover (weights ``w_pos``/``w_neg``); the factors are Boolean by construction.

    A row gains from a candidate only if it holds more than a share of its columns, so only the
    rows listed under its rarest columns are looked at one by one; the rows' share of the most
    frequent columns is counted by groups of rows. Scores are exact integer sums (a
    candidate's score is ``w_pos·A − w_neg·B``, A and B the ones and zeros it covers where it
    gains), so ties go to the lowest candidate whatever the order of the sums. Each step scores
    again only the candidates that share a column with the new factor, and the τ sweep keeps
    the scores of candidates that the next τ leaves unchanged while it chooses the same factors.
    On retail (88162 × 16470, 908,576 ones) the sweep with k = 10 takes about 16 s on 2 cores.

    Parameters
    ----------
    n_components : int, default 10
    tau : float in (0, 1] or None, default None
        Association threshold. None sweeps τ = 0.05, 0.10, ..., 1.0 and keeps the lowest error.
    w_pos, w_neg : float, default 1.0
        Reward for covering a one, penalty for covering a zero.
    work_budget : float or None, default 6e10
        Refuse up front (``ValueError`` with the estimate and what to change) a fit estimated,
        from X's rows and columns, the candidates and k, at more operations than this (about
        5 minutes on 2 cores, at 2·10⁸ operations a second); None: no limit.
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
    interrupted_ : bool
        True if Ctrl-C (KeyboardInterrupt) stopped the fit: the result is the best so far, the
        factors found at the τ under way included, and KeyboardInterrupt is raised again once
        the attributes are set (:func:`banmf.fit_many` cancelling a fit stops it the same way,
        without the exception).

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

    _parameter_constraints: ClassVar[dict] = {
        **COMMON_CONSTRAINTS,
        "tau": [NONE, Interval(Real, 0, 1, closed="right")],
        "w_pos": [Interval(Real, 0, np.inf, closed="neither")],
        "w_neg": [Interval(Real, 0, np.inf, closed="neither")],
        "work_budget": [NONE, Interval(Real, 0, None, closed="neither")],
    }

    __init__ = declared_init(
        {
            "n_components": 10,
            "tau": None,
            "w_pos": 1.0,
            "w_neg": 1.0,
            "work_budget": WORK_BUDGET,
            **COMMON_DEFAULTS,
        }
    )

    @budgeted
    def fit(self, X, y=None, *, missing=None, observed=None) -> ASSO:
        """Fit to the 0/1 matrix X (dense or sparse, (n, m)); ``missing`` marks unknown cells
        as in :meth:`BANMF.fit` (``observed`` is refused: with few cells observed, "don't care"
        leaves nothing to find)."""
        data, k, start = self._begin(X, missing, observed)
        X, unknown = data.X, data.unknown
        refuse_observed(data, "ASSO")
        polish = self._polish_method(k)
        taus = TAU_GRID if self.tau is None else (float(self.tau),)
        w_pos, w_neg = float(self.w_pos), float(self.w_neg)
        n, m = X.shape
        deg = np.diff(X.indptr).astype(np.float64)
        products = float(deg @ deg)  # the products that XᵀX sums, and a bound on its entries
        # The sparse product, then its entries sorted twice (docs/decisions.md, "The work
        # estimates").
        gram = 30 * products
        what = f"ASSO on this {n}×{m} X ({X.nnz:,} ones)"
        check_work(
            gram,
            self.work_budget,
            f"{what}: the association matrix XᵀX alone "
            f"(up to {format_size(min(products, m * m) * 40)})",
            "sample or split the columns",
        )
        progress = StartProgress(1, 1, len(taus) * k)
        progress.setup("the association matrix and its candidates")
        if unknown is None:
            assoc = _Association(X)
            greedy = _Greedy(X, k, w_pos, w_neg, assoc)
        else:
            # Unknown cells are "don't care": in the relation the factors are cut from, never
            # counted as a one covered or a zero covered (as ones covered from the start).
            # Column counts and rows by heavy columns would count them: no heavy columns.
            relation, dont_care = with_cells(X, unknown.cells)
            assoc = _Association(X, 0, relation)
            greedy = _Greedy(relation, k, w_pos, w_neg, assoc, dont_care)
        plan = {tau: assoc.candidates(tau) for tau in taus}
        # each step: the kernel, and a few passes over the rows and candidates
        # (docs/decisions.md, "The work estimates")
        steps = {
            tau: (
                assoc.step_work(plan[tau], w_pos, w_neg, len(greedy.all_x))
                if unknown is None
                else assoc.rowwise_work(plan[tau], greedy.X)
            )
            + 30 * (n + m)
            for tau in taus
        }
        if len(taus) > 1:
            fix = (
                f"pass one tau (the sweep tries {len(taus)}; tau=0.5 alone: "
                f"{work_duration(gram + k * steps[0.5])}) or a smaller n_components"
            )
        else:
            fix = "pass a higher tau (fewer, smaller candidates) or a smaller n_components"
        check_work(
            gram + k * sum(steps.values()),
            self.work_budget,
            f"{what} with n_components={k} and tau={self.tau}",
            fix,
        )
        self.tau_errors_ = {}
        best = None
        interrupted = cancel = False
        tau = taus[0]
        try:
            for t, tau in enumerate(taus):
                cancel = greedy.run(tau, plan.pop(tau), progress, t * k)
                self.tau_errors_[tau] = greedy.error  # cancelled: the factors so far count too
                if best is None or greedy.error < best[0]:
                    best = (greedy.error, tau, greedy.W, greedy.H, greedy.n_used)
                if cancel:
                    break
                progress.iteration((t + 1) * k, greedy.error)
        except KeyboardInterrupt:
            # The first Ctrl-C: the factors of the τ under way so far are a result too.
            interrupted = True
            W, H, used = greedy.W, greedy.H, greedy.n_used
            W[:, used:] = False
            H[used:] = False
            err = data.error(W, H)
            if greedy.tau is not None:
                self.tau_errors_[greedy.tau] = err
            if best is None or err < best[0]:
                best = (err, tau if greedy.tau is None else greedy.tau, W, H, used)
        err, self.tau_, W, H, used = best
        self._conclude(data, (W, H, err, used), start, polish, progress, interrupted, cancel)
        return self


class _Association:
    """The association (confidence) matrix's candidates for any τ, from one sparse XᵀX.

    Candidate c is row ``cols[c]`` of ``[A ≥ τ]`` for the c-th nonempty column of X (its own
    confidence is 1, so no row is empty for any τ), its columns rarest first (ties: lower
    column first): the gram's entries are put in that order once and each τ keeps a subset.
    The ``HEAVY`` most frequent columns are numbered by bit (``heavy_bit``, else -1): they come
    last in every candidate.
    """

    def __init__(self, X, heavy: int | None = None, relation=None):
        """Associations from the ones of X; the rows of each column from ``relation`` (X
        with its "don't care" cells; default X)."""
        m = X.shape[1]
        heavy = HEAVY if heavy is None else heavy
        assert 0 <= heavy <= 32, "a group's key holds 32 bits of heavy columns"
        Xi = sp.csr_array((np.ones(X.nnz, np.int64), X.indices, X.indptr), shape=X.shape)
        gram = (Xi.T @ Xi).tocsr()  # co-occurrence counts, m × m, sparse
        gram.sort_indices()
        self.colsum = colsum = gram.diagonal()
        rows = np.repeat(np.arange(m), np.diff(gram.indptr))
        # by row, then by count; stable, so equal counts by column (one key: faster than lexsort)
        order = np.argsort(
            rows * (int(colsum.max(initial=0)) + 1) + colsum[gram.indices], kind="stable"
        )
        self.rows, self.cols = rows[order], gram.indices[order].astype(np.int64)
        self.counts = gram.data[order]
        self.base = colsum[self.rows].astype(np.float64)  # A_ij ≥ τ as count_ij ≥ τ·colsum_i
        self.nonempty = np.flatnonzero(colsum > 0)
        self.index = np.full(m, -1, dtype=np.int64)  # column -> candidate number
        self.index[self.nonempty] = np.arange(len(self.nonempty))
        by_count = np.lexsort((np.arange(m), colsum))  # the candidates' order of columns
        heavy = by_count[max(0, m - heavy) :][colsum[by_count[max(0, m - heavy) :]] > 0]
        self.heavy_bit = np.full(m, -1, dtype=np.int64)
        self.heavy_bit[heavy] = np.arange(len(heavy))
        # CSC of X, each column's rows by decreasing number of ones (ties: by row)
        X = X if relation is None else relation
        Xt = transpose_mask(X)
        deg = np.diff(X.indptr)
        col_of = np.repeat(np.arange(m), np.diff(Xt.indptr))
        order = np.lexsort((-deg[Xt.indices], col_of))
        self.colptr, self.colrows = Xt.indptr, Xt.indices[order]
        self.coldeg = deg[self.colrows]
        # Sorted keys (column, fewer ones later): how many rows of a column hold more than t.
        self._most = int(deg.max(initial=0)) + 1
        self._keys = col_of * self._most + (self._most - 1 - self.coldeg)

    def candidates(self, tau: float) -> AssoCandidates:
        """The candidates ``A_ij ≥ τ`` (as ``count ≥ τ·colsum``): their columns, the number of
        each one's light columns, its heavy ones as bits, and its class (candidates of equal
        heavy columns and size share a class)."""
        keep = self.counts >= tau * self.base
        owner = self.index[self.rows[keep]]
        n_cand = len(self.nonempty)
        ptr = np.zeros(n_cand + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner, minlength=n_cand), out=ptr[1:])
        cols = self.cols[keep]
        bits = self.heavy_bit[cols]
        heavy = bits >= 0
        # (no candidate is empty: reduceat sees no empty segment)
        n_light = np.add.reduceat((~heavy).astype(np.int64), ptr[:-1]) if n_cand else ptr[1:]
        one_bit = np.where(
            heavy, np.uint64(1) << np.maximum(bits, 0).astype(np.uint64), np.uint64(0)
        )
        kmask = np.bitwise_or.reduceat(one_bit, ptr[:-1]) if n_cand else np.zeros(0, np.uint64)
        key = np.stack([kmask.view(np.int64), np.diff(ptr)], axis=1)
        cls = np.unique(key, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
        return AssoCandidates(ptr, cols, n_light, kmask, cls, int(cls.max(initial=-1)) + 1)

    def step_work(self, cands, w_pos: float, w_neg: float, n_groups: int) -> float:
        """Operations of one step of :func:`asso_scores` over every candidate of ``cands``
        with no factor yet: the rows its rarest light columns list (two operations each: the
        look and the row's sum), the groups of rows counted once per class of candidates whose
        heavy columns may gain, and a pass over its columns. Later steps cost about as much or
        less (only the candidates meeting the new factor are scored again)."""
        ptr, cols, n_light, kmask, cls, _ = cands
        sizes = np.diff(ptr)
        if len(sizes) == 0:
            return 0.0
        values, where = np.unique(sizes, return_inverse=True)
        t = np.array([asso_threshold(int(v), w_pos, w_neg) for v in values])[where.reshape(-1)]
        owner = np.repeat(np.arange(len(sizes)), sizes)
        pos = np.arange(len(cols)) - ptr[owner]
        prefix = pos < np.minimum(n_light, sizes - t)[owner]
        q, tq = cols[prefix], t[owner[prefix]]
        # rows of column q holding more than tq ones: those before the key (q, tq) in its list
        ahead = np.searchsorted(self._keys, q * self._most + np.maximum(self._most - 1 - tq, 0))
        visits = float(np.sum(np.maximum(ahead - self.colptr[q], 0)))
        bits = np.unpackbits(kmask.view(np.uint8)).reshape(-1, 64).sum(axis=1)
        classes = len(np.unique(cls[bits > t]))
        return 2 * visits + float(classes) * n_groups + len(cols)

    def rowwise_work(self, cands, relation) -> float:
        """Operations of one step of :func:`asso_scores_rowwise` (unknown cells) over every
        candidate: the rows its columns list, repeats included, and a pass over each distinct
        row (at most all n) at the relation's mean row length."""
        ptr, cols = cands[0], cands[1]
        if len(cols) == 0:
            return 0.0
        visits = np.add.reduceat(np.diff(self.colptr)[cols].astype(np.float64), ptr[:-1])
        n = relation.shape[0]
        return float(np.sum(visits + np.minimum(visits, n) * (relation.nnz / max(1, n))))


#: Columns counted by groups of rows rather than row by row (at most 32: a group's key is its
#: pattern and its heavy columns in one 64-bit word).
HEAVY = 32


class _Greedy:
    """ASSO's greedy cover for one candidate set (τ) after another. A candidate's score depends
    on its columns and on the factors chosen before, so the scores of the last τ's steps are
    kept: while a τ has chosen the same factors as the last one (always at the first step), the
    candidates it leaves unchanged keep their scores."""

    def __init__(self, X, k: int, w_pos: float, w_neg: float, assoc: _Association, dont_care=None):
        """``dont_care``: per one of X (CSR order), whether it is an unknown cell (None:
        none), which starts covered and is never counted."""
        self.X, self.k, self.w_pos, self.w_neg = X, k, w_pos, w_neg
        self.dont_care = dont_care
        self.n_ones = X.nnz if dont_care is None else X.nnz - int(dont_care.sum())
        self.colptr, self.colrows, self.coldeg = assoc.colptr, assoc.colrows, assoc.coldeg
        heavy_bit = assoc.heavy_bit
        self.heavy_bit = heavy_bit
        bits = heavy_bit[X.indices]
        heavy = bits >= 0
        self.xtop = np.zeros(X.shape[0], dtype=np.uint64)  # each row's heavy columns, as bits
        row_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        np.bitwise_or.at(self.xtop, row_of[heavy], np.uint64(1) << bits[heavy].astype(np.uint64))
        self.all_x, all_count = np.unique(self.xtop, return_counts=True)  # rows by heavy columns
        self.all_count = all_count.astype(np.int64)
        self.steps: list = []  # (sizes, A, B) at each step of the last τ
        self.chosen: list = []  # the columns it chose at each step
        self._reset(None)

    def _reset(self, tau) -> None:
        n, m = self.X.shape
        self.W = np.zeros((n, self.k), dtype=bool)
        self.H = np.zeros((self.k, m), dtype=bool)
        self.tau, self.n_used, self.error = tau, 0, self.n_ones

    def run(self, tau: float, cands, progress: StartProgress, done_before: int) -> bool:
        """Fit k factors from the candidates of ``tau``; the result goes to ``W``, ``H``,
        ``n_used`` and ``error`` (the Boolean error), updated factor by factor. Returns True if
        :func:`banmf.fit_many` cancelled the fit (the factors so far stand)."""
        self._reset(tau)
        X, k = self.X, self.k
        n, m = X.shape
        cand_ptr, cand_cols = cands.ptr, cands.cols
        n_cand = len(cand_ptr) - 1
        if n_cand == 0:
            return False
        sizes = np.diff(cand_ptr)
        words = max(1, -(-k // 64))
        used = np.zeros((n, words), dtype=np.uint64)  # bit l: row uses factor l
        fac_mask = np.zeros((m, words), dtype=np.uint64)  # bit l: factor l holds the column
        # per one of X (CSR order): not yet covered
        uncov = np.ones(X.nnz, dtype=bool) if self.dont_care is None else ~self.dont_care
        patterns = _Patterns(n, words, self.xtop)
        A = np.zeros(n_cand, dtype=np.int64)
        B = np.zeros(n_cand, dtype=np.int64)
        todo = np.ones(n_cand, dtype=bool)
        last_steps, last_chosen = self.steps, self.chosen
        self.steps, self.chosen = [], []
        shared = True  # the same factors so far as the last τ
        # A candidate's score is summed within one block: the blocks may follow the threads.
        # Work: each candidate's light columns' rows and the groups of rows.
        threads = threads_for(cand_ptr[-1] * (X.nnz // max(1, m) + 1))
        n_blocks = blocks_for(threads, n_cand)
        scores_kernel = variant(asso_scores, threads)
        rowwise = variant(asso_scores_rowwise, threads)
        dont_care = _NO_CELLS if self.dont_care is None else self.dont_care
        csr, csc = Sparse(X.indptr, X.indices), Sparse(self.colptr, self.colrows)
        cover = Cover(uncov, used, fac_mask)
        weights = Weights(self.w_pos, self.w_neg)
        sums = Sums(A, B)
        for l in range(k):
            if cancelled():
                return True
            if shared and l < len(last_steps) and len(last_steps[l][0]) == n_cand:
                # Candidates of the same size are the same (the sets shrink as τ grows).
                same = last_steps[l][0] == sizes
                A[same], B[same] = last_steps[l][1][same], last_steps[l][2][same]
                todo = ~same
            if todo.any() and self.dont_care is not None:
                rowwise(cands, todo, csr, csc, cover, dont_care, weights, n_blocks, sums)
            elif todo.any():
                groups = RowGroups(
                    self.coldeg,
                    self.xtop,
                    self.all_x,
                    self.all_count,
                    patterns.pat,
                    patterns.used,
                    patterns.ctop,
                    patterns.g_ptr,
                    patterns.g_x,
                    patterns.g_count,
                )
                scores_kernel(cands, todo, csr, csc, cover, groups, weights, n_blocks, sums)
            self.steps.append((sizes, A.copy(), B.copy()))
            scores = self.w_pos * A - self.w_neg * B
            c = int(np.argmax(scores))
            if scores[c] <= 0:
                return False
            cols = cand_cols[cand_ptr[c] : cand_ptr[c + 1]]
            self.chosen.append(cols)
            shared = shared and l < len(last_chosen) and np.array_equal(last_chosen[l], cols)
            usage = np.zeros(n, dtype=bool)
            a, b = asso_usage(cols, csr, csc, cover, dont_care, weights, usage)
            rows = np.flatnonzero(usage)
            in_factor = np.zeros(m, dtype=bool)
            in_factor[cols] = True
            word, bit = l // 64, np.uint64(1) << np.uint64(l % 64)
            used[rows, word] |= bit
            fac_mask[cols, word] |= bit
            cover_concept(X.indptr, X.indices, rows, in_factor, uncov, _NO_BITS)
            hb = self.heavy_bit[cols]
            heavy = np.bitwise_or.reduce(
                np.uint64(1) << hb[hb >= 0].astype(np.uint64), initial=np.uint64(0)
            )
            patterns.add(rows, word, bit, heavy)
            self.W[rows, l] = True
            self.H[l, cols] = True
            self.error = self.error - int(a) + int(b)
            self.n_used = l + 1
            progress.iteration(done_before + l + 1, self.error)
            # Only the candidates that share a column with the new factor change score.
            todo = np.logical_or.reduceat(in_factor[cand_cols], cand_ptr[:-1])
        return False


class _Patterns:
    """Rows by the set of factors they use (their pattern) and, within a pattern, by their heavy
    columns: the groups whose rows :func:`asso_scores` counts together."""

    def __init__(self, n: int, words: int, xtop: np.ndarray):
        self.xtop = xtop
        self.pat = np.zeros(n, dtype=np.int64)
        self.used = np.zeros((1, words), dtype=np.uint64)  # each pattern's factors, as bits
        self.ctop = np.zeros(1, dtype=np.uint64)  # the heavy columns its factors hold
        self._group()

    def add(self, rows: np.ndarray, word: int, bit, ctop) -> None:
        """The rows ``rows`` now use the factor (``word``, ``bit``) holding heavy columns
        ``ctop``."""
        n_pat = len(self.ctop)
        moved = np.bincount(self.pat[rows], minlength=n_pat) > 0  # patterns some rows leave
        new_id = np.full(n_pat, -1, dtype=np.int64)
        new_id[moved] = n_pat + np.arange(int(moved.sum()))
        used = self.used[moved].copy()
        used[:, word] |= bit
        self.used = np.vstack([self.used, used])
        self.ctop = np.concatenate([self.ctop, self.ctop[moved] | ctop])
        self.pat[rows] = new_id[self.pat[rows]]
        live = np.bincount(self.pat, minlength=len(self.ctop)) > 0  # renumber without the empty
        renumber = np.cumsum(live) - 1
        self.pat = renumber[self.pat]
        self.used, self.ctop = self.used[live], self.ctop[live]
        self._group()

    def _group(self) -> None:
        key = (self.pat.astype(np.uint64) << np.uint64(32)) | self.xtop  # HEAVY ≤ 32 bits
        key, count = np.unique(key, return_counts=True)
        self.g_x = key & np.uint64(0xFFFFFFFF)
        self.g_count = count.astype(np.int64)
        self.g_ptr = np.zeros(len(self.ctop) + 1, dtype=np.int64)
        np.cumsum(
            np.bincount((key >> np.uint64(32)).astype(np.int64), minlength=len(self.ctop)),
            out=self.g_ptr[1:],
        )


_NO_BITS = np.zeros((0, 0), dtype=np.uint64)
_NO_CELLS = np.zeros(0, dtype=bool)
