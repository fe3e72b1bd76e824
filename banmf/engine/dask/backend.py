"""The Dask backend of :mod:`banmf.engine.protocol`: the row blocks stay on the workers
(:class:`~banmf.engine.dask.session.Session`), each step is per-block work
(:mod:`banmf.engine.dask.worker`) and sums over the blocks by one fixed tree, and a start
that loses a worker runs again from its seed after the repair.

The blocks hold W's rows (balanced and Boolean) of the best start so far, and with
``combine`` every other start's Boolean rows too; the driver holds every start's H. The
combination (:func:`banmf.engine.pool.choose`) runs over the blocks' rows
(:class:`_BlockSource`). Steps that need whole columns (the exact polish, the GreConD start)
are not here: the driver refuses them (``DaskBackend.whole_columns`` is False). Two steps read
X whole on the driver, gathered from the blocks when the fit was not given it in memory
(:meth:`DaskBackend.dataset`): GreConD's factors for the combination's pool, where one machine
pools them too (:func:`banmf.engine.pool.grecond_pays`), and the inner fit that chooses the
predictor of unknown cells (as one machine's, on the same cells).
"""

from __future__ import annotations

import contextlib
import itertools
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..._kernels.svd import fill_at_most
from ...data.validation import check_n_components
from ...exceptions import InputError
from ...io import Dataset
from ...runtime.memory import check_memory
from ...runtime.signals import Interruptions
from ...runtime.threads import pick
from ..booleanize import balance_scales, grid_points, grid_ranks, search_grid
from ..columns import top_columns
from ..iterations import h_step, objective_value
from ..local import grecond_factors, predictor_factors
from ..nndsvd import Here, nonnegative_part, subspace_svd, use_randomized
from ..polish import moved_bits, polish_over
from ..pool import Pool, bounded, choose, grecond_pays
from ..protocol import StartRecord
from ..refine import thresholds_over
from ..swaps import swaps_over
from . import worker
from .session import Session, WorkerLost, lost_before

__all__ = ["DaskBackend"]

#: Stamps of the flips' bounds on the blocks (:class:`_BlockRows`), unique in this process.
_stamps = itertools.count()


class _Rows:
    """The rows' half of the threshold search (:class:`banmf.engine.booleanize.GridRows`) summed over
    the row blocks on the workers."""

    #: Coverages asked for in one round trip (:func:`banmf.engine.booleanize.search_grid`).
    batch = 16

    def __init__(self, session: Session, distinct: np.ndarray, pairs: bool):
        self.s, self.distinct, self.pairs = session, distinct, pairs
        self.sizes = self.shared = None

    def hit_diffs(self, vt, P):
        # The factors' sizes and pair counts come in the same round trip: search_grid asks
        # for the hits first. Integer sums: the same whatever the blocks' grouping.
        hits, cells, self.sizes, self.shared = self.s.sum(worker.grid_sums, vt, P, self.pairs)
        return hits, cells

    def active_counts(self, P):
        return self.sizes

    def pair_counts(self, P):
        return self.shared

    def distinct_ranks(self):
        return self.distinct

    def packed_bytes(self, P):
        return max(self.s.each(worker.packed_bytes, P))

    def covers(self, requests, cache):
        counts = self.s.sum(worker.covers, requests, cache)
        out, at = [], 0
        for _, packed_h in requests:
            out.append([int(c) for c in counts[at : at + len(packed_h)]])
            at += len(packed_h)
        return out


