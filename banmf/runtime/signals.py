"""Stopping long work cleanly: Ctrl-C (SIGINT) and SIGTERM.

The rule everywhere: the first interruption of a fit ends its iterations and finishes the best
result so far (the model is usable, ``interrupted_`` is True, and ``KeyboardInterrupt`` is
raised again once it is, so that a loop of fits stops); a second one aborts at once. Both
signals reach banmf as ``KeyboardInterrupt`` in the main thread: Python raises it for SIGINT,
and :func:`signals_interrupt` makes SIGTERM (what batch schedulers send) do the same.
"""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["Interruptions", "signals_interrupt"]


class Interruptions:
    """The interruptions one fit has seen, shared by the threads running its starts."""

    def __init__(self):
        self.count = 0
        self._lock = threading.Lock()

    def first(self) -> bool:
        """Count one; True if it is the first (finish the work), False if not (abort).

        Call it in an ``except KeyboardInterrupt`` block and re-raise when it returns False.
        """
        with self._lock:
            self.count += 1
            return self.count == 1


class SignalLog:
    """The signals received under :func:`signals_interrupt`, first first."""

    def __init__(self):
        self.received: list[int] = []

    @property
    def exit_code(self) -> int:
        """The shell's code for death by the first signal received (130 for SIGINT, 143 for
        SIGTERM), or 130 when Ctrl-C came by another route."""
        return 128 + (self.received[0] if self.received else signal.SIGINT)

    @property
    def name(self) -> str:
        return signal.Signals(self.received[0]).name if self.received else "SIGINT"


@contextlib.contextmanager
def signals_interrupt(notify=None):
    """Within this context SIGINT and SIGTERM both raise ``KeyboardInterrupt`` in the main
    thread, and the signals received are logged (yields a :class:`SignalLog`).

    ``notify(log)``, if given, is called on each signal before the exception is raised (to say
    at once what happens next). Outside the main thread (where Python does not allow handlers)
    it only yields the log.
    """
    log = SignalLog()
    if threading.current_thread() is not threading.main_thread():
        yield log
        return

    def interrupt(signum, frame):
        log.received.append(signum)
        if notify is not None:
            notify(log)
        raise KeyboardInterrupt

    saved = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield log
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def deferred_interrupts(interrupts: Interruptions):
    """Within this context (in the main thread) the first SIGINT only counts in
    ``interrupts``, for work that stops at its next safe point rather than wherever the
    signal lands; the second raises ``KeyboardInterrupt`` as usual. A SIGTERM handler that a
    caller installed (:func:`signals_interrupt`) is deferred the same way; Python's default
    SIGTERM is left alone. Handlers in force are still called, so that they log and announce
    each signal."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def deferring(previous):
        def handle(signum, frame):
            first = interrupts.first()
            try:
                previous(signum, frame)
            except KeyboardInterrupt:
                if not first:
                    raise

        return handle

    saved = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        if callable(previous):
            saved[sig] = signal.signal(sig, deferring(previous))
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
