"""What runs on the workers: each row block's state, kept in the worker process between the
tasks of a fit, and the tasks that read and update it.

A block is its rows of X, their unknown cells, the current start's multiplicative-update state
(:class:`banmf.models.MUSolver` over those rows: W's rows, Y, Y Hᵀ) and the Boolean rows
of the starts kept. Every task names its fit and block; a block that is not here (its worker
died and the task ran on another, or the fit was cleaned up) raises :class:`BlockLost`,
which the driver takes as a lost block. Tasks return only sums over the block's rows (k×k,
m×k, grid counts) or, at the end, the block's rows of W.

Out of core: a worker keeps at most ``budget`` bytes of blocks in memory (with their caches
of packed W for the threshold search); the least recently used ones beyond it wait in the
worker's local folder (pickled, without their caches) until a task needs them.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import threading
import weakref
from collections import Counter, OrderedDict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..._kernels.svd import fill_at_most
from ...data.masks import hits_and_cover, pack_rows, words
from ...io import read_dataset
from ...runtime.threads import pick, thread_budget
from ..booleanize import GridRows, grid_ranks
from ..changes import bit_changes, factor_costs
from ..columns import columns_as_factors, swap_rows
from ..iterations import MUSolver
from ..nndsvd import Here, mask_product
from ..polish import flip_half_step
from ..pool import Pool, WholePool, column_work, majority, majority_counts, segment_sums

_lock = threading.RLock()
#: (fit, block) → its state, most recently used last.
_blocks: OrderedDict[tuple[str, int], _Block | Path] = OrderedDict()
#: Per fit: the bytes of block state a worker keeps in memory (None: no limit), and the most
#: that was resident at once (the out-of-core test reads it).
_budgets: dict[str, int | None] = {}
_peaks: dict[str, int] = {}
#: Tasks using each block now: a block in use is never spilled.
_busy: Counter = Counter()
#: The cache of packed W that each block's ranks (a GridRows) keep for the threshold search,
#: as :func:`covers` sized it; it goes with them (new ranks, or the block spilled).
_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class BlockLost(LookupError):
    """A task asked for a block (or a start's rows) that this worker does not hold: its
    worker died and it was read again elsewhere, or the fit was cleaned up."""


class _Block:
    """One row block's state on its worker."""

    def __init__(self, data):
        self.data = data  # the block's rows (a Dataset): its observed ones and unknown cells
        self.solver: MUSolver | None = None
        self.scaled: np.ndarray | None = None  # the current start's balanced W rows
        self.rows: GridRows | None = None  # their grid ranks, for the threshold search
        # start → (W scaled, W bool); a start no longer the best keeps only its Boolean rows
        # when the starts are combined (its scaled ones None).
        self.kept: dict = {}
        # The flip polish's bounds on the polished start's rows (:func:`polish_rows_of`):
        # ``(stamp, slack)``, the stamp naming the H they were counted against.
        self.bounds: tuple | None = None
        self.stored: dict = {}  # rows kept between calls (the NNDSVD's)
        # The combination's state (:mod:`banmf.engine.pool`): the grown candidates' rows, the
        # whole pool's rows on this block, and the candidates taken with their slots.
        self.grown: np.ndarray | None = None
        self.pool: Pool | None = None
        self.candidates: WholePool | None = None

    @property
    def X(self):
        """The block's observed ones."""
        return self.data.X

    @property
    def Xt(self):
        """The block's columns as rows (the mask of its transpose), made once when needed."""
        return self.data.T.X

    @property
    def nbytes(self) -> int:
        data = self.data
        arrays = [data.X.indptr, data.X.indices, self.scaled]
        if "T" in vars(data):  # the transpose, once made
            arrays += [data.T.X.indptr, data.T.X.indices]
        if data.unknown is not None:
            arrays += [data.unknown.cells.indptr, data.unknown.cells.indices]
        if self.solver is not None:
            arrays += [v for v in vars(self.solver).values() if isinstance(v, np.ndarray)]
        if self.rows is not None:
            arrays.append(self.rows.u)
        for pair in self.kept.values():
            arrays += list(pair)
        if self.bounds is not None:
            arrays.append(self.bounds[1])
        arrays += self.stored.values()
        arrays.append(self.grown)
        for pool in (self.pool, self.candidates and self.candidates.pool):
            if pool is not None:
                arrays += [pool.row_ptr, pool.row_idx, pool.col_ptr, pool.col_idx]
        if self.candidates is not None:
            arrays.append(self.candidates.codes)
        return sum(a.nbytes for a in arrays if a is not None)


def _spill_folder() -> Path:
    """The worker's local folder (Dask's), else the system's temporary one."""
    try:
        from distributed import get_worker

        base = get_worker().local_directory
    except (ImportError, ValueError):
        base = tempfile.gettempdir()
    folder = Path(base) / f"banmf-blocks-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def _use(fit: str, b: int):
    """Block ``b`` of ``fit`` for the length of a task, read back from the spill folder if it
    waits there; other blocks not in use go there while the resident ones exceed the fit's
    budget."""
    key = (fit, b)
    with _lock:
        try:
            state = _blocks.pop(key)
        except KeyError:
            raise BlockLost(f"row block {b} of this fit is not on this worker") from None
        if isinstance(state, Path):
            with open(state, "rb") as fh:
                spilled, state = state, pickle.load(fh)
            spilled.unlink()
        _blocks[key] = state
        _busy[key] += 1
        _fit_budget(fit)
    try:
        yield state
    finally:
        with _lock:
            _busy[key] -= 1
            if not _busy[key]:
                del _busy[key]


class _Cache:
    """A block's cache of packed W (:meth:`GridRows.covers`): at most ``entries`` thresholds,
    at most ``entry`` bytes each; ``seen``, the thresholds asked for so far. Its LRU evicts only
    when full, so it holds ``min(entries, len(seen))`` of them."""

    def __init__(self, entries: int, entry: int):
        self.entries, self.entry = entries, entry
        self.seen: set[int] = set()

    @property
    def nbytes(self) -> int:
        return min(self.entries, len(self.seen)) * self.entry


def _resident_bytes(state: _Block) -> int:
    """A block's bytes in memory: its state and its cache of packed W."""
    cache = None if state.rows is None else _caches.get(state.rows)
    return state.nbytes + (0 if cache is None else cache.nbytes)


def _fit_budget(fit: str) -> None:
    """Spill the fit's least recently used blocks not in use until those resident, with their
    caches of packed W, fit its budget (call with the lock held)."""
    budget = _budgets.get(fit)
    resident = [(key, s) for key, s in _blocks.items() if key[0] == fit and isinstance(s, _Block)]
    total = sum(_resident_bytes(s) for _, s in resident)
    if budget is not None:
        for key, state in resident:
            if total <= budget:
                break
            if _busy[key]:
                continue
            path = _spill_folder() / f"{fit}-{key[1]}.pickle"
            with open(path, "wb") as fh:
                pickle.dump(state, fh, protocol=5)
            _blocks[key] = path
            total -= _resident_bytes(state)
    _peaks[fit] = max(_peaks.get(fit, 0), total)


def load(fit: str, b: int, source, budget: int | None) -> tuple:
    """Read block ``b`` (a file, or its rows sent in memory) and keep it here. Returns its
    ``(rows, columns, observed ones, cells the updates visit besides them, observed cells,
    unknown-cell form)``; the form is None without unknown cells, else
    :attr:`banmf.data.masks.Unknown.observed`."""
    data = read_dataset(source) if isinstance(source, (str, Path)) else source
    X, unknown = data.X, data.unknown
    with _lock:
        _budgets[fit] = budget
        _blocks[(fit, b)] = _Block(data)
        _fit_budget(fit)
    n, m = X.shape
    if unknown is None:
        return n, m, X.nnz, 0, n * m, None
    return n, m, X.nnz, unknown.pass_cells(X.nnz), unknown.observed_count(X.nnz), unknown.observed


def forget(fit: str) -> None:
    """Drop every block of ``fit`` from this worker (and its spill files)."""
    with _lock:
        for key in [key for key in _blocks if key[0] == fit]:
            state = _blocks.pop(key)
            if isinstance(state, Path):
                state.unlink(missing_ok=True)
        _budgets.pop(fit, None)
        _peaks.pop(fit, None)


def peak_bytes(fit: str) -> int:
    """The most bytes of ``fit``'s blocks this worker held in memory at once."""
    return _peaks.get(fit, 0)


def draw(spec: tuple, offset: int, shape: tuple[int, int]) -> np.ndarray:
    """``shape`` uniforms of the random stream ``spec`` (a bit generator's class name and
    state) from its ``offset``-th draw on: the values ``Generator.random`` gives there."""
    name, state = spec
    bitgen = getattr(np.random, name)()
    bitgen.state = state
    bitgen.advance(offset)
    return np.random.Generator(bitgen).random(shape)


def begin(fit: str, b: int, Ht0: np.ndarray, start: dict) -> None:
    """A new start on the block: its rows of the starting W (from the start's random stream
    or the rows sent) and the solver over its rows, Y = X."""
    k, dtype = Ht0.shape[1], Ht0.dtype
    with _use(fit, b) as block:
        W0 = start.get("W")
        if "stored" in start:  # rows computed here before (the NMF start's NNDSVD)
            W0 = block.stored.pop(start["stored"])
        elif W0 is None:
            n = block.X.shape[0]
            W0 = draw(start["stream"], start["row0"] * k, (n, k)) * start["init_scale"]
            W0 = np.maximum(W0, np.finfo(dtype).eps).astype(dtype, order="C")
        block.solver = MUSolver(
            block.data,
            W0,
            Ht0,
            project=start["project"],
            lower=start["lower"],
            upper=start["upper"],
            eps=start["eps"],
            parts=start["parts"],
        )
        block.scaled = block.rows = None


def step(fit: str, b: int, h: tuple | None, lam: float | None) -> tuple:
    """One round on the block: with ``h`` (an H step's result), take its H and project Y
    (the end of an iteration); with ``lam``, then the W step of the next. Returns the block's
    partial sums ``((Wᵀ Y)ᵀ, WᵀW, ‖W²−W‖², Σ residual², Σ s², Σ s² over its observed cells)``
    (0 for a half not run)."""
    with _use(fit, b) as block:
        solver = block.solver
        res = s2 = observed = 0.0
        if h is not None:
            solver.set_h(h[0], h[1])
            solver.step_y()
            res, s2 = float(solver.sq[:, 0].sum()), float(solver.sq[:, 1].sum())
            observed = float(solver.osq[:, 1].sum()) if solver.observed else 0.0
        if lam is None:
            return 0.0, 0.0, 0.0, res, s2, observed
        solver.step_w(lam)
        W = solver.W
        penalty = float(np.sum((W * W - W) ** 2)) if lam else 0.0
        return solver.WtY_partial.copy(), solver.WtW.copy(), penalty, res, s2, observed


def add(a, b):
    """Two partial sums added: arrays, or tuples of them item by item."""
    if isinstance(a, tuple):
        return tuple(x + y for x, y in zip(a, b, strict=True))
    return a + b


def node_sum(lo: int, hi: int, value, known: dict | None = None):
    """The sum of blocks ``lo:hi`` by the fixed binary tree over block indices (halves split
    at the middle): ``value(b)`` is block b's partial; ``known`` maps nodes ``(lo, hi)``
    already added (by the workers) to their sums."""
    if known is not None and (lo, hi) in known:
        return known[(lo, hi)]
    if hi - lo == 1:
        return value(lo)
    mid = (lo + hi) // 2
    return add(node_sum(lo, mid, value, known), node_sum(mid, hi, value, known))


def tree_nodes(lo: int, hi: int, owned) -> list[tuple[int, int]]:
    """The largest nodes of the tree over blocks ``lo:hi`` whose blocks are all in ``owned``."""
    inside = sum(1 for b in range(lo, hi) if b in owned)
    if inside == 0:
        return []
    if inside == hi - lo:
        return [(lo, hi)]
    mid = (lo + hi) // 2
    return tree_nodes(lo, mid, owned) + tree_nodes(mid, hi, owned)


class BlockServer:
    """A fit's row blocks on one worker, as a Dask actor: the driver calls it directly (no
    scheduler between), and it runs a task on each of its blocks: in turn, each on all the
    worker's threads, or, when the worker holds at least as many blocks as threads, side by
    side, each on one thread. Each block's W pass has only its share of the Wᵀ Y partials
    (:class:`banmf.models.MUSolver`'s ``parts``), often one, which one thread adds
    serially: side by side, the worker's blocks still use all its threads. The results are the
    same either way.

    :meth:`sums` returns the blocks' partials already added over every node of the tree over
    all blocks (:func:`node_sum`) that lies within this worker's blocks: the driver adds the
    rest of the tree the same way, so the sum is the same however blocks sit on workers.
    """

    def __init__(self, fit: str, threads: int):
        self.fit, self.threads = fit, threads

    def each(self, func, blocks: list, args: tuple = (), own: dict | None = None) -> list:
        """``func(fit, b, *args, *own[b])`` for each block; the results in block order."""

        def run(b, threads):
            with thread_budget(threads):
                return func(self.fit, b, *args, *(own[b] if own else ()))

        if self.threads > 1 and len(blocks) >= self.threads:
            with ThreadPoolExecutor(self.threads) as pool:
                return list(pool.map(run, blocks, [1] * len(blocks)))
        return [run(b, self.threads) for b in blocks]

    def sums(self, func, blocks: list, n_blocks: int, args: tuple = ()) -> dict:
        """The tree nodes within this worker's blocks: ``{(lo, hi): sum}``."""
        values = dict(zip(blocks, self.each(func, blocks, args), strict=True))
        return {
            (lo, hi): node_sum(lo, hi, values.__getitem__)
            for lo, hi in tree_nodes(0, n_blocks, set(blocks))
        }


# -- the NNDSVD start (banmf.engine.nndsvd, over row blocks) -------------------------------
# The SVD keeps one array of the block's rows at a time (``stored["svd"]``: X V, the sketch's
# basis, the left singular vectors): each task that makes one replaces the last.


def gram_apply(fit: str, b: int, V: np.ndarray) -> np.ndarray:
    """The block's share of ``XᵀX V`` (V: m×c), for ARPACK's operator."""
    with _use(fit, b) as block:
        return mask_product(block.Xt, mask_product(block.X, V))


def cols_apply(
    fit: str, b: int, x: np.ndarray | None, offsets: np.ndarray | None, single: bool = False
) -> np.ndarray:
    """The block's share of ``Xᵀ x`` (x: an n×c array, the block's rows of it
    ``offsets[b]:offsets[b + 1]``; None: the SVD's kept rows), in float64; with ``single``,
    those rows read in float32."""
    with _use(fit, b) as block:
        rows = block.stored["svd"] if x is None else x[offsets[b] : offsets[b + 1]]
        return mask_product(block.Xt, rows.astype(np.float32) if single else rows)


def rows_apply(
    fit: str, b: int, y: np.ndarray, keep: bool = False, single: bool = False
) -> np.ndarray | None:
    """The block's rows of ``X y`` (y: m×c); with ``keep``, kept here as the SVD's rows
    instead; with ``single``, y read and the rows made in float32."""
    with _use(fit, b) as block:
        rows = mask_product(block.X, y, single)
        if not keep:
            return rows
        block.stored["svd"] = rows
        return None


def svd_put(fit: str, b: int, rows: np.ndarray) -> None:
    """Keep the block's ``rows`` (sent) as the SVD's rows."""
    with _use(fit, b) as block:
        block.stored["svd"] = Here.put(rows)


def svd_gram(fit: str, b: int) -> np.ndarray:
    """The Gram of the SVD's rows (c, c), the block's share."""
    with _use(fit, b) as block:
        return Here.gram(block.stored["svd"])


def svd_times(fit: str, b: int, M: np.ndarray) -> None:
    """The SVD's rows become themselves times M (c, w)."""
    with _use(fit, b) as block:
        block.stored["svd"] = Here.times(block.stored["svd"], M)


def keep_left(fit: str, b: int) -> np.ndarray:
    """The SVD's rows are the block's rows of the left singular vectors: kept as such. Returns
    per vector the squares of its positive and negative parts, summed over the block's rows
    (2, r)."""
    with _use(fit, b) as block:
        U = block.stored.pop("svd")
        block.stored["U"] = U
        return np.stack([(np.maximum(U, 0) ** 2).sum(axis=0), (np.maximum(-U, 0) ** 2).sum(axis=0)])


def nndsvd_rows(fit: str, b: int, k: int, picks: list) -> float:
    """The block's rows of the NNDSVD's W: factor l is ``scale * part / norm`` of the left
    vector ``j`` (``picks[l] = (j, positive part?, scale / norm)``, None: left at 0). Returns
    their largest entry."""
    with _use(fit, b) as block:
        U = block.stored.pop("U")
        W = np.zeros((U.shape[0], k))
        for l, pick in enumerate(picks):
            if pick is not None:
                j, positive, factor = pick
                W[:, l] = factor * (np.maximum(U[:, j], 0) if positive else np.maximum(-U[:, j], 0))
        block.stored["nndsvd"] = W
        return float(W.max()) if W.size else 0.0


def nndsvd_fill(fit: str, b: int, cut: float, fill: float, dtype, floor: float) -> None:
    """Entries at rounding level (``<= cut``) become ``fill``; then the start's floor and
    type, as the NMF start takes them."""
    with _use(fit, b) as block:
        W = block.stored.pop("nndsvd")
        pick(fill_at_most, W.size)(W, cut, fill)
        block.stored["nmf"] = np.maximum(W, floor).astype(dtype, order="C")


# -- the threshold search and the Boolean rows ----------------------------------------------


def column_max(fit: str, b: int) -> np.ndarray:
    """The largest entry of each column of the block's W (zeros for an empty block)."""
    with _use(fit, b) as block:
        W = block.solver.W
        return W.max(axis=0).astype(np.float64) if W.shape[0] else np.zeros(W.shape[1])


def scale(fit: str, b: int, factors: np.ndarray | None) -> float:
    """Balance the block's rows of W (:func:`banmf.engine.booleanize.balance`; None: as they are);
    returns their largest entry."""
    with _use(fit, b) as block:
        W = block.solver.W.astype(np.float64)
        block.scaled = W if factors is None else W * factors[None, :]
        return float(block.scaled.max()) if block.scaled.size else 0.0


def rank(fit: str, b: int, points: np.ndarray) -> np.ndarray:
    """The block's grid ranks of W (:func:`banmf.engine.booleanize.grid_ranks`); returns the
    distinct ranks."""
    with _use(fit, b) as block:
        block.rows = GridRows(block.data, grid_ranks(block.scaled, points))
        return np.unique(block.rows.u)


def grid_sums(fit: str, b: int, vt: np.ndarray, P: int, pairs: bool) -> tuple:
    """The block's hit difference arrays (ones; unknown cells or zeros), factor sizes and,
    with ``pairs``, the rows each pair of factors shares (:meth:`GridRows.pair_counts`,
    P·k² integers: a temporary the size of a few m×k arrays, not counted in the budget; an
    empty array without)."""
    with _use(fit, b) as block:
        hits, cells = block.rows.hit_diffs(vt, P)
        sizes = block.rows.active_counts(P)
        shared = block.rows.pair_counts(P) if pairs else np.zeros(0, np.int64)
        return hits, np.zeros_like(hits) if cells is None else cells, sizes, shared


def packed_bytes(fit: str, b: int, P: int) -> int:
    """Bytes of the block's packed W at one threshold."""
    with _use(fit, b) as block:
        return block.rows.packed_bytes(P)


def covers(fit: str, b: int, requests: list, cache: int) -> np.ndarray:
    """The ones on the block of ``(u > s) ⊗ H`` for each request ``(s, packed Hs)`` and each
    H in it, in one array.

    The block's cache of packed W (up to ``cache`` thresholds, as the search sizes it) counts
    in the fit's budget: it gets an even share of the room the worker's blocks leave there,
    and none when they do not fit (each request then packs W again: the same counts, more
    work)."""
    with _use(fit, b) as block:
        rows = block.rows
        with _lock:
            held = _caches.get(rows)
            if held is None:
                held = _caches[rows] = _Cache(*_cache_room(fit, rows, cache))
            held.seen.update(int(s) for s, _ in requests)
        counts = rows.covers(requests, held.entries)
        with _lock:
            _fit_budget(fit)  # the cache grew: its peak, and room for it
        return np.array([c for row in counts for c in row], dtype=np.int64)


def _cache_room(fit: str, rows: GridRows, cache: int) -> tuple[int, int]:
    """``(entries, bytes per entry)`` for a block's cache of packed W of ``rows`` (call with
    the lock held): ``cache`` entries without a budget; else the budget less the fit's blocks
    on this worker, shared evenly by them (none if some wait on disk already)."""
    # At most: W's codes, bits and counts (:meth:`GridRows.packed_bytes` above every rank)
    # and its distinct rows (at most one per row, as long as a code).
    n, k = rows.u.shape
    entry = max(rows.packed_bytes(int(rows.u.max(initial=0))) + 8 * n * words(k), 1)
    budget = _budgets.get(fit)
    if budget is None:
        return cache, entry
    mine = [state for key, state in _blocks.items() if key[0] == fit]
    if any(isinstance(state, Path) for state in mine):
        return 0, entry
    room = (budget - sum(state.nbytes for state in mine)) // len(mine)
    return int(min(cache, max(room, 0) // entry)), entry


def keep(fit: str, b: int, start: int, s: int) -> None:
    """Keep the start's Boolean rows (``u > s``) with its balanced ones; the solver and the
    ranks go (the start is over)."""
    with _use(fit, b) as block:
        block.kept[start] = (block.scaled, block.rows.u > s)
        block.solver = block.rows = block.scaled = None


def column_counts(fit: str, b: int) -> np.ndarray:
    """Ones per column on the block."""
    with _use(fit, b) as block:
        X = block.X
        return np.bincount(X.indices, minlength=X.shape[1]).astype(np.int64)


def association_work(fit: str, b: int) -> np.ndarray:
    """The block's share of :func:`banmf.engine.pool.column_work`."""
    with _use(fit, b) as block:
        return column_work(block.X)


def degree_squares(fit: str, b: int) -> np.float64:
    """The sum of the block's rows' squared degrees (an integer, exact as a float64 up to
    2⁵³, so the same in any grouping): :func:`banmf.models.grecond.grecond_work_of`."""
    with _use(fit, b) as block:
        deg = np.diff(block.X.indptr).astype(np.float64)
        return np.float64(deg @ deg)


def keep_boolean(fit: str, b: int, start, W: np.ndarray) -> None:
    """Keep Boolean rows ``W`` of a factor set found on the driver (GreConD's, for the
    combination's pool) as the block's rows of ``start``."""
    with _use(fit, b) as block:
        block.kept[start] = (None, np.ascontiguousarray(W, dtype=bool))


def keep_columns(fit: str, b: int, start, top: np.ndarray, k: int) -> None:
    """Keep the block's rows of the "columns" start: factor l is column ``top[l]`` with all
    its rows (:func:`banmf.engine.columns.columns_as_factors`)."""
    with _use(fit, b) as block:
        W, _ = columns_as_factors(block.Xt, top, k)
        block.kept[start] = (W.astype(np.float64), W)


def counts(fit: str, b: int, start, H: np.ndarray) -> tuple:
    """``(hits, observed cells covered)`` of the kept start's rows times H on the block."""
    with _use(fit, b) as block:
        return tuple(
            np.int64(v)
            for v in hits_and_cover(block.X, block.kept[start][1], H, block.data.unknown)
        )


def keep_only(fit: str, b: int, starts: list, boolean: bool = False) -> None:
    """Drop the kept starts other than ``starts``; with ``boolean`` (the starts are to be
    combined), keep the others' Boolean rows."""
    with _use(fit, b) as block:
        if boolean:
            block.kept = {i: v if i in starts else (None, v[1]) for i, v in block.kept.items()}
        else:
            block.kept = {i: v for i, v in block.kept.items() if i in starts}
        block.bounds = None  # a start's polish is over once the best is chosen


def polish_rows_of(
    fit: str, b: int, start, Ht: np.ndarray, since, moved: np.ndarray | None, stamp
) -> tuple:
    """The flip polish's row half-step on the block's rows of the kept start (in place,
    :func:`banmf.engine.polish.flip_half_step`), with the bounds the block keeps: those of the
    half-step ``since`` names, lowered by ``moved`` (H's rows that changed since, per bit),
    if the block holds them; else new ones. The bounds left are kept under ``stamp``.
    Returns ``(flips, W's rows changed per bit (k,), change in error)``, to be summed over
    the blocks."""
    with _use(fit, b) as block:
        held = block.bounds
        slack = held[1] if held is not None and held[0] == since else None
        block.bounds = None  # lowered in place below: never kept under the old stamp
        slack, flips, changed, gain = flip_half_step(
            block.data, block.kept[start][1], Ht, slack, moved
        )
        block.bounds = (stamp, slack)
        return np.int64(flips), changed.astype(np.int64), np.int64(gain)


def column_changes(
    fit: str, b: int, start, A: np.ndarray, columns: np.ndarray, only: int = -1
) -> np.ndarray:
    """The block's share of the column updates of H: per column in ``columns`` (of H's
    packed columns ``A``) and factor l (``only``: that one), the change in error on the
    block's rows from switching bit l (:func:`banmf.engine.changes.bit_changes`)."""
    with _use(fit, b) as block:
        return bit_changes(block.data.T, A, block.kept[start][1], columns, only)


def row_changes(fit: str, b: int, start, Ht: np.ndarray, l: int) -> tuple:
    """For the per-factor threshold of factor l on W: the block's values of W's column l
    and each row's change in error from having bit l on (other bits as they are)."""
    with _use(fit, b) as block:
        scaled, W = block.kept[start]
        rows = np.arange(W.shape[0])
        d = bit_changes(block.data, pack_rows(W), Ht, rows, l)[:, 0]
        return scaled[:, l].copy(), d


def set_threshold(fit: str, b: int, start, l: int, t: float) -> None:
    """Factor l of W is its values above ``t`` on the block's rows."""
    with _use(fit, b) as block:
        scaled, W = block.kept[start]
        W[:, l] = scaled[:, l] > t


def swap_costs(fit: str, b: int, start, Ht: np.ndarray) -> tuple:
    """The block's share of :func:`banmf.engine.changes.factor_costs` for the kept start's rows:
    ``(removal (k,), cover (m, k + 1))``."""
    with _use(fit, b) as block:
        return factor_costs(block.data, block.kept[start][1], Ht)


def swap_in(fit: str, b: int, start, Ht: np.ndarray, l: int, j: int) -> None:
    """Swap column j in for factor l on the block's rows (:func:`banmf.engine.columns.swap_rows`)."""
    with _use(fit, b) as block:
        W = block.kept[start][1]
        rows = swap_rows(block.Xt, W, Ht, l, j)
        W[:, l] = False
        W[rows, l] = True


def holds(fit: str, b: int, start) -> bool:
    """Whether the block still holds the start's rows (a block read again holds none)."""
    with _use(fit, b) as block:
        return start in block.kept


def lacks(fit: str, b: int, starts: list) -> list:
    """The starts of ``starts`` whose rows the block does not hold (a block read again holds
    none)."""
    with _use(fit, b) as block:
        return [start for start in starts if start not in block.kept]


def rows_of(fit: str, b: int, start: int) -> tuple[np.ndarray, np.ndarray]:
    """The kept start's rows: ``(W balanced, W Boolean)``."""
    with _use(fit, b) as block:
        if start not in block.kept:
            raise BlockLost(f"row block {b} no longer holds start {start}")
        return block.kept[start]


# -- the combination of the starts (banmf.engine.pool, over row blocks) -----------------------

#: Seeds of the two 64-bit row hashes (splitmix64) that identify a candidate's rows across
#: blocks: summed over its rows and over the blocks, with its row count.
_HASH_SEEDS = np.array([0x9E3779B97F4A7C15, 0xD1B54A32D192ED03], dtype=np.uint64)


def _row_hashes(rows: np.ndarray) -> np.ndarray:
    """Two 64-bit hashes (splitmix64's finalizer) of each row index: (len(rows), 2)."""
    z = rows.astype(np.uint64)[:, None] + _HASH_SEEDS
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _set_rows(block: _Block, b: int, key) -> np.ndarray:
    """The Boolean rows of a factor set: a kept start's, or (None) the grown candidates'."""
    if key is None:
        return block.grown
    if key not in block.kept:
        raise BlockLost(f"row block {b} no longer holds start {key}")
    return block.kept[key][1]


def grow_rows(fit: str, b: int, H: np.ndarray) -> None:
    """The grown candidates' rows on the block against their columns ``H``
    (:func:`banmf.engine.pool.majority`)."""
    with _use(fit, b) as block:
        block.grown = majority(block.data, H.T)


def grow_columns(fit: str, b: int, t0: int, t1: int) -> tuple:
    """The block's share of the grown candidates ``t0:t1``'s column counts
    (:func:`banmf.engine.pool.majority_counts`; zeros without unknown cells)."""
    with _use(fit, b) as block:
        ones, cells, sizes = majority_counts(block.data, block.grown[:, t0:t1])
        return ones, np.zeros_like(ones) if cells is None else cells, sizes


def pool_keys(fit: str, b: int, keys: list, offsets: np.ndarray) -> tuple:
    """Per factor of the sets ``keys`` (in order, all factors in one array): its rows on the
    block, and the sum of their hashes (wrapping; (F, 2) uint64)."""
    with _use(fit, b) as block:
        hashes = _row_hashes(np.arange(offsets[b], offsets[b + 1]))
        counts, sums = [], []
        for key in keys:
            W = _set_rows(block, b, key)
            counts.append(W.sum(axis=0).astype(np.int64))
            sums += [hashes[W[:, l]].sum(axis=0, dtype=np.uint64) for l in range(W.shape[1])]
        return np.concatenate(counts), np.stack(sums)


def pool_build(fit: str, b: int, keys: list, picks: list, cols: list) -> None:
    """The pool on the block: candidate f is factor ``picks[f] = (set, l)`` of the sets
    ``keys``, its rows this block's (local indices), its columns ``cols[f]``. The grown
    candidates' rows go."""
    with _use(fit, b) as block:
        sets = [_set_rows(block, b, key) for key in keys]
        block.pool = Pool.of_lists([np.flatnonzero(sets[s][:, l]) for s, l in picks], cols)
        block.grown = None


def pool_bounds(fit: str, b: int) -> tuple:
    """The block's share of :func:`banmf.engine.pool.bounded`'s counts: ones per column and
    per candidate over its rows, and the same of the unknown cells."""
    with _use(fit, b) as block:
        pool, X, unknown = block.pool, block.X, block.data.unknown
        m = X.shape[1]
        ones = np.bincount(X.indices, minlength=m).astype(np.int64)
        row_ones = segment_sums(np.diff(X.indptr)[pool.row_idx], pool.row_ptr)
        if unknown is None:
            return ones, row_ones, np.zeros(m, dtype=np.int64), np.zeros_like(row_ones)
        cells = unknown.cells
        hidden = np.bincount(cells.indices, minlength=m).astype(np.int64)
        return (
            ones,
            row_ones,
            hidden,
            segment_sums(np.diff(cells.indptr)[pool.row_idx], pool.row_ptr),
        )


def pool_take(fit: str, b: int, keep: np.ndarray, k: int) -> None:
    """The candidates ``keep`` of the block's pool, no slot assigned."""
    with _use(fit, b) as block:
        block.candidates = WholePool(block.data, block.pool.take(keep), k)


def pool_gains(fit: str, b: int, fresh: bool, moves: list, col_codes, skip) -> np.ndarray:
    """The block's share of :meth:`banmf.engine.protocol.PoolRows.gains`, after the slot changes
    ``moves`` (``(slot, candidate, on)``, in order; ``fresh``: from no slot assigned)."""
    with _use(fit, b) as block:
        rows = block.candidates
        if fresh:
            rows.reset()
        for slot, f, on in moves:
            rows.assign(slot, f, on)
        return rows.gains(col_codes, skip)


def pool_end(fit: str, b: int, start, chosen: list | None, k: int) -> None:
    """The combination's state goes; with ``chosen`` (candidate per slot, -1: none), the
    block keeps their rows as the start ``start``."""
    with _use(fit, b) as block:
        if chosen is not None:
            W = block.candidates.pool.w(chosen, block.X.shape[0], k)
            block.kept[start] = (W.astype(np.float64), W)
        block.grown = block.pool = block.candidates = None