class _DaskStart:
    """A start's multiplicative updates over the blocks: each block runs the Y pass of one
    iteration and the W step of the next in one call; the H step runs on the driver, on the
    summed partials. The Y pass runs alone at the end of a call of :meth:`iterate` (where the
    fit may stop) and once Ctrl-C was noted."""

    def __init__(self, backend: DaskBackend, key, Ht: np.ndarray):
        self.b, self.key, self.Ht = backend, key, Ht
        self.sums = None  # the W step's partials, when the blocks ran it ahead

    def chunk(self, every: int, callback: bool) -> int:
        return 1 if callback else every

    def iterate(self, lams: np.ndarray) -> np.ndarray:
        session, p, eps = self.b.session, self.b.p, self.b.model.eps
        out = []
        if self.sums is None:
            self.sums = session.sum(worker.step, None, float(lams[0]))
        for q, lam in enumerate(lams):
            lam, sums = float(lam), self.sums
            WtW = sums[1]
            Ht, HHt = h_step(self.Ht, sums[0].astype(self.Ht.dtype), sums[1], lam, eps)
            penalty = sums[2] + (float(np.sum((Ht * Ht - Ht) ** 2)) if lam else 0.0)
            last = q + 1 == len(lams) or bool(session.interrupts.count)
            sums = session.sum(worker.step, (Ht, HHt), None if last else float(lams[q + 1]))
            res, s2, observed_s2 = sums[3:]
            covered = observed_s2 if p.observed else float(np.sum(WtW * HHt))
            out.append(objective_value(res, s2, covered, lam, penalty))
            self.Ht, self.sums = Ht, None if last else sums
            if last:
                break
        return np.asarray(out)

    def threshold(self) -> dict:
        """The grid threshold search over the blocks (:func:`banmf.engine.booleanize.search_grid`),
        keeping each block's Boolean rows."""
        session, p, normalize = self.b.session, self.b.p, self.b.model.normalize
        P = p.n_thresholds
        H = self.Ht.T.astype(np.float64)
        factors = None
        if normalize == "balance":
            a = np.max(session.each(worker.column_max), axis=0)
            b = H.max(axis=1) if H.shape[1] else np.zeros(H.shape[0])
            factors, inv = balance_scales(a, b)
            H = H * inv[:, None]
        top = max(session.each(worker.scale, factors))
        w_points = grid_points(top, P)
        h_points = grid_points(H.max() if H.size else 0.0, P)
        vt = grid_ranks(np.ascontiguousarray(H.T), h_points)
        distinct = np.unique(np.concatenate(session.each(worker.rank, w_points)))
        # The pruned search needs the pairs' counts unless few observed cells make every
        # point's error known from the hits alone.
        s, t, error, _, _ = search_grid(
            _Rows(session, distinct, pairs=not p.observed),
            vt,
            P,
            p.nnz_ones,
            "pruned",
            w_points,
            h_points,
            normalize,
            p.observed,
        )
        session.each(worker.keep, self.key, s)
        k = H.shape[0]
        return {
            "H_continuous": H,
            "H": np.ascontiguousarray((vt > t).T),
            "grid_thresholds": (float(w_points[s]), float(h_points[t])),
            "thresholds": (np.full(k, float(w_points[s])), np.full(k, float(h_points[t]))),
            "error": int(error),
        }


class _SvdRows:
    """:class:`banmf.engine.protocol.Side` of X's rows for the NNDSVD's SVD: each block keeps
    its rows of one array at a time (``stored["svd"]``), so a block handed out here is that
    array's number, and one made since replaced it; the products by X on the blocks."""

    def __init__(self, session: Session):
        self.s, self.live = session, 0

    def _replaced(self) -> int:
        self.live += 1
        return self.live

    def _check(self, Y: int) -> None:
        if Y != self.live:
            raise RuntimeError(f"the SVD's rows {Y} were replaced by {self.live} on the blocks")

    def put(self, Y: np.ndarray) -> int:
        offsets = self.s.blocks.offsets
        own = {b: (Y[offsets[b] : offsets[b + 1]],) for b in range(len(offsets) - 1)}
        self.s.each(worker.svd_put, own=own)
        return self._replaced()

    def gram(self, Y: int) -> np.ndarray:
        self._check(Y)
        return self.s.sum(worker.svd_gram)

    def times(self, Y: int, M: np.ndarray) -> int:
        self._check(Y)
        self.s.each(worker.svd_times, M)
        return self._replaced()

    def x_times(self, C: np.ndarray, single: bool = False) -> int:
        """X C (C: m×c, sent to every worker), kept on the blocks; with ``single``, C sent and
        the product kept in float32 (:func:`banmf.engine.nndsvd.mask_product`)."""
        if single:
            C = C.astype(np.float32)
        self.s.each(worker.rows_apply, C, True, single)
        return self._replaced()

    def xt_times(self, Y: int, single: bool = False) -> np.ndarray:
        """Xᵀ Y (m, c), summed over the blocks in float64; with ``single``, Y read in float32
        and the sum rounded to float32 (the one-machine product's rounding, to that of its
        sums)."""
        self._check(Y)
        total = self.s.sum(worker.cols_apply, None, None, single)
        return total.astype(np.float32) if single else total

    def keep_left(self, U: int) -> np.ndarray:
        """Keep U as the left singular vectors' rows; the squares of their positive and
        negative parts (2, r), summed over the blocks."""
        self._check(U)
        self.live = None
        return self.s.sum(worker.keep_left)


