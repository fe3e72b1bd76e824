"""The multiplicative-update engine shared by BANMF and NMF (NMF is BANMF with Y frozen at X).

State lives in row-major arrays: ``W`` (n, k), ``Ht`` (m, k) = Hᵀ, and ``y``, one value per
nonzero of X in its CSR order. Each half-step is one method so that tests can check the
objective after every one of them.
"""

from __future__ import annotations

import numpy as np

from .._kernels.mu import (
    Y_PARTS,
    Cells,
    Factors,
    Step,
    YSums,
    add_unobserved,
    cross_gram,
    padded_width,
    project_spmm,
    row_width,
    scatter_rows,
    sum_blocks,
    update_rows,
    update_scatter_rows,
)
from .._kernels.mu_small import (
    Settings,
    SmallState,
    iterate_small,
    project_spmm_small,
    scatter_rows_small,
    update_rows_small,
)
from .._kernels.prefetch import zeros_line_aligned
from .._kernels.sparse import Sparse
from ..data.masks import mask_union
from ..runtime.threads import pick, serial_blas, threads_for, variant

# Row blocks of the W pass: each holds an (m, k) partial of Wᵀ Y. The count depends only on the
# problem's shape (never on the thread count), so results are the same on any machine.
_MAX_BLOCKS = 4
_SCATTER_BUDGET_BYTES = 2**28

#: Work per iteration (multiply-adds: 3·nnz·k + (n+m)·k²) below which the solver uses the
#: plain-loop kernels of :mod:`banmf._kernels.mu_small`: as fast there, and quicker to compile
#: (docs/decisions.md, "Plain loops for small problems"). It depends on the problem only, never
#: on the threads.
SMALL_WORK = 100_000


def is_small(n: int, m: int, k: int, passes: int) -> bool:
    """Whether an n×m problem at rank k whose passes visit ``passes`` cells an iteration (the
    nonzeros and unknown cells; with few observed cells, twice those too) is under
    :data:`SMALL_WORK`."""
    return 3 * passes * k + (n + m) * k * k < SMALL_WORK


