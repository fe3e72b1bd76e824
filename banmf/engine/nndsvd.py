"""NNDSVD starting factors (Boutsidis & Gallopoulos 2008): the rank-one part of each singular
pair that a factor keeps (:func:`nonnegative_part`), and the one-machine factors from a sparse
truncated SVD (:func:`nndsvda`): ARPACK's on small data, a randomized one on large
(:func:`use_randomized`).

The randomized SVD is written once, :func:`subspace_svd`, over X's two products and two
:class:`Side` objects that hold its blocks of X's rows' and columns' length: :class:`Here`
(arrays in this process) for both on one machine (:func:`randomized_svd`); the Dask backend
keeps the rows' blocks on its row blocks. Every backend takes the same rule, sketch and seed,
so their starts agree to rounding."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, svds

from .._kernels.mu import cross_gram
from .._kernels.svd import fill_at_most, mask_times, rows_times, scaled_column, signed_parts
from ..data.masks import transpose_mask
from ..runtime.threads import pick, serial_blas
from .protocol import Side

#: Nonzeros from which the NNDSVD's SVD is the randomized one, not ARPACK's
#: (:func:`use_randomized`): above it ARPACK's serial steps cost more than the randomized SVD's
#: parallel passes, and below it the fits keep ARPACK's exact pairs (docs/decisions.md, "The
#: randomized SVD").
RANDOMIZED_MIN_NNZ = 2_000_000

# The randomized SVD's sketch: k + _OVERSAMPLES columns, _POWER_ITERATIONS passes of XᵀX.
_OVERSAMPLES = 10
_POWER_ITERATIONS = 4
# Its fixed seed: the factors depend on X and k only, as ARPACK's with its fixed start vector.
_SEED = 0


def nonnegative_part(na_p: float, na_n: float, y: np.ndarray, s: float):
    """The factor NNDSVD makes of one singular triplet (x, y, s), from the norms of x's
    positive and negative parts (``na_p``, ``na_n``: summed over row blocks where x lives) and
    y whole: ``(positive, b, na, nb, scale)`` — whether x's positive part is kept, y's part
    ``b`` kept with it, the two parts' norms and the scale, so that the factor is
    ``scale * x_part / na`` and ``scale * b / nb`` — or None when both products are 0.

    The pair of parts with the larger product of norms is kept: the nonnegative rank-one term
    closest to s·x·yᵀ (the leading pair, nonnegative up to sign, is used whole)."""
    yp, yn = np.maximum(y, 0), np.maximum(-y, 0)
    nb_p, nb_n = np.linalg.norm(yp), np.linalg.norm(yn)
    positive, negative = na_p * nb_p, na_n * nb_n
    if positive >= negative:
        side, b, na, nb, sigma = True, yp, na_p, nb_p, positive
    else:
        side, b, na, nb, sigma = False, yn, na_n, nb_n, negative
    if not sigma > 0:
        return None
    return side, b, na, nb, np.sqrt(max(s, 0.0) * sigma)


def use_randomized(nnz: int) -> bool:
    """Whether the NNDSVD of a matrix of ``nnz`` nonzeros (the whole matrix's, on any backend)
    takes the randomized SVD (:func:`subspace_svd`) rather than ARPACK's: from
    :data:`RANDOMIZED_MIN_NNZ` on, read at each call."""
    return nnz >= RANDOMIZED_MIN_NNZ


class Here:
    """:class:`Side` of arrays in this process (both sides on one machine; a Dask driver's
    columns): C-ordered float64 arrays, the products by Numba kernels."""

    @staticmethod
    def put(Y: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(Y, dtype=np.float64)

    @staticmethod
    def gram(Y: np.ndarray) -> np.ndarray:
        """YᵀY (c, c), summed over four fixed blocks of rows (the same on any threads)."""
        c = Y.shape[1]
        blocks = np.empty((min(4, max(1, Y.shape[0])), c, c))
        return pick(cross_gram, Y.size * c)(Y, Y, c, blocks)

    @staticmethod
    def times(Y: np.ndarray, M: np.ndarray) -> np.ndarray:
        """Y M by :func:`banmf._kernels.svd.rows_times` (not numpy's BLAS, whose idle threads
        spin after a call: see there)."""
        out = np.empty((Y.shape[0], M.shape[1]))
        pick(rows_times, Y.size * M.shape[1])(Y, np.ascontiguousarray(M), out)
        return out


def mask_product(A, B: np.ndarray, single: bool = False) -> np.ndarray:
    """A B for the CSR mask A and the block B (m, c), by
    :func:`banmf._kernels.svd.mask_times`: parallel, each row summed in float64 in its stored
    order (as scipy's product), so the same bits on any number of threads.

    B is read as float32 where it is float32, else as float64, and the product is float64;
    with ``single``, B is read as float32 (rounded to it first) and the product rounded to
    float32 too. Each nonzero reads a row of B at random, so halving B's bytes speeds the
    product where B is beyond the caches (:func:`subspace_svd`'s power iterations)."""
    wide = not single and B.dtype != np.float32
    B = np.ascontiguousarray(B, dtype=np.float64 if wide else np.float32)
    out = np.empty((A.shape[0], B.shape[1]), dtype=np.float32 if single else np.float64)
    pick(mask_times, A.nnz * B.shape[1])(A.indptr, A.indices, B, out)
    return out


def subspace_svd(
    shape: tuple[int, int],
    r: int,
    rows: Side,
    cols: Side,
    x_times: Callable,
    xt_times: Callable,
    *,
    oversamples: int = _OVERSAMPLES,
    power_iterations: int = _POWER_ITERATIONS,
    seed: int = _SEED,
) -> tuple:
    """The r leading singular triplets of the 0/1 matrix X of ``shape`` (n, m), S descending,
    by a randomized subspace iteration (Halko, Martinsson & Tropp 2011, algorithms 4.4 and
    5.1), given X's two products: returns ``U`` (a block of ``rows``, n × r), ``S`` (r,) and
    ``V`` (a block of ``cols``, m × r).

    ``x_times(C, single=False)`` is the block of ``rows`` X C for a block C of ``cols``;
    ``xt_times(R, single=False)`` the block of ``cols`` Xᵀ R for a block R of ``rows``; each
    sums in float64, and with ``single`` reads its input and gives its product in float32
    (:func:`mask_product`); a float32 input is read as such. Every backend runs this one
    function (:func:`randomized_svd` on one machine, the Dask backend over its row blocks):
    the same sketch and steps, so the triplets agree to the rounding of the products' sums
    (to about 10⁻⁸ where the sketch is on the Dask row blocks: there the float32 rounding
    below follows sums over the blocks, whose last bits differ from one machine's).

    A Gaussian block of ``l = min(r + oversamples, min(n, m))`` columns on X's shorter side
    (drawn from ``seed``) goes ``power_iterations`` times through XᵀX (or XXᵀ),
    orthonormalised after each (:func:`_orthonormal`); the Rayleigh–Ritz step on that basis
    gives the triplets. That is 2 q + 1 products, and the orthonormalisations touch the
    shorter side only. The power iterations' first products (l columns on X's longer side,
    the largest block) are read and kept in float32: the second product, which gathers their
    rows at random, reads half the bytes (0.64× the pair's time at 10⁸ nonzeros). That
    rounding moves the basis by about 10⁻⁷ of σ₁² per pass, only along directions X has (far
    below the σ² of the directions kept), and the Rayleigh–Ritz products are float64: the
    triplets keep the full precision of the basis's span. With l = min(n, m) the basis is
    the whole space and the triplets are exact to rounding.

    The basis is orthonormalised from Gram matrices of XᵀX's products (σ⁴ to rounding), so
    directions of σ below about ``(l eps)^(1/4) σ₁ ≈ 10⁻⁴ σ₁`` may be lost (returned as
    σ = 0; their share of X is below 10⁻⁸ of it); the singular vector on X's longer side of a
    σ below ``1e-6 σ₁`` is returned as 0 (no factor of NNDSVD is made of it).
    """
    n, m = shape
    # The sketch and its basis on the shorter side; A is the taller of X and Xᵀ.
    if n >= m:
        short, long, a_times, at_times = cols, rows, x_times, xt_times
    else:
        short, long, a_times, at_times = rows, cols, xt_times, x_times
    size = min(n, m)
    rng = np.random.default_rng(seed)
    Q = _orthonormal(short, short.put(rng.standard_normal((size, min(r + oversamples, size)))))
    for _ in range(power_iterations):
        Q = _orthonormal(short, at_times(a_times(Q, single=True)))
    Z = a_times(Q)
    # Rayleigh–Ritz: A ≈ Z Qᵀ, and Z = U S Eᵀ with E the eigenvectors of ZᵀZ. Where A's rank
    # is below r the basis lost the rest: they are σ = 0, their vectors 0 (E's zero columns).
    lam, vectors = np.linalg.eigh(long.gram(Z))
    top = np.argsort(-lam, kind="stable")[:r]
    S, E = np.zeros(r), np.zeros((len(lam), r))
    S[: len(top)], E[:, : len(top)] = np.sqrt(np.maximum(lam[top], 0.0)), vectors[:, top]
    keep = S > 1e-6 * max(S.max(initial=0), np.finfo(float).tiny)
    V = short.times(Q, E)
    U = long.times(Z, E * np.divide(1.0, S, out=np.zeros_like(S), where=keep))
    return (U, S, V) if n >= m else (V, S, U)


def randomized_svd(
    X,
    r: int,
    Xt=None,
    *,
    oversamples: int = _OVERSAMPLES,
    power_iterations: int = _POWER_ITERATIONS,
    seed: int = _SEED,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The r leading singular triplets ``U`` (n, r), ``S`` (r,), ``Vt`` (r, m) of the 0/1
    matrix X (canonical CSR mask), S in descending order: :func:`subspace_svd` in this
    process.

    Each of its passes over X is one sparse-times-block product of l columns
    (:func:`mask_product`, on X's rows or on ``Xt``'s, X's transpose as a CSR mask, built
    here when None): parallel, each output row summed in its stored order, so the same bits
    on any number of threads. ``seed`` fixes the Gaussian block: the result depends on X, r
    and the three parameters only.
    """
    if Xt is None:
        Xt = transpose_mask(X)
    U, S, V = subspace_svd(
        X.shape,
        r,
        Here,
        Here,
        lambda C, single=False: mask_product(X, C, single),
        lambda R, single=False: mask_product(Xt, R, single),
        oversamples=oversamples,
        power_iterations=power_iterations,
        seed=seed,
    )
    return U, S, V.T


def _orthonormal(side: Side, Y):
    """An orthonormal basis of the span of the block Y's columns (l of them, fewer where Y's
    rank is lower), on its ``side``: twice, the columns times the eigenvectors of the Gram
    matrix scaled by its eigenvalues' inverse square roots ("SVQB", Stathopoulos & Wu 2002),
    directions whose eigenvalue is at rounding level (below ``l·eps`` of the largest)
    dropped. The first pass leaves columns orthogonal to about ``eps`` times the Gram's
    condition, the second to rounding. Only l×l problems go to LAPACK (not numpy's QR: see
    :meth:`Here.times`), and on Dask the Gram is a sum over the row blocks."""
    tiny = np.finfo(float).tiny
    for _ in range(2):
        lam, E = np.linalg.eigh(side.gram(Y))
        keep = lam > len(lam) * np.finfo(float).eps * max(lam.max(initial=0), tiny)
        Y = side.times(Y, E[:, keep] / np.sqrt(lam[keep]))
    return Y


def nndsvda(data, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Nonnegative starting factors W (n, k), Ht (m, k) from the k leading singular triplets
    of the support mask X of ``data`` (a :class:`banmf.Dataset`: its observed ones), with
    zeros (to rounding) set to the mean of X ("NNDSVDa"), or None when the SVD cannot be
    computed (fewer than two rows or columns, no nonzeros, ARPACK fails).

    Each singular pair is one factor by :func:`nonnegative_part`. Multiplicative updates never
    move an exact zero, hence the fill. Factors past ``min(n, m) - 1`` (the most ARPACK
    computes) are the fill alone.

    The SVD works on X as a sparse operator. Below :data:`RANDOMIZED_MIN_NNZ` nonzeros it is
    ARPACK's (scipy's ``svds``): O(nnz) per step, serial, and its start vector is fixed. From
    there on it is :func:`randomized_svd` (on X and its transpose, ``data.T``: the polish
    builds it anyway), 9 passes of O(nnz·(k + 10)) in parallel, with a fixed seed; its
    singular values are close to ARPACK's, and the default fits from either start end at
    the same errors (docs/decisions.md, "The randomized SVD"). Either way the factors depend on X and k only, whatever the
    number of threads, and the Dask backend's agree with them to rounding.
    """
    X = data.X
    n, m = X.shape
    r = min(k, min(n, m) - 1)
    if r < 1 or X.nnz == 0:
        return None
    # BLAS on one thread: ARPACK's vectors and the norms below would otherwise depend on the
    # BLAS library's thread count (each thread sums its share of a long product).
    with serial_blas():
        if use_randomized(X.nnz):
            U, S, Vt = randomized_svd(X, r, data.T.X)
        else:
            try:
                U, S, Vt = svds(
                    X.astype(np.float64),
                    k=r,
                    v0=np.full(min(n, m), 1.0 / np.sqrt(min(n, m))),
                    solver="arpack",
                )
            except (ArpackError, ArpackNoConvergence):
                return None
        W, Ht = np.zeros((n, k)), np.zeros((m, k))
        # One part of a left vector at a time, into two reused arrays, by parallel kernels:
        # with numpy's serial temporaries these steps took 3.7-4.2 s at 10⁸ nonzeros, so
        # 1.3-1.5 s.
        xp, xn = np.empty(n), np.empty(n)
        split, column = pick(signed_parts, 2 * n), pick(scaled_column, n)
        for l, j in enumerate(np.argsort(-S, kind="stable")):
            split(U, j, xp, xn)
            part = nonnegative_part(np.linalg.norm(xp), np.linalg.norm(xn), Vt[j], S[j])
            if part is not None:
                positive, b, na, nb, scale = part
                column(xp if positive else xn, scale, na, W, l)
                Ht[:, l] = scale * b / nb
    # Entries at rounding level count as zero: the SVD leaves them where a part is exactly 0.
    fill = X.nnz / (n * m)
    pick(fill_at_most, W.size)(W, 1e-12 * max(W.max(), 1.0), fill)
    pick(fill_at_most, Ht.size)(Ht, 1e-12 * max(Ht.max(), 1.0), fill)
    return W, Ht
