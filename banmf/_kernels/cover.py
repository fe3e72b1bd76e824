"""Kernels for the greedy cover methods (ASSO, GreConD): scores of candidate factors over the
rows of X that can take them, from X's CSR and CSC forms.

The kernels take their arrays in named groups: X's CSR and CSC forms as
:class:`~banmf._kernels.sparse.Sparse`, and the groups below.
"""

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .boolean import popcount64
from .variants import kernel

_ONE = np.uint64(1)


class AssoCandidates(NamedTuple):
    """ASSO's candidate basis vectors.

    Attributes
    ----------
    ptr, cols : int64 arrays (n_cand + 1,) and (total size,)
        Candidate c's columns are ``cols[ptr[c]:ptr[c + 1]]``, rarest first.
    n_light : int64 array (n_cand,)
        Candidate c's first ``n_light[c]`` columns are light, the rest heavy.
    kmask : uint64 array (n_cand,)
        Its heavy columns, as bits.
    cls : int64 array (n_cand,)
        Its class: candidates of equal heavy columns and size share one.
    n_cls : int
        The number of classes.
    """

    ptr: np.ndarray
    cols: np.ndarray
    n_light: np.ndarray
    kmask: np.ndarray
    cls: np.ndarray
    n_cls: int


class Cover(NamedTuple):
    """The factors chosen so far, as X's uncovered ones and bits of factors (bit l of word
    l // 64: factor l).

    Attributes
    ----------
    uncov : bool array (nnz,)
        ``uncov[p]``: is the p-th one of X (CSR order) uncovered.
    used : uint64 array (n, words)
        The factors each row uses.
    fac_mask : uint64 array (m, words)
        The factors that hold each column.
    """

    uncov: np.ndarray
    used: np.ndarray
    fac_mask: np.ndarray


class RowGroups(NamedTuple):
    """X's rows as :func:`asso_scores` counts them: by pattern (the set of factors a row uses)
    and heavy columns (at most 64 of X's heaviest, numbered by bit).

    Attributes
    ----------
    coldeg : int64 array (nnz,)
        Per one of X in the CSC order, its row's number of ones (each column's rows come by
        decreasing number of ones).
    xtop : uint64 array (n,)
        Each row's heavy columns.
    all_x, all_count : uint64 and int64 arrays
        All rows by their heavy columns: each set of heavy columns and its number of rows.
    pat : int64 array (n,)
        Each row's pattern.
    pat_used : uint64 array (patterns, words)
        Each pattern's factors (bit l: factor l).
    pat_ctop : uint64 array (patterns,)
        The heavy columns its factors hold.
    g_ptr, g_x, g_count : int64, uint64 and int64 arrays
        The groups of rows of equal pattern and heavy columns: pattern P's are
        ``g_ptr[P]:g_ptr[P + 1]``, each with its heavy columns and its number of rows.
    """

    coldeg: np.ndarray
    xtop: np.ndarray
    all_x: np.ndarray
    all_count: np.ndarray
    pat: np.ndarray
    pat_used: np.ndarray
    pat_ctop: np.ndarray
    g_ptr: np.ndarray
    g_x: np.ndarray
    g_count: np.ndarray


class Weights(NamedTuple):
    """ASSO's weights: covering a ones and b zeros of a row gains iff ``pos·a − neg·b > 0``."""

    pos: float
    neg: float


class Sums(NamedTuple):
    """ASSO's scores as integer sums, per candidate (outputs).

    Attributes
    ----------
    A, B : int64 arrays (n_cand,)
        The uncovered ones and the uncovered zeros a candidate covers in the rows where it
        gains: its score is ``pos·A − neg·B``.
    """

    A: np.ndarray
    B: np.ndarray


class Concept(NamedTuple):
    """GreConD's current concept.

    Attributes
    ----------
    in_extent : bool array (n,)
        Its rows.
    in_intent : bool array (m,)
        Its columns.
    extent_bits : uint64 array (ceil(n / 64),)
        Its rows packed (empty when X's columns are not packed).
    """

    in_extent: np.ndarray
    in_intent: np.ndarray
    extent_bits: np.ndarray


