"""The BANMF driver, written once over the row-block protocol (:mod:`banmf.engine.protocol`).

The starts (the greedy extra starts first, then the random ones, one after the other or side by
side, then "nmf"), each start's iterations and their stopping (``tol``, the callback, Ctrl-C),
the grid thresholds, the per-factor thresholds, the polish and the swaps, progress, and the
choice of the kept start. What a step computes, the backend computes.

Ctrl-C: the first ends the iterations of the start under way, or cuts its refinements short
(the steps done so far stand), and no further start begins; the best start so far is kept. A
second one aborts. A backend may defer the first (:func:`banmf.runtime.signals.deferred_interrupts`):
it is then counted in the fit's :class:`~banmf.runtime.signals.Interruptions` and seen at the next
safe point instead of raised.
"""

from __future__ import annotations

import functools
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

from ..data.params import Options, subset_of, validate_params
from ..exceptions import ConvergenceWarning, InvalidParameterError
from ..runtime.progress import StartProgress
from ..runtime.runner import run_side_by_side
from ..runtime.signals import Interruptions
from ..runtime.threads import cancelled
from .protocol import Backend, Start, StartRecord
from .settings import RunSettings
from .starts import auto_n_init

__all__ = ["WITHOUT_WHOLE_COLUMNS", "Driver", "Outcome", "check_backend", "settled"]

#: What the parameters that choose steps needing whole columns may be on a backend without
#: :attr:`Backend.whole_columns`: no exact polish, nor "auto" (which may pick it), no GreConD
#: start. ``polish=True`` flips bits there.
WITHOUT_WHOLE_COLUMNS = {
    "polish": [Options(False, True, "flip")],
    "extra_starts": [subset_of("nmf", "columns")],
}


def check_backend(model, backend) -> None:
    """Refuse a fit of ``model`` that needs what ``backend`` cannot do, before any work.

    The one place where the parameters meet a backend's capabilities: :meth:`Driver.fit`
    calls it first, and an estimator whose backend is costly to build may call it earlier
    with the backend's class.

    Parameters
    ----------
    model : banmf.BANMF
        The estimator, its parameters already checked against its own constraints.
    backend : Backend or type
        The backend, or its class (its capabilities are class attributes).

    Raises
    ------
    InvalidParameterError
        Without :attr:`~banmf.engine.protocol.Backend.whole_columns`: ``polish`` or
        ``extra_starts`` outside :data:`WITHOUT_WHOLE_COLUMNS`, or ``swap`` with ``polish=False``.
        Without :meth:`~banmf.engine.protocol.Backend.combine`: ``combine=True``.
    """
    kind = backend if isinstance(backend, type) else type(backend)
    if model.combine and getattr(kind, "combine", None) is None:
        raise InvalidParameterError(
            f"combine=True needs every start's factors, which {kind.__name__} does not keep: "
            "set combine=False"
        )
    if backend.whole_columns:
        return
    validate_params(
        WITHOUT_WHOLE_COLUMNS,
        {name: getattr(model, name) for name in WITHOUT_WHOLE_COLUMNS},
        type(model).__name__,
    )
    if model.swap and model.polish is False:
        # Said as banmf.distributed.BANMF has always said it: Dask's row blocks are, so far,
        # the one backend without whole columns.
        raise InvalidParameterError(
            "swap=True polishes after each swap, and with polish=False banmf.BANMF uses its "
            "'auto' polish there, whose exact form is not distributed: set polish=True "
            "(flips) or swap=False"
        )


def settled(losses: list, tol: float | None, every: int) -> bool:
    """Whether a start stops on ``tol`` after the iterations whose objectives are ``losses``:
    at every ``every``-th iteration past the first ``every``, once the objective moved by at
    most ``tol`` times the first objective over the last ``every`` iterations."""
    done = len(losses)
    if tol is None or done <= every or done % every:
        return False
    # Relative to the first objective (as scikit-learn's NMF): an exact fit drives f to 0,
    # where a change relative to f itself never gets small.
    return abs(losses[-1 - every] - losses[-1]) <= tol * max(losses[0], np.finfo(float).tiny)


@contextmanager
def timed(seconds: dict, phase: str):
    """Add the wall time of the enclosed code to ``seconds[phase]`` (also when it raises, so
    that a phase cut short by Ctrl-C still counts). Reading the clock changes no result."""
    begin = time.perf_counter()
    try:
        yield
    finally:
        seconds[phase] = seconds.get(phase, 0.0) + time.perf_counter() - begin