class DaskBackend:
    """The row blocks of one fit on a Dask cluster.

    Parameters
    ----------
    model : banmf.distributed.BANMF
        The estimator: its parameters, and ``recoveries_`` counted on it.
    session : Session
        The blocks, placed on the workers (:meth:`open` places them).
    p : RunSettings
        The run's settings (``BANMF._check_params``, with ``observed`` and ``nnz_ones``).
    rng : numpy.random.Generator
        The random starts' generator.
    data : banmf.Dataset or None
        The data whole in this process when the fit was given it in memory; None for row
        blocks, gathered here only if a step needs it whole (:meth:`dataset`).
    unknown : {None, "missing", "observed"}
        The form of the unknown cells.
    sizes : tuple
        ``(columns, observed ones, observed cells)``.
    """

    whole_columns = False  # a block holds some rows of each column; the steps sum over blocks
    deferred = True  # Ctrl-C is counted and seen at the next safe point

    def __init__(self, model, session: Session, p, rng, data=None, unknown=None, sizes=()):
        self.model, self.session, self.p, self.rng = model, session, p, rng
        self.data, self.unknown, self.sizes = data, unknown, sizes
        self.interrupts = session.interrupts
        self.specs: dict = {}  # random start → how it was drawn
        self.error_counts: tuple[int, int] | None = None  # the kept start's (hits, cover)
        self._grecond: tuple | None = None  # GreConD's factors, once computed

    @classmethod
    def open(cls, model, session: Session, data, rng) -> DaskBackend:
        """The backend of ``model``'s fit over ``session``'s blocks, placed on the workers
        here and checked as read; its run settings from the blocks' sizes."""
        blocks = session.blocks
        n, m = blocks.shape
        k = check_n_components(model.n_components, (n, m))
        session.place(range(blocks.n_blocks))
        loads = [session.loads[b] for b in range(blocks.n_blocks)]
        _check_loaded(blocks, loads)
        nnz = sum(q[2] for q in loads)
        if nnz == 0:
            warnings.warn(
                "X has no nonzeros: nothing to factorize, the best W⊗H is all zeros",
                UserWarning,
                stacklevel=7,
            )
        forms = {q[5] for q in loads} - {None}
        if data is not None:
            form = data.unknown and ("observed" if data.unknown.observed else "missing")
        else:
            form = forms and ("observed" if next(iter(forms)) else "missing")
        unknown = form or None
        p = model._check_params(k, (n, m), nnz + sum(q[3] for q in loads))
        p = replace(p, observed=unknown == "observed", nnz_ones=nnz)
        model.recoveries_ = 0
        return cls(model, session, p, rng, data, unknown, (m, nnz, sum(q[4] for q in loads)))

    def fitted(self) -> dict:
        """The fitted attributes a cluster fit adds: the error's two parts, the blocks, the
        peak of a worker's blocks in memory and the traffic."""
        session = self.session
        hits, cover = self.error_counts
        return {
            "false_negatives_": int(self.p.nnz_ones - hits),
            "false_positives_": int(cover - hits),
            "n_blocks_": session.blocks.n_blocks,
            "peak_block_bytes_": session.peak_bytes(),
            "traffic_": {
                "sent_bytes": session.sent,
                "received_bytes": session.received,
                "round_trips": session.calls,
            },
        }

    def dataset(self):
        """The data whole in this process: as given, or gathered from the row blocks once (a
        step that reads X whole, as the predictor's choice and GreConD do on one machine)."""
        if self.data is None:
            n, m = self.session.blocks.shape
            check_memory(
                GATHERED_BYTES_PER_CELL * self.p.nnz + 8 * (n + 1),
                f"the row blocks of a {n}×{m} matrix gathered on this machine (the predictor "
                "of unknown cells and GreConD's factors read X whole)",
                "fit without unknown cells, or with combine=False, or on a machine with more "
                "memory",
            )
            self.data = Dataset.of(*self.session.blocks.gather())
        return self.data

    @contextlib.contextmanager
    def inner_fits(self):
        """The predictor's inner fit runs on the same cluster: the workers this fit lost (a
        hung worker, still listed by the scheduler) stay left alone."""
        token = lost_before.set(frozenset(self.session.hung))
        try:
            yield
        finally:
            lost_before.reset(token)

    def start_factors(self, outcome, observed: bool, again) -> dict:
        """Every start's Boolean rows (with two starts or more) and the NMF start's balanced
        rows (with ``missing=``) gathered from the blocks: the predictor's factors
        (:func:`banmf.engine.local.predictor_factors`), as one machine's records give them. A
        start whose rows a block read again (after a lost worker) runs again first."""
        runs = [run for _, run in outcome.kept]
        keys = [run.start for run in runs] if len(runs) > 1 else []
        nmf = None if observed else outcome.extra.get("nmf")
        session = self.session

        def gather():
            wanted = [*keys, *(["nmf"] if nmf is not None else [])]
            lost = set().union(*session.each(worker.lacks, wanted)) if wanted else set()
            for run in runs:
                if run.start in lost:
                    self._run_again(again, run)

            def rows(key, part):
                return np.concatenate([q[part] for q in session.each(worker.rows_of, key)])

            Ws = [rows(key, 1) for key in keys]
            return Ws, None if nmf is None else rows("nmf", 0)

        Ws, nmf_w = self.attempt(gather)
        return predictor_factors(Ws, [run.H for run in runs], nmf, nmf_w, observed)

    def side_by_side(self, n_starts: int) -> int:
        return 1  # the workers' threads run each start's blocks

    def random_starts(self):
        for i in range(self.p.n_init):
            self.specs[i] = self._draw_start()
            yield self.specs[i]

    def _draw_start(self) -> dict:
        """A random start as :meth:`banmf.BANMF._initial_factors` draws it from the
        generator: W's rows from the same stream (each worker jumps to its rows' place in it;
        with a bit generator other than PCG64, the rows are drawn here), then H."""
        blocks, model, rng = self.session.blocks, self.model, self.rng
        n, m = blocks.shape
        k, dtype = self.p.k, self.p.dtype
        tiny = np.finfo(dtype).eps
        bitgen = rng.bit_generator
        spec = {
            "init_scale": float(model.init_scale),
            "lower": float(model.lower),
            "upper": self.p.upper,
            "eps": float(model.eps),
        }
        # PCG64's advance counts draws (Philox's counts blocks of four): jump only there.
        if isinstance(bitgen, (np.random.PCG64, np.random.PCG64DXSM)):
            spec["stream"] = (type(bitgen).__name__, bitgen.state)
            H = worker.draw(spec["stream"], n * k, (k, m))
            bitgen.advance(n * k + k * m)
        else:
            spec["rows"] = [
                np.maximum(rng.random((int(b1 - b0), k)) * model.init_scale, tiny).astype(dtype)
                for b0, b1 in zip(blocks.offsets[:-1], blocks.offsets[1:], strict=True)
            ]
            H = rng.random((k, m))
        spec["Ht"] = np.ascontiguousarray(np.maximum(H * model.init_scale, tiny).T, dtype=dtype)
        return spec

    def begin(self, key, init: dict, project: bool) -> _DaskStart:
        offsets = self.session.blocks.offsets
        own = {}
        for b in range(self.session.blocks.n_blocks):
            start = {name: v for name, v in init.items() if name not in ("rows", "Ht")}
            start.update(row0=int(offsets[b]), project=project, parts=self.session.blocks.n_blocks)
            if "rows" in init:
                start["W"] = init["rows"][b]
            own[b] = (start,)
        self.session.each(worker.begin, init["Ht"], own=own)
        return _DaskStart(self, key, init["Ht"])

    def nmf_init(self) -> dict:
        """NNDSVDa over the blocks (:meth:`_nndsvd`, W's rows kept on them), else the first
        random start's factors."""
        Ht = self._nndsvd()
        first = self.specs[0]
        if Ht is None:
            return first
        spec = {name: v for name, v in first.items() if name not in ("stream", "rows")}
        spec.update(stored="nmf", Ht=Ht)
        return spec

    def _nndsvd(self) -> np.ndarray | None:
        """:func:`banmf.engine.nndsvd.nndsvda` over the blocks: returns Hᵀ (m, k) and keeps
        each block's rows of W on it (as "nmf"); None when the SVD cannot be computed.

        The SVD is the one machine's, with each product over X summed over the blocks: from
        :func:`~banmf.engine.nndsvd.use_randomized`'s size (the whole matrix's nonzeros) the
        randomized one (:func:`~banmf.engine.nndsvd.subspace_svd`, X's rows on the blocks and
        its columns here, :class:`_SvdRows`), below it ARPACK's (:meth:`_arpack`). The left
        vectors stay on the blocks. The factors agree with one machine's to rounding."""
        session, p = self.session, self.p
        n, m = session.blocks.shape
        k = p.k
        r = min(k, min(n, m) - 1)
        if r < 1 or p.nnz_ones == 0:
            return None
        rows = _SvdRows(session)
        if use_randomized(p.nnz_ones):
            U, S, V = subspace_svd((n, m), r, rows, Here, rows.x_times, rows.xt_times)
            Vt = V.T
        else:
            svd = self._arpack(rows, r)
            if svd is None:
                return None
            U, S, Vt = svd
        squares = rows.keep_left(U)
        Ht = np.zeros((m, k))
        picks: list = [None] * k
        for l, j in enumerate(np.argsort(-S, kind="stable")):
            part = nonnegative_part(np.sqrt(squares[0, j]), np.sqrt(squares[1, j]), Vt[j], S[j])
            if part is not None:
                side, b, na, nb, scale = part
                Ht[:, l] = scale * b / nb
                picks[l] = (int(j), side, scale / na)
        top = max(session.each(worker.nndsvd_rows, k, picks))
        fill = p.nnz_ones / (n * m)
        dtype = p.dtype
        floor = np.finfo(dtype).eps
        session.each(worker.nndsvd_fill, 1e-12 * max(top, 1.0), fill, dtype, floor)
        pick(fill_at_most, Ht.size)(Ht, 1e-12 * max(Ht.max(), 1.0), fill)
        return np.maximum(Ht, floor).astype(dtype, order="C")

    def _arpack(self, rows: _SvdRows, r: int) -> tuple | None:
        """scipy's ``svds`` (ARPACK) step by step: the Lanczos iterations on XᵀX (m ≥ n: on
        XXᵀ) with each product summed over the blocks, the same fixed start vector, then the
        left vectors from ``X V`` (their Gram summed over the blocks). Returns ``(U, S, Vt)``
        with U kept on the blocks, S ascending as ``svds`` gives it, or None where ARPACK
        fails."""
        from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh

        session = self.session
        n, m = session.blocks.shape
        offsets = session.blocks.offsets

        def gram(V):
            if n >= m:
                return session.sum(worker.gram_apply, V)
            return np.concatenate(
                session.each(worker.rows_apply, session.sum(worker.cols_apply, V, offsets))
            )

        size = min(n, m)
        operator = LinearOperator(
            (size, size),
            matvec=lambda v: gram(v.reshape(-1, 1))[:, 0],
            matmat=gram,
            dtype=np.float64,
        )
        try:
            _, eigvec = eigsh(operator, k=r, tol=0, v0=np.full(size, 1.0 / np.sqrt(size)))
        except (ArpackError, ArpackNoConvergence):
            return None
        eigvec, _ = np.linalg.qr(eigvec)
        if n >= m:
            # svd(X V) from the Gram of X V (r×r).
            Av = rows.x_times(eigvec)
            values, V = np.linalg.eigh(rows.gram(Av))
            S = np.sqrt(np.maximum(values, 0.0))
            return rows.times(Av, V / np.where(S > 0, S, 1.0)), S, V.T @ eigvec.T
        u, S, vh = np.linalg.svd(
            session.sum(worker.cols_apply, eigvec, offsets), full_matrices=False
        )
        u, S, vh = u[:, ::-1], S[::-1], vh[::-1]
        return rows.put(eigvec @ vh.T), S, u.T

    def greedy(self, name: str, k: int):
        """The "columns" start (:func:`banmf.engine.columns.column_factors`) over the blocks; W's rows
        stay on them."""
        counts = self.session.sum(worker.column_counts)
        top = top_columns(counts, k)
        H = np.zeros((k, counts.shape[0]), dtype=bool)
        H[np.arange(len(top)), top] = True
        self.session.each(worker.keep_columns, name, top, k)
        return None, H, self._error(name, H)

    def _error(self, start, H: np.ndarray) -> int:
        """The Hamming error (observed cells) of the start's kept rows times H."""
        hits, cover = self.session.sum(worker.counts, start, H)
        return int(self.p.nnz_ones + cover - 2 * hits)

    def refine_thresholds(self, run: StartRecord) -> dict:
        """Per-factor thresholds over the blocks (:func:`banmf.engine.refine.thresholds_over`): for a
        column of W, each block sends its rows' values and bit changes (16 bytes a row) and
        the cut is chosen here; for a row of H, the bit changes are summed over the blocks."""
        tw, th = (t.copy() for t in run.thresholds)
        history = [run.error]
        Htb = thresholds_over(
            _BlockRows(self, run.start),
            np.ascontiguousarray(run.H_continuous.T),
            tw,
            th,
            history=history,
        )
        return {"H": np.ascontiguousarray(Htb.T), "error": history[-1], "thresholds": (tw, th)}

    def polish(self, run: StartRecord, method: str) -> dict:
        """The polish over the blocks (:func:`banmf.engine.polish.polish_over`; the driver asks for
        flips here, the exact polish needing whole columns)."""
        Ht = np.array(run.H.T, order="C")
        history = [run.error]
        rounds = polish_over(_BlockRows(self, run.start), Ht, method, history=history)
        return {"H": np.ascontiguousarray(Ht.T), "error": history[-1], "polish_rounds": rounds}

    def swaps(self, run: StartRecord, method: str, most: int):
        """The swaps over the blocks (:func:`banmf.engine.swaps.swaps_over`): each factor's cost and
        each column's gain summed over the blocks, the new factor's rows found on theirs."""
        Ht = np.array(run.H.T, order="C")
        for l, j, error in swaps_over(_BlockRows(self, run.start), Ht, method, most):
            yield {"H": np.ascontiguousarray(Ht.T), "error": error, "swap": (l, j)}

    def attempt(self, work):
        """``work()``, run again after repairing the cluster each time a worker is lost (up to
        ``max_recoveries`` in the whole fit)."""
        model = self.model
        while True:
            try:
                return work()
            except WorkerLost as lost:
                if model.recoveries_ >= model.max_recoveries:
                    raise RuntimeError(
                        f"the fit lost a worker {model.recoveries_ + 1} times "
                        f"(max_recoveries={model.max_recoveries}); last: {lost}"
                    ) from None
                model.recoveries_ += 1
                warnings.warn(
                    f"a worker was lost ({lost}): its row blocks are read again on the live "
                    "workers and the step under way runs again",
                    UserWarning,
                    stacklevel=2,
                )
                self.session.repair()

    def combine(self, runs: list, k: int, again):
        """The combination over the blocks (:func:`banmf.engine.pool.choose` with
        :class:`_BlockSource`); the choice's rows stay on the blocks as the start
        "combined". A start whose rows a block read again (after a lost worker) no longer
        holds runs again first (``again(run, init)``), from its seed: the same rows. None
        when a deferred Ctrl-C came during the choice: the starts stand."""
        session = self.session
        lost = set().union(*session.each(worker.lacks, [run.start for run in runs]))
        for run in runs:
            if run.start in lost:
                self._run_again(again, run)
        more = []
        if all(run.start != "grecond" for run in runs) and self._grecond_pays(runs, k):
            if self._grecond is None:
                self._grecond = grecond_factors(self.dataset(), k)
            W, H = self._grecond
            offsets = session.blocks.offsets
            own = {b: (W[offsets[b] : offsets[b + 1]],) for b in range(session.blocks.n_blocks)}
            session.each(worker.keep_boolean, "grecond", own=own)
            more.append((("grecond", H), self.dataset().error(W, H)))
        try:
            _, H, error, info = choose(_BlockSource(self, k), runs, k, more)
        except _Stopped:
            session.each(worker.pool_end, None, None, k)
            return None
        return None, H, error, info["new"]

    def _grecond_pays(self, runs: list, k: int) -> bool:
        """One machine's decision (:func:`banmf.engine.pool.grecond_pays`), from the rows'
        squared degrees summed over the blocks."""
        from ...models.grecond import grecond_work_of

        p = self.p
        squares = float(self.session.sum(worker.degree_squares))
        work = grecond_work_of(p.shape, p.nnz_ones, squares, k)
        return grecond_pays(work, p.observed, p.shape, p.nnz_ones, k, runs)

    def _run_again(self, again, run: StartRecord) -> None:
        """``again(run, init)`` with the run again's own interruptions (none) seen by the
        steps' safe points."""
        counted, self.session.interrupts = self.session.interrupts, Interruptions()
        try:
            again(run, self.specs.get(run.start))
        finally:
            self.session.interrupts = counted

    def keep(self, best) -> None:
        """Only the best start so far keeps its rows on the blocks; the others keep their
        Boolean rows for the combination (``combine``) and the predictor of unknown cells,
        which also reads the NMF start's balanced rows (``missing=``)."""
        boolean = self.p.combine or self.unknown is not None
        whole = [best, *(["nmf"] if self.unknown == "missing" else [])]
        self.attempt(lambda: self.session.each(worker.keep_only, whole, boolean))

    def rows(self, best: StartRecord, again) -> tuple[np.ndarray, np.ndarray]:
        """The kept start's rows from every block, and the error's two parts
        (:attr:`error_counts`); a start that a block read again (after a worker was lost) no
        longer holds runs again first (``again``), from its seed: the same rows."""

        def gather():
            i = best.start
            if not all(self.session.each(worker.holds, i)):
                self._run_again(lambda run, init: again(init), best)
            parts = self.session.each(worker.rows_of, i)
            self.error_counts = self.session.sum(worker.counts, i, best.H)
            return np.concatenate([q[0] for q in parts]), np.concatenate([q[1] for q in parts])

        return self.attempt(gather)


