"""Kernels for Boolean factors: bit packing, error counts on the support, threshold grids."""

import numpy as np
from numba import njit, prange

from .variants import kernel

_ONE = np.uint64(1)
_INT64_MAX = np.iinfo(np.int64).max

#: Words (8 bytes each) of padding after each row of a kernel's per-block scratch, one cache
#: line: the blocks of a parallel kernel write their rows on different threads, which must not
#: share a line (each miss would move it from one core to the other).
SCRATCH_PAD = 8


@njit(cache=True, nogil=True)
def popcount64(x):
    """Number of set bits of a uint64 (SWAR)."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@kernel()
def pack_rows_above(R, s, out):
    """Bits of ``R > s`` row by row: ``out[i]`` (ceil(c / 64) words) packs row i of R (r, c)."""
    r, c = R.shape
    words = out.shape[1]
    for i in prange(r):
        for w in range(words):
            out[i, w] = 0
        for j in range(c):
            if R[i, j] > s:
                out[i, j >> 6] |= _ONE << np.uint64(j & 63)


@kernel()
def pack_cols_above(R, s, out):
    """Bits of ``R > s`` column by column: ``out[j]`` (ceil(r / 64) words) packs column j."""
    r, c = R.shape
    words = out.shape[1]
    for j in prange(c):
        for w in range(words):
            out[j, w] = 0
        for i in range(r):
            if R[i, j] > s:
                out[j, i >> 6] |= _ONE << np.uint64(i & 63)


@njit(cache=True, nogil=True, inline="always")
def _insert_descending(keys, vals, cnt, key, val):
    """Insert (key, val) into the first ``cnt`` entries of ``keys``/``vals``, kept sorted by key
    descending; after any equal keys, so that a sort by insertion is stable."""
    q = cnt
    while q > 0 and keys[q - 1] < key:
        keys[q] = keys[q - 1]
        vals[q] = vals[q - 1]
        q -= 1
    keys[q] = key
    vals[q] = val


@kernel()
def support_hits(indptr, indices, a, b, out):
    """``out[i] = #{p in row i : a[i] & b[indices[p]] != 0}``: ones of X covered by W⊗H."""
    n = a.shape[0]
    words = a.shape[1]
    for i in prange(n):
        hits = 0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            for w in range(words):
                if a[i, w] & b[j, w]:
                    hits += 1
                    break
        out[i] = hits