def last_start(run: StartRecord) -> bool:
    """Does this start end the restarts? Ctrl-C and the callback stop the whole fit, and
    nothing beats an exact fit."""
    return run.interrupted or run.stopped or run.error == 0


def greedy_record(W, H: np.ndarray, error: int, name: str, seconds: dict) -> StartRecord:
    """A start's record for Boolean factors found without iterations (a greedy start), before
    its polish and swaps; its "continuous" factors are the Boolean ones, thresholded at 0.5
    (W None: the backend keeps W's rows). ``seconds``: the times of its phases so far."""
    k = H.shape[0]
    return StartRecord(
        start=name,
        H=H,
        error=error,
        H_continuous=H.astype(np.float64),
        grid_thresholds=(0.5, 0.5),
        thresholds=(np.full(k, 0.5), np.full(k, 0.5)),
        booleanized_err=error,
        unpolished_err=error,
        refinement={name: error},
        seconds=seconds,
        W=W,
        W_continuous=None if W is None else W.astype(np.float64),
    )


@dataclass
class Outcome:
    """What a fit's starts gave: the random starts' records in start order, the extra ones'
    by name (in the order named), whether Ctrl-C ended the fit, the random starts it
    asked for (``n_init="auto"`` as the first start decided, or when none ran, the most it
    could decide), and the wall time of all the starts.

    Every record's ``"seconds"`` holds the wall time of each of its phases
    (:attr:`timings`)."""

    runs: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    interrupted: bool = False
    n_init: int = 0
    seconds: float = 0.0

    @property
    def timings(self) -> dict:
        """``{start: {phase: seconds}}`` for every start that ran, ranked as :attr:`kept`.

        The phases, in the order they run: ``"setup"`` (the NMF start's NNDSVD),
        ``"iterations"`` (the solver's set-up included), ``"threshold search"``,
        ``"per-factor thresholds"``, ``"greedy factors"`` (a greedy start's own work),
        ``"combining"`` (the combination's choice), ``"polish"``, ``"swaps"``; only those
        that ran. Starts side by side each count their own wall time.
        """
        return {start: dict(run.seconds) for start, run in self.kept}

    @property
    def kept(self) -> list[tuple]:
        """``(start, record)`` for every start that ran, ranked: random, then extra."""
        return [*enumerate(self.runs), *self.extra.items()]

    @property
    def best(self) -> tuple:
        """The kept start ``(start, record)``: the lowest error (ties: the first ranked)."""
        return min(self.kept, key=lambda start: start[1].error)