class _BlockRows:
    """:class:`banmf.engine.protocol.Rows` with the kept start's rows of W in the row blocks on the
    workers: per-row work on each block, sums over the blocks here."""

    def __init__(self, backend: DaskBackend, start):
        self.backend, self.session, self.start = backend, backend.session, start
        self.Htb = None
        # The flips' bounds stay on the blocks (:func:`worker.polish_rows_of`); here, the
        # stamp they are kept under and H as they were counted against, while W moves only
        # by the flips (None: the blocks count new bounds).
        self._bounds: tuple | None = None
        self.moved = self.gain = None

    def polish_rows(self, Ht, method):
        if method != "flip":
            raise AssertionError("the exact polish needs whole columns: the driver refuses it here")
        since, moved = None, None
        if self._bounds is not None:
            since, counted = self._bounds
            moved = moved_bits(counted, Ht)
            if not moved.any():
                # H as counted: every block's bounds say that no row moves (the last flips
                # left none negative). One round trip less, the last round's.
                self.moved, self.gain = np.zeros(Ht.shape[1], dtype=np.int64), 0
                return 0
        self._bounds = (next(_stamps), Ht.copy())
        flips, self.moved, gain = self.session.sum(
            worker.polish_rows_of, self.start, Ht, since, moved, self._bounds[0]
        )
        self.gain = int(gain)
        return int(flips)

    def exact_columns(self, Ht):
        raise AssertionError("the exact polish needs whole columns: the driver refuses it here")

    def column_changes(self, A, columns, only=-1):
        return self.session.sum(worker.column_changes, self.start, A, columns, only)

    def fix(self, Htb):
        self.Htb = Htb.copy()  # sent with every factor's request: H as it was fixed

    def factor_changes(self, l):
        parts = self.session.each(worker.row_changes, self.start, self.Htb, l)
        return np.concatenate([q[0] for q in parts]), np.concatenate([q[1] for q in parts])

    def set_threshold(self, l, t):
        self.session.each(worker.set_threshold, self.start, l, t)
        self._bounds = None  # W moved otherwise than by the flips

    def swap_costs(self, Ht):
        return self.session.sum(worker.swap_costs, self.start, Ht)

    def swap_in(self, Ht, l, j):
        self.session.each(worker.swap_in, self.start, Ht, l, j)
        self._bounds = None  # W moved otherwise than by the flips

    def error(self, H):
        return self.backend._error(self.start, H)

    def stopped(self):
        return bool(self.session.interrupts.count)