def n_row_blocks(n: int, m: int, k: int, itemsize: int, parts: int = 1) -> int:
    """Blocks for the W pass: up to 4, fewer when their Wᵀ Y partials would exceed 256 MB.

    With ``parts`` > 1 the n rows are one of that many row blocks, each with its own solver
    (:mod:`banmf.distributed`): each then gets its share of the blocks, at least one, so that
    up to 4 of them together zero and add as many m×k partials as one solver over all the rows,
    and more of them one each. The count depends on the shapes and ``parts`` only (never on the
    threads or on where the blocks run)."""
    fit = _SCATTER_BUDGET_BYTES // max(1, m * k * itemsize)
    return int(max(1, min(_MAX_BLOCKS, fit, n) // max(1, parts)))


def solver_bytes(
    n: int, m: int, k: int, dtype, nnz: int, unknown: int = 0, observed: bool = False
) -> int:
    """Memory of one :class:`MUSolver` on an n×m X with ``nnz`` ones and ``unknown`` listed
    cells (the unknown cells, or with ``observed`` the observed zeros), from its arrays: W, Hᵀ,
    Y Hᵀ and Wᵀ Y in rows of :func:`padded_width`, the W pass's Wᵀ Y partials
    (:func:`n_row_blocks`), Y on the ones, the objective's sums (per row on the small path,
    per part of the rows otherwise) and the k×k Gram matrices with their block partials; for
    the unknown cells, Y there with a copy of their indices, or (few observed cells) the
    second pass's cells, Y, rows and sums."""
    itemsize = np.dtype(dtype).itemsize
    kp = padded_width(k, dtype)
    blocks = n_row_blocks(n, m, kp, itemsize)
    rows = 2 * n + (blocks + 2) * m
    passes = nnz + (2 * (nnz + unknown) if observed else unknown)
    sums = 16 * (n if is_small(n, m, k, passes) else Y_PARTS)
    cells = itemsize * nnz + sums
    if observed:
        rows += 2 * n + m  # its Y Hᵀ and Wᵀ Y, and W before the step
        cells += (itemsize + 8) * (nnz + unknown) + 8 * n + sums
    elif unknown:
        cells += (itemsize + 8) * unknown + 8 * n
    grams = 8 * k * k * (blocks + 2 * _MAX_BLOCKS + 4)
    return itemsize * kp * rows + cells + grams


def lambda_schedule(regularization, max_iter: int) -> np.ndarray:
    """λ per iteration: zeros (None), a constant (a number) or the paper's log-space ramp
    ("logspace"); the estimator has checked ``regularization``."""
    if regularization is None:
        return np.zeros(max_iter)
    if regularization == "logspace":
        return np.logspace(-4, 10, max_iter)
    return np.full(max_iter, float(regularization))


def objective_value(res: float, s2: float, covered: float, lam: float, penalty: float) -> float:
    """``½(Σ residual² + max(0, covered − Σ s²)) + (λ/2)·penalty``: the relaxed objective of
    :meth:`MUSolver.objective` from its sums (over all rows, or added over row blocks).
    ``covered``: ``‖WH‖²`` (Σ WᵀW ∘ HHᵀ), or with few observed cells Σ s² over them; the
    off-support part it leaves after Σ s² is clamped at 0 against cancellation."""
    f = 0.5 * (res + max(0.0, covered - s2))
    if lam:
        f += 0.5 * lam * penalty
    return float(f)


def h_step(
    Ht: np.ndarray, WtY: np.ndarray, WtW: np.ndarray, lam: float, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """The H step of :meth:`MUSolver.step_h` from the sums ``WtY`` = (Wᵀ Y)ᵀ (m, k) and ``WtW``
    (k, k) of row blocks' W steps: returns the new Hᵀ (m, k) and HHᵀ (k, k). The same kernel on
    the same padded rows; its Gram partials are summed in a fixed order, so the result depends
    on the inputs only."""
    m, k = Ht.shape
    dtype = Ht.dtype
    kp = padded_width(k, dtype)
    H, numer = zeros_line_aligned((m, kp), dtype), zeros_line_aligned((m, kp), dtype)
    H[:, :k], numer[:, :k] = Ht, WtY
    blocks = np.empty((min(_MAX_BLOCKS, max(1, m)), k, k), np.float64)
    update = pick(update_rows, m * k * k)
    update(H, numer, WtW.astype(dtype), lam, eps, blocks, None)
    return np.ascontiguousarray(H[:, :k]), blocks.sum(axis=0)


class MUSolver:
    """Multiplicative updates of W and H against Y, with Y projected onto [lower, upper] on Ω.

    The factors are copied into rows of :func:`padded_width` values (zero columns past k, which
    the updates keep at zero), so that the kernels work on whole vectors, in arrays that start
    on a cache line (:func:`zeros_line_aligned`); :attr:`W` and
    :attr:`Ht` are views of the first k columns.

    Parameters
    ----------
    data : Dataset
        The data (trusted): X's observed ones and its unknown cells.
    W : ndarray (n, k), the starting W (not modified)
    Ht : ndarray (m, k), the starting Hᵀ (not modified)
    project : bool
        True for BANMF (Y is projected every step), False for NMF (Y stays X).
    lower, upper : float
        Box for Y on the support (``upper`` may be ``inf``).
    eps : float
        Added to every denominator.
    y : ndarray (nnz,), optional
        Initial Y values on the support (default: ones, i.e. Y = X).
    parts : int, optional
        The rows are one of ``parts`` row blocks, each with its own solver (default 1: all
        the rows): the W pass's Wᵀ Y partials are then its share (:func:`n_row_blocks`).

    Y is free on unknown cells (``data.unknown``), so the Y pass
        sets it to WH: the iteration is then a block descent of ``½‖Y − WH‖²`` over the
        observed cells alone. With a few unknown cells, Y's values on them are kept (one per
        cell) and enter Y Hᵀ and Wᵀ Y in the same passes as the support's. With a few observed
        cells, Y on the
        unobserved ones is WH as of the last Y pass, which never needs them one by one:
        ``Y Hᵀ`` gains ``W HHᵀ − (O⊙WH) Hᵀ`` and ``Wᵀ Y`` gains ``(WᵀW') H − (O⊙WH)ᵀ W'``
        (O the observed cells, W' the new W), both passes over O only.

    Each kernel runs serially or in parallel by its work per call and the thread budget in
    force when the solver is made (:mod:`banmf.runtime.threads`); the results are the same either way.
    On several threads the W step's update and scatter are one parallel call
    (:func:`update_scatter_rows`) and the H step sums Wᵀ Y's block partials itself: each
    parallel call wakes the threads up.
    Problems under :data:`SMALL_WORK` use the plain-loop kernels instead.
    """

    def __init__(self, data, W, Ht, *, project, lower, upper, eps, y=None, parts=1):
        X, unknown = data.X, data.unknown
        self.indptr, self.indices = X.indptr, X.indices
        dtype = W.dtype
        n, k = W.shape
        m = Ht.shape[0]
        kp = padded_width(k, dtype)
        # Rows on cache lines: the passes gather and scatter them at random (see
        # zeros_line_aligned).
        self._W, self._Ht = zeros_line_aligned((n, kp), dtype), zeros_line_aligned((m, kp), dtype)
        self._W[:, :k], self._Ht[:, :k] = W, Ht
        self.k = k
        self.y = np.ones(X.nnz, dtype=dtype) if y is None else np.ascontiguousarray(y, dtype=dtype)
        self.project = bool(project)
        self.lower, self.upper, self.eps = float(lower), float(upper), float(eps)
        # The few unknown cells that the nonzeros' passes also visit, and Y's values there;
        # None when there are none, which compiles that part of the kernels out.
        few_unknown = unknown is not None and not unknown.observed
        C = unknown.cells if few_unknown else None
        self.cindptr = C.indptr.astype(X.indptr.dtype) if few_unknown else None
        self.cindices = C.indices.astype(X.indices.dtype) if few_unknown else None
        self.cy = np.zeros(C.nnz, dtype=dtype) if few_unknown else None
        # The kernels' argument groups (views of the arrays above, which are never rebound).
        self.X = Sparse(self.indptr, self.indices)
        self.cells = Cells(self.cindptr, self.cindices, self.cy) if few_unknown else None
        self._factors = Factors(self._W, self._Ht)
        n_cells = C.nnz if few_unknown else 0
        self.observed = unknown is not None and unknown.observed
        nnz = len(self.indices) + n_cells
        if self.observed:
            # Few observed cells: a second pass over all of them (ones and zeros), Y = WH there.
            O = mask_union(X, unknown.cells)
            self.oindptr, self.oindices = O.indptr, O.indices
            self.OX = Sparse(self.oindptr, self.oindices)
            nnz += 2 * O.nnz
        self.small = is_small(n, m, k, nnz)
        nb = 1 if self.small else n_row_blocks(n, m, kp, dtype.itemsize, parts)
        self.width = row_width(kp, dtype)
        self.YHt = zeros_line_aligned((n, kp), dtype)
        self.WtY_blocks = zeros_line_aligned((nb, m, kp), dtype)
        self.WtW_blocks = np.empty((nb, k, k), np.float64)
        self.HHt_blocks = np.empty(
            (1 if self.small else min(_MAX_BLOCKS, max(1, m)), k, k), np.float64
        )
        # The Y pass's objective sums: one pair per row on the small path, per part of the
        # rows otherwise (project_spmm).
        self.sq = np.empty((n if self.small else Y_PARTS, 2), np.float64)
        # On one BLAS thread wherever the solver is made (a fit, a Dask worker's block): over
        # tens of thousands of rows OpenBLAS's threads would each sum a share.
        with serial_blas():
            self.HHt = Ht.T.astype(np.float64) @ Ht
            self.WtW = W.T.astype(np.float64) @ W
        # The Gram matrices in the factors' type, as the row updates read them.
        self.HHt_t, self.WtW_t = self.HHt.astype(dtype), self.WtW.astype(dtype)
        self.WtY = zeros_line_aligned(
            (m, kp), dtype
        )  # block sums land here: no allocation per iteration
        # Work per call, in multiply-adds: the row updates cost k² per row, the passes k per
        # nonzero (and per unknown cell).
        nnz = len(self.indices) + n_cells
        self._update_w = pick(update_rows, n * k * k)
        self._update_h = pick(update_rows, m * k * k)
        # In one parallel call where it runs on several threads: each call wakes them up. On
        # one thread the update's and the scatter's own best variants (see pick) run apart.
        fused = threads_for(n * k * k + nnz * k)
        self._update_scatter = (
            variant(update_scatter_rows(self.width), fused) if fused > 1 else None
        )
        self._sum_blocks = variant(sum_blocks, threads_for(nb * m * kp))
        # True while Wᵀ Y is the unsummed partials of the last W step (WtY_blocks): the H step
        # sums them as it goes (one parallel call fewer), anything else by _sum_wty.
        self._wty_in_blocks = False
        self._scatter = variant(scatter_rows(self.width), threads_for(nnz * k))
        self._project = variant(project_spmm(self.width), threads_for(2 * nnz * k))
        if self.observed:
            onnz = len(self.oindices)
            self.oy = np.zeros(onnz, dtype=dtype)
            self.oYHt = zeros_line_aligned((n, kp), dtype)
            self.oWtY = zeros_line_aligned((m, kp), dtype)
            self.osq = np.empty(self.sq.shape, np.float64)
            self._oscatter = variant(scatter_rows(self.width), threads_for(onnz * k))
            self._oproject = variant(project_spmm(self.width), threads_for(2 * onnz * k))
            self._add_w = variant(add_unobserved, threads_for(n * k * k))
            self._add_h = variant(add_unobserved, threads_for(m * k * k))
            self._W_before = zeros_line_aligned((n, kp), dtype)
            self._cross = variant(cross_gram, threads_for(n * k * k))
            self._cross_blocks = np.empty((min(_MAX_BLOCKS, max(1, n)), k, k), np.float64)
        # iterate_small's buffers as one group, made once (the arrays are never rebound): a
        # call from Python pays for each group it builds and types.
        self._small_state = SmallState(
            self.YHt, self.WtY, self.sq, self.WtW, self.HHt, self.WtW_t, self.HHt_t
        )
        # Y Hᵀ and the support terms for the starting Y, without projecting it.
        self._y_pass(False)

    @property
    def W(self) -> np.ndarray:
        """The current W (n, k): a view."""
        return self._W[:, : self.k]

    @property
    def Ht(self) -> np.ndarray:
        """The current Hᵀ (m, k): a view."""
        return self._Ht[:, : self.k]

    def step_w(self, lam: float, scatter: bool = True) -> None:
        """W step; also forms WᵀW and (unless ``scatter=False``) Wᵀ Y for the H step."""
        if self.observed and scatter:
            np.copyto(self._W_before, self._W)
        if self.small:
            update_rows_small(self._W, self.YHt, self.HHt_t, lam, self.eps, self.WtW_blocks[0])
            if scatter:
                self._scatter_pass(self.X, self.y, self.WtY, True)
        elif scatter and self._update_scatter is not None:
            self._update_scatter(
                Step(self._W, self.YHt, self.HHt_t, lam, self.eps),
                self.WtW_blocks,
                self.X,
                self.y,
                self.cells,
                self.WtY_blocks,
                self.width,
            )
            self._wty_in_blocks = True
        else:
            self._update_w(self._W, self.YHt, self.HHt_t, lam, self.eps, self.WtW_blocks, None)
            if scatter:
                self._scatter_pass(self.X, self.y, self.WtY, True)
        if self.observed and scatter:
            self._sum_wty()  # (the pass below reuses the partials)
            # Y on the unobserved cells was W_before H: its part of Wᵀ Y is Hᵀ (W_beforeᵀ W)
            # less its part on the observed cells. (Numba kernels, not numpy's BLAS: its idle
            # threads spin and slow the kernels that follow.)
            self._scatter_pass(self.OX, self.oy, self.oWtY)
            k = self.k
            cross = self._cross(self._W_before, self._W, k, self._cross_blocks)
            self._add_h(self.WtY, self.oWtY, self._Ht, cross.astype(self._W.dtype), k)
        np.sum(self.WtW_blocks, axis=0, out=self.WtW)
        np.copyto(self.WtW_t, self.WtW)

    def _scatter_pass(self, X, y, out, cells: bool = False) -> None:
        """Wᵀ Y over one CSR structure ``X`` with its values ``y`` (and, with ``cells``, the
        unknown cells with theirs), into ``out``."""
        C = self.cells if cells else None
        if self.small:
            scatter_rows_small(X, y, C, self._W, self.k, out)
        else:
            kernel = self._scatter if X is self.X else self._oscatter
            kernel(X, y, C, self._W, self.WtY_blocks, out, self.width)

    def _sum_wty(self) -> None:
        """Wᵀ Y into ``WtY`` from the last W step's partials, if not summed yet."""
        if self._wty_in_blocks:
            self._sum_blocks(self.WtY_blocks, self.WtY)
            self._wty_in_blocks = False

    @property
    def WtY_partial(self) -> np.ndarray:
        """Wᵀ Y as (Wᵀ Y)ᵀ (m, k) of the last :meth:`step_w`: a view."""
        self._sum_wty()
        return self.WtY[:, : self.k]

    def set_h(self, Ht: np.ndarray, HHt: np.ndarray) -> None:
        """Take Hᵀ (m, k) and its Gram HHᵀ from an H step made elsewhere (:func:`h_step`, on
        the sums of row blocks' :meth:`step_w` partials), in place of :meth:`step_h`."""
        self._Ht[:, : self.k] = Ht
        self.HHt[...] = HHt
        np.copyto(self.HHt_t, HHt)

    def step_h(self, lam: float) -> None:
        if self.small:
            update_rows_small(self._Ht, self.WtY, self.WtW_t, lam, self.eps, self.HHt_blocks[0])
        else:
            # The W step's partials of Wᵀ Y, if left unsummed, are summed block by block here.
            blocks = self.WtY_blocks if self._wty_in_blocks else None
            self._update_h(self._Ht, self.WtY, self.WtW_t, lam, self.eps, self.HHt_blocks, blocks)
            self._wty_in_blocks = False
        np.sum(self.HHt_blocks, axis=0, out=self.HHt)
        np.copyto(self.HHt_t, self.HHt)

    def step_y(self) -> None:
        """Project Y (BANMF) and refresh Y Hᵀ and the objective's support terms."""
        self._y_pass(self.project)

    def _y_pass(self, project: bool) -> None:
        self._pass(self.X, self.y, self.YHt, self.sq, project, True)
        if not self.observed:
            return
        # Few observed cells: Y is WH on all the others, whose part of Y Hᵀ is W HHᵀ less its
        # part on the observed cells (a pass over them with Y = WH: the box [0, inf) never
        # binds, as WH >= 0).
        self._pass(self.OX, self.oy, self.oYHt, self.osq, True, False, 0.0)
        self._add_w(self.YHt, self.oYHt, self._W, self.HHt_t, self.k)

    def _pass(self, X, y, YHt, sq, project, cells, lower=None) -> None:
        """The Y pass over one CSR structure ``X`` (with ``cells``, the unknown cells too);
        ``lower`` None: the solver's box (the support), else [lower, inf)."""
        lo, up = (self.lower, self.upper) if lower is None else (lower, np.inf)
        C, out = (self.cells if cells else None), YSums(YHt, sq)
        if self.small:
            project_spmm_small(X, y, self._factors, out, C, self.k, lo, up, project)
        else:
            kernel = self._project if X is self.X else self._oproject
            kernel(X, y, self._factors, out, C, lo, up, project, self.width)

    def iterate(self, lams: np.ndarray, update_h: bool = True) -> np.ndarray:
        """One iteration per value of ``lams`` (the λ of each: W step, H step unless
        ``update_h`` is False, Y pass); returns the :meth:`objective` after each. Small problems
        run them all in one kernel call, and the same kernel for one iteration or several, so
        the results do not depend on how the iterations are grouped."""
        out = np.empty(len(lams))
        if self.small and not self.observed:
            state = self._small_state
            settings = Settings(self.k, self.eps, self.lower, self.upper, self.project, update_h)
            lams = np.ascontiguousarray(lams, dtype=np.float64)
            iterate_small(self.X, self.y, self.cells, self._factors, state, settings, lams, out)
            return out
        for q, lam in enumerate(lams):
            self.step_w(float(lam), scatter=update_h)
            if update_h:
                self.step_h(float(lam))
            self.step_y()
            out[q] = self.objective(float(lam))
        return out

    def objective(self, lam: float = 0.0) -> float:
        """``½‖Y − WH‖² + (λ/2)(‖W²−W‖² + ‖H²−H‖²)`` as of the last :meth:`step_y`, the
        first term over the observed cells.

        The off-support part ``‖WH‖² − Σ_Ω s²`` (less the unknown cells' ``Σ s²``; with few
        observed cells, ``Σ_O s² − Σ_Ω s²``) is clamped at 0 against cancellation.
        """
        # Column by column: numpy's axis-0 sum of an (n, 2) array is ~20× slower.
        res, s2 = self.sq[:, 0].sum(), self.sq[:, 1].sum()
        if self.observed:
            covered = self.osq[:, 1].sum()
        else:  # (s2 includes the unknown cells')
            covered = float(np.sum(self.WtW * self.HHt))
        penalty = 0.0
        if lam:
            W, Ht = self.W, self.Ht
            penalty = float(np.sum((W * W - W) ** 2)) + float(np.sum((Ht * Ht - Ht) ** 2))
        return objective_value(res, s2, covered, lam, penalty)
