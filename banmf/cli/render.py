"""What the command line shows: the progress line on stderr, summaries, patterns and tables
on stdout (or JSON), warnings and signals in one line each."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import signal
import threading
import time


class Progress(logging.Handler):
    """The status of a fit on stderr, from the ``banmf.progress`` records (:mod:`banmf.runtime.progress`)
    and numba's compile events.

    On a terminal: one line rewritten every 0.1 s (start i/N, iteration, objective, elapsed
    time, ETA). Otherwise: quiet for the first 2 s, then a line every 2 s, so that a long run
    never goes silent. Compiling kernels is announced at once, and its time is kept apart
    (:attr:`compile_seconds`) so that the fit's own time can be reported without it.

    While a rank selection runs (``-k auto``) the line says the rank (i of N, its k), the fit
    (which fold), its fits done, and the time left for the whole selection: the time so far
    per unit of work done, a rank's fits counting k units each (a fit's cost grows with k),
    times the work of the ranks left, an upper bound when the patience stop may end it
    sooner.
    """

    TTY_EVERY, LOG_EVERY = 0.1, 2.0

    def __init__(self, stream, what: str, enabled: bool = True, ahead=None):
        super().__init__(level=logging.DEBUG)
        # Called on the first compilation: starts compiling the rest in a second process
        # (:func:`banmf.runtime.warmup.ahead`); its handle is stopped when the progress ends.
        self._ahead, self._ahead_handle = ahead, None
        self.compiled: set[str] = set()  # the kinds of kernels compiled: "float64", "parallel"
        self.stream, self.what, self.enabled = stream, what, enabled
        self.tty = enabled and hasattr(stream, "isatty") and stream.isatty()
        self.start = time.monotonic()
        self._state = threading.Lock()
        self.fractions: dict[int, float] = {}  # start -> share of its iterations done
        self.n_starts, self.status = 1, what
        self.selection: dict | None = None  # the rank selection under way (-k auto)
        self.selection_compile_seconds = 0.0  # of compile_seconds, during the selection
        self._fit_since, self._fit_compiled = self.start, 0.0  # where the fit's rate counts from
        self.compile_seconds, self._compiling_since, self._depth, self._announced = (
            0.0,
            None,
            0,
            False,
        )
        self._done = threading.Event()
        self._last_line = self.start
        self._ticker = threading.Thread(target=self._tick, daemon=True, name="banmf-progress")

    # logging.Handler
    def emit(self, record: logging.LogRecord) -> None:
        data = getattr(record, "banmf", None)
        if data is None:
            return
        event = data["event"]
        if event in ("rank_start", "fit_done", "fits", "rank", "selected"):  # -k auto's
            with self._state:
                self._selection_event(event, data)
            return
        if self.selection is not None:  # a start of one of the selection's fits
            with self._state:
                sel = self.selection
                fit = f", {data['fit']}" if data.get("fit") else ""
                self.status = f"{self._rank_words()}{fit}: start {data['start']}/{data['n_starts']}"
                if event == "iteration":
                    self.status += f", iteration {data['iteration']}"
                elif event in ("setup", "phase"):
                    self.status += f", {data[event]}"
                self.status += f" ({sel['fits_done']}/{sel['n_fits']} fits of this rank done)"
            return
        with self._state:
            i, self.n_starts = data["start"], data["n_starts"]
            label = f"start {i}/{self.n_starts}" if self.n_starts > 1 else self.what
            if data.get("name") and self.n_starts > 1:  # an extra start: which
                label += f" ({data['name']})"
            if data["event"] == "iteration":
                total = data["max_iter"]
                if total:  # else no share of the work is known, nor the time to go
                    self.fractions[i] = data["iteration"] / total
                of = f"/{total}" if total else ""
                self.status = (
                    f"{label}, iteration {data['iteration']}{of}: objective {data['objective']:.6g}"
                )
            elif data["event"] == "setup":
                self.status = f"{label}: {data['setup']}"
            elif data["event"] == "phase":
                self.fractions[i] = max(self.fractions.get(i, 0.0), 1.0)
                self.status = f"{label}: {data['phase']}"
            elif data["event"] == "done":
                self.fractions[i] = 1.0

    def _rank_words(self) -> str:
        sel = self.selection
        return f"{self.what}, choosing k: rank {sel['rank']} of {sel['n_ranks']} (k={sel['k']})"

    def _selection_event(self, event: str, data: dict) -> None:
        """A rank selection's record (under :attr:`_state`)."""
        if event == "selected":
            if self.selection is not None:  # its compilation, reported apart
                self.selection_compile_seconds = self.compile_seconds - self.selection["compiled"]
            self.selection, self.status = None, self.what
            self.fractions, self.n_starts = {}, 1
            # The fit at the chosen k: its time to go from its own rate.
            self._fit_since, self._fit_compiled = time.monotonic(), self.compile_seconds
            return
        sel = self.selection
        if event == "rank_start":
            if sel is None:
                sel = self.selection = {
                    "since": time.monotonic(),
                    "compiled": self.compile_seconds,
                    "work_done": 0.0,
                }
            sel.update(
                k=data["k"],
                rank=data["rank"],
                n_ranks=data["n_ranks"],
                n_fits=data["n_fits"],
                fits_done=0,
                work_total=float(sum(data["ks"][data["rank"] - 1 :]) * data["n_fits"]),
            )
            sel["work_total"] += sel["work_done"]
            self.status = f"{self._rank_words()}: {data['n_fits']} fits"
        elif sel is None:
            return
        elif event in ("fit_done", "fits"):
            sel["fits_done"] = max(sel["fits_done"], data["fits_done"])
            self.status = f"{self._rank_words()}: {sel['fits_done']}/{sel['n_fits']} fits done"
        elif event == "rank":
            sel["work_done"] += sel["k"] * sel["n_fits"]
            sel["fits_done"] = 0

    def _selection_left(self, now: float, compiling: float) -> str:
        """The time left for the whole rank selection, in words ("" until a fit is done)."""
        sel = self.selection
        done = sel["work_done"] + sel["k"] * sel["fits_done"]
        if done <= 0 or done >= sel["work_total"]:
            return ""
        spent = max(now - sel["since"] - (compiling - sel["compiled"]), 1e-9)
        left = spent / done * (sel["work_total"] - done)
        return f", at most about {left:.0f} s left in the selection"

    # numba.core.event listener ("numba:compile"); compilations are serialised by numba's lock
    def on_start(self, event) -> None:
        self._depth += 1
        self.compiled.update(kernel_kinds(event.data))
        if self._depth == 1:
            self._compiling_since = time.monotonic()
            if self._ahead is not None and self._ahead_handle is None:
                self._ahead_handle = self._ahead()
            if not self._announced and self.enabled:
                self._announced = True
                self._write(f"banmf: {COMPILING}…", newline=True)

    def on_end(self, event) -> None:
        self._depth -= 1
        if self._depth == 0 and self._compiling_since is not None:
            self.compile_seconds += time.monotonic() - self._compiling_since
            self._compiling_since = None

    def _line(self, now: float) -> str:
        with self._state:
            elapsed = now - self.start
            text = f"{self.status} ({elapsed:.1f} s"
            done = sum(self.fractions.values()) / max(1, self.n_starts)
            compiling = self.compile_seconds + (
                now - self._compiling_since if self._compiling_since else 0.0
            )
            if self._compiling_since is not None:
                text = f"{COMPILING}… ({elapsed:.1f} s"
            elif self.selection is not None:
                text += self._selection_left(now, compiling)
            elif 0.02 < done < 1.0:
                # Compilation is not part of the rate of progress.
                spent = now - self._fit_since - (compiling - self._fit_compiled)
                rate = max(spent, 1e-9) / done
                text += f", about {rate * (1.0 - done):.0f} s to go"
            return text + ")"

    def _write(self, text: str, newline: bool) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text + ("\n" if newline else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _tick(self) -> None:
        every = self.TTY_EVERY if self.tty else self.LOG_EVERY
        while not self._done.wait(every):
            now = time.monotonic()
            if self.tty or now - self.start >= self.LOG_EVERY:
                self._write(self._line(now), newline=False)

    def __enter__(self) -> Progress:
        from numba.core import event

        owner = self

        class Compiles(event.Listener):
            def on_start(self, ev):
                owner.on_start(ev)

            def on_end(self, ev):
                owner.on_end(ev)

        self._listener = Compiles()
        event.register("numba:compile", self._listener)
        self._logger = logging.getLogger("banmf.progress")
        self._saved = self._logger.level, self._logger.propagate
        self._logger.setLevel(logging.DEBUG)
        self._logger.propagate = False
        self._logger.addHandler(self)
        if self.enabled:
            self._ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        from numba.core import event

        self._done.set()
        if self._ticker.is_alive():
            self._ticker.join()
        self._logger.removeHandler(self)
        self._logger.setLevel(self._saved[0])
        self._logger.propagate = self._saved[1]
        event.unregister("numba:compile", self._listener)
        if self._ahead_handle is not None:
            self._ahead_handle.stop()
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()


#: What the progress says while kernels compile.
COMPILING = "compiling kernels (kept in the cache for later runs)"


def kernel_kinds(data: dict) -> set[str]:
    """The kinds of a kernel being compiled (numba's compile event ``data``): its float
    types and whether it is a parallel variant (:mod:`banmf._kernels.variants`)."""
    kinds = set()
    func = getattr(data.get("dispatcher"), "py_func", None)
    if func is not None and func.__module__.startswith("banmf"):
        kinds.add("parallel" if func.__qualname__.endswith("__parallel") else "serial")
    for arg in data.get("args", ()):
        name = str(getattr(arg, "dtype", arg))
        if name in ("float32", "float64"):
            kinds.add(name)
    return kinds


def compiled_kinds(kinds: set[str]) -> str:
    """``kinds`` (:func:`kernel_kinds`) in words: "parallel float32 kernels"."""
    order = ("serial", "parallel", "float32", "float64")
    words = [kind for kind in order if kind in kinds]
    return " ".join([*words, "kernels"])


def start_numba() -> None:
    """Numba's one-time start-up (about 0.5 s: its typing context, on the first call of any
    kernel) happens here, so that the fit's reported time is the fit's own."""
    import numpy as np

    from .._kernels.boolean import popcount64

    popcount64(np.uint64(0))


def plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


#: What a terminal acts on rather than shows: C0 and C1 control characters (ANSI escape
#: sequences start with one) and the bidirectional overrides, which reorder the text shown.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with each control character written as its escape (``\\x1b``, ``\\u202e``),
    so that a label cannot move the cursor, recolour or reorder a terminal's text."""
    return _CONTROL.sub(
        lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text
    )


def emit(args, record: dict, lines: list[str], out) -> None:
    """A command's result on stdout: ``record`` as JSON (``--json``; JSON escapes control
    characters itself), else ``lines`` with their control characters escaped."""
    if args.json:
        out.write(json.dumps(record, indent=2, default=str) + "\n")
    else:
        out.write("\n".join(printable(line) for line in lines) + "\n")


def fit_lines(
    args,
    result,
    *,
    nnz: int,
    fitted_ones: int,
    observed_cells: int,
    unknown: int,
    split: tuple[int, int],
    compiling: float = 0.0,
    compiled: set[str] = frozenset(),
    where: str = "",
    choosing: float | None = None,
) -> list[str]:
    """The head of ``banmf factorize``'s summary, on one machine or a cluster (``where``:
    " on SCHEDULER"): the input, its unknown cells, the method, the error and its two parts
    (``split``: ones missed, zeros covered), the relative error. ``choosing``: the seconds of
    ``-k auto``'s rank selection, part of ``result.seconds`` and said apart from the fit's."""
    n, m = result.shape
    fn, fp = split
    extra = [f"{choosing:.1f} s choosing k"] if choosing is not None else []
    if compiling >= 0.05:
        extra.append(f"{compiling:.1f} s compiling {compiled_kinds(compiled)}, once")
    seconds = result.seconds - (choosing or 0.0)
    lines = [
        f"input           {args.input} ({n}×{m}, {nnz} nonzeros, density {nnz / (n * m):.4g})",
        f"method          {args.method}{where}, k={result.n_components}, "
        f"{plural(result.n_iter, 'iteration')}, {max(seconds, 0.0):.2f} s"
        + (f" (+ {', + '.join(extra)})" if extra else ""),
        f"error           {result.error} ({fn} ones missed, {fp} zeros covered)"
        + (f" on the {observed_cells} cells fitted" if observed_cells < n * m else ""),
        f"relative error  {result.relative_error:.4f} (error / "
        + (f"the {fitted_ones} ones fitted, of {nnz})" if fitted_ones < nnz else "nnz)"),
    ]
    if unknown:
        lines.insert(
            1,
            f"unknown         {plural(unknown, 'cell')} ({100 * unknown / (n * m):.3g} %), "
            "left out of the fit",
        )
    return lines


def refinement_lines(info: dict, record: dict) -> list[str]:
    """The refinement line of a BANMF fit (its steps' errors, the starts run and the one
    kept), from a result's ``info``; the same facts go into ``record``."""
    if "refinement_" not in info:
        return []
    ran, n_init = len(info["init_errors_"]), info["n_init_"]
    record.update(
        refinement=dict(info["refinement_"]),
        n_init=n_init,
        starts_run=ran,  # random starts; n_starts counts the extra ones too
        n_starts=info.get("n_starts_", ran),
    )
    of = f" of {n_init}" if ran < n_init else ""
    steps = " → ".join(f"{step} {error}" for step, error in info["refinement_"].items())
    if not ran and info.get("n_starts_"):  # an extra start that runs first was exact
        return [f"refinement      {steps} ({info['best_start_']} start, exact: no other ran)"]
    starts = f"{ran}{of} {'start' if n_init == 1 else 'starts'}"
    extra = list(info.get("extra_start_errors_") or {})
    if extra:
        starts += " + " + ", ".join(extra)
    kept = info.get("best_start_")
    kept = f"{kept} start: " if isinstance(kept, str) else ""
    return [f"refinement      {steps} ({kept}best of {starts})"]


def pattern_lines(found: list) -> list[str]:
    """The text of ``banmf show``: a head line per pattern, its columns, its rows."""
    lines = []
    for rank, p in enumerate(found, 1):
        size = f"{plural(p.n_rows, 'row')} × {plural(p.n_cols, 'column')}"
        if p.cells == 0:  # a factor without rows or without columns covers no cell
            lines.append(f"pattern {rank} (factor {p.factor}): empty, {size}: it covers no cell")
        else:
            if p.cells == p.unknown:
                ones = f"all {p.cells} cells unknown (precision n/a"
            elif p.unknown:
                ones = (
                    f"{p.ones} of {p.cells - p.unknown} known cells are ones ({p.unknown} "
                    f"unknown; precision {p.precision:.2f}"
                )
            else:
                ones = f"{p.ones} of {p.cells} cells are ones (precision {p.precision:.2f}"
            lines.append(
                f"pattern {rank} (factor {p.factor}): {size}, {ones}); "
                f"{p.ones_alone} ones covered by it alone; without it the error rises by "
                f"{p.contribution}"
            )
        for what, names, total in (
            ("columns", p.col_names, p.n_cols),
            ("rows", p.row_names, p.n_rows),
        ):
            more = f" (+{total - len(names)} more)" if total > len(names) else ""
            lines.append(f"  {what:<8}{', '.join(names) or '(none)'}{more}")
    return lines


@contextlib.contextmanager
def listening(handler: logging.Handler):
    """``handler`` alone on the ``banmf.progress`` logger at INFO, for the ``with`` block (as
    :class:`Progress`: the records do not reach the root logger)."""
    logger = logging.getLogger("banmf.progress")
    saved = logger.level, logger.propagate
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def rank_line(row: dict) -> str:
    """One k's evidence in words, for the progress on stderr."""
    parts = [f"k={row['k']}: error {row['training_error']}"]
    if "description_length" in row:
        parts.append(f"{row['description_length']:.0f} bits")
    if "held_out_error" in row:
        parts.append(f"held-out {row['held_out_error']:.4f} ± {row['held_out_se']:.4f}")
    if "stability" in row:
        parts.append(f"agreement {row['stability']:.3f}")
    return ", ".join(parts)


def rank_table(sel) -> list:
    """The per-k table of ``banmf select-k``, the choices marked with *."""
    head = ["k", "error"]
    columns = [("description_length", "bits", "mdl", "{:.0f}")]
    columns += [
        ("held_out_error", "held-out", "cv", "{:.4f}"),
        ("stability", "agreement", "stability", "{:.3f}"),
    ]
    rows = sel.to_dict()["per_k"]
    shown = [c for c in columns if c[0] in rows[0]]
    head += [c[1] for c in shown]
    table = [head]
    for row in rows:
        cells = [str(row["k"]), str(row["training_error"])]
        for key, _, criterion, fmt in shown:
            mark = "*" if sel.choices.get(criterion) == row["k"] else " "
            cells.append(fmt.format(row[key]) + mark)
        table.append(cells)
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    return ["  ".join(c.rjust(w) for c, w in zip(r, widths)).rstrip() for r in table]


def warnings_to(err):
    """Show warnings as one line each, ``banmf: warning: ...``, each message once."""
    shown = set()

    def show(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if text not in shown:
            shown.add(text)
            err.write(
                ("\r\033[K" if getattr(err, "isatty", lambda: False)() else "")
                + f"banmf: warning: {printable(text)}\n"
            )

    return show


def announce(err):
    """Say at once what a signal does: the first finishes the best result so far, the next aborts."""

    def announce(log) -> None:
        name = log.name if len(log.received) == 1 else signal.Signals(log.received[-1]).name
        text = (
            f"banmf: {name}: finishing the best result so far (again to abort)"
            if len(log.received) == 1
            else f"banmf: {name} again: aborting"
        )
        try:
            err.write("\n" + text + "\n")
            err.flush()
        except (RuntimeError, ValueError, OSError):  # a write was under way: the exit says it
            pass

    return announce