class _Stopped(Exception):
    """A deferred Ctrl-C came during the combination's choice."""


class _BlockSource:
    """:class:`banmf.engine.protocol.PoolSource` over the row blocks: the starts' Boolean rows
    kept on them, the candidates' rows built there, every count summed over the blocks. A
    factor set is a start's key (None: the grown candidates) with its H; a candidate's rows
    are known across blocks by their count and hashes summed over the blocks."""

    def __init__(self, backend: DaskBackend, k: int):
        self.session, self.k = backend.session, k
        self.shape = self.session.blocks.shape
        self.nnz, self.observed = backend.p.nnz_ones, backend.p.observed
        self.counts: list = []  # per set, its factors' row counts (:meth:`row_keys`)

    def column_ones(self):
        return self.session.sum(worker.column_counts)

    def column_work(self):
        return self.session.sum(worker.association_work)

    def grow_rows(self, H):
        self.session.each(worker.grow_rows, H)

    def grow_columns(self, t0, t1):
        return self.session.sum(worker.grow_columns, t0, t1)

    def set_of(self, run):
        return run.start, run.H

    def grown_set(self, H):
        return None, H

    def row_keys(self, sets):
        offsets = self.session.blocks.offsets
        counts, hashes = self.session.sum(worker.pool_keys, [key for key, _ in sets], offsets)
        out, at = [], 0
        self.counts = []
        for _, H in sets:
            q = H.shape[0]
            part = counts[at : at + q].tolist()
            keys = [(c, *h) for c, h in zip(part, hashes[at : at + q].tolist(), strict=True)]
            out.append((keys, part))
            self.counts.append(part)
            at += q
        return out

    def pool(self, sets, picks):
        cols = [np.flatnonzero(sets[s][1][l]) for s, l in picks]
        keys = [key for key, _ in sets]
        self.session.each(worker.pool_build, keys, picks, cols)
        return Pool.counted(np.array([self.counts[s][l] for s, l in picks], dtype=np.int64), cols)

    def useful(self, pool):
        if self.observed:
            return np.arange(len(pool))
        ones, row_ones, hidden, row_hidden = self.session.sum(worker.pool_bounds)
        return bounded(pool, (ones, row_ones), (hidden, row_hidden))

    def take(self, pool, keep):
        self.session.each(worker.pool_take, keep, self.k)
        return pool.take(keep)

    def rows(self, pool, k):
        return _BlockPool(self.session)

    def w(self, pool, chosen, k):
        self.session.each(worker.pool_end, "combined", chosen, k)