class Packed(NamedTuple):
    """X's columns as bits of rows, for GreConD on dense data (both (0, 0) when not used).

    Attributes
    ----------
    colbits : uint64 array (m, ceil(n / 64))
        Each column's rows.
    ubits : uint64 array (m, ceil(n / 64))
        Its rows where its one is uncovered.
    """

    colbits: np.ndarray
    ubits: np.ndarray


class _Candidate(NamedTuple):
    """One candidate: its columns ``cols[lo:hi]``, the first ``n_light`` of them light, its
    heavy ones as bits (``kmask``)."""

    cols: np.ndarray
    lo: int
    hi: int
    n_light: int
    kmask: np.uint64


class _PatternView(NamedTuple):
    """Per pattern, the current candidate as its rows see it (see :func:`_pattern`)."""

    stamp: np.ndarray
    hit: np.ndarray
    size: np.ndarray
    thresh: np.ndarray
    keep: np.ndarray
    limit: np.ndarray
    rest: np.ndarray


class _Scratch(NamedTuple):
    """One block's scratch for :func:`_asso_candidate`: per row ``acc`` (zero between
    candidates) and ``touched``, per column ``mark``, per word ``meets``, per class of
    candidates ``cache`` and ``cached``."""

    acc: np.ndarray
    touched: np.ndarray
    mark: np.ndarray
    meets: np.ndarray
    cache: np.ndarray
    cached: np.ndarray


class _UsageScratch(NamedTuple):
    """Zeroed scratch of :func:`_usage_counts`: per row ``seen``, per column ``mark``, per
    word ``meets``."""

    seen: np.ndarray
    mark: np.ndarray
    meets: np.ndarray


@njit(cache=True, nogil=True)
def asso_threshold(s, w_pos, w_neg):
    """The most of an s-column basis vector's columns a row can hold without gaining: the
    largest t in [0, s] with ``w_pos·t − w_neg·(s − t) > 0`` false (the gain grows with t, in
    floating point too, so this is the very test the scores use)."""
    lo, hi = 0, s
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if w_pos * mid - w_neg * (s - mid) > 0:
            hi = mid - 1
        else:
            lo = mid
    return lo


@njit(cache=True, nogil=True, inline="always")
def _gains(a, s, w_pos, w_neg):
    """Does covering a ones and s − a zeros gain?"""
    return w_pos * a - w_neg * (s - a) > 0


@njit(cache=True, nogil=True, inline="always")
def _pattern(P, c, cand, groups, fac_mask, meets, weights, view):
    """Candidate c (``cand``) as the rows of pattern P see it, into ``view``
    (:class:`_PatternView`): ``hit[P]``, does one of P's factors (``groups.pat_used[P]``) hold
    a column of c (``meets``: the factors that do); the columns of c those factors do not hold
    (``size``; ``keep``: its heavy ones as bits), the most of them a row can hold without
    gaining (``thresh``), and how many of c's light columns (rarest first) must be looked at
    for the rows of P that the count by groups gets wrong (``limit``; ``rest``: the light
    columns after those that P does not hold). Computed once per candidate (``stamp``)."""
    cols, lo, hi, n_light, kmask = cand
    pat_used, pat_ctop = groups.pat_used, groups.pat_ctop
    w_pos, w_neg = weights
    stamp, hit, size, thresh, keep, limit, rest = view
    if stamp[P] == c:
        return
    stamp[P] = c
    words = pat_used.shape[1]
    h = False
    for w in range(words):
        if pat_used[P, w] & meets[w]:
            h = True
            break
    s = hi - lo
    kept = kmask
    if h:
        kept = kmask & ~pat_ctop[P]
        for q in range(lo, hi):
            for w in range(words):
                if pat_used[P, w] & fac_mask[cols[q], w]:
                    s -= 1
                    break
    t = asso_threshold(s, w_pos, w_neg)
    hit[P], size[P], thresh[P], keep[P] = h, s, t, kept
    rest[P] = 0
    if popcount64(kept) > t:
        # Some group may gain: its rows that also hold light columns of c are counted short.
        limit[P] = n_light
        return
    # Otherwise only rows that hold more than t of c's columns gain, so one of the s − t
    # rarest that P does not hold; the heavy ones alone do not suffice, so a light one.
    need = s - t
    if not h:
        limit[P] = min(n_light, need)
        rest[P] = n_light - limit[P]
        return
    limit[P] = n_light
    for q in range(lo, lo + n_light):
        held = False
        for w in range(words):
            if pat_used[P, w] & fac_mask[cols[q], w]:
                held = True
                break
        if held:
            continue
        if need > 0:
            need -= 1
            if need == 0:
                limit[P] = q - lo + 1
        else:
            rest[P] += 1


