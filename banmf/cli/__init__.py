"""The ``banmf`` command: factorize, info, generate, evaluate, complete, select-k, show, export,
plot, report.

Results go to stdout (a short table, or JSON with ``--json``); progress and diagnostics go to
stderr. Exit codes: 0 ok, 2 bad usage or bad input (one line, no traceback), 1 internal error,
141 stdout closed early (``| head``), 130 / 143 interrupted by SIGINT (Ctrl-C) / SIGTERM. The first signal finishes the best result so
far (written, if asked, and reported as interrupted); a second one aborts, writing nothing.
An internal error is one line; ``--debug`` (or ``BANMF_DEBUG=1``) prints its traceback first.

The package parses, renders and maps errors to exit codes; every computation is a library call.
:mod:`.parser` builds the options, :mod:`.inputs` turns them into the library's inputs,
:mod:`.render` writes what is shown, and one module per command group runs it: :mod:`.fit`
(factorize, on this machine or a cluster), :mod:`.data` (info, generate, evaluate, complete),
:mod:`.ranks` (select-k), :mod:`.results` (show, export, plot), :mod:`.report` (report).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import sys
import traceback
import warnings

from ..runtime.signals import signals_interrupt
from .exits import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    USER_ERRORS,
    UsageError,
)
from .fit import ahead_for
from .parser import attach_dashed_values, build_parser
from .render import Progress, announce, printable, warnings_to

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "Progress",
    "UsageError",
    "build_parser",
    "main",
    "main_entry",
]


def main(argv=None, *, stdout=None, stderr=None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 internal error, 2 bad input,
    130/143 interrupted by SIGINT/SIGTERM)."""
    words = sys.argv[1:] if argv is None else argv
    # A first run of `banmf factorize`: its second process compiling ahead starts beside the
    # parser's imports.
    with ahead_for(words) as early:
        return _run(words, early, stdout or sys.stdout, stderr or sys.stderr)


def _run(words: list[str], early, out, err) -> int:
    """:func:`main` beside ``early`` (:func:`banmf.cli.fit.ahead_for`)."""
    parser = build_parser()
    try:
        args = parser.parse_args(attach_dashed_values(words))
    except SystemExit as exc:  # argparse: --help or --version
        return int(exc.code or 0)
    except UsageError as exc:
        err.write(f"banmf: error: {printable(str(exc))}\n")
        return EXIT_USAGE
    args.early = early
    with signals_interrupt(announce(err)) as args.signals, warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = warnings_to(err)
        try:
            return args.func(args, out, err)
        except USER_ERRORS as exc:
            # The library's errors in the command line's words, where they differ.
            message = getattr(exc, "command_line", None) or str(exc)
            err.write(f"banmf: error: {printable(message)}\n")
            return EXIT_USAGE
        except KeyboardInterrupt:
            # Before any result existed, or a second signal: atomic writes leave no partial file.
            what, written = args.signals.name, getattr(args, "written", None)
            done = f"{written} was written" if written else "nothing written"
            aborted = len(args.signals.received) > 1
            if aborted:
                err.write(f"banmf: aborted by a second signal ({what} first); {done}\n")
            else:
                err.write(f"banmf: interrupted by {what} before any result existed; {done}\n")
            if getattr(args, "json", False):
                out.write(
                    json.dumps(
                        {
                            "command": args.command,
                            "interrupted": True,
                            "signal": what,
                            "aborted": aborted,
                            "written": written,
                        },
                        indent=2,
                    )
                    + "\n"
                )
            return args.signals.exit_code
        except BrokenPipeError:
            # The reader went away (``banmf complete ... | head``): nothing more to say. Point
            # stdout at nothing, so that Python's own flush at exit does not fail again.
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
            return EXIT_BROKEN_PIPE
        except MemoryError:
            err.write(
                "banmf: error: out of memory (set BANMF_MEMORY_LIMIT to refuse such work up front)\n"
            )
            return EXIT_USAGE
        except Exception as exc:  # anything else is our bug: say so, briefly
            if args.debug or os.environ.get("BANMF_DEBUG", "") not in ("", "0"):
                traceback.print_exc(file=err)
                how = "please report it with the traceback above"
            else:
                how = "please report it; --debug or BANMF_DEBUG=1 shows the traceback"
            err.write(
                f"banmf: internal error: {type(exc).__name__}: {exc} (a bug in banmf: {how})\n"
            )
            return EXIT_INTERNAL


def main_entry() -> None:
    """Console-script entry point (``banmf``)."""
    try:
        code = main()
    except KeyboardInterrupt:
        # Ctrl-C while starting (parsing, before the command's own handling is in place).
        sys.stderr.write("\nbanmf: interrupted while starting; nothing written\n")
        code = 128 + signal.SIGINT
    # The interpreter's garbage collections at exit walk every object, Numba's typing context
    # and compiled kernels among them, a good part of a later run's time. Frozen, they are
    # not walked; the exit is otherwise the same (atexit handlers, flushed streams).
    gc.freeze()
    sys.exit(code)
