"""Boolean row updates for the polish and the per-factor thresholds: exact (all 2^k patterns)
and single-bit flips (any k)."""

import numpy as np
from numba import njit, prange

from .boolean import lower_bound, popcount64
from .variants import kernel


@njit(cache=True, nogil=True)
def subset_sums(counts, k):
    """In place: ``counts[s] <- sum of counts[t] over the subsets t of s`` (zeta transform)."""
    size = 1 << k
    for bit in range(k):
        step = 1 << bit
        for s in range(size):
            if s & step:
                counts[s] += counts[s ^ step]


@kernel()
def best_row_codes(X, cells, observed, col_codes, F, k, m, codes, n_blocks):
    """Give every row the k-bit pattern with the lowest Hamming error; change only on strict gain.

    ``col_codes[j]`` is column j of the other factor as k bits and ``F[s]`` the number of columns
    whose code is a subset of s (all m columns). A row with pattern a leaves uncovered exactly
    the columns with code ⊆ ~a, so with S_i its support (``X``, CSR
    :class:`~banmf._kernels.sparse.Sparse`) and F_i the same count over S_i only, its error is
    ``m − |S_i| − F(~a) + 2·F_i(~a)``. With listed cells (``cells``, CSR: row i's cells C_i,
    :class:`banmf.data.masks.Unknown`, and F_C the count over them) only observed cells count:
    ``m − |S_i| − |C_i| − F + 2·F_i + F_C`` when C_i are the unknown cells, ``|C_i| + F_i − F_C``
    when they are the observed zeros (``observed``).
    ``codes`` (n,) is updated in place; returns how many rows changed.
    """
    indptr, indices = X
    cindptr, cindices = cells
    n = len(indptr) - 1
    size = 1 << k
    full = size - 1
    changed = np.zeros(n_blocks, dtype=np.int64)
    for b in prange(n_blocks):
        Fi = np.zeros(size, dtype=np.int64)
        Fc = np.zeros(size, dtype=np.int64)
        for i in range(b * n // n_blocks, (b + 1) * n // n_blocks):
            lo, hi = indptr[i], indptr[i + 1]
            clo, chi = cindptr[i], cindptr[i + 1]
            Fi[:] = 0
            for p in range(lo, hi):
                Fi[col_codes[indices[p]]] += 1
            subset_sums(Fi, k)
            Fc[:] = 0
            if chi > clo:
                for p in range(clo, chi):
                    Fc[col_codes[cindices[p]]] += 1
                subset_sums(Fc, k)
            current = full & ~codes[i]
            best_s = current
            if observed:
                base = chi - clo
                best = base + Fi[current] - Fc[current]
                for s in range(size):
                    e = base + Fi[s] - Fc[s]
                    if e < best:
                        best = e
                        best_s = s
            else:
                base = m - (hi - lo) - (chi - clo)
                best = base - F[current] + 2 * Fi[current] + Fc[current]
                for s in range(size):
                    e = base - F[s] + 2 * Fi[s] + Fc[s]
                    if e < best:
                        best = e
                        best_s = s
            if best_s != current:
                codes[i] = full & ~best_s
                changed[b] += 1
    return changed.sum()


_ONE = np.uint64(1)

#: The flips' bounds on each row's changes (:func:`banmf.engine.polish.flip_rows`) are kept as int16,
#: the larger changes as this (still a bound).
SLACK_MAX = np.iinfo(np.int16).max


@njit(cache=True, nogil=True)
def _low_bit(x):
    """Index of the lowest set bit of a nonzero uint64."""
    return np.int64(popcount64((x & (~x + _ONE)) - _ONE))


@njit(cache=True, nogil=True)
def _shared_bits(a, b):
    """Number of bits set in both packed rows."""
    shared = 0
    for w in range(len(a)):
        shared += np.int64(popcount64(a[w] & b[w]))
    return shared


@njit(cache=True, nogil=True)
def _one_word_uncovered(lo, hi, indices, a, B, only, out):
    """:func:`support_uncovered` for one row of pattern ``a`` over its nonzeros ``lo:hi`` when
    k ≤ 64: the shared bits as one word, a single one told by ``x & (x - 1) == 0``, not
    counted. 0.68-0.73× the general loop's time at 10⁷ nonzeros, k = 10, one thread."""
    if only >= 0:
        bit = _ONE << np.uint64(only)
        for p in range(lo, hi):
            b = B[indices[p], 0]
            if b & bit and a & b & ~bit == 0:
                out[0] += 1
        return
    for p in range(lo, hi):
        b = B[indices[p], 0]
        x = a & b
        if x == 0:
            while b:
                out[_low_bit(b)] += 1
                b &= b - _ONE
        elif x & (x - _ONE) == 0:
            out[_low_bit(x)] += 1


@kernel()
def support_uncovered(indptr, indices, A, B, rows, only, out):
    """Ones of X that factor l alone would have to cover, row by row, on the support.

    For every row ``i = rows[r]`` with pattern ``A[i]`` (k bits in words) against the column
    codes ``B[j]``: ``out[r, l] = #{j in S_i : bit l of B[j], and B[j] meets A[i] in no bit other
    than l}``: the ones of row i that bit l covers and nothing else does. ``only >= 0`` counts that
    bit alone into ``out[r, 0]``. Cost O(|S_i| · (words + bits of B[j])).
    """
    words = A.shape[1]
    for r in prange(len(rows)):
        i = rows[r]
        for c in range(out.shape[1]):
            out[r, c] = 0
        if words == 1:
            _one_word_uncovered(indptr[i], indptr[i + 1], indices, A[i, 0], B, only, out[r])
            continue
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            shared = _shared_bits(A[i], B[j])
            if only >= 0:
                wl, bit = only >> 6, _ONE << np.uint64(only & 63)
                if B[j, wl] & bit and shared - (1 if A[i, wl] & bit else 0) == 0:
                    out[r, 0] += 1
            elif shared == 1:
                # Only the one shared bit is needed for this one; every other bit is backed up.
                for w in range(words):
                    x = A[i, w] & B[j, w]
                    if x:
                        out[r, (w << 6) + _low_bit(x)] += 1
            elif shared == 0:
                for w in range(words):
                    x = B[j, w]
                    while x:
                        out[r, (w << 6) + _low_bit(x)] += 1
                        x &= x - _ONE


@kernel()
def uncovered_counts(U, R, only, out):
    """``out[u, l] = |R_l minus (union of R_l' over the other bits l' of U[u])|``, any k.

    ``R`` (k, words over columns) holds the fixed factor's bitsets; ``U`` (u, words over k)
    distinct patterns. Built per pattern from the running "covered once" and "covered twice"
    unions, so a pattern costs O((bits of U[u] + k) · m / 64). ``only >= 0``: that bit alone,
    into ``out[u, 0]``.
    """
    k, mw = R.shape
    n_u = U.shape[0]
    n_blocks = min(n_u, 64)
    for b in prange(n_blocks):
        ones = np.empty(mw, dtype=np.uint64)
        twos = np.empty(mw, dtype=np.uint64)
        for u in range(b * n_u // n_blocks, (b + 1) * n_u // n_blocks):
            ones[:] = 0
            twos[:] = 0
            for w in range(U.shape[1]):
                x = U[u, w]
                while x:
                    l = (w << 6) + _low_bit(x)
                    x &= x - _ONE
                    for q in range(mw):
                        twos[q] |= ones[q] & R[l, q]
                        ones[q] |= R[l, q]
            first, last = (only, only + 1) if only >= 0 else (0, k)
            for l in range(first, last):
                in_u = (U[u, l >> 6] >> np.uint64(l & 63)) & _ONE
                total = 0
                for q in range(mw):
                    # Bit l is backed up where another pattern bit covers: twice-covered if l is
                    # in the pattern, covered at all if not.
                    total += np.int64(popcount64(R[l, q] & ~(twos[q] if in_u else ones[q])))
                out[u, l - first] = total


@kernel()
def single_cover(indptr, indices, A, B, out):
    """Ones of X by how they are covered, row by row of the mask: ``out[r, l]`` counts the ones
    of row r that bit l alone covers, ``out[r, k]`` those that no bit covers.

    Row r has pattern ``A[r]`` and column j the code ``B[j]`` (both k bits in words), as in
    :func:`support_uncovered`; ``out`` has shape (rows, k + 1). Cost O(nnz · words).
    """
    k = out.shape[1] - 1
    words = A.shape[1]
    for r in prange(A.shape[0]):
        for c in range(k + 1):
            out[r, c] = 0
        for p in range(indptr[r], indptr[r + 1]):
            j = indices[p]
            shared = _shared_bits(A[r], B[j])
            if shared == 0:
                out[r, k] += 1
            elif shared == 1:
                for w in range(words):
                    x = A[r, w] & B[j, w]
                    if x:
                        out[r, (w << 6) + _low_bit(x)] += 1


@kernel()
def lone_bit_lines(indptr, indices, lines, cuts, A, B, l, out):
    """Ones of X that bit l alone would cover, counted from the fixed factor's side.

    The mask (``indptr``, ``indices``: canonical, each line's free rows sorted) has one line
    per row of the fixed factor (codes ``B``, k bits in words) listing free rows; ``lines``
    are the fixed rows with bit l. For each free row i with pattern ``A[i]``: ``out[i] =
    #{j in lines : i in line j, and A[i] and B[j] share no bit other than l}``, which is
    :func:`support_uncovered`'s ``out[:, 0]`` for ``only=l`` over every free row (a line
    without bit l adds nothing there). The free rows ``cuts[b]:cuts[b + 1]`` go to block b,
    which zeroes and counts its own part of ``out``, finding each line's part by bisection:
    no partial counts to add up, and a block's reads and writes stay in its rows (one n-long
    partial per block, zeroed and summed, took as long as the counts at 10⁷ free rows; on
    H's side at 10⁸ nonzeros, 10⁶ free rows, the lines split by their ones with a partial per
    block took as long as these cuts, 0.41-0.51 s against 0.41-0.50 for 2·10⁷ ones).
    Integer counts: the same whatever the cuts. Cost O(ones in the lines · words + blocks ·
    lines · log), not O(nnz · words).
    """
    words = A.shape[1]
    wl, bit = l >> 6, _ONE << np.uint64(l & 63)
    for b in prange(len(cuts) - 1):
        lo, hi = cuts[b], cuts[b + 1]
        for i in range(lo, hi):
            out[i] = 0
        for q in range(len(lines)):
            j = lines[q]
            start, stop = indptr[j], indptr[j + 1]
            if lo > 0:
                start = lower_bound(indices, start, stop, lo)
            if hi < len(out):
                stop = lower_bound(indices, start, stop, hi)
            if words == 1:
                # Without a branch on A[i] (taken at random), the loads of A and out overlap:
                # 0.6-0.8× the time at 10⁸ nonzeros, k = 10 (W's and H's lines).
                other = B[j, 0] & ~bit
                for p in range(start, stop):
                    i = indices[p]
                    out[i] += np.int64(A[i, 0] & other == 0)
                continue
            for p in range(start, stop):
                i = indices[p]
                alone = True
                for w in range(words):
                    shared = A[i, w] & B[j, w]
                    if w == wl:
                        shared &= ~bit
                    if shared:
                        alone = False
                        break
                if alone:
                    out[i] += 1


@kernel()
def uncovered_by_codes(A, codes, counts, out):
    """``out[i] = sum of counts[c] over the codes c that meet A[i] in no bit``.

    With ``codes`` the distinct rows of the fixed factor that hold bit l, bit l cleared, and
    ``counts`` how many rows hold each: the columns with bit l that no other bit of the
    pattern ``A[i]`` covers, :func:`uncovered_counts`'s ``only=l`` for every row, without
    the distinct patterns of A. Cost O(rows · codes · words).
    """
    words = A.shape[1]
    for i in prange(A.shape[0]):
        total = 0
        for c in range(codes.shape[0]):
            meets = False
            for w in range(words):
                if A[i, w] & codes[c, w]:
                    meets = True
                    break
            if not meets:
                total += counts[c]
        out[i] = total


@kernel()
def table_uncovered(A, T, only, out):
    """``out[r, l] = T[l, ~(A[r] minus bit l)]``: per row pattern ``A[r]`` (k ≤ 16 bits, one
    word) and bit l, the columns with bit l that no other bit of the pattern covers, read from
    the subset-sum tables ``T`` (k, 2^k) of :func:`banmf.engine.changes.bit_tables`. ``only >= 0``:
    that bit alone, into ``out[r, 0]``. The gather numpy would make of it indexes with two
    arrays of n·k entries: 4× this loop's processor time at 10⁶ rows, k = 10 (0.10 against
    0.025 s, one thread)."""
    k = T.shape[0]
    full = (1 << k) - 1
    first, last = (only, only + 1) if only >= 0 else (0, k)
    for r in prange(A.shape[0]):
        a = np.int64(A[r, 0])
        for l in range(first, last):
            out[r, l - first] = T[l, full & ~(a & ~(1 << l))]


@kernel()
def table_changes(A, rows, T, only, out):
    """In place, from ``out[r, l]`` the ones of row ``rows[r]`` that bit l alone covers or would
    cover (:func:`support_uncovered`'s counts): ``out[r, l] = T[l, ~(A[i] minus bit l)] −
    2·out[r, l]``, the row's change in error from having bit l on rather than off, with the
    columns that bit l alone covers read from the subset-sum tables ``T`` as
    :func:`table_uncovered` reads them. ``only >= 0``: that bit alone, in ``out[r, 0]``.
    ``rows`` None: every row of A, in order (an n-long ``np.arange`` cost more than the
    reads at 10⁷ rows: its fresh pages). Fused because numpy's ``uncovered - 2 * sup`` made
    three n×k temporaries, serial: at 10⁷ rows, k = 10, 0.8 GB each, every flip pass of the
    polish."""
    k = T.shape[0]
    full = (1 << k) - 1
    first, last = (only, only + 1) if only >= 0 else (0, k)
    for r in prange(out.shape[0]):
        # One integer type for both (prange's index may be unsigned): Numba 0.68's parallel
        # variant otherwise kept r, or made the index a float.
        i = np.int64(r) if rows is None else np.int64(rows[r])
        a = np.int64(A[i, 0])
        for l in range(first, last):
            out[r, l - first] = T[l, full & ~(a & ~(1 << l))] - 2 * out[r, l - first]


@kernel()
def best_flips(d, rows, free, A, slack, bounded, moved):
    """Each row ``i = rows[r]``'s best single-bit flip, from ``d[r, l]`` (its error with bit l
    on minus with it off): the flip's change is ``-d`` where the bit is on, ``d`` where it is
    off, and the least, the first bit on ties (as ``np.argmin``), is made if it is negative:
    in ``free`` and in its packed row ``A`` (:func:`banmf.data.masks.pack_rows`), with
    ``moved[r]`` set. A row that does not move, when ``bounded``, leaves its changes in
    ``slack[i]`` (capped at :data:`SLACK_MAX`). Returns the sum of the changes made: integers,
    the same on any number of threads. Fused because numpy's ``where``, ``argmin`` and fancy
    indexing over the n×k changes were a third of the flip polish's time, serial."""
    k = d.shape[1]
    total = 0
    for r in prange(len(rows)):
        i = rows[r]
        best = 0
        least = np.iinfo(np.int64).max
        for l in range(k):
            change = -d[r, l] if free[i, l] else d[r, l]
            if change < least:
                best, least = l, change
        moved[r] = least < 0
        if least < 0:
            total += least
            free[i, best] = not free[i, best]
            A[i, best >> 6] ^= _ONE << np.uint64(best & 63)
        elif bounded:
            for l in range(k):
                change = -d[r, l] if free[i, l] else d[r, l]
                slack[i, l] = min(change, SLACK_MAX)
    return total


@kernel()
def drift_bounds(slack, drop, negative):
    """In place: each row's bounds ``slack[i, l]`` lowered by ``drop[l]``, kept at -1 or above
    (a negative bound only says that the flip may lower the error: no wrapping around), and
    ``negative[i]`` whether any of row i's bounds is now below zero. One parallel pass for
    numpy's three serial ones over the n×k bounds."""
    k = slack.shape[1]
    for i in prange(slack.shape[0]):
        below = False
        for l in range(k):
            value = max(np.int64(slack[i, l]) - drop[l], -1)
            slack[i, l] = value
            below |= value < 0
        negative[i] = below


@kernel()
def changed_bits(before, after, n_blocks, out):
    """``out[b, l]``: the rows of block b (of ``n_blocks`` equal ones) that differ between the
    Boolean ``before`` and ``after`` and hold bit l in either. Integer counts: their sum over
    the blocks is the same whatever the blocks."""
    n, k = before.shape
    for b in prange(n_blocks):
        for l in range(k):
            out[b, l] = 0
        for i in range(b * n // n_blocks, (b + 1) * n // n_blocks):
            differ = False
            for l in range(k):
                if before[i, l] != after[i, l]:
                    differ = True
                    break
            if differ:
                for l in range(k):
                    if before[i, l] or after[i, l]:
                        out[b, l] += 1


@njit(cache=True, nogil=True)
def rank_buckets(order, shift, pos, low):
    """The layout :func:`cut_sums` gathers by, from ``order`` (the rows by decreasing value):
    rank p falls in bucket ``p >> shift``; ``pos[i]`` is row i's place in its bucket's part
    of a scratch array, the bucket's rows in increasing order of row, and ``low[e]`` the rank
    (its low ``shift`` bits) of the row at place e. Once per factor; O(n)."""
    n = len(order)
    rank = np.empty(n, dtype=np.int64)
    for p in range(n):
        rank[order[p]] = p
    cursor = np.arange(0, n, 1 << shift)
    mask = (1 << shift) - 1
    for i in range(n):
        b = rank[i] >> shift
        e = cursor[b]
        pos[i] = e
        low[e] = rank[i] & mask
        cursor[b] = e + 1


@kernel()
def cut_sums(vals, d, pos, low, shift, current, buf, gathered, sums, out):
    """The least prefix sum of ``d`` taken in decreasing order of value (``vals``, decreasing:
    the rows in that order as laid out by :func:`rank_buckets`, ``pos``, ``low``, ``shift``)
    over the cuts r, where ``vals`` drops or r is 0 or n: ``out = (r, its sum, the sum after
    `current` rows)``, the first r on ties as ``np.argmin``. d is taken into rank order in
    two passes that each write within a bucket's part (``buf``, ``gathered``: n scratch;
    ``sums``: one per bucket), not by a gather at random over n, whose random reads take about
    twice as long (docs/decisions.md, "Sorting for the thresholds"). Then the buckets sum in
    parallel and each scans from its offset. Integer sums: the same whatever the threads."""
    n = len(vals)
    n_buckets = len(sums)
    for c in prange(n_buckets):
        # Rows in order, each to its bucket's next place: a write stream per bucket.
        for i in range(c * n // n_buckets, (c + 1) * n // n_buckets):
            buf[pos[i]] = d[i]
    for b in prange(n_buckets):
        start, stop = b << shift, min(n, (b + 1) << shift)
        total = 0
        for e in range(start, stop):
            gathered[start + low[e]] = buf[e]
            total += buf[e]
        sums[b] = total
    offset = 0
    for b in range(n_buckets):
        total = sums[b]
        sums[b] = offset
        offset += total
    best = np.empty(n_buckets, dtype=np.int64)
    least = np.zeros(n_buckets, dtype=np.int64)
    out[2] = 0
    for b in prange(n_buckets):
        running = sums[b]
        best[b] = -1
        for p in range(b << shift, min(n, (b + 1) << shift)):
            running += gathered[p]
            r = p + 1
            if r == current:
                out[2] = running
            if (r == n or vals[r] < vals[p]) and (best[b] < 0 or running < least[b]):
                best[b] = r
                least[b] = running
    out[0], out[1] = 0, 0
    for b in range(n_buckets):
        if best[b] >= 0 and least[b] < out[1]:
            out[0], out[1] = best[b], least[b]


_SIGN = np.uint64(1) << np.uint64(63)


@kernel()
def descending_keys(bits, shift, keys):
    """``keys[i]``: row i's sort key, decreasing in its value, then increasing in i. ``bits``
    are the values' float64 bit patterns; the key's top ``64 - shift`` bits are the top of a
    word that falls as the value rises (the sign and magnitude made one unsigned order), its
    low ``shift`` bits i (``shift`` bits hold every row). A row packed with its value sorts
    as one word: numpy's sort of words is vectorised, its argsort of floats is not (0.14
    against 1.0 s for 10⁷ of them). Distinct values may share the top bits
    (:func:`order_ties`)."""
    for i in prange(len(bits)):
        u = bits[i]
        # Nonnegative: the bits rise with the value, so flip them (their top bit stays 0);
        # negative: they rise as it falls, and the sign puts them after every nonnegative.
        key = u if u & _SIGN else ~u & ~_SIGN
        keys[i] = (key >> shift << shift) | np.uint64(i)


@kernel()
def unpack_keys(keys, shift, values, vals, order):
    """``order[p]``: the row in sorted key p (:func:`descending_keys`: its low ``shift``
    bits), ``vals[p]`` its value in ``values``."""
    mask = (np.uint64(1) << shift) - np.uint64(1)
    for p in prange(len(keys)):
        i = np.int64(keys[p] & mask)
        order[p] = i
        vals[p] = values[i]


#: Runs of keys with the same top bits up to this long are put in order by insertion.
_INSERTION_MAX = 16


@njit(cache=True, nogil=True)
def _merge_descending(vals, order, lo, hi):
    """In place: ``vals[lo:hi]`` (and ``order`` with them) in decreasing order, stably: equal
    values keep their order. A bottom-up merge sort over two buffers: the order of numba's
    ``argsort(kind="mergesort")``, from far less code to compile."""
    size = hi - lo
    src_v, src_o = vals[lo:hi].copy(), order[lo:hi].copy()
    dst_v, dst_o = np.empty_like(src_v), np.empty_like(src_o)
    width = 1
    while width < size:
        for start in range(0, size, 2 * width):
            mid = min(start + width, size)
            end = min(start + 2 * width, size)
            a, b, out = start, mid, start
            while a < mid and b < end:
                # The left run wins ties: the sort is stable.
                if src_v[b] > src_v[a]:
                    dst_v[out], dst_o[out] = src_v[b], src_o[b]
                    b += 1
                else:
                    dst_v[out], dst_o[out] = src_v[a], src_o[a]
                    a += 1
                out += 1
            while a < mid:
                dst_v[out], dst_o[out] = src_v[a], src_o[a]
                a += 1
                out += 1
            while b < end:
                dst_v[out], dst_o[out] = src_v[b], src_o[b]
                b += 1
                out += 1
        src_v, dst_v = dst_v, src_v
        src_o, dst_o = dst_o, src_o
        width *= 2
    # Element by element: numba's slice assignment from an array also compiles the
    # formatting of its shape-mismatch error, a large function.
    for a in range(size):
        vals[lo + a] = src_v[a]
        order[lo + a] = src_o[a]


@njit(cache=True, nogil=True)
def order_ties(keys, shift, vals, order):
    """In place: ``vals`` (and ``order`` with them) in decreasing order, from the order of the
    sorted ``keys`` (:func:`descending_keys`), which is it but within runs of equal top bits
    (the truncated values): each run whose values rise somewhere is sorted, stably (by row).
    Returns how many runs were. One pass over ``vals``; at 10⁸ nonzeros (10⁷ rows of W, 40
    bits of value) 4,000-7,000 runs of a few rows each per factor."""
    n = len(vals)
    runs = 0
    p = 0
    while p + 1 < n:
        if vals[p + 1] <= vals[p]:
            p += 1
            continue
        top = keys[p] >> shift
        lo, hi = p, p + 2
        while lo > 0 and keys[lo - 1] >> shift == top:
            lo -= 1
        while hi < n and keys[hi] >> shift == top:
            hi += 1
        if hi - lo <= _INSERTION_MAX:
            for a in range(lo + 1, hi):
                v, i = vals[a], order[a]
                b = a
                while b > lo and vals[b - 1] < v:
                    vals[b], order[b] = vals[b - 1], order[b - 1]
                    b -= 1
                vals[b], order[b] = v, i
        else:
            _merge_descending(vals, order, lo, hi)
        runs += 1
        p = hi
    return runs