@njit(cache=True, nogil=True)
def _asso_candidate(c, cands, X, Xt, cover, groups, weights, scratch, view):
    """(A, B) of candidate c; see :func:`asso_scores` (``scratch``: :class:`_Scratch`, whose
    ``acc`` is all zeros on entry and on return; ``view``: :class:`_PatternView`)."""
    cand = _Candidate(cands.cols, cands.ptr[c], cands.ptr[c + 1], cands.n_light[c], cands.kmask[c])
    cols, lo, hi, n_light, kmask = cand
    cls = cands.cls[c]
    indptr, indices = X
    colptr, colrows = Xt
    uncov, fac_mask = cover.uncov, cover.fac_mask
    coldeg, xtop, pat, pat_used = groups.coldeg, groups.xtop, groups.pat, groups.pat_used
    all_x, all_count = groups.all_x, groups.all_count
    g_ptr, g_x, g_count = groups.g_ptr, groups.g_x, groups.g_count
    w_pos, w_neg = weights
    acc, touched, mark, meets, cache, cached = scratch
    hit, size, thresh, keep = view.hit, view.size, view.thresh, view.keep
    limit, rest = view.limit, view.rest
    words = fac_mask.shape[1]
    for w in range(words):
        meets[w] = 0
    for q in range(lo, hi):
        for w in range(words):
            meets[w] |= fac_mask[cols[q], w]
    for q in range(lo, lo + n_light):
        mark[cols[q]] = c
    A = 0
    B = 0
    s = hi - lo
    t = asso_threshold(s, w_pos, w_neg)
    heavy_gain = popcount64(kmask) > t
    reach = 0
    least = s  # the least threshold over the patterns
    by_pattern = 0  # the groups to go through pattern by pattern
    by_class = 0 if cached[cls] or not heavy_gain else len(all_x)  # ... or all rows at once
    for P in range(len(g_ptr) - 1):
        _pattern(P, c, cand, groups, fac_mask, meets, weights, view)
        reach = max(reach, limit[P])
        least = min(least, thresh[P])
        own_gain = popcount64(keep[P]) > thresh[P]
        if own_gain:
            by_pattern += g_ptr[P + 1] - g_ptr[P]
        if hit[P] and (own_gain or heavy_gain):
            by_class += g_ptr[P + 1] - g_ptr[P]
    # Every row by its group, as if it held no light column of c; either pattern by pattern, or
    # all rows by their heavy columns as if no factor held a column of c (the same sums for
    # every candidate of the same heavy columns and size, class ``cls``: kept in ``cache``),
    # corrected for the patterns whose factors do: whichever goes through fewer groups.
    if by_class < by_pattern and heavy_gain:
        if not cached[cls]:
            ca = 0
            cb = 0
            for g in range(len(all_x)):
                a = popcount64(all_x[g] & kmask)
                if _gains(a, s, w_pos, w_neg):
                    ca += all_count[g] * a
                    cb += all_count[g] * (s - a)
            cache[cls, 0] = ca
            cache[cls, 1] = cb
            cached[cls] = True
        A += cache[cls, 0]
        B += cache[cls, 1]
    for P in range(len(g_ptr) - 1):
        own_gain = popcount64(keep[P]) > thresh[P]
        out = False  # take the group out of the count by class
        if by_class < by_pattern:
            if not hit[P]:
                continue
            out = heavy_gain
        if not (own_gain or out):
            continue
        sp = size[P]
        for g in range(g_ptr[P], g_ptr[P + 1]):
            if out:
                a = popcount64(g_x[g] & kmask)
                if _gains(a, s, w_pos, w_neg):
                    A -= g_count[g] * a
                    B -= g_count[g] * (s - a)
            if own_gain:
                a = popcount64(g_x[g] & keep[P])
                if _gains(a, sp, w_pos, w_neg):
                    A += g_count[g] * a
                    B += g_count[g] * (sp - a)
    # Then the rows whose light columns change that: count, for each row, the first ``limit``
    # light columns of c it holds uncovered (rarest first)... A row that gains holds more than
    # its pattern's threshold of c's columns, so more ones than that: each column's rows come
    # by decreasing number of ones (``coldeg``), and the rest of a list cannot gain.
    n_touched = 0
    for qp in range(reach):
        j = cols[lo + qp]
        for r in range(colptr[j], colptr[j + 1]):
            if coldeg[r] <= least:
                break
            i = colrows[r]
            P = pat[i]
            if qp >= limit[P] or coldeg[r] <= thresh[P]:
                continue
            if hit[P]:
                held = False
                for w in range(words):
                    if pat_used[P, w] & fac_mask[j, w]:
                        held = True
                        break
                if held:  # j is covered in row i
                    continue
            if acc[i] == 0:
                touched[n_touched] = i
                n_touched += 1
            acc[i] += 1
    # ... then each such row's gain, with its heavy columns and its other light ones.
    for e in range(n_touched):
        i = touched[e]
        P = pat[i]
        s = size[P]
        heavy = popcount64(xtop[i] & keep[P])
        a = heavy + acc[i]
        if limit[P] < n_light:
            # No group of P gains, so neither does the row unless its light ones after the
            # first ``limit`` make it: at most ``rest[P]`` of them, and at most the row's light
            # ones not counted yet. Only then count them all.
            light = indptr[i + 1] - indptr[i] - popcount64(xtop[i])
            if not _gains(heavy + min(acc[i] + rest[P], light), s, w_pos, w_neg):
                acc[i] = 0
                continue
            a = heavy
            for p in range(indptr[i], indptr[i + 1]):
                if mark[indices[p]] == c and uncov[p]:
                    a += 1
        acc[i] = 0
        if _gains(a, s, w_pos, w_neg):
            A += a
            B += s - a
        if _gains(heavy, s, w_pos, w_neg):
            A -= heavy
            B -= s - heavy
    return A, B