class Driver:
    """One BANMF fit's starts over a backend.

    Parameters
    ----------
    model : banmf.BANMF
        The estimator: its parameters (``callback``, ``thresholds``, ``tol``, ``normalize``,
        and those :func:`check_backend` reads).
    backend : Backend
        Where X is.
    p : RunSettings
        The run's settings (``BANMF._check_params``).
    interrupts : Interruptions
        The fit's interruptions, shared with a backend that defers Ctrl-C.
    deferred : bool, default False
        Ctrl-C is deferred (:func:`banmf.runtime.signals.deferred_interrupts`): a first one is only
        counted, and a KeyboardInterrupt in the iterations is then the callback's own, which
        stops the fit as Ctrl-C does, without the warning that tells a signal.
    """

    def __init__(
        self,
        model,
        backend: Backend,
        p: RunSettings,
        interrupts: Interruptions,
        deferred: bool = False,
    ):
        self.model, self.backend, self.p, self.interrupts = model, backend, p, interrupts
        self.deferred = deferred
        self.names: list[str] = []  # the extra starts, in the order ranked
        self.pooled: list[StartRecord] = []  # the starts the combination pooled, ranked

    # -- the starts ----------------------------------------------------------------------

    def fit(self, names: list[str]) -> Outcome:
        """Run the starts: the extra ones ``names`` and ``p.n_init`` random ones, then
        (``p.combine``, unless a start was exact or Ctrl-C came) their combination.

        The starts without iterations run first: when one is exact, nothing can beat it and
        no other start runs. They still rank after the random starts (ties: the earlier start,
        in the order random, then as named). Raises KeyboardInterrupt when Ctrl-C came before
        any start had factors; InvalidParameterError, before any start, when the fit needs
        what the backend cannot do (:func:`check_backend`)."""
        check_backend(self.model, self.backend)
        begin = time.perf_counter()
        p, interrupts = self.p, self.interrupts
        self.names = names
        greedy = [name for name in names if name != "nmf"]
        later = [name for name in names if name == "nmf"]
        out = Outcome()
        extra: dict[str, StartRecord] = {}
        interrupted = False
        for j, name in enumerate(greedy):
            if interrupts.count:  # Ctrl-C before the first start (deferred): none runs
                break
            total = len(greedy) + p.n_init + len(later) + p.combine
            progress = StartProgress(j + 1, total, p.max_iter, name)
            run, interrupted = self._attempt_extra(name, progress, [], extra)
            if interrupted or (run is not None and run.error == 0):
                break
        exact = any(run.error == 0 for run in extra.values())
        if not interrupted and not exact and not interrupts.count:
            out.runs, interrupted = self.run_starts(
                extra, before=len(greedy), after=len(later) + p.combine
            )
        # Ctrl-C and the callback end the fit; nothing beats an exact fit.
        ended = interrupted or any(map(last_start, (*out.runs, *extra.values())))
        for name in later:
            if ended or interrupts.count:
                break
            number = len(greedy) + len(out.runs) + 1
            progress = StartProgress(number, number + p.combine, p.max_iter, name)
            run, interrupted = self._attempt_extra(name, progress, out.runs, extra)
            ended = interrupted
        ended = interrupted or any(map(last_start, (*out.runs, *extra.values())))
        if p.combine and not ended and not interrupts.count:
            # Ranked after every start: it is kept only when strictly lower than all.
            kept = [*out.runs, *(extra[name] for name in names if name in extra)]
            self.pooled = kept
            self.names = [*names, "combined"]
            number = len(kept) + 1
            progress = StartProgress(number, number, p.max_iter, "combined")
            _, interrupted = self._attempt_extra(
                "combined", progress, out.runs, extra, lambda: self.combined(kept, progress)
            )
        out.extra = {name: extra[name] for name in self.names if name in extra}
        out.interrupted = interrupted or bool(interrupts.count)
        decided = p.auto_n_init and out.runs
        out.n_init = auto_n_init(p, out.runs[0].n_iter) if decided else p.n_init
        if not out.kept:  # Ctrl-C before any start had factors: nothing to keep
            raise KeyboardInterrupt
        out.seconds = time.perf_counter() - begin
        return out

    def _attempt_extra(self, name, progress, runs: list, extra: dict, work=None):
        """An extra start (``work()``, by default :meth:`extra_start`) through the backend's
        :meth:`~Backend.attempt`; its record goes into ``extra`` (if it ran) and the best so
        far is kept."""
        work = work or (lambda: self.extra_start(name, progress))
        run, interrupted = self.backend.attempt(work)
        if run is not None:
            extra[name] = run
            self._keep_best(runs, extra)
        return run, interrupted

    def _keep_best(self, runs: list, extra: dict) -> None:
        """Tell the backend the best start so far (ties: the first ranked)."""
        ranked = [*runs, *(extra[name] for name in self.names if name in extra)]
        self.backend.keep(min(ranked, key=lambda run: run.error).start)

    def run_starts(
        self, extra: dict, before: int = 0, after: int = 0
    ) -> tuple[list[StartRecord], bool]:
        """Every random start's run, in start order, up to and including the first that ends
        the restarts (:func:`last_start`): one after the other, or side by side, one thread
        each, as many as the backend runs at once (:meth:`Backend.side_by_side`), on
        :func:`banmf.runtime.runner.run_side_by_side`. Either way the list is the same. Also returns
        whether Ctrl-C stopped the starts.

        The first Ctrl-C ends the starts: the running ones booleanize their factors so far
        (side by side, or one after the other unless an earlier start's result stands) and
        the best is kept; a second one aborts (``KeyboardInterrupt`` propagates).

        The progress counts every start of the fit: ``before`` run ahead of these, ``after``
        may follow them."""
        p, interrupts, backend = self.p, self.interrupts, self.backend
        n_starts = p.n_init
        workers = backend.side_by_side(n_starts)
        inline = workers == 1
        lock = None if inline else threading.Lock()  # the callback, called from every start
        limit = n_starts  # starts from here on are not part of the fit (an earlier one decided)
        runs: dict[int, StartRecord] = {}  # the starts with a result so far, by index
        dropped = False  # Ctrl-C in a start's threshold search (one after the other)

        def start(i: int, init) -> StartRecord | None:
            progress = StartProgress(before + i + 1, before + limit + after, p.max_iter)
            return backend.attempt(
                lambda: self.fit_one(
                    i,
                    init,
                    progress,
                    lock=lock,
                    # In a thread of its own, KeyboardInterrupt can come from the callback
                    # alone (Ctrl-C reaches the calling thread only), and stops this start only.
                    interrupts=interrupts if inline else Interruptions(),
                    needed=not inline or not runs,
                )
            )

        def ended(i: int, run: StartRecord | None, starts) -> None:
            nonlocal limit, dropped
            if run is None:  # the earlier starts stand
                dropped = True
                starts.stop()
                return
            runs[i] = run
            if run.stopped or run.interrupted or interrupts.count:
                # The callback stops the whole fit (by its return value or a KeyboardInterrupt),
                # and so does Ctrl-C, deferred (only counted) or not.
                starts.stop()
            else:
                if i == 0 and p.auto_n_init:
                    # Starts past the number the first allows are not part of the fit.
                    limit = min(limit, auto_n_init(p, run.n_iter))
                if run.error == 0:
                    # An exact fit ends the restarts: later starts stop, earlier ones run to
                    # their end.
                    limit = min(limit, i + 1)
                starts.keep_first(limit)
            self._keep_best([runs[j] for j in sorted(runs) if j < limit], extra)

        def warn(starts) -> None:
            if starts.workers > 1:  # one after the other, the start itself says it
                warnings.warn(
                    "interrupted: the running starts stop here and booleanize their factors so far",
                    UserWarning,
                    # The caller of BANMF.fit: this function, the runner's rule, its wait for
                    # the threads and itself, run_starts, Driver.fit, BANMF.fit, its budget.
                    stacklevel=9,
                )

        done = run_side_by_side(
            (functools.partial(start, i, init) for i, init in enumerate(backend.random_starts())),
            workers=workers,
            on_done=ended,
            on_interrupt=warn,
            interrupts=interrupts,
            name="banmf-start",
        )
        return [run for run in done.ordered() if run is not None], done.interrupted or dropped

    def rows(self, best: StartRecord) -> tuple[np.ndarray, np.ndarray]:
        """The kept start's W ``(balanced continuous, Boolean)`` from the backend."""
        return self.backend.rows(best, functools.partial(self.rerun, best))

    def rerun(self, best: StartRecord, init) -> None:
        """Run the kept start ``best`` again from ``init`` (its initial factors; None for an
        extra start), for a backend that lost its rows: exactly the iterations it ran (Ctrl-C,
        the callback or the tolerance may have ended it), with neither the callback nor Ctrl-C
        cutting the run short; "combined", the combination of the same starts. Raises
        RuntimeError if it ends elsewhere."""
        key = best.start
        p = replace(self.p, max_iter=best.n_iter, tol=None, rerun=True)
        driver = Driver(self.model, self.backend, p, Interruptions(), self.deferred)
        progress = StartProgress(1, 1, p.max_iter, key if isinstance(key, str) else None)
        if key == "combined":
            run, _ = driver.combined(self.pooled, progress)
        elif isinstance(key, str):
            run, _ = driver.extra_start(key, progress)
        else:
            run = driver.fit_one(key, init, progress, interrupts=driver.interrupts)
        if run is None or run.error != best.error or not np.array_equal(run.H, best.H):
            error = None if run is None else run.error
            raise RuntimeError(
                f"start {key} ran again after a lost worker and ended elsewhere (error "
                f"{error}, not {best['error']}): the result would not be consistent"
            )

    # -- one start -----------------------------------------------------------------------

    def fit_one(
        self,
        key,
        init,
        progress: StartProgress,
        *,
        lock=None,
        interrupts: Interruptions | None = None,
        needed: bool = True,
        project: bool | None = None,
        setup: dict | None = None,
    ) -> StartRecord | None:
        """One start from ``init``: iterate, threshold, refine the thresholds, polish, swap.
        ``setup``: the times of the phases that prepared ``init`` (:attr:`Outcome.timings`).

        The first Ctrl-C of the fit (``interrupts``) ends the iterations, or cuts the
        refinements short (the steps done so far stand). In the threshold search, it drops the
        start (returns None) unless the start is ``needed`` (no earlier start has a result):
        then the search runs again and only a second Ctrl-C stops it.
        """
        project = self.model._project_y if project is None else project
        seconds = {} if setup is None else dict(setup)
        with timed(seconds, "iterations"):
            start = self.backend.begin(key, init, project)
            losses, n_iter, interrupted, stopped = self.iterate(
                start, progress=progress, lock=lock, interrupts=interrupts
            )

        def absorbed() -> bool:  # in an except KeyboardInterrupt block: go on (True) or abort
            return not interrupted and interrupts is not None and interrupts.first()

        def search() -> StartRecord:
            with timed(seconds, "threshold search"):
                found = start.threshold()
            return StartRecord(
                start=key,
                **found,
                losses=losses,
                n_iter=n_iter,
                stopped=stopped,
                booleanized_err=found["error"],
                unpolished_err=found["error"],
                refinement={"grid": found["error"]},
                seconds=seconds,
            )

        out = None
        try:
            progress.phase("threshold search")
            out = search()
            if self.model.thresholds == "per-factor":
                progress.phase("per-factor thresholds")
                with timed(seconds, "per-factor thresholds"):
                    ref = self.backend.refine_thresholds(out)
                # One call, so that a Ctrl-C lands before or after the whole step.
                out.update(
                    ref,
                    unpolished_err=ref["error"],
                    refinement={**out.refinement, "per-factor thresholds": ref["error"]},
                )
            self.boolean_steps(out, progress)
        except KeyboardInterrupt:
            # The steps done so far stand; without a search done, the start is dropped if an
            # earlier one has a result, else its factors must be booleanized all the same.
            if not absorbed():
                raise
            interrupted = True
            if out is None:
                if not needed:
                    return None
                out = search()
        out.update(
            interrupted=interrupted, signalled=interrupts is not None and interrupts.count > 0
        )
        progress.done(out.error)
        return out

    def iterate(
        self,
        start: Start,
        *,
        progress: StartProgress | None = None,
        lock: threading.Lock | None = None,
        interrupts: Interruptions | None = None,
    ):
        """Iterate; returns (loss curve, iterations done, interrupted, stopped by the callback).

        A cancel (:func:`banmf.runtime.threads.cancelled`: the start is no longer wanted) ends the
        run as Ctrl-C does; ``lock`` serialises the callback's calls when starts run side by
        side. The first Ctrl-C of the fit (``interrupts``) ends the iterations; without
        ``interrupts`` it propagates.
        ``p.rerun``: a start run again exactly, without the callback."""
        p, model = self.p, self.model
        callback = None if p.rerun else model.callback
        lams, max_iter, tol, every = p.lams, p.max_iter, p.tol, p.check_every
        losses: list[float] = []
        interrupted = stopped = converged = False
        chunk = start.chunk(every, callback is not None)
        try:
            done = 0
            while done < max_iter:
                n = min(chunk, max_iter - done, every - done % every)
                for f in start.iterate(lams[done : done + n]):
                    done += 1
                    f = float(f)
                    losses.append(f)
                if progress is not None:
                    progress.iteration(done, f)
                if interrupts is not None and interrupts.count:  # a deferred Ctrl-C
                    interrupted = True
                    _warn_interrupted(len(losses))
                    break
                if callback is not None:
                    try:
                        if lock is None:
                            stop_now = callback(done, f)
                        else:
                            with lock:
                                stop_now = callback(done, f)
                    except KeyboardInterrupt:
                        # Without deferred Ctrl-C a signal may land here too: the handler
                        # below takes both.
                        if not self.deferred or interrupts is None or not interrupts.first():
                            raise
                        interrupted = True
                        break
                    if stop_now:
                        stopped = True
                        break
                if cancelled():  # a start side by side no longer wanted, or a caller's cancel
                    interrupted = True
                    break
                if settled(losses, tol, every):
                    converged = True
                    break
        except KeyboardInterrupt:
            if interrupts is None or not interrupts.first():
                raise
            interrupted = True
            _warn_interrupted(len(losses))
        # Only a tolerance the user asked for warns: "auto" is a saving, not a promise.
        if (
            tol is not None
            and tol > 0
            and model.tol != "auto"
            and not converged
            and not interrupted
            and len(losses) == max_iter
        ):
            warnings.warn(
                f"max_iter={max_iter} reached before the objective settled to tol={tol}",
                ConvergenceWarning,
                stacklevel=4,
            )
        return np.asarray(losses), len(losses), interrupted, stopped

    def boolean_steps(self, out: StartRecord, progress: StartProgress) -> None:
        """The polish and the swaps on a start's Boolean factors, updating ``out`` after each
        step, so that Ctrl-C keeps the steps done so far."""
        p, backend = self.p, self.backend
        method = p.polish
        if method is not None and not backend.whole_columns:
            method = "flip"  # polish=True ("auto"): check_backend left only flips here
        if method is not None:
            progress.phase("polish")
            with timed(out.seconds, "polish"):
                pol = backend.polish(out, method)
            out.update(pol, refinement={**out.refinement, "polish": pol["error"]})
        k = out.H.shape[0]
        if p.swap and out.error > 0 and k > 0:
            progress.phase("swaps")
            # At most one swap per factor on average: each is a polish, and on sparse data
            # the first few swaps bring nearly all of the gain.
            with timed(out.seconds, "swaps"):
                for step in backend.swaps(out, method or "auto", k):
                    swap = step.pop("swap")
                    out.update(
                        step,
                        swaps=[*out.swaps, swap],
                        refinement={**out.refinement, "swaps": step["error"]},
                    )

    def extra_start(self, name: str, progress: StartProgress) -> tuple[StartRecord | None, bool]:
        """One of ``extra_starts``, refined as every start is: its record (None if it did not
        run: NMF's own start in :class:`banmf.NMF`, or Ctrl-C before it had factors) and
        whether Ctrl-C cut it short."""
        interrupts = self.interrupts
        if name == "nmf":
            if not self.model._project_y:  # NMF itself: the first start was this start
                return None, False
            progress.setup("NNDSVD")
            seconds: dict = {}
            try:
                with timed(seconds, "setup"):
                    init = self.backend.nmf_init()
            except KeyboardInterrupt:
                if not interrupts.first():
                    raise
                return None, True
            run = self.fit_one(
                name,
                init,
                progress,
                interrupts=interrupts,
                needed=False,
                project=False,
                setup=seconds,
            )
            return run, run is None or run.interrupted
        seconds: dict = {}
        try:
            progress.phase("greedy factors")
            with timed(seconds, "greedy factors"):
                W, H, error = self.backend.greedy(name, self.p.k)
        except KeyboardInterrupt:
            if not interrupts.first():
                raise
            return None, True
        return self._refined(greedy_record(W, H, error, name, seconds), progress)

    def combined(self, kept: list, progress: StartProgress) -> tuple[StartRecord | None, bool]:
        """The combination of the starts ``kept`` (:mod:`banmf.engine.pool`): k of their
        factors chosen for the lowest error, then polished and swapped as a start unless they
        are the best start's own; its record (None if Ctrl-C came before the choice) and
        whether Ctrl-C cut it short."""
        seconds: dict = {}
        try:
            progress.phase("combining")
            with timed(seconds, "combining"):
                chosen = self.backend.combine(kept, self.p.k, self.rerun)
        except KeyboardInterrupt:
            if not self.interrupts.first():
                raise
            return None, True
        if chosen is None:  # a deferred Ctrl-C during the choice: the starts stand
            return None, True
        W, H, error, new = chosen
        run = greedy_record(W, H, error, "combined", seconds)
        if new:
            return self._refined(run, progress)
        # The best start's own factors: its polish and swaps ended where they are.
        progress.done(error)
        return run, False

    def _refined(self, run: StartRecord, progress: StartProgress) -> tuple[StartRecord, bool]:
        """A start without iterations through the polish and the swaps."""
        interrupts = self.interrupts
        try:
            self.boolean_steps(run, progress)
        except KeyboardInterrupt:  # the steps done so far stand
            if not interrupts.first():
                raise
            run.interrupted = True
        progress.done(run.error)
        return run, run.interrupted


def _warn_interrupted(done: int) -> None:
    warnings.warn(
        f"interrupted after {done} iterations; booleanizing the factors so far",
        UserWarning,
        stacklevel=4,
    )
