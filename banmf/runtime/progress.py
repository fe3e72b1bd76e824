"""Progress of long fits, reported as records of the ``banmf.progress`` logger.

Models never print: they say what they are doing here and whoever listens renders it (the
command line's status line, a notebook's own handler). Every record carries ``record.banmf``,
a dict with at least ``"event"``:

- ``"setup"``: ``start``, ``n_starts``, ``setup`` (what is being prepared) before the
  iterations begin, when that takes a while (level INFO);
- ``"iteration"``: ``start``, ``n_starts``, ``iteration``, ``max_iter`` (None when the total is
  not known in advance, e.g. GreConD adding factors until X is covered), ``objective``; at most
  every :data:`EVERY_SECONDS` per start, and at a start's last iteration (level DEBUG);
- ``"phase"``: ``start``, ``n_starts``, ``phase`` (``"threshold search"``,
  ``"per-factor thresholds"``, ``"polish"``) as each phase of a start begins (level INFO);
- ``"done"``: ``start``, ``n_starts``, ``error`` when a start is finished (level INFO).

A rank selection (:func:`banmf.select_rank`, ``n_components="auto"``) adds ``"rank_start"``
(``k``, ``rank`` of ``n_ranks``, the ranks ``ks`` it may try, ``n_fits``) as each rank's fits
begin, ``"fit_done"`` (``k``, ``fits_done``, ``n_fits``; DEBUG) as each of them ends,
``"fits"`` (the same, INFO, at most every 2 s), ``"rank"`` (its evidence) and ``"selected"``
when it has chosen; the records of the starts of its fits carry ``fit``, which fit they
belong to (``"fold 3 of 10"``, ``"all observed cells"``).

Starts are numbered from 1, in one count over all the starts of a fit (a BANMF fit's random
and extra starts alike); the records of a start that is not a random one carry its ``name``
(e.g. ``"columns"``, ``"nmf"``). ``n_starts`` is the total as known then: ``n_init="auto"``
may lower it once the first start has run. Starts that run side by side report from their own
threads.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time

logger = logging.getLogger("banmf.progress")

# Set while a method runs as a step of another's start (GreConD's factors for a BANMF start or
# its combination): the outer start reports, the inner fit's own "start 1/1" would mislead.
_inside: contextvars.ContextVar[bool] = contextvars.ContextVar("banmf_inside", default=False)


@contextlib.contextmanager
def inside_a_start():
    """Silence the progress of the fits run in this scope: they are a step of a start that
    reports for them."""
    token = _inside.set(True)
    try:
        yield
    finally:
        _inside.reset(token)


_fit: contextvars.ContextVar[str | None] = contextvars.ContextVar("banmf_fit", default=None)


@contextlib.contextmanager
def fit_label(label: str | None):
    """Label the records of the starts run in this scope with the fit they belong to."""
    token = _fit.set(label)
    try:
        yield
    finally:
        _fit.reset(token)


#: Least time between two iteration records of one start.
EVERY_SECONDS = 0.2


class StartProgress:
    """The reporter of one start (``start`` of ``n_starts``, up to ``max_iter`` iterations, or
    an unknown number if ``max_iter`` is None; ``name``: which kind of start, when it is not a
    random one)."""

    def __init__(self, start: int, n_starts: int, max_iter: int | None, name: str | None = None):
        self.start, self.n_starts, self.max_iter, self.name = start, n_starts, max_iter, name
        self.verbose = logger.isEnabledFor(logging.DEBUG)
        self.last = -EVERY_SECONDS

    def _emit(self, level: int, event: str, message: str, **fields) -> None:
        if _inside.get():
            return
        data = {"event": event, "start": self.start, "n_starts": self.n_starts, **fields}
        if _fit.get() is not None:
            data["fit"] = _fit.get()
        label = f"start {self.start}/{self.n_starts}"
        if self.name:
            data["name"] = self.name
            label += f" ({self.name})"
        logger.log(level, "%s: %s", label, message, extra={"banmf": data})

    def iteration(self, t: int, objective: float) -> None:
        """After iteration ``t`` (from 1)."""
        if not self.verbose:
            return
        now = time.monotonic()
        if now - self.last >= EVERY_SECONDS or t == self.max_iter:
            self.last = now
            self._emit(
                logging.DEBUG,
                "iteration",
                f"iteration {t}/{self.max_iter}" if self.max_iter else f"iteration {t}",
                iteration=t,
                max_iter=self.max_iter,
                objective=float(objective),
            )

    def setup(self, name: str) -> None:
        """As a preparation before the iterations begins."""
        if logger.isEnabledFor(logging.INFO):
            self._emit(logging.INFO, "setup", name, setup=name)

    def phase(self, name: str) -> None:
        """As a phase after the iterations begins."""
        if logger.isEnabledFor(logging.INFO):
            self._emit(logging.INFO, "phase", name, phase=name)

    def done(self, error: int) -> None:
        """When the start has its final error."""
        if logger.isEnabledFor(logging.INFO):
            self._emit(logging.INFO, "done", f"error {error}", error=int(error))