@kernel()
def asso_scores(cands, todo, X, Xt, cover, groups, weights, n_blocks, out):
    """ASSO's score of every candidate basis vector marked in ``todo``, as integer sums.

    Candidate c used in row i covers ``a`` uncovered ones and ``b`` uncovered zeros of row i;
    it gains there iff ``w_pos·a − w_neg·b > 0``. ``out.A[c]``, ``out.B[c]``: the sums of a
    and b over the rows where it gains, so that its score is ``w_pos·A − w_neg·B`` (integer
    sums: the score does not depend on the order of the rows).

    The heaviest columns of X (at most 64, numbered by bit) make the difference: a row's gain
    depends on its pattern (the factors it uses, ``groups.pat[i]``), its heavy columns
    (``groups.xtop[i]``) and its light ones. Rows are counted in groups as if they held no
    light column of c: by groups of equal pattern and heavy columns, or, when that goes through
    fewer groups, all rows by their heavy columns as if they used no factor holding a column of
    c (the same for candidates of equal heavy columns and size: class ``cands.cls[c]``,
    computed once per block) corrected for the patterns whose factors do. Then the rows whose
    light columns of c change their gain are looked at one by one: those of groups that gain
    and hold light columns of c, and those that gain only with their light columns, which
    (pigeonhole) hold one of c's rarest. So no heavy column's rows are listed.

    Parameters
    ----------
    cands : AssoCandidates
        The candidates: columns (rarest first), light and heavy ones, classes.
    todo : bool array (n_cand,)
        The candidates to score; the others' sums are left as they are.
    X, Xt : Sparse
        X's CSR and CSC forms; Xt's rows of each column come by decreasing number of ones
        (``groups.coldeg``), so that a list is cut where its rows hold too few to gain.
    cover : Cover
        The factors so far (``uncov`` and ``fac_mask``; the rows' factors come by pattern).
    groups : RowGroups
        The rows by pattern and heavy columns.
    weights : Weights
        w_pos and w_neg.
    n_blocks : int
        Candidates are dealt to ``n_blocks`` blocks in turn (each score is computed alone: the
        results do not depend on the blocks).
    out : Sums
        A and B, written for the candidates of ``todo``.
    """
    A, B = out
    n_cand = len(cands.ptr) - 1
    n = len(X.indptr) - 1
    m = len(Xt.indptr) - 1
    n_pat = len(groups.g_ptr) - 1
    n_cls = cands.n_cls
    words = cover.fac_mask.shape[1]
    for b in prange(n_blocks):
        scratch = _Scratch(
            np.zeros(n, dtype=np.int64),  # acc
            np.empty(n, dtype=np.int64),  # touched
            np.full(m, -1, dtype=np.int64),  # mark
            np.zeros(words, dtype=np.uint64),  # meets
            np.zeros((n_cls, 2), dtype=np.int64),  # cache
            np.zeros(n_cls, dtype=np.bool_),  # cached
        )
        view = _PatternView(
            np.full(n_pat, -1, dtype=np.int64),  # stamp
            np.zeros(n_pat, dtype=np.bool_),  # hit
            np.zeros(n_pat, dtype=np.int64),  # size
            np.zeros(n_pat, dtype=np.int64),  # thresh
            np.zeros(n_pat, dtype=np.uint64),  # keep
            np.zeros(n_pat, dtype=np.int64),  # limit
            np.zeros(n_pat, dtype=np.int64),  # rest
        )
        for c in range(b, n_cand, n_blocks):
            if not todo[c]:
                continue
            A[c], B[c] = _asso_candidate(c, cands, X, Xt, cover, groups, weights, scratch, view)