@kernel()
def union_popcounts(codes, bitsets, out, acc):
    """``out[d] = |OR of bitsets[l] over the bits l set in codes[d]|``.

    ``codes`` (D, ceil(k/64)) are packed rows of a Boolean factor, ``bitsets`` (k, ceil(m/64)) the
    packed rows of the other factor: ``out[d]`` is how many entries of the product row ``d`` covers.
    The codes are split in ``n_blocks`` contiguous blocks, one row of the scratch ``acc``
    (n_blocks, ceil(m/64) or more: :data:`SCRATCH_PAD`) uint64 each, which the caller allocates
    (allocating it here compiled Numba's array constructors into the kernel).
    """
    D = codes.shape[0]
    k = bitsets.shape[0]
    mwords = bitsets.shape[1]
    n_blocks = acc.shape[0]
    for b in prange(n_blocks):
        row = acc[b]
        for d in range(b * D // n_blocks, (b + 1) * D // n_blocks):
            for w in range(mwords):
                row[w] = 0
            for l in range(k):
                if codes[d, l >> 6] & (_ONE << np.uint64(l & 63)):
                    for w in range(mwords):
                        row[w] |= bitsets[l, w]
            total = 0
            for w in range(mwords):
                total += popcount64(row[w])
            out[d] = total


@njit(cache=True, nogil=True, inline="always")
def lower_bound(values, lo, hi, x):
    """The first position in ``values[lo:hi]`` (increasing) holding ``x`` or more: numpy's
    ``searchsorted(..., side="left")`` there."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel()
def scaled_ranks(F, scale, points, scaled, ranks):
    """Per entry of F times ``scale[l]`` in its column l (written to ``scaled`` unless that
    has no rows), how many of the increasing grid ``points`` lie strictly below it, into
    ``ranks``: numpy's ``F * scale`` (the same IEEE products) and ``searchsorted(points, ·,
    side="left")`` (a binary search per entry) in one parallel pass over F."""
    n, k = F.shape
    P = len(points)
    write = scaled.shape[0] > 0
    nb = min(n, 64)
    for b in prange(nb):
        for i in range(b * n // nb, (b + 1) * n // nb):
            for l in range(k):
                v = F[i, l] * scale[l]
                if write:
                    scaled[i, l] = v
                ranks[i, l] = lower_bound(points, 0, P, v)


@kernel()
def staircase_hits(indptr, indices, u, v, diff, rank, order):
    """Hit counts on the support for a whole grid of threshold pairs, as 2-D difference arrays.

    ``u[i, l]`` (resp. ``v[j, l]``) is how many grid thresholds lie strictly below W[i, l]
    (resp. H[l, j]), so at grid point (s, t) factor l joins row i iff s < u[i, l] and column j
    iff t < v[j, l]. Nonzero (i, j) is covered at (s, t) iff t < V(s) := max{v[j, l] : u[i, l] > s},
    a staircase. Each nonzero adds its staircase to a (P + 1)^2 difference array, P the grid's
    thresholds; rows are split in ``n_blocks`` contiguous blocks with one array each (integer
    sums: order-free), added into ``diff`` (n_blocks, P + 1, P + 1) int64, zeros. Scratch, one
    row per block: ``rank`` and ``order`` (n_blocks, k or more: :data:`SCRATCH_PAD`) int64.
    The caller allocates both (allocating them here compiled Numba's array constructors into
    the kernel).
    """
    n, k = u.shape
    n_blocks = diff.shape[0]
    for blk in prange(n_blocks):
        lo = blk * n // n_blocks
        hi = (blk + 1) * n // n_blocks
        # Row i's factors with u > 0 by u descending, sorted once per row rather than once per
        # nonzero: 0.66× the time at 10⁷ nonzeros, k = 10 (the same arrays).
        rank_b = rank[blk]
        order_b = order[blk]
        D = diff[blk]
        for i in range(lo, hi):
            cnt = 0
            for l in range(k):
                if u[i, l] > 0:
                    _insert_descending(rank_b, order_b, cnt, np.int64(u[i, l]), l)
                    cnt += 1
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                # Over the factors with v > 0 too, by u descending: rectangle [a, top) x
                # [0, vmax) between each u and the one above it, vmax over those above.
                top = vmax = 0
                for r in range(cnt):
                    b = np.int64(v[j, order_b[r]])
                    if b == 0:
                        continue
                    a = rank_b[r]
                    if top > a:
                        D[a, 0] += 1
                        D[top, 0] -= 1
                        D[a, vmax] -= 1
                        D[top, vmax] += 1
                    top = a
                    vmax = max(vmax, b)
                if vmax > 0:
                    D[0, 0] += 1
                    D[top, 0] -= 1
                    D[0, vmax] -= 1
                    D[top, vmax] += 1


@kernel()
def pack_csr_rows(indptr, indices, out):
    """Pack the rows of a CSR pattern into ``out`` (rows, ceil(cols / 64)) uint64 words."""
    r = len(indptr) - 1
    words = out.shape[1]
    for i in prange(r):
        for w in range(words):
            out[i, w] = 0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            out[i, j >> 6] |= _ONE << np.uint64(j & 63)


@njit(cache=True, nogil=True)
def _grid_cover(u, vt, s, t, colbits, acc):
    """Ones of ``(u > s) ⊗ (vt > t)ᵀ``: per row, the union of the column sets of its factors."""
    n, k = u.shape
    m = vt.shape[0]
    colbits[:, :] = 0
    for j in range(m):
        for l in range(k):
            if vt[j, l] > t:
                colbits[l, j >> 6] |= _ONE << np.uint64(j & 63)
    total = 0
    for i in range(n):
        acc[:] = 0
        for l in range(k):
            if u[i, l] > s:
                for w in range(acc.shape[0]):
                    acc[w] |= colbits[l, w]
        for w in range(acc.shape[0]):
            total += popcount64(acc[w])
    return total


@njit(cache=True, nogil=True)
def pruned_grid_search(
    u, vt, order, bound, hits, cell_hits, floor, nnz, key_w, key_h, colbits, acc, seen
):
    """The pruned grid search of :func:`banmf.booleanize` in one call, for small factors.

    Visits grid points by (static lower bound ``bound``, flat index) as given in ``order``;
    stops once a point's bound cannot beat or tie-win the best, skips points whose dynamic
    bound ``nnz − 2·hits + floor`` cannot, and otherwise computes the exact coverage, which
    is then a floor for every point at or below it in both thresholds. Ties go to the lowest
    flat index. Points with the same (``key_w[s]``, ``key_h[t]``) have the same coverage and
    are counted once in ``n_evaluated``. ``floor`` is updated in place. The coverage counts
    observed cells only: the grid ``cell_hits`` (the unknown cells covered at each point; zeros
    when every cell is observed) is taken off. Scratch, given by the caller (allocating it here
    compiled Numba's array constructors into the kernel): ``colbits``
    (k, ⌈m/64⌉) and ``acc`` (⌈m/64⌉,) uint64, ``seen`` (P + 2, P + 2) bool, all False (the
    keys run up to P + 1).

    Returns ``(best error, best flat index, n_evaluated)``. Cost per coverage: O(k·m + n·k·m/64).
    """
    P = hits.shape[0]
    best_err = _INT64_MAX
    best_idx = -1
    evaluated = 0
    for q in range(order.shape[0]):
        idx = order[q]
        lb = bound[idx]
        if lb > best_err or (lb == best_err and idx > best_idx):
            break
        s, t = idx // P, idx % P
        dyn = nnz - 2 * hits[s, t] + floor[s, t]
        if dyn > best_err or (dyn == best_err and idx > best_idx):
            continue
        c = _grid_cover(u, vt, s, t, colbits, acc) - cell_hits[s, t]
        if not seen[key_w[s], key_h[t]]:
            seen[key_w[s], key_h[t]] = True
            evaluated += 1
        for a in range(s + 1):
            for b in range(t + 1):
                if floor[a, b] < c:
                    floor[a, b] = c
        err = nnz - 2 * hits[s, t] + c
        if err < best_err or (err == best_err and idx < best_idx):
            best_err, best_idx = err, idx
    return best_err, best_idx, evaluated


@kernel()
def pair_histograms(ranks, out, held, rank):
    """Histograms of the pairwise minima of a factor's grid ranks, for the pair bound of the
    threshold search.

    ``ranks[i, l]`` is how many grid thresholds lie strictly below entry (i, l), so row i holds
    factors l and l' together at threshold s iff ``min(ranks[i, l], ranks[i, l']) > s``.
    ``out[b, r, l, l']`` counts the rows of block b where ``ranks[i, l] = r`` is the minimum of
    the pair, l' before l in the row's order (rank descending, then factor); each pair counts
    once, either way round, and a factor alone goes on the diagonal. Rows are split in
    ``n_blocks`` contiguous blocks with one array each (integer counts: order-free). Sorting a
    row's nonzero ranks first makes each factor's pairs one contiguous run of increments, and a
    sparse factor costs only its nonzeros' pairs. Adds into ``out`` (n_blocks, P + 1, k, k)
    int64, zeros, P the grid's thresholds; scratch, one row per block: ``held`` and ``rank``
    (n_blocks, k or more: :data:`SCRATCH_PAD`) int64. The caller allocates both (allocating
    them here compiled Numba's array constructors into the kernel).
    """
    n, k = ranks.shape
    n_blocks = out.shape[0]
    for blk in prange(n_blocks):
        lo = blk * n // n_blocks
        hi = (blk + 1) * n // n_blocks
        held_b = held[blk]
        rank_b = rank[blk]
        H = out[blk]
        for i in range(lo, hi):
            # insertion sort of the row's nonzero ranks, descending (stable)
            cnt = 0
            for l in range(k):
                r = np.int64(ranks[i, l])
                if r == 0:
                    continue
                _insert_descending(rank_b, held_b, cnt, r, l)
                cnt += 1
            for b in range(cnt):
                # every factor before b in the order has a rank at least b's
                row = H[rank_b[b], held_b[b]]
                for a in range(b + 1):
                    row[held_b[a]] += 1


@kernel()
def pair_cover_bound(A, B, out, size, order):
    """A lower bound on the ones of W⊗H at every grid point, from pairs of factors.

    ``A[s, l, l']`` is how many rows hold factors l and l' together at W's threshold s (the
    diagonal: factor l's rows), ``B[t, l, l']`` the same for H's columns at t (both symmetric).
    Rectangle l covers ``A[s, l, l]·B[t, l, l]`` cells and overlaps rectangle l' on
    ``A[s, l, l']·B[t, l, l']``. Taken largest first, each rectangle adds at least its cells
    less its overlaps with those before it, and never less than 0:

        cover(s, t) ≥ Σ_q max(0, |R_q| − Σ_{q' < q} |R_q ∩ R_q'|),

    at least the largest rectangle (its first term) and at least the Bonferroni bound
    ``Σ|R_l| − Σ_{l<l'} |R_l ∩ R_l'|`` (each term is at least its part of that sum). Ties of
    size go to the lower factor. Into ``out`` (P_W, P_H) int64; scratch, one row per threshold
    s of W so that parallel iterations share none: ``size`` and ``order`` (P_W, k or more:
    :data:`SCRATCH_PAD`) int64. The caller allocates both (allocating them here compiled
    Numba's array constructors into the kernel).
    """
    PW, k = A.shape[0], A.shape[1]
    PH = B.shape[0]
    for s in prange(PW):
        size_s = size[s]
        order_s = order[s]
        for t in range(PH):
            # insertion sort of the factors by rectangle size, descending (stable)
            for l in range(k):
                _insert_descending(size_s, order_s, l, A[s, l, l] * B[t, l, l], l)
            total = 0
            for q in range(k):
                if size_s[q] == 0:
                    break  # the rest are empty too
                la = order_s[q]
                add = size_s[q]
                for r in range(q):
                    lb = order_s[r]
                    add -= A[s, la, lb] * B[t, la, lb]
                    if add <= 0:
                        break
                if add > 0:
                    total += add
            out[s, t] = total
