"""Kernels of the multiplicative-update iteration on the support of X.

An iteration is the W step (:func:`update_rows`: each row of W against the k×k Gram HHᵀ, and
WᵀW; then :func:`scatter_rows`: each nonzero's ``y[p] W[i]`` into Wᵀ Y; on several threads both
in one call, :func:`update_scatter_rows`), the H step (:func:`update_rows` on Hᵀ) and the Y
pass (:func:`project_spmm`: project Y onto [lower, upper] and accumulate Y Hᵀ). Each is a
:class:`~banmf._kernels.variants.Kernel`, serial or parallel over blocks of rows. Sums across
rows go to one buffer per block, added up afterwards in block order, so the result is the same
serial or parallel, on any number of threads. The k×k Gram products are done inline, in
register tiles: no BLAS call in the loop, whose idle threads would compete with Numba's on a
small machine.

The solver stores factor rows zero-padded to whole vectors (:func:`padded_width`). The Y pass
and the scatter are compiled per padded width up to four registers (:func:`row_width`) and
then keep a factor row in registers across a row's nonzeros.

Each pass keeps its own loop over the rows (the W step's two share a parallel call, not a
loop): fusing them was no faster, nor were the other variants tried (docs/decisions.md, "The
iteration's passes stay apart" and "The kernels' other variants").

A kernel's loop over its blocks or parts calls a function that does one block's or part's rows
(:func:`_update_block`, :func:`_scatter_block_registers`, :func:`_project_rows_registers`, ...),
compiled on its own rather than inlined: Numba's parallel passes then work on a loop whose body
is one call, the serial and parallel variants share that function's machine code (compiled once,
cached), and the two variants of a kernel compile in about half the time. The functions carry
the kernels' own fastmath flags, so the arithmetic, and its bits, are the same.
"""

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .prefetch import FAR_AHEAD, SCATTER_MIN_BYTES, prefetch_ahead, worth_prefetching
from .simd import (
    VBYTES,
    Width,
    hsum4,
    lanes,
    vaccumulate,
    vadd,
    vdiv,
    vdot_partial,
    vfma,
    vlift,
    vload,
    vloadw,
    vmul,
    vsplat,
    vsplatw,
    vstore,
)
from .variants import Kernel, kernel

# Reassociation and FMA contraction let LLVM vectorize the length-k dot products and updates;
# NaN/inf semantics are kept (no "nnan"/"ninf"), so a bad value still shows instead of being
# optimised away.
_FAST = {"reassoc", "contract"}


class Cells(NamedTuple):
    """The unknown cells, with Y there (free: Y = WH). A kernel takes them as one argument,
    ``None`` when every cell is observed, which compiles their part out (tested on the
    argument: a field holding None would not be).

    Attributes
    ----------
    indptr, indices : integer arrays
        Their CSR: row i's are ``indices[indptr[i]:indptr[i + 1]]``.
    y : array (cells,)
        Y at each, in the factors' dtype.
    """

    indptr: np.ndarray
    indices: np.ndarray
    y: np.ndarray


class Factors(NamedTuple):
    """W (n, ≥ k) and Hᵀ (m, ≥ k), rows zero-padded as the solver stores them."""

    W: np.ndarray
    Ht: np.ndarray


class YSums(NamedTuple):
    """What the Y pass sums: ``YHt`` (n, ≥ k), Y Hᵀ by row, and ``sq`` (rows, 2), the
    objective's support terms (Σ (y − s)², Σ s²) by row or part of the rows."""

    YHt: np.ndarray
    sq: np.ndarray


class Step(NamedTuple):
    """A factor's MU step: ``F[i] <- F[i] * (numer[i] + 3 lam F[i]^2) / (F[i] @ G + 2 lam
    F[i]^3 + lam F[i] + eps)`` against the symmetric (k, k) ``G``."""

    F: np.ndarray
    numer: np.ndarray
    G: np.ndarray
    lam: float
    eps: float


# Rows go through the k×k Gram terms four at a time, in register tiles of four rows by two
# vectors of columns: each vector of G (or of a row) is loaded once per eight FMAs.
_R = 4

# Bytes of rows per chunk of the Gram product: 16 KiB stays in L1 beside the tiles' other
# operands. Fewer, longer chunks spread the cost of adding each chunk's tiles into the float64
# sums (at k = 32 float32, 128 rows a chunk made the whole update 1.05× faster than 64).
_CHUNK_BYTES = 16384


#: Widest factor row kept in registers by the Y pass and the scatter: four AVX2 registers.
MAX_REGISTER_BYTES = 4 * VBYTES

#: Parts of equal work that the Y pass's rows are split into, and the rows of its objective
#: sums (``sq``). Numba hands each thread an equal run of a prange's iterations: over rows,
#: the thread with the heavy rows would finish last (rows sorted by degree, as exported data
#: often is, put them all in one thread's run).
Y_PARTS = 64