@njit(cache=True, nogil=True, inline="always")
def _usage_counts(cols, X, Xt, cover, dont_care, weights, usage, scratch):
    """The rows where the basis vector ``cols`` gains (``usage[i] = True``) and its (A, B):
    uncovered ones and zeros it would cover in them. ``dont_care`` (per one, CSR order; empty:
    none) marks cells that are neither: unknown cells in the relation. ``scratch``
    (:class:`_UsageScratch`) is zeroed, and left zeroed."""
    indptr, indices = X
    colptr, colrows = Xt
    uncov, used, fac_mask = cover
    w_pos, w_neg = weights
    seen, mark, meets = scratch
    words = used.shape[1]
    s = len(cols)
    careless = len(dont_care) > 0
    for q in range(s):
        mark[cols[q]] = True
        for w in range(words):
            meets[w] |= fac_mask[cols[q], w]
    A = 0
    B = 0
    for q in range(s):
        for r in range(colptr[cols[q]], colptr[cols[q] + 1]):
            i = colrows[r]
            if seen[i]:
                continue
            seen[i] = True
            a = 0
            dc = 0
            for p in range(indptr[i], indptr[i + 1]):
                if mark[indices[p]]:
                    if uncov[p]:
                        a += 1
                    elif careless and dont_care[p]:
                        # Counted out of the zeros, unless an earlier factor holds it (then
                        # its column is not free).
                        held = False
                        for w in range(words):
                            if used[i, w] & fac_mask[indices[p], w]:
                                held = True
                                break
                        if not held:
                            dc += 1
            free = s
            for w in range(words):
                if used[i, w] & meets[w]:
                    for q2 in range(s):
                        for w2 in range(words):
                            if used[i, w2] & fac_mask[cols[q2], w2]:
                                free -= 1
                                break
                    break
            if _gains(a, free - dc, w_pos, w_neg):
                usage[i] = True
                A += a
                B += free - a - dc
    for q in range(s):
        mark[cols[q]] = False
        for r in range(colptr[cols[q]], colptr[cols[q] + 1]):
            seen[colrows[r]] = False
    for w in range(words):
        meets[w] = 0
    return A, B


@njit(cache=True, nogil=True)
def asso_usage(cols, X, Xt, cover, dont_care, weights, usage):
    """Where the basis vector ``cols`` gains, found row by row through all its columns.

    Parameters
    ----------
    cols : int array
        The basis vector's columns.
    X, Xt : Sparse
        X's CSR and CSC forms.
    cover : Cover
        The factors so far.
    dont_care : bool array (nnz,)
        Per one of X (CSR order): an unknown cell, counted as neither a one nor a zero
        (empty: none).
    weights : Weights
        w_pos and w_neg.
    usage : bool array (n,)
        Output: ``usage[i] = True`` for every row where it gains.

    Returns
    -------
    A, B : int
        Its sums as :func:`asso_scores` counts them.
    """
    scratch = _UsageScratch(
        np.zeros(len(X.indptr) - 1, dtype=np.bool_),  # seen
        np.zeros(len(Xt.indptr) - 1, dtype=np.bool_),  # mark
        np.zeros(cover.used.shape[1], dtype=np.uint64),  # meets
    )
    return _usage_counts(cols, X, Xt, cover, dont_care, weights, usage, scratch)