class _BlockPool:
    """:class:`banmf.engine.protocol.PoolRows` over the blocks: the gains summed over them; the
    slot changes go to the blocks with the next gains asked for (one round trip each)."""

    def __init__(self, session: Session):
        self.session, self.fresh, self.moves = session, True, []

    def gains(self, col_codes, skip):
        if self.session.interrupts is not None and self.session.interrupts.count:
            raise _Stopped
        out = self.session.sum(worker.pool_gains, self.fresh, self.moves, col_codes, skip)
        self.fresh, self.moves = False, []
        return out

    def assign(self, slot, f, on):
        self.moves.append((slot, f, on))


#: Bytes per stored cell of X (observed ones and unknown cells) gathered on the driver: its CSR
#: index and the copies made while the blocks are stacked.
GATHERED_BYTES_PER_CELL = 16


def _check_loaded(blocks, loads: list) -> None:
    """The blocks as read agree with the layout (files may change after read_blocks)."""
    for b, (rows, cols, *_rest) in enumerate(loads):
        expected = int(blocks.offsets[b + 1] - blocks.offsets[b])
        if (rows, cols) != (expected, blocks.n_cols):
            where = blocks.sources[b] if isinstance(blocks.sources[b], Path) else "in memory"
            raise InputError(
                f"row block {b} ({where}) has shape {(rows, cols)}, expected "
                f"{(expected, blocks.n_cols)}: did the files change after read_blocks?"
            )
    forms = {q[5] for q in loads} - {None}
    if len(forms) > 1:
        raise InputError("row blocks mix both forms of unknown cells (missing and observed)")