@njit(cache=True, nogil=True)
def row_parts(indptr, cindptr, parts):
    """Boundaries (``parts + 1`` row indices, fewer for fewer rows) of contiguous row ranges
    of about equal work: each row costs its nonzeros (and unknown cells: ``cindptr``, or None)
    plus one for the row itself. Where rows compute independently, any split gives the same
    bits; this one gives each thread of a prange over the parts an equal share of the work."""
    n = len(indptr) - 1
    parts = max(1, min(parts, n))
    extra = 0 if cindptr is None else cindptr[n] - cindptr[0]
    total = indptr[n] - indptr[0] + extra + n
    bounds = np.empty(parts + 1, dtype=np.int64)
    bounds[0], bounds[parts] = 0, n
    for c in range(1, parts):
        # The first row whose cost before it reaches c/parts of the total (costs only grow).
        target = total * c // parts
        lo, hi = bounds[c - 1], n
        while lo < hi:
            mid = (lo + hi) // 2
            cost = indptr[mid] - indptr[0] + mid
            if cindptr is not None:
                cost += cindptr[mid] - cindptr[0]
            if cost < target:
                lo = mid + 1
            else:
                hi = mid
        bounds[c] = lo
    return bounds


def padded_width(k: int, dtype) -> int:
    """k rounded up to whole vectors of ``dtype``: the width the solver stores its factor rows
    with (the extra columns are zeros, which the kernels never change)."""
    lanes = VBYTES // np.dtype(dtype).itemsize
    return -(-k // lanes) * lanes


def row_width(k: int, dtype) -> Width:
    """The ``width`` argument of :func:`project_spmm` and :func:`scatter_rows` for rows of k
    stored values.

    ``Width(k)`` when a row fits in four registers: the kernels are then compiled for that k,
    with the rows held in registers (with :func:`padded_width` rows that is at most four
    versions per dtype: 1 to 4 registers). Otherwise ``Width(0)``: one version for every
    wider k, with loops.
    """
    return Width(k if k * np.dtype(dtype).itemsize <= MAX_REGISTER_BYTES else 0)


@njit(cache=True, nogil=True, inline="always")
def padded(k, A):
    """k rounded up to whole vectors of A's dtype: the width of the kernels' scratch rows, whose
    extra columns stay zero so that every tile is made of whole vectors."""
    L = lanes(A)
    return (k + L - 1) // L * L


@njit(cache=True, nogil=True, inline="always", fastmath=_FAST)
def _row_tile(A, o, B, l, nq, two, a_transposed):
    """``A[o:o+4] @ B[:nq, l : l + (2 if two else 1) * lanes]`` as register vectors: a sum of
    nq outer products, each row of A broadcast against one or two vectors of a row of B.
    With ``a_transposed`` it is ``A[:nq, o:o+4]ᵀ @ B[...]`` instead."""
    L = lanes(B)
    zero = vsplat(B.dtype.type(0))
    a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = zero
    for q in range(nq):
        g0 = vload(B, q, l)
        if a_transposed:
            x0, x1, x2, x3 = (
                vsplat(A[q, o]),
                vsplat(A[q, o + 1]),
                vsplat(A[q, o + 2]),
                vsplat(A[q, o + 3]),
            )
        else:
            x0, x1, x2, x3 = (
                vsplat(A[o, q]),
                vsplat(A[o + 1, q]),
                vsplat(A[o + 2, q]),
                vsplat(A[o + 3, q]),
            )
        a0, a1, a2, a3 = vfma(x0, g0, a0), vfma(x1, g0, a1), vfma(x2, g0, a2), vfma(x3, g0, a3)
        if two:
            g1 = vload(B, q, l + L)
            b0, b1, b2, b3 = vfma(x0, g1, b0), vfma(x1, g1, b1), vfma(x2, g1, b2), vfma(x3, g1, b3)
    return a0, a1, a2, a3, b0, b1, b2, b3


@njit(cache=True, nogil=True, inline="always", fastmath=_FAST)
def _store_tile(out, l, two, tile):
    """Write a :func:`_row_tile` result to rows 0..3 of ``out`` from column l."""
    L = lanes(out)
    a0, a1, a2, a3, b0, b1, b2, b3 = tile
    vstore(out, 0, l, a0)
    vstore(out, 1, l, a1)
    vstore(out, 2, l, a2)
    vstore(out, 3, l, a3)
    if two:
        vstore(out, 0, l + L, b0)
        vstore(out, 1, l + L, b1)
        vstore(out, 2, l + L, b2)
        vstore(out, 3, l + L, b3)


@njit(cache=True, nogil=True, inline="always")
def subnormal_floor(A):
    """The smallest positive value the updates leave in a factor of A's dtype, √tiny (2⁻⁶³ in
    float32, 2⁻⁵¹¹ in float64): a smaller positive one is raised to it.

    Multiplicative updates shrink the entries headed for 0 by a factor each iteration; without
    a floor they reach the subnormal numbers, on which the CPU computes far slower. The
    product of two entries at the floor is still a normal number. Raised, not set to 0: an
    entry at the floor can grow back when the other factor changes (set to 0, it never could);
    exact zeros stay zero (docs/decisions.md, "A floor for the factors' entries").
    """
    return (
        A.dtype.type(1.0842021724855044e-19)
        if A.itemsize == 4
        else A.dtype.type(1.4916681462400413e-154)
    )


@njit(cache=True, nogil=True, inline="always")
def lifted(v, floor):
    """``v`` raised to ``floor`` (:func:`subnormal_floor`) if it lies in (0, floor)."""
    return floor if 0.0 < v < floor else v


@njit(cache=True, nogil=True, inline="always", fastmath=_FAST)
def _mu_rows(F, k, i0, c, numer, G, lam, eps, rows, o, lin):
    """MU step of columns ``:k`` of rows ``i0 .. i0+c-1`` (c ≤ 4) of F against the symmetric G
    (kp, kp), zero past k. The new rows are written back to F and left in ``rows[o:o+4]`` (kp
    wide), rows past c and columns past k zero.

    ``F[i] <- F[i] * (numer[i] + 3 lam F[i]^2) / (F[i] @ G + 2 lam F[i]^3 + lam F[i] + eps)``;
    ``lam = 0`` is the plain Lee-Seung step. ``F @ G`` is formed up to column k rounded up
    to a whole vector, not over the whole padding of wider rows (zeros). New values in
    (0, :func:`subnormal_floor`) are raised to it.
    """
    kp = padded(k, rows)
    L = lanes(rows)
    floor = subnormal_floor(rows)
    # Rows padded to whole vectors (the solver's) are copied in and out a vector at a time: a
    # value at a time, the copies took a sixth of the update's time (k = 10 float64).
    whole = F.shape[1] >= kp
    vz = vsplat(rows.dtype.type(0))
    for t in range(_R):
        if whole:
            for l in range(0, kp, L):
                vstore(rows, o + t, l, vload(F, i0 + t, l) if t < c else vz)
        else:
            for l in range(k):
                rows[o + t, l] = F[i0 + t, l] if t < c else 0.0
    l = 0
    while l + 2 * L <= kp:
        _store_tile(lin, l, True, _row_tile(rows, o, G, l, k, True, False))
        l += 2 * L
    if l < kp:
        _store_tile(lin, l, False, _row_tile(rows, o, G, l, k, False, False))
    for t in range(c):
        i = i0 + t
        if lam == 0.0:
            # eps in the factors' type: a float64 eps made this a float64 division, converting
            # every value there and back (the whole update 1.1× slower in float32).
            e = rows.dtype.type(eps)
            # Whole vectors written out: LLVM leaves this loop scalar in the serial kernel,
            # where numer, lin and rows might overlap for all it knows (the serial update took
            # 1.45× the parallel one's time on one thread, at k = 10 float64 and k = 32
            # float32). The same operations in the same order: the same bits.
            ve = vsplat(e)
            l = 0
            # Over the padding too where it is zero in numer (the solver's rows) and eps > 0:
            # 0 * 0 / (0 + eps) keeps it zero.
            last = kp if e > 0 and numer.shape[1] >= kp else k
            while l + L <= last:
                v = vdiv(
                    vmul(vload(rows, o + t, l), vload(numer, i, l)), vadd(vload(lin, t, l), ve)
                )
                vstore(rows, o + t, l, vlift(v, floor))
                l += L
            for q in range(l, k):
                v = rows[o + t, q] * numer[i, q] / (lin[t, q] + e)
                rows[o + t, q] = lifted(v, floor)
        else:
            for l in range(k):
                f = rows[o + t, l]
                v = (
                    f
                    * (numer[i, l] + 3.0 * lam * f * f)
                    / (lin[t, l] + 2.0 * lam * f * f * f + lam * f + eps)
                )
                rows[o + t, l] = lifted(v, floor)
        if whole:
            for l in range(0, kp, L):
                vstore(F, i, l, vload(rows, o + t, l))
        else:
            for l in range(k):
                F[i, l] = rows[o + t, l]


@njit(cache=True, nogil=True, inline="always", fastmath=_FAST)
def _accumulate_tile(acc, o, l, L, two, tile):
    """Add a :func:`_row_tile` result (vectors of L values) to rows o..o+3 of the float64
    ``acc``, from column l."""
    a0, a1, a2, a3, b0, b1, b2, b3 = tile
    vaccumulate(acc, o, l, a0)
    vaccumulate(acc, o + 1, l, a1)
    vaccumulate(acc, o + 2, l, a2)
    vaccumulate(acc, o + 3, l, a3)
    if two:
        vaccumulate(acc, o, l + L, b0)
        vaccumulate(acc, o + 1, l + L, b1)
        vaccumulate(acc, o + 2, l + L, b2)
        vaccumulate(acc, o + 3, l + L, b3)


@njit(cache=True, nogil=True, inline="always", fastmath=_FAST)
def _gram_flush(acc, chunk, cnt, k):
    """``acc += chunk[:cnt]ᵀ chunk[:cnt]`` on and above the diagonal (``acc`` (kp, kp) float64,
    ``chunk`` (rows, kp) zero past k), up to row k and column k rounded up to a whole vector: the
    scratch may be wider (the stored rows' padding), and its zeros are skipped.

    Tiles of four rows of the Gram by two vectors of columns, summed over the chunk's rows in
    registers (in the factors' dtype), then widened and added to ``acc`` a vector at a time.
    Tiles start at the vector holding the diagonal, so only about half the matrix is formed.
    """
    kp = padded(k, chunk)
    L = lanes(chunk)
    # Rows q0..q0+3 of the Gram, columns l..: (chunk[:cnt, q0:q0+4])ᵀ chunk[:cnt, l:...].
    for q0 in range(0, k, _R):
        l = q0 // L * L
        while l + 2 * L <= kp:
            _accumulate_tile(acc, q0, l, L, True, _row_tile(chunk, q0, chunk, l, cnt, True, True))
            l += 2 * L
        if l < kp:
            _accumulate_tile(acc, q0, l, L, False, _row_tile(chunk, q0, chunk, l, cnt, False, True))


@njit(cache=True, nogil=True, inline="always")
def _padded_gram(G, F, kp):
    """G (k, k) as F's dtype, zero-padded to (kp, kp)."""
    k = G.shape[0]
    Gp = np.zeros((kp, kp), dtype=F.dtype)
    for q in range(k):
        for l in range(k):
            Gp[q, l] = G[q, l]
    return Gp


@njit(cache=True, nogil=True, fastmath=_FAST)
def _update_block(F, k, numer, Gp, lam, eps, gram, lo, hi):
    """Rows lo..hi-1 of the W (or H) step, and FᵀF of the block into ``gram``."""
    kp = Gp.shape[0]
    chunk_rows = max(_R, _CHUNK_BYTES // (kp * F.itemsize) // _R * _R)
    chunk = np.zeros((chunk_rows, kp), dtype=F.dtype)
    lin = np.empty((_R, kp), dtype=F.dtype)
    acc = np.zeros((kp, kp), dtype=np.float64)
    cnt = 0
    for i0 in range(lo, hi, _R):
        c = min(_R, hi - i0)
        _mu_rows(F, k, i0, c, numer, Gp, lam, eps, chunk, cnt, lin)
        cnt += _R
        if cnt + _R > chunk.shape[0] or i0 + c >= hi:
            _gram_flush(acc, chunk, cnt, k)
            cnt = 0
    # The upper triangle, mirrored.
    for q in range(k):
        for l in range(q, k):
            gram[q, l] = gram[l, q] = acc[q, l]


@njit(cache=True, nogil=True, inline="always")
def _sum_blocks(blocks, out, lo, hi):
    """Rows lo..hi-1 of ``out`` = the sum of ``blocks`` (b, r, w) over b, added in block
    order: the same bits whichever rows a thread takes."""
    for j in range(lo, hi):
        for l in range(out.shape[1]):
            out[j, l] = blocks[0, j, l]
        for b in range(1, blocks.shape[0]):
            for l in range(out.shape[1]):
                out[j, l] += blocks[b, j, l]


# On one thread the parallel variant: the serial one, the same bits, took 1.36× its time at
# k = 10 float64 and 1.10× at k = 32 float32 (10⁵ rows; where the difference lies was not found:
# not in one loop of the body, nor the arguments' aliasing).
@kernel(fastmath=_FAST, one_thread="parallel")
def update_rows(F, numer, G, lam, eps, gram_blocks, numer_blocks):
    """In-place MU step of every row of F against the symmetric (k, k) G; ``gram_blocks``
    (b, k, k) receives FᵀF by block.

    F and numer are (r, k) or zero-padded to more columns (the solver's :func:`padded_width`):
    only the first k columns are computed, the others stay as they are. Row i belongs to block
    ``i * b // r``. With ``numer_blocks`` (c, r, numer's width), each block first sets its rows
    of ``numer`` to their sum over c, in order (as :func:`scatter_rows` adds its blocks): the
    H step then needs no parallel call of its own for that sum. ``numer_blocks`` is None
    otherwise, passed rather than left out: an argument left out is another type to Numba,
    and so another compilation of the same code.
    """
    r = F.shape[0]
    nb = gram_blocks.shape[0]
    Gp = _padded_gram(G, F, padded(F.shape[1], F))
    for b in prange(nb):
        lo, hi = b * r // nb, (b + 1) * r // nb
        if numer_blocks is not None:  # (None: compiled out)
            _sum_blocks(numer_blocks, numer, lo, hi)
        _update_block(F, G.shape[0], numer, Gp, lam, eps, gram_blocks[b], lo, hi)


def scatter_rows(width: Width) -> Kernel:
    """The scatter ``out = Yᵀ W`` = (Wᵀ Y)ᵀ, (m, k), for rows of ``width`` (:func:`row_width`
    of k), by way of the block sums ``scatter_blocks[b] = (Y_b)ᵀ W_b``.

    Both kernels take ``(X, y, cells, W, scatter_blocks, out, width)``: the nonzeros
    (:class:`~.sparse.Sparse` ``X``) with their values ``y``, then the unknown cells
    (:class:`Cells`, with Y's values there; None when every cell is observed, which compiles
    that part out) summed the same way in the same pass. Row i belongs to block ``i * b //
    n``; the blocks are added in block order, the same on any number of threads.
    """
    return _scatter_rows_registers if width.lanes > 0 else _scatter_rows_loops


def update_scatter_rows(width: Width) -> Kernel:
    """The W step's row update (:func:`update_rows`) and the block sums of its scatter
    (:func:`scatter_rows`, without adding them up) in one parallel call: each block of rows is
    updated, then scattered into its own partial, by the same thread.

    Both kernels take ``(step, gram_blocks, X, y, cells, scatter_blocks, width)``: the
    :class:`Step` of W (the arguments of :func:`update_rows` before ``gram_blocks``), then
    those of :func:`scatter_rows` but ``W`` and ``out``; ``gram_blocks`` and
    ``scatter_blocks`` with the same number of blocks; the results are those of the two
    kernels to the bit. Each parallel call wakes the sleeping threads up (banmf's OpenMP threads wait passively; see
    :mod:`banmf.runtime.threads`), about 0.1 ms on a 2-core virtual machine: one call fewer here and
    one in the H step (``numer_blocks`` of :func:`update_rows`). For several threads only: on
    one, the update's and the scatter's own best variants are apart.
    """
    return _update_scatter_registers if width.lanes > 0 else _update_scatter_loops


@njit(cache=True, nogil=True, fastmath=_FAST)
def _scatter_block_registers(X, y, cells, W, part, lo, hi, width):
    """Rows lo..hi-1's share of the scatter into ``part``, the row of W in registers."""
    indptr, indices = X
    part[:, :] = 0.0
    pf = worth_prefetching(part, SCATTER_MIN_BYTES)
    for i in range(lo, hi):
        w = vloadw(W, i, 0, width)
        p, p1 = indptr[i], indptr[i + 1]
        # Two nonzeros at a time, both rows of the partial loaded before either is stored
        # (a row's columns are distinct): 1.2× over one at a time.
        while p + 1 < p1:
            if pf:
                prefetch_ahead(part, indices, p, 2, True, width.lanes, FAR_AHEAD)
            j0, j1 = indices[np.uintp(p)], indices[np.uintp(p + 1)]
            a0, a1 = vloadw(part, j0, 0, width), vloadw(part, j1, 0, width)
            vstore(part, j0, 0, vfma(vsplatw(y[np.uintp(p)], width), w, a0))
            vstore(part, j1, 0, vfma(vsplatw(y[np.uintp(p + 1)], width), w, a1))
            p += 2
        if p < p1:
            j = indices[np.uintp(p)]
            vstore(part, j, 0, vfma(vsplatw(y[np.uintp(p)], width), w, vloadw(part, j, 0, width)))
        if cells is not None:  # (None: no unknown cells, compiled out)
            cindptr, cindices, cy = cells
            for c in range(cindptr[i], cindptr[i + 1]):
                j = cindices[c]
                vstore(part, j, 0, vfma(vsplatw(cy[c], width), w, vloadw(part, j, 0, width)))


@njit(cache=True, nogil=True, fastmath=_FAST)
def _scatter_block_loops(X, y, cells, W, part, lo, hi):
    """Rows lo..hi-1's share of the scatter into ``part``, loops over a run-time k."""
    indptr, indices = X
    k = part.shape[1]
    part[:, :] = 0.0
    pf = worth_prefetching(part, SCATTER_MIN_BYTES)
    for i in range(lo, hi):
        for p in range(indptr[i], indptr[i + 1]):
            if pf:
                prefetch_ahead(part, indices, p, 1, True, k, FAR_AHEAD)
            j, v = indices[np.uintp(p)], y[np.uintp(p)]
            for l in range(k):
                part[j, l] += v * W[i, l]
        if cells is not None:  # (None: no unknown cells, compiled out)
            cindptr, cindices, cy = cells
            for c in range(cindptr[i], cindptr[i + 1]):
                j, v = cindices[c], cy[c]
                for l in range(k):
                    part[j, l] += v * W[i, l]


@kernel(fastmath=_FAST)
def _scatter_rows_registers(X, y, cells, W, scatter_blocks, out, width):
    """The scatter (:func:`scatter_rows`) with the row of W held in registers (``width.lanes``
    values) across the row's nonzeros: each nonzero then costs one load, FMA and store per
    vector of the partial.

    Its own kernel, as the Y pass's: with the loops for wide rows in the same body, or vectors
    over a run-time k instead of them, it runs slower (docs/devices.md). The rows of the partial it will update are asked for
    ahead only where the partials are beyond the caches (:data:`~.prefetch.SCATTER_MIN_BYTES`;
    docs/decisions.md, "Prefetching"). The variants not kept are in docs/decisions.md, "The
    kernels' other variants".
    """
    n = W.shape[0]
    nb = scatter_blocks.shape[0]
    for b in prange(nb):
        _scatter_block_registers(
            X, y, cells, W, scatter_blocks[b], b * n // nb, (b + 1) * n // nb, width
        )
    # Summed here rather than by numpy: in parallel, and without another pass over ``out``.
    for j in prange(out.shape[0]):
        _sum_blocks(scatter_blocks, out, j, j + 1)


@kernel(fastmath=_FAST)
def _scatter_rows_loops(X, y, cells, W, scatter_blocks, out, width):
    """The scatter (:func:`scatter_rows`) with loops over a run-time k (any k; ``width`` is
    unused): for rows too wide for registers, plain loops ran 3× faster than vectors over a
    run-time k (bench_devices.py). The partial's rows are asked for ahead where the partials
    are past the caches, as in :func:`_scatter_rows_registers` (docs/decisions.md,
    "Prefetching")."""
    n = W.shape[0]
    nb = scatter_blocks.shape[0]
    for b in prange(nb):
        _scatter_block_loops(X, y, cells, W, scatter_blocks[b], b * n // nb, (b + 1) * n // nb)
    for j in prange(out.shape[0]):
        _sum_blocks(scatter_blocks, out, j, j + 1)


@kernel()
def sum_blocks(blocks, out):
    """``out`` = ``blocks`` (b, r, w) summed over b in block order, as :func:`scatter_rows`
    adds its partials: the sum of :func:`update_scatter_rows`' partials where it is wanted
    alone."""
    for j in prange(out.shape[0]):
        _sum_blocks(blocks, out, j, j + 1)


@kernel(fastmath=_FAST)
def _update_scatter_registers(step, gram_blocks, X, y, cells, scatter_blocks, width):
    """:func:`update_scatter_rows` with the scatter's row of W in registers."""
    F, numer, G, lam, eps = step
    r = F.shape[0]
    nb = gram_blocks.shape[0]
    Gp = _padded_gram(G, F, padded(F.shape[1], F))
    for b in prange(nb):
        lo, hi = b * r // nb, (b + 1) * r // nb
        _update_block(F, G.shape[0], numer, Gp, lam, eps, gram_blocks[b], lo, hi)
        _scatter_block_registers(X, y, cells, F, scatter_blocks[b], lo, hi, width)


@kernel(fastmath=_FAST)
def _update_scatter_loops(step, gram_blocks, X, y, cells, scatter_blocks, width):
    """:func:`update_scatter_rows` with the scatter's loops over a run-time k."""
    F, numer, G, lam, eps = step
    r = F.shape[0]
    nb = gram_blocks.shape[0]
    Gp = _padded_gram(G, F, padded(F.shape[1], F))
    for b in prange(nb):
        lo, hi = b * r // nb, (b + 1) * r // nb
        _update_block(F, G.shape[0], numer, Gp, lam, eps, gram_blocks[b], lo, hi)
        _scatter_block_loops(X, y, cells, F, scatter_blocks[b], lo, hi)


# Plain IEEE arithmetic, and not inlined by Numba into the fastmath kernels (whose flags
# inlined code takes): contracted or reassociated, the objective's sums came out differently
# in a kernel's serial and parallel variants, and the loss with them depended on the threads.
@njit(cache=True, nogil=True)
def _plus_squares(res, s2, v, s):
    """A row's objective sums with one more nonzero (Y value ``v``, W H value ``s``):
    ``res + (v - s)²`` and ``s2 + s²``."""
    d = v - s
    return res + d * d, s2 + s * s


@njit(cache=True, nogil=True, inline="always")
def _project4(y, p, project, lo, up, s0, s1, s2, s3):
    """Y at nonzeros p..p+3 from their W H values s: projected onto [lo, up] and stored
    (BANMF), or read (Y fixed). Returns the four values."""
    if project:
        v0, v1, v2, v3 = (
            min(up, max(lo, s0)),
            min(up, max(lo, s1)),
            min(up, max(lo, s2)),
            min(up, max(lo, s3)),
        )
        y[np.uintp(p)] = v0
        y[np.uintp(p + 1)] = v1
        y[np.uintp(p + 2)] = v2
        y[np.uintp(p + 3)] = v3
    else:
        v0, v1, v2, v3 = y[np.uintp(p)], y[np.uintp(p + 1)], y[np.uintp(p + 2)], y[np.uintp(p + 3)]
    return v0, v1, v2, v3


@njit(cache=True, nogil=True, inline="always")
def _project2(y, p, project, lo, up, s0, s1):
    """:func:`_project4` for two nonzeros."""
    if project:
        v0, v1 = min(up, max(lo, s0)), min(up, max(lo, s1))
        y[np.uintp(p)] = v0
        y[np.uintp(p + 1)] = v1
    else:
        v0, v1 = y[np.uintp(p)], y[np.uintp(p + 1)]
    return v0, v1


@njit(cache=True, nogil=True, inline="always")
def _project1(y, p, project, lo, up, s):
    """:func:`_project4` for one nonzero."""
    if project:
        v = min(up, max(lo, s))
        y[np.uintp(p)] = v
    else:
        v = y[np.uintp(p)]
    return v


def project_spmm(width: Width) -> Kernel:
    """The Y pass for rows of ``width`` (:func:`row_width` of k): fused Y-projection (SDDMM)
    and ``Y @ Ht`` over the nonzeros, row by row, with rows in registers or loops over k.

    Both kernels take ``(X, y, factors, out, cells, lower, upper, project, width)``: the
    nonzeros (:class:`~.sparse.Sparse` ``X``) with Y's values ``y``, the :class:`Factors`,
    the :class:`YSums` ``out`` (``YHt``, ``sq``) and the :class:`Cells`. For every stored nonzero p = (i, j): ``s = W[i] . Ht[j]``; if
    ``project``, ``y[p]`` becomes ``min(upper, max(lower, s))`` (otherwise ``y`` is only read).
    Then ``YHt[i] = sum_p y[p] Ht[j]``, and the two support terms of the objective,
    ``(sum_p (y[p] - s)^2, sum_p s^2)``, go to ``sq`` (:data:`Y_PARTS`, 2) summed over each part
    of the rows (:func:`row_parts`, in row order; rows past the parts zero): their sums over
    ``sq``'s rows are the objective's terms, the same bits on any number of threads. Every
    unknown cell c = (i, j) of ``cells`` (None when every cell is observed, which compiles that
    part out) takes ``cells.y[c] = s`` (Y is free there) and
    enters ``YHt[i]`` and the second sum as a nonzero does, in the same pass.
    """
    return _project_spmm_registers if width.lanes > 0 else _project_spmm_loops


@njit(cache=True, nogil=True, fastmath=_FAST)
def _project_rows_registers(X, y, factors, YHt, cells, lo, up, project, width, pf, lo_row, hi_row):
    """Rows ``lo_row .. hi_row-1`` of :func:`_project_spmm_registers`; returns their two
    objective sums."""
    indptr, indices = X
    W, Ht = factors
    zero = W.dtype.type(0)
    res = 0.0
    s2 = 0.0
    for i in range(lo_row, hi_row):
        vz = vsplatw(zero, width)
        p, hi = indptr[i], indptr[i + 1]
        # The rows of W and of Y Hᵀ stay in registers across the row's nonzeros, and each row
        # of Hᵀ is loaded once for both its uses. Two nonzeros at a time: with four, the rows
        # in flight overflow the sixteen AVX2 registers at k = 32 float32 (1.1× slower).
        w, acc = vloadw(W, i, 0, width), vz
        while p + 1 < hi:
            if pf:
                prefetch_ahead(Ht, indices, p, 2, False, width.lanes)
            h0, h1 = (
                vloadw(Ht, indices[np.uintp(p)], 0, width),
                vloadw(Ht, indices[np.uintp(p + 1)], 0, width),
            )
            d0, d1 = vdot_partial(w, h0), vdot_partial(w, h1)
            s0, s1, _, _ = hsum4(d0, d1, d0, d1)
            v0, v1 = _project2(y, p, project, lo, up, s0, s1)
            res, s2 = _plus_squares(res, s2, v0, s0)
            res, s2 = _plus_squares(res, s2, v1, s1)
            acc = vfma(vsplatw(v0, width), h0, vfma(vsplatw(v1, width), h1, acc))
            p += 2
        if p < hi:
            h0 = vloadw(Ht, indices[np.uintp(p)], 0, width)
            d0 = vdot_partial(w, h0)
            s = hsum4(d0, d0, d0, d0)[0]
            v = _project1(y, p, project, lo, up, s)
            res, s2 = _plus_squares(res, s2, v, s)
            acc = vfma(vsplatw(v, width), h0, acc)
        if cells is not None:  # (None: no unknown cells, compiled out)
            cindptr, cindices, cy = cells
            for c in range(cindptr[i], cindptr[i + 1]):
                h0 = vloadw(Ht, cindices[c], 0, width)
                d0 = vdot_partial(w, h0)
                s = hsum4(d0, d0, d0, d0)[0]
                cy[c] = s
                res, s2 = _plus_squares(res, s2, s, s)  # (v = s: adds only s²)
                acc = vfma(vsplatw(s, width), h0, acc)
        vstore(YHt, i, 0, acc)
    return res, s2


@kernel(fastmath=_FAST)
def _project_spmm_registers(X, y, factors, out, cells, lower, upper, project, width):
    """The Y pass (:func:`project_spmm`) with rows of ``width.lanes`` values held in registers."""
    indptr = X.indptr
    W, Ht = factors
    YHt, sq = out
    pf = worth_prefetching(Ht)
    # Sums run in the factors' own type: float32 inputs get float32 arithmetic (twice the
    # vector width); the objective terms stay float64.
    lo, up = W.dtype.type(lower), W.dtype.type(upper)
    if cells is None:  # (tested on the argument, so that one branch is compiled)
        bounds = row_parts(indptr, None, Y_PARTS)
    else:
        bounds = row_parts(indptr, cells.indptr, Y_PARTS)
    parts = len(bounds) - 1
    sq[parts:, :] = 0.0
    for part in prange(parts):
        # The objective's sums run over the part's rows in order, and a part's pair is stored:
        # Y_PARTS pairs to add up after the pass instead of one per row.
        sq[part, 0], sq[part, 1] = _project_rows_registers(
            X, y, factors, YHt, cells, lo, up, project, width, pf, bounds[part], bounds[part + 1]
        )


@njit(cache=True, nogil=True, fastmath=_FAST)
def _project_rows_loops(X, y, factors, YHt, cells, lo, up, project, pf, lo_row, hi_row):
    """Rows ``lo_row .. hi_row-1`` of :func:`_project_spmm_loops` (summed over the part's rows,
    as in :func:`_project_rows_registers`); returns their two objective sums."""
    indptr, indices = X
    W, Ht = factors
    k = W.shape[1]
    zero = W.dtype.type(0)
    res = 0.0
    s2 = 0.0
    for i in range(lo_row, hi_row):
        p, hi = indptr[i], indptr[i + 1]
        for l in range(k):
            YHt[i, l] = 0.0
        # Four nonzeros at a time: four independent dot products hide each one's reduction
        # latency, and Y Hᵀ's row is read and written once per four (1.3-1.7× over one).
        while p + 3 < hi:
            if pf:
                prefetch_ahead(Ht, indices, p, 4, False, k, FAR_AHEAD)
            j0, j1, j2, j3 = (
                indices[np.uintp(p)],
                indices[np.uintp(p + 1)],
                indices[np.uintp(p + 2)],
                indices[np.uintp(p + 3)],
            )
            s0 = s1 = s2_ = s3 = zero
            for l in range(k):
                wl = W[i, l]
                s0 += wl * Ht[j0, l]
                s1 += wl * Ht[j1, l]
                s2_ += wl * Ht[j2, l]
                s3 += wl * Ht[j3, l]
            v0, v1, v2, v3 = _project4(y, p, project, lo, up, s0, s1, s2_, s3)
            res, s2 = _plus_squares(res, s2, v0, s0)
            res, s2 = _plus_squares(res, s2, v1, s1)
            res, s2 = _plus_squares(res, s2, v2, s2_)
            res, s2 = _plus_squares(res, s2, v3, s3)
            for l in range(k):
                YHt[i, l] += v0 * Ht[j0, l] + v1 * Ht[j1, l] + v2 * Ht[j2, l] + v3 * Ht[j3, l]
            p += 4
        while p < hi:
            j = indices[np.uintp(p)]
            s = zero
            for l in range(k):
                s += W[i, l] * Ht[j, l]
            v = _project1(y, p, project, lo, up, s)
            res, s2 = _plus_squares(res, s2, v, s)
            for l in range(k):
                YHt[i, l] += v * Ht[j, l]
            p += 1
        if cells is not None:  # (None: no unknown cells, compiled out)
            cindptr, cindices, cy = cells
            for c in range(cindptr[i], cindptr[i + 1]):
                j = cindices[c]
                s = zero
                for l in range(k):
                    s += W[i, l] * Ht[j, l]
                cy[c] = s
                res, s2 = _plus_squares(res, s2, s, s)  # (v = s: adds only s²)
                for l in range(k):
                    YHt[i, l] += s * Ht[j, l]
    return res, s2


@kernel(fastmath=_FAST)
def _project_spmm_loops(X, y, factors, out, cells, lower, upper, project, width):
    """The Y pass (:func:`project_spmm`) with loops over k (any k; ``width`` is unused). The
    rows of Hᵀ are asked for :data:`~.prefetch.FAR_AHEAD` nonzeros ahead where Hᵀ is past L2
    (docs/decisions.md, "Prefetching")."""
    indptr = X.indptr
    W, Ht = factors
    YHt, sq = out
    pf = worth_prefetching(Ht)
    lo, up = W.dtype.type(lower), W.dtype.type(upper)
    if cells is None:  # (tested on the argument, so that one branch is compiled)
        bounds = row_parts(indptr, None, Y_PARTS)
    else:
        bounds = row_parts(indptr, cells.indptr, Y_PARTS)
    parts = len(bounds) - 1
    sq[parts:, :] = 0.0
    for part in prange(parts):
        sq[part, 0], sq[part, 1] = _project_rows_loops(
            X, y, factors, YHt, cells, lo, up, project, pf, bounds[part], bounds[part + 1]
        )


# -- unknown cells --------------------------------------------------------------------------


@kernel(fastmath=_FAST)
def add_unobserved(out, observed_part, F, G, k):
    """``out[i, :k] += max(F[i] @ G − observed_part[i], 0)`` for every row: with few cells
    observed, the part of a numerator that Y's unobserved cells (Y = WH there) contribute is
    ``F G`` less its part on the observed cells (:class:`banmf.engine.iterations.MUSolver`); >= 0
    but for rounding. ``G`` is (k, k); rows are independent, so serial and parallel agree."""
    n = out.shape[0]
    nb = min(n, 64)
    zero = F.dtype.type(0)
    for b in prange(nb):
        row = np.empty(k, dtype=F.dtype)
        for i in range(b * n // nb, (b + 1) * n // nb):
            # Row times G a row of G at a time: unit-stride inner loops that vectorize.
            for l in range(k):
                row[l] = zero
            for q in range(k):
                f = F[i, q]
                for l in range(k):
                    row[l] += f * G[q, l]
            for l in range(k):
                out[i, l] += max(row[l] - observed_part[i, l], zero)


# Plain IEEE arithmetic: with FMA contraction LLVM contracts the serial and the parallel
# variant's loops differently, and the sums would then depend on the thread count.
@kernel()
def cross_gram(A, B, k, blocks):
    """``A[:, :k]ᵀ B[:, :k]`` (k, k) in float64, summed over row blocks: ``blocks`` (b, k, k)
    receives each block's sum (row i in block ``i * b // n``), added up in block order after, so
    the result is the same on any number of threads."""
    n = A.shape[0]
    nb = blocks.shape[0]
    for b in prange(nb):
        part = blocks[b]
        part[:, :] = 0.0
        for i in range(b * n // nb, (b + 1) * n // nb):
            for q in range(k):
                a = np.float64(A[i, q])
                for l in range(k):
                    part[q, l] += a * B[i, l]
    out = np.zeros((k, k), dtype=np.float64)
    for b in range(nb):
        out += blocks[b]
    return out