@kernel()
def asso_scores_rowwise(cands, todo, X, Xt, cover, dont_care, weights, n_blocks, out):
    """The sums of :func:`asso_scores` for every candidate with ``todo``, by
    :func:`asso_usage`, row by row: the scores with "don't care" cells, where the counts by
    groups of :func:`asso_scores` do not hold (a row's zeros are no longer its free columns
    less its ones).

    Parameters
    ----------
    cands : AssoCandidates
        The candidates (their columns: ``ptr`` and ``cols``).
    todo : bool array (n_cand,)
        The candidates to score; the others' sums are left as they are.
    X, Xt : Sparse
        X's CSR and CSC forms.
    cover : Cover
        The factors so far.
    dont_care : bool array (nnz,)
        Per one of X (CSR order): an unknown cell (empty: none).
    weights : Weights
        w_pos and w_neg.
    n_blocks : int
        Candidates in ``n_blocks`` blocks, each with its own scratch.
    out : Sums
        A and B, written for the candidates of ``todo``.
    """
    cand_ptr, cand_cols = cands.ptr, cands.cols
    A, B = out
    n_cand = len(cand_ptr) - 1
    n = len(X.indptr) - 1
    for b in prange(n_blocks):
        scratch = _UsageScratch(
            np.zeros(n, dtype=np.bool_),  # seen
            np.zeros(len(Xt.indptr) - 1, dtype=np.bool_),  # mark
            np.zeros(cover.used.shape[1], dtype=np.uint64),  # meets
        )
        usage = np.zeros(n, dtype=np.bool_)
        for c in range(b * n_cand // n_blocks, (b + 1) * n_cand // n_blocks):
            if todo[c]:
                A[c], B[c] = _usage_counts(
                    cand_cols[cand_ptr[c] : cand_ptr[c + 1]],
                    X,
                    Xt,
                    cover,
                    dont_care,
                    weights,
                    usage,
                    scratch,
                )


@njit(cache=True, nogil=True, inline="always")
def _lowest_bit(x):
    """Position of the lowest set bit of a nonzero uint64."""
    return popcount64((x & (~x + _ONE)) - _ONE)


@njit(cache=True, nogil=True, inline="always")
def _rows_within(ext, colbits, j, lo, hi):
    """Does column j (packed rows) have a one in every row of ``ext``, whose nonzero words lie
    in ``[lo, hi)``?"""
    for w in range(lo, hi):
        if ext[w] & ~colbits[j, w]:
            return False
    return True


@kernel()
def grecond_values(X, Xt, uncov, concept, packed, n_blocks, values):
    """GreConD's value of adding each column j not in the current intent D.

    The new concept is C' = extent ∩ rows(j) and D' = C'↑ (the columns shared by all of C');
    its value is the number of still-uncovered ones in C' × D'. ``values[j] = -1`` for j in D
    and 0 when C' is empty. D' lies within any one row of C', say the first, r. Two ways to the
    value, the cheaper per column:

    - counting: over the rows of C', how many hold each column and how many of those ones are
      uncovered; D' is the columns of r held by all |C'| rows, the value the sum of their
      uncovered counts. Cost Σ deg(i) over C' (a call: Σ deg(i)² over the extent).
    - bitsets (when X's columns are packed): C' packed, then each column of r tested for
      containing it and its uncovered rows in C' counted. Cost deg(r) × the words that C'
      spans: dense data.

    Parameters
    ----------
    X, Xt : Sparse
        X's CSR and CSC (the rows of each column) forms.
    uncov : bool array (nnz,)
        ``uncov[p]``: is the p-th one of X (CSR order) still uncovered.
    concept : Concept
        The current extent and intent D (``extent_bits`` used with ``packed``).
    packed : Packed
        X's columns and their uncovered ones as bits of rows; (0, 0) arrays: count instead.
    n_blocks : int
        Columns are dealt to ``n_blocks`` blocks in turn (each value is computed alone, so the
        results do not depend on the blocks).
    values : int64 array (m,)
        Output: the value of each column.
    """
    indptr, indices = X
    colptr, colrows = Xt
    in_extent, in_intent, extent_bits = concept
    colbits, ubits = packed
    m = len(colptr) - 1
    words = colbits.shape[1]
    bits = colbits.shape[0] > 0
    mean_deg = indptr[-1] / max(1, len(indptr) - 1)
    for b in prange(n_blocks):
        stamp = np.full(m, -1, dtype=np.int64)
        count = np.zeros(m, dtype=np.int64)
        ucount = np.zeros(m, dtype=np.int64)
        ext = np.zeros(words, dtype=np.uint64)
        for j in range(b, m, n_blocks):
            if in_intent[j]:
                values[j] = -1
                continue
            size = 0
            first = -1
            lo = hi = 0
            work = 0  # the cost of counting: Σ deg(i) over C', or an estimate
            if bits:  # C' from the bits: one pass over the words
                for w in range(words):
                    ext[w] = extent_bits[w] & colbits[j, w]
                    if ext[w]:
                        if first < 0:
                            first = (w << 6) + _lowest_bit(ext[w])
                            lo = w
                        hi = w + 1
                        size += popcount64(ext[w])
                work = size * mean_deg
            else:
                for r in range(colptr[j], colptr[j + 1]):
                    i = colrows[r]
                    if in_extent[i]:
                        if first < 0:
                            first = i
                        size += 1
                        work += indptr[i + 1] - indptr[i]
            if size == 0:
                values[j] = 0
                continue
            total = 0
            if bits and (hi - lo) * (indptr[first + 1] - indptr[first] + 1) < work:
                for p in range(indptr[first], indptr[first + 1]):
                    c = indices[p]
                    if _rows_within(ext, colbits, c, lo, hi):
                        for w in range(lo, hi):
                            total += popcount64(ext[w] & ubits[c, w])
            else:
                for r in range(colptr[j], colptr[j + 1]):
                    i = colrows[r]
                    if not in_extent[i]:
                        continue
                    for p in range(indptr[i], indptr[i + 1]):
                        c = indices[p]
                        if stamp[c] != j:
                            stamp[c] = j
                            count[c] = 0
                            ucount[c] = 0
                        count[c] += 1
                        if uncov[p]:
                            ucount[c] += 1
                for p in range(indptr[first], indptr[first + 1]):
                    c = indices[p]
                    if count[c] == size:
                        total += ucount[c]
            values[j] = total


@njit(cache=True, nogil=True)
def intent_of(indptr, indices, rows, extent_bits, colbits, out):
    """``out[j] = True`` iff every row in ``rows`` (row numbers, ascending) has a one in column
    j; all columns for no rows. The intent lies within the first row: its columns are checked
    against the packed extent (``extent_bits``) when ``colbits`` (m, ceil(n/64)) is given and
    that is cheaper than counting the columns over the rows."""
    if len(rows) == 0:
        out[:] = True
        return
    out[:] = False
    first = rows[0]
    lo, hi = rows[0] >> 6, (rows[-1] >> 6) + 1
    deg = indptr[first + 1] - indptr[first]
    if colbits.shape[0] > 0 and (hi - lo) * deg < len(rows) * indptr[-1] / (len(indptr) - 1):
        for p in range(indptr[first], indptr[first + 1]):
            out[indices[p]] = _rows_within(extent_bits, colbits, indices[p], lo, hi)
        return
    count = np.zeros(len(out), dtype=np.int64)
    for r in range(len(rows)):
        i = rows[r]
        for p in range(indptr[i], indptr[i + 1]):
            count[indices[p]] += 1
    for p in range(indptr[first], indptr[first + 1]):
        out[indices[p]] = count[indices[p]] == len(rows)


@njit(cache=True, nogil=True)
def cover_concept(indptr, indices, rows, in_intent, uncov, ubits):
    """Mark the ones of X in ``rows`` × ``in_intent`` covered: ``uncov[p] = False`` (p in CSR
    order) and, if ``ubits`` (m, ceil(n/64)) is given, row i's bit of column j cleared.
    Returns how many were uncovered."""
    newly = 0
    bits = ubits.shape[0] > 0
    for r in range(len(rows)):
        i = rows[r]
        for p in range(indptr[i], indptr[i + 1]):
            if uncov[p] and in_intent[indices[p]]:
                uncov[p] = False
                newly += 1
                if bits:
                    ubits[indices[p], i >> 6] &= ~(_ONE << np.uint64(i & 63))
    return newly
