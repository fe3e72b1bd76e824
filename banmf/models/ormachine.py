"""OrMachine (Rukat, Holmes, Titsias, Yau, ICML 2017): Bayesian Boolean factorization by Gibbs
sampling, sparse over CSR with packed factors."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import ClassVar

import numpy as np

from .._kernels.ormachine import Other, Weights, accumulate_codes, gibbs_rows
from .._kernels.sparse import Sparse
from ..data.masks import csr_from_parts, unique_rows, words
from ..data.params import BOOLEAN, NONE, Interval, Options
from ..data.validation import WORK_BUDGET, check_random_state, check_work
from ..exceptions import InvalidParameterError
from ..runtime.progress import StartProgress
from ..runtime.runner import run_side_by_side
from ..runtime.signals import Interruptions
from ..runtime.threads import blocks_for, cancelled, pick, threads_for, variant
from ._base import (
    COMMON_CONSTRAINTS,
    COMMON_DEFAULTS,
    BaseFactorization,
    budgeted,
    declared_init,
)

__all__ = ["OrMachine"]

#: λ is kept at most logit(1 − 1e-12) ≈ 27.6: an exact fit would otherwise draw P = 1 in
#: floating point and λ = ∞, and ∞ · 0 (a score of 0) is NaN.
_P_MAX = 1.0 - 1e-12


class OrMachine(BaseFactorization):
    """Bayesian Boolean matrix factorization (OrMachine): Gibbs sampling of ``X ≈ Z ⊗ Uᵀ``.

    Each observed cell is explained correctly with probability ``σ(λ)``:
    ``p(x_ij | Z, U, λ) = σ(λ · x̃_ij · (1 − 2∏_l(1 − z_il u_jl)))`` with ``x̃ = 2x − 1``. With
    uniform priors on the factors, the full conditional of ``z_il`` is
    ``σ(λ · Σ_j x̃_ij u_jl ∏_{l'≠l}(1 − z_il' u_jl'))``: only the cells that no other active
    factor of row i explains count. Each sweep samples every entry of Z (row by row, the rows
    in parallel), then every entry of U the same way, then the noise:
    ``P = σ(λ) ~ Beta(alpha + #correct, beta + #wrong)`` over the observed cells, restricted
    to ``P ≥ ½`` (a prediction worse than chance would turn the sampler against the data; the
    authors' code clamps λ at 0 likewise). After ``burn_in`` sweeps the samples are averaged:
    ``W_posterior_`` and ``H_posterior_`` are the posterior means, and ``W_`` /
    ``components_`` those means rounded at ½.

    Sparse throughout: a row's conditionals need the ones it lists and, for the zeros, only how
    many columns have each *distinct* code of the other factor (at most ``min(m, 2^k)``
    codes), so a sweep costs about ``(nnz + unknown cells)·(1 + changes per row) + n·D_U +
    m·D_Z`` word operations (D: distinct nonzero codes of U's columns and of Z's rows), never
    n·m for small k. Memory is O(nnz + (n + m)·k).

    Unknown cells are native: they drop out of the likelihood (``x̃ = 0``). With ``missing=``
    the listed cells are taken out of the counted zeros; with ``observed=`` only X's ones and
    the listed zeros are observed.

    Parameters
    ----------
    n_components : int, default 10
        Number of factors k.
    max_iter : int, default 200
        Sweeps in all, burn-in included.
    burn_in : int or None, default None
        Sweeps discarded before the samples are averaged, less than ``max_iter``; None: half
        of ``max_iter`` (rounded down).
    alpha, beta : float, default 1.0
        The Beta prior on ``P = σ(λ)``, the probability that a cell is explained correctly.
    init : {"rows", "random"}, default "rows"
        The starting U: ``"rows"`` takes k distinct nonempty rows of X drawn at random (the
        ones of each, as a factor's columns; with fewer such rows than k, some repeat), ``"random"`` sets each entry with probability ½ (as the
        authors' code does). Z starts empty and is sampled first.
    reseed : bool, default True
        During the first half of the burn-in, restart every factor that has no rows or no
        columns after a sweep, or the same rows or columns as another (a duplicate: two equal
        factors hold one factor's worth, and each one's conditionals are flat where the other
        explains the cells), from the ones of X that the sample leaves uncovered in one row
        (drawn with probability proportional to them); its Z column is then sampled afresh.
        Without it a factor that dies early stays dead (with no rows its columns carry no
        information, and a row never takes such a factor), and the fit has one factor fewer;
        with it, planted data is recovered exactly far more often (docs/decisions.md,
        "OrMachine's reseeding and chains"). The authors' code resets such factors too; the
        samples that are averaged come after every restart. False: the sampler alone.
    n_init : int, default 1
        Chains run one after the other, each from its own start; the one whose rounded
        posterior means have the fewest errors is kept (``chain_errors_`` has each chain's).
        One chain is the published method. Single-site Gibbs sampling can settle in a local
        mode (two factors each holding half of two planted ones) that it does not leave in a
        few hundred sweeps; a few chains avoid most such fits (docs/decisions.md, "OrMachine's
        reseeding and chains").
    work_budget : float or None, default 6e10
        Refuse up front (``ValueError`` with the estimate) a fit estimated at more operations
        than this (about 5 minutes on 2 cores); None: no limit.
    polish : bool or {"auto", "exact", "flip"}, default False
        Polish the rounded factors with :func:`banmf.polish` (off by default so that this
        stays the published method; ``unpolished_err_`` keeps its own error).
    n_jobs : int or None, default None
        Thread budget, as for :class:`BANMF`. The uniforms of each half-sweep are drawn in
        numpy before the kernel runs, so the result does not depend on it.
    random_state : None, int or numpy Generator, default None
    verbose : int, default 0
        1: phases (burn-in, sampling, polish) and the result on stderr; 2: every sweep too.

    Attributes
    ----------
    W_ : ndarray of shape (n, k), bool
        ``W_posterior_ > ½`` (then polished, with ``polish=``).
    components_ : ndarray of shape (k, m), bool
        ``H_posterior_ > ½`` (then polished, with ``polish=``).
    W_posterior_ : ndarray of shape (n, k), float64
        Posterior mean of each entry of Z (the fraction of the kept samples in which it is 1).
    H_posterior_ : ndarray of shape (k, m), float64
        Posterior mean of each entry of Uᵀ.
    chain_errors_ : ndarray of shape (chains run,)
        The error of each chain's rounded posterior means (before the polish).
    n_samples_ : int
        Samples averaged (``max_iter − burn_in``, fewer after Ctrl-C; if Ctrl-C came during
        the burn-in, the current state is the one sample).
    lambda_ : float
        Posterior mean of λ over the kept samples (the last λ drawn if none were kept).
    lambda_curve_ : ndarray of shape ``(n_iter_,)``
        λ drawn after each sweep.
    error_curve_ : ndarray of shape ``(n_iter_,)``
        The Hamming error, on the observed cells, of each sweep's sample.
    reconstruction_err_, relative_error_, n_iter_ (sweeps run), interrupted_, fit_seconds_
        As for every method; the error is that of ``W_ ⊗ components_`` (after the polish).

    References
    ----------
    Rukat, Holmes, Titsias, Yau, "Bayesian Boolean Matrix Factorisation", ICML 2017
    (reference code: github TammoR/LogicalFactorisationMachines).

    Examples
    --------
    >>> import banmf
    >>> X, _, _ = banmf.make_boolean(40, 30, 3, 0.3, random_state=0)
    >>> est = OrMachine(3, random_state=0).fit(X)
    >>> est.W_posterior_.shape, est.relative_error_ < 0.1
    ((40, 3), True)
    """

    _parameter_constraints: ClassVar[dict] = {
        **COMMON_CONSTRAINTS,
        "max_iter": [Interval(Integral, 1, None)],
        "burn_in": [NONE, Interval(Integral, 0, None)],
        "alpha": [Interval(Real, 0, np.inf, closed="neither")],
        "beta": [Interval(Real, 0, np.inf, closed="neither")],
        "init": [Options("rows", "random")],
        "reseed": [BOOLEAN],
        "n_init": [Interval(Integral, 1, None)],
        "work_budget": [NONE, Interval(Real, 0, None, closed="neither")],
    }

    __init__ = declared_init(
        {
            "n_components": 10,
            "max_iter": 200,
            "burn_in": None,
            "alpha": 1.0,
            "beta": 1.0,
            "init": "rows",
            "reseed": True,
            "n_init": 1,
            "work_budget": WORK_BUDGET,
            **COMMON_DEFAULTS,
        }
    )

    @budgeted
    def fit(self, X, y=None, *, missing=None, observed=None) -> OrMachine:
        """Sample the posterior of the factors of the 0/1 matrix X (dense or sparse, (n, m));
        ``missing`` / ``observed`` mark unknown cells as in :meth:`BANMF.fit`: they are left
        out of the likelihood."""
        data, k, start = self._begin(X, missing, observed)
        X, unknown = data.X, data.unknown
        polish = self._polish_method(k)
        burn_in = self.max_iter // 2 if self.burn_in is None else self.burn_in
        if burn_in >= self.max_iter:
            raise InvalidParameterError(
                f"burn_in={burn_in} leaves no samples of max_iter={self.max_iter} sweeps; "
                "take burn_in < max_iter (e.g. half of it)"
            )
        n, m = X.shape
        self._check_work(data, k)
        rng = check_random_state(self.random_state)
        rows, cols = _Side(data), _Side(data.T)
        n_obs = n * m if unknown is None else unknown.observed_count(X.nnz)
        interrupts = Interruptions()

        def chains():
            for c in range(self.n_init):
                progress = StartProgress(c + 1, self.n_init, self.max_iter)
                yield functools.partial(
                    self._chain,
                    data,
                    rows,
                    cols,
                    k,
                    n_obs,
                    burn_in,
                    rng,
                    progress,
                    interrupts,
                )

        def ended(c: int, chain: _Chain, run) -> None:
            if chain.interrupted or chain.cancel:
                run.stop()  # the chains so far make the result

        # The chains draw from one generator one after the other (the same seed, the same
        # chains): they run in this thread.
        run = run_side_by_side(chains(), workers=1, on_done=ended, interrupts=interrupts)
        done = run.ordered()
        if not done:  # Ctrl-C before a chain had a state: nothing to keep
            raise KeyboardInterrupt
        best = min(done, key=lambda chain: chain.error)  # ties: the first
        interrupted = run.interrupted or done[-1].interrupted
        progress = StartProgress(len(done), self.n_init, self.max_iter)
        self.W_posterior_ = best.W
        self.H_posterior_ = np.ascontiguousarray(best.H)
        self.n_samples_ = best.samples
        self.lambda_ = best.lam
        self.lambda_curve_ = np.asarray(best.lambdas, dtype=np.float64)
        self.error_curve_ = np.asarray(best.errors, dtype=np.int64)
        self.chain_errors_ = np.array([chain.error for chain in done], dtype=np.int64)
        W = self.W_posterior_ > 0.5
        H = self.H_posterior_ > 0.5
        err = best.error
        found = (W, H, err, len(best.errors))
        self._conclude(data, found, start, polish, progress, interrupted, done[-1].cancel)
        return self

    def _chain(
        self, data, rows, cols, k, n_obs, burn_in, rng, progress, interrupts: Interruptions
    ) -> _Chain:
        """Run one chain: ``max_iter`` sweeps from a fresh start, the samples after
        ``burn_in`` averaged, and the error of its posterior means rounded. The first Ctrl-C of the fit (``interrupts``), or a cancel, ends
        it with the samples so far."""
        X = data.X
        n, m = X.shape
        kw = words(k)
        Z = np.zeros((n, kw), dtype=np.uint64)
        U = self._start(X, k, kw, rng)
        lam = self._draw_lambda(rng, n_obs, X.nnz)  # Z = 0 misses every one
        z_sum = np.zeros((n, k), dtype=np.int64)
        u_sum = np.zeros((m, k), dtype=np.int64)
        z_samples = u_samples = 0  # one count per side: Ctrl-C may fall between the two sums
        errors_n, errors_m = np.empty(n, dtype=np.int64), np.empty(m, dtype=np.int64)
        out = _Chain()
        progress.phase("burn-in" if burn_in else "sampling")
        try:
            for sweep in range(1, self.max_iter + 1):
                if cancelled():
                    out.cancel = True
                    break
                rows.sweep(Z, U, lam, rng.random((n, k)), errors_n)
                cols.sweep(U, Z, lam, rng.random((m, k)), errors_m)
                err = int(errors_m.sum())
                lam = self._draw_lambda(rng, n_obs, err)
                out.lambdas.append(lam)
                out.errors.append(err)
                if sweep > burn_in:
                    if sweep == burn_in + 1 and burn_in:
                        progress.phase("sampling")
                    pick(accumulate_codes, n * k)(Z, z_sum)
                    z_samples += 1
                    pick(accumulate_codes, m * k)(U, u_sum)
                    u_samples += 1
                if self.reseed and sweep <= burn_in // 2:
                    self._reseed(X, Z, U, k, rng)
                progress.iteration(sweep, err)
        except KeyboardInterrupt:
            if not interrupts.first():
                raise
            out.interrupted = True  # the samples so far are the result
        if u_samples == 0:  # stopped in the burn-in: the current state is the one sample
            if z_samples == 0:
                accumulate_codes.serial(Z, z_sum)
                z_samples = 1
            accumulate_codes.serial(U, u_sum)
            u_samples = 1
        out.W, out.H, out.samples = z_sum / z_samples, (u_sum / u_samples).T, u_samples
        kept = out.lambdas[burn_in:]
        out.lam = float(np.mean(kept)) if kept else float(lam)
        out.error = data.error(out.W > 0.5, out.H > 0.5)
        return out

    @staticmethod
    def _reseed(X, Z, U, k: int, rng) -> None:
        """Restart in place the factors with no rows or no columns, and the copies of another
        factor (the same rows or the same columns as a factor of lower index; see ``reseed``)."""
        used = np.bitwise_or.reduce(Z, axis=0) & np.bitwise_or.reduce(U, axis=0)
        bits = np.unpackbits(used.view(np.uint8), bitorder="little")[:k]
        dead = set(np.flatnonzero(bits == 0).tolist())
        for codes in (Z, U):
            # Two equal factors explain the same cells, so neither sees them: each one's
            # conditionals are flat there, and the pair holds one factor's worth.
            columns = np.unpackbits(codes.view(np.uint8), axis=1, bitorder="little")[:, :k].T
            _, first = np.unique(columns, axis=0, return_index=True)
            dead.update(set(range(k)) - set(first.tolist()))
        dead = sorted(dead)
        if not dead:
            return
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        covered = (Z[rows] & U[X.indices]).any(axis=1)
        uncovered = np.bincount(rows[~covered], minlength=X.shape[0]).astype(np.float64)
        total = uncovered.sum()
        for l in dead:
            if total == 0:
                return
            i = rng.choice(X.shape[0], p=uncovered / total)
            cols = X.indices[X.indptr[i] : X.indptr[i + 1]][~covered[X.indptr[i] : X.indptr[i + 1]]]
            word, bit = l >> 6, np.uint64(1) << np.uint64(l & 63)
            Z[:, word] &= ~bit
            U[:, word] &= ~bit
            U[cols, word] |= bit
            uncovered[i] = 0  # another dead factor starts from another row
            total = uncovered.sum()

    def _start(self, X, k: int, kw: int, rng) -> np.ndarray:
        """The starting U as packed codes, one per column of X (m, ceil(k / 64))."""
        n, m = X.shape
        B = np.zeros((m, k), dtype=bool)
        if self.init == "random":
            B[:] = rng.random((m, k)) < 0.5
        else:
            nonempty = np.flatnonzero(np.diff(X.indptr))
            if len(nonempty):
                seeds = rng.choice(nonempty, size=k, replace=k > len(nonempty))
                for l, i in enumerate(seeds):
                    B[X.indices[X.indptr[i] : X.indptr[i + 1]], l] = True
        codes = np.zeros((m, kw), dtype=np.uint64)
        for l in range(k):
            codes[B[:, l], l >> 6] |= np.uint64(1) << np.uint64(l & 63)
        return codes

    def _draw_lambda(self, rng, n_obs: int, wrong: int) -> float:
        """λ = logit(P), P ~ Beta(alpha + correct, beta + wrong) restricted to [½, 1)."""
        a, b = self.alpha + (n_obs - wrong), self.beta + wrong
        p = rng.beta(a, b)
        if p < 0.5:
            # Rare (a state worse than chance, early in a run): draw from the tail above ½ by
            # inverting the distribution function.
            from scipy.special import betainc, betaincinv

            lo = float(betainc(a, b, 0.5))
            p = float(betaincinv(a, b, lo + (1.0 - lo) * rng.random())) if lo < 1.0 else 0.5
            p = max(p, 0.5)
        p = min(p, _P_MAX)
        return math.log(p / (1.0 - p))

    def _check_work(self, data, k: int) -> None:
        """Refuse up front a fit estimated over ``work_budget``. Per sweep and side: each
        listed cell tallied once, then each code a row touches (all distinct codes of the other
        factor when zeros are implicit, at most ``min(2^k, columns)``) visited about twice (a
        rescoring after a change, and the errors), k/64 words each (docs/decisions.md, "The work
        estimates")."""
        X, unknown = data.X, data.unknown
        n, m = X.shape
        cells = 0 if unknown is None else unknown.cells.nnz
        implicit = unknown is None or not unknown.observed
        # Distinct codes of k bits: at most 2^k (an integer: 2.0**k overflows past k = 1023).
        visits = (
            float(min(1 << k, m) * n + min(1 << k, n) * m) if implicit else 2.0 * (X.nnz + cells)
        )
        per_sweep = 2.0 * (X.nnz + cells) + 2.0 * words(k) * visits + 2.0 * (n + m) * k
        check_work(
            self.n_init * self.max_iter * per_sweep,
            self.work_budget,
            f"OrMachine on this {n}×{m} X ({X.nnz:,} ones) with n_components={k}, "
            f"max_iter={self.max_iter} and n_init={self.n_init}",
            "pass a smaller n_components, max_iter or n_init",
        )


@dataclass
class _Chain:
    """What one chain leaves: its posterior means, samples, λ and error curves."""

    W: np.ndarray | None = None
    H: np.ndarray | None = None
    samples: int = 0
    lam: float = 0.0
    lambdas: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    error: int = 0
    interrupted: bool = False
    cancel: bool = False


class _Side:
    """One side of the sampler: the rows of X (for Z) or of Xᵀ (for U), with the listed cells
    of each row and the weights that make the scores ``Σ x̃`` over the counting cells."""

    def __init__(self, data):
        X, unknown = data.X, data.unknown
        self.X = X
        if unknown is None:
            n = X.shape[0]
            self.cells = csr_from_parts(
                np.zeros(n + 1, dtype=X.indptr.dtype), X.indices[:0], X.shape
            )
        else:
            self.cells = unknown.cells
        # Zeros are implicit (every cell not listed and not unknown is an observed zero) unless
        # the listed cells are the observed zeros themselves.
        self.implicit = unknown is None or not unknown.observed
        self.w_one, self.w_cell = (2, 1) if self.implicit else (1, -1)

    def sweep(self, codes, other, lam: float, uniforms: np.ndarray, errors: np.ndarray) -> None:
        """Sample every entry of ``codes`` (this side's factor) given ``other``, in place."""
        distinct, inverse, counts = unique_rows(other)
        nonzero = distinct.any(axis=1)
        dcodes = np.ascontiguousarray(distinct[nonzero])
        dcounts = counts[nonzero].astype(np.int64)
        # each column's distinct nonzero code, −1 for a column no factor holds
        ids = np.full(len(distinct), -1, dtype=np.int64)
        ids[nonzero] = np.arange(len(dcodes))
        code_id = ids[inverse]
        X, C = self.X, self.cells
        visits = X.shape[0] * len(dcodes) if self.implicit else X.nnz + C.nnz
        threads = threads_for((X.nnz + C.nnz + 2 * visits) * other.shape[1])
        variant(gibbs_rows, threads)(
            Sparse(X.indptr, X.indices),
            Sparse(C.indptr, C.indices),
            Weights(self.w_one, self.w_cell, self.implicit),
            Other(code_id, dcodes, dcounts),
            blocks_for(threads, X.shape[0]),
            float(lam),
            uniforms,
            codes,
            errors,
        )
