"""The ``banmf`` command: factorize, info, generate, evaluate, complete, select-k, show, export,
plot.

Results go to stdout (a short table, or JSON with ``--json``); progress and diagnostics go to
stderr. Exit codes: 0 ok, 2 bad usage or bad input (one line, no traceback), 1 internal error,
141 stdout closed early (``| head``), 130 / 143 interrupted by SIGINT (Ctrl-C) / SIGTERM. The first signal finishes the best result so
far (written, if asked, and reported as interrupted); a second one aborts, writing nothing.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import csv
import hashlib
import json
import logging
import os
import re
import signal
import sys
import threading
import time
import warnings
from pathlib import Path

from ._signals import signals_interrupt

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2
#: What a shell reports for a command whose output pipe was closed (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


class UsageError(Exception):
    """Bad usage or input: reported in one line with exit code 2."""


def _parse_param(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise UsageError(f"--param expects KEY=VALUE, got {text!r}")
    key, raw = text.split("=", 1)
    words = {"true": True, "false": False, "none": None}
    if raw.strip().lower() in words:
        return key.strip(), words[raw.strip().lower()]
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        # Bare words such as logspace or float32; a comma list of them (nmf,columns) is a tuple.
        value = tuple(w.strip() for w in raw.split(",") if w.strip()) if "," in raw else raw
    return key.strip(), value


class Progress(logging.Handler):
    """The status of a fit on stderr, from the ``banmf.progress`` records (:mod:`banmf._progress`)
    and numba's compile events.

    On a terminal: one line rewritten every 0.1 s (start i/N, iteration, objective, elapsed
    time, ETA). Otherwise: quiet for the first 2 s, then a line every 2 s, so that a long run
    never goes silent. Compiling kernels is announced at once, and its time is kept apart
    (:attr:`compile_seconds`) so that the fit's own time can be reported without it.
    """

    TTY_EVERY, LOG_EVERY = 0.1, 2.0

    def __init__(self, stream, what: str, enabled: bool = True):
        super().__init__(level=logging.DEBUG)
        self.stream, self.what, self.enabled = stream, what, enabled
        self.tty = enabled and hasattr(stream, "isatty") and stream.isatty()
        self.start = time.monotonic()
        self._state = threading.Lock()
        self.fractions: dict[int, float] = {}  # start -> share of its iterations done
        self.n_starts, self.status = 1, what
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

    # numba.core.event listener ("numba:compile"); compilations are serialised by numba's lock
    def on_start(self, event) -> None:
        self._depth += 1
        if self._depth == 1:
            self._compiling_since = time.monotonic()
            if not self._announced and self.enabled:
                self._announced = True
                self._write("banmf: compiling kernels (first run only)…", newline=True)

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
                text = f"compiling kernels (first run only)… ({elapsed:.1f} s"
            elif 0.02 < done < 1.0:
                # Compilation is not part of the rate of progress.
                rate = max(elapsed - compiling, 1e-9) / done
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
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()


def _start_numba() -> None:
    """Numba's one-time start-up (about 0.5 s: its typing context, on the first call of any
    kernel) happens here, so that the fit's reported time is the fit's own."""
    import numpy as np

    from ._kernels.boolean import popcount64

    popcount64(np.uint64(0))


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


def _read_input(path: str, fmt: str | None = None):
    from .io import FORMATS, format_of, read_dataset

    if Path(path).is_dir():
        raise UsageError(f"{path} is a directory, not a matrix file")
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no such file")
    if fmt is None:
        try:
            format_of(Path(path), None)
        except ValueError:
            raise UsageError(
                f"{path}: cannot tell the format from the extension; name it with "
                f"--format ({', '.join(FORMATS)})"
            ) from None
    return read_dataset(path, format=fmt)


def _unknown_cells(args, ds) -> dict:
    """The data's unknown cells as ``fit`` takes them (``missing=`` / ``observed=``): the
    cells the file leaves unknown (``?``, ``NA``, blank; a mask it carries) joined with
    ``--missing FILE``, or the cells of ``--observed FILE`` less those."""
    from ._boolean import mask_difference, mask_union

    n, m = ds.X.shape
    masks = {"missing": ds.missing, "observed": None}
    for option in ("missing", "observed"):
        path = getattr(args, option, None)
        if not path:
            continue
        mask = _read_input(path).X
        if mask.shape != (n, m):
            raise UsageError(
                f"--{option} {path} is {mask.shape[0]}×{mask.shape[1]} but the data is {n}×{m}"
            )
        if option == "missing":
            masks["missing"] = mask if ds.missing is None else mask_union(ds.missing, mask)
        else:
            masks["observed"] = mask if ds.missing is None else mask_difference(mask, ds.missing)
            masks["missing"] = None
    return masks


def _observed_count(masks: dict, shape: tuple[int, int]) -> int:
    return shape[0] * shape[1] - _unknown_count(masks, shape)


def _unknown_count(masks: dict, shape: tuple[int, int]) -> int:
    n, m = shape
    if masks["observed"] is not None:
        return n * m - masks["observed"].nnz
    return 0 if masks["missing"] is None else masks["missing"].nnz


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_output(path: str, option: str, inputs=(), suffixes=(".npz",)) -> None:
    """Refuse a destination before any work: wrong kind of file, the input itself, a missing
    or read-only folder (:func:`banmf.io.check_output`)."""
    from .io import check_output

    if suffixes and not path.lower().endswith(suffixes):
        raise UsageError(f"{option} {path}: the file must end in {' or '.join(suffixes)}")
    check_output(path, inputs=[p for p in inputs if p])


def _matching_data(X, data_path: str, saved, result_path: str) -> None:
    """Refuse data of another shape than the saved factorization's; warn if it is not the file
    the factorization was made from (its sha256 is recorded)."""
    n, m = saved.W.shape[0], saved.H.shape[1]
    if X.shape != (n, m):
        raise UsageError(
            f"{data_path} is {X.shape[0]}×{X.shape[1]} but {result_path} factorizes a "
            f"{n}×{m} matrix"
        )
    recorded = saved.meta.get("input_sha256")
    if recorded and recorded != _sha256(data_path):
        warnings.warn(
            f"{data_path} is not the file {result_path} was fitted to (its sha256 differs "
            f"from the recorded one, of {saved.meta.get('input', 'the input')})",
            UserWarning,
            stacklevel=2,
        )


def _emit(args, record: dict, lines: list[str], out) -> None:
    if args.json:
        out.write(json.dumps(record, indent=2, default=str) + "\n")
    else:
        out.write("\n".join(lines) + "\n")


#: Estimator parameters that the command line sets with an option of its own (or not at all).
_OWN_OPTIONS = {
    "n_components": "use -k",
    "random_state": "use --seed",
    "max_iter": "use --max-iter",
    "n_jobs": "use --jobs",
    "verbose": "progress is shown on stderr anyway; -q hides it",
    "callback": "a callback cannot be given on the command line",
}


def _estimator_params(args, cls) -> dict:
    """The estimator's keyword arguments from --param, --max-iter and --jobs, checked."""
    valid = set(cls._param_names())
    params = {}
    for text in args.param:
        key, value = _parse_param(text)
        if key in _OWN_OPTIONS:
            raise UsageError(f"--param {key}: {_OWN_OPTIONS[key]}")
        if key not in valid:
            settable = sorted(valid - set(_OWN_OPTIONS))
            raise UsageError(
                f"--param {key}: method {args.method} has no such parameter; "
                f"it has {', '.join(settable)}"
            )
        if key in params:
            raise UsageError(f"--param {key} is given twice")
        params[key] = value
    if args.max_iter is not None:
        if "max_iter" not in valid:
            raise UsageError(f"--max-iter: method {args.method} does not iterate")
        params["max_iter"] = args.max_iter
    if args.jobs is not None:
        from ._threads import effective_n_jobs

        if "n_jobs" not in valid:
            raise UsageError(f"--jobs: method {args.method} runs on one thread")
        try:
            effective_n_jobs(args.jobs)  # a bad value stops here, before the input is read
        except ValueError as exc:
            raise UsageError(f"--jobs: {exc}") from None
        params["n_jobs"] = args.jobs
    return params


def cmd_factorize(args, out, err) -> int:
    from . import __version__
    from .api import factorize
    from .booleanize import error_counts
    from .exceptions import Interrupted
    from .io import jsonable
    from .models import METHODS

    if args.method not in METHODS:
        raise UsageError(
            f"--method: unknown method {args.method!r}; choose one of {', '.join(METHODS)}"
        )
    params = _estimator_params(args, METHODS[args.method])
    if args.scheduler:
        return _factorize_distributed(args, out, err, params)
    if args.out:
        _check_output(args.out, "--out", inputs=[args.input, args.missing, args.observed])
    ds = _read_input(args.input, args.format)
    X = ds.X
    masks = _unknown_cells(args, ds)
    fit_masks, hidden = masks, None
    if args.hold_out:
        from ._boolean import mask_difference, mask_union
        from .model_selection import mask_entries

        hidden = mask_entries(X, args.hold_out, random_state=args.seed, **masks)
        if hidden.nnz == 0:
            raise UsageError(
                f"--hold-out {args.hold_out:g} holds out no cell of the "
                f"{_observed_count(masks, X.shape)} observed cells; give a larger fraction"
            )
        if masks["observed"] is not None:
            fit_masks = {"missing": None, "observed": mask_difference(masks["observed"], hidden)}
        elif masks["missing"] is not None:
            fit_masks = {"missing": mask_union(masks["missing"], hidden), "observed": None}
        else:
            fit_masks = {"missing": hidden, "observed": None}
    record = {
        "input": args.input,
        "shape": list(X.shape),
        "nnz": int(X.nnz),
        "method": args.method,
        "n_components": args.k,
        "seed": args.seed,
    }
    progress = Progress(err, f"fitting {args.method}", enabled=not args.quiet)
    signalled = False
    with progress:
        _start_numba()
        start = time.perf_counter()
        try:
            result = factorize(
                X, args.k, args.method, random_state=args.seed, **fit_masks, **params
            )
        except Interrupted as exc:  # the first signal: the best result so far
            result, signalled = exc.result, True
    # The fit's own time: the first run's compilation is reported apart.
    seconds = time.perf_counter() - start - progress.compile_seconds
    result = result.replace(
        seconds=seconds,
        row_labels=ds.row_labels,
        col_labels=ds.col_labels,
        meta={"input": str(args.input), "input_sha256": _sha256(args.input), "seed": args.seed},
    )
    n, m = X.shape
    fn, fp = error_counts(X, result.W, result.H, **fit_masks)
    unknown = _unknown_count(masks, X.shape)
    observed_cells = result.n_observed
    # The relative error divides by the observed ones the fit saw: fewer than X's nonzeros
    # when some are unknown or held out.
    fitted_ones = X.nnz if result.X is None else int(result.X.nnz)
    record.update(
        {
            "n_components": result.n_components,  # capped at min(n, m): the k fitted
            "n_components_asked": args.k,
            "unknown_cells": unknown,
            "observed_cells": observed_cells,
            "error": result.error,
            "relative_error": result.relative_error,
            "false_negatives": fn,
            "false_positives": fp,
            "n_iter": result.n_iter,
            "seconds": round(seconds, 4),
            "compile_seconds": round(progress.compile_seconds, 4),
            "interrupted": result.interrupted,
            "signal": args.signals.name if signalled else None,
            "out": args.out,
            "params": jsonable(result.params),
            "version": __version__,
        }
    )
    if args.out:
        result.save(args.out)
        args.written = args.out
    compiling = progress.compile_seconds
    lines = _fit_lines(
        args,
        result,
        nnz=X.nnz,
        fitted_ones=fitted_ones,
        observed_cells=observed_cells,
        unknown=unknown,
        split=(fn, fp),
        compiling=compiling,
    )
    if hidden is not None:
        from .model_selection import held_out_scores

        scores = held_out_scores(X, result.W, result.H, hidden)
        record["held_out"] = {"fraction": args.hold_out, "seed": args.seed, **scores}
        f1 = "n/a, no ones held out" if scores["f1"] is None else f"{scores['f1']:.4f}"
        lines.append(
            f"held out        {scores['cells']} observed cells ({100 * args.hold_out:g} %): "
            f"{scores['errors']} wrong (accuracy {scores['accuracy']:.4f}, F1 on the ones {f1})"
        )
    lines += _refinement_lines(result.info, record)
    if record["interrupted"]:
        why = f"by {record['signal']}" if signalled else "by request"
        lines.append(f"interrupted     {why}: the best result so far")
    if args.out:
        lines.append(f"saved           {args.out}")
    if args.show:
        found = result.patterns(X, top=args.top)
        record["patterns"] = [pattern.to_dict() for pattern in found]
        lines += ["", *_pattern_lines(found)]
    _emit(args, record, lines, out)
    return args.signals.exit_code if signalled else EXIT_OK


def _fit_lines(
    args,
    result,
    *,
    nnz: int,
    fitted_ones: int,
    observed_cells: int,
    unknown: int,
    split: tuple[int, int],
    compiling: float = 0.0,
    where: str = "",
) -> list[str]:
    """The head of ``banmf factorize``'s summary, on one machine or a cluster (``where``:
    " on SCHEDULER"): the input, its unknown cells, the method, the error and its two parts
    (``split``: ones missed, zeros covered), the relative error."""
    n, m = result.shape
    fn, fp = split
    lines = [
        f"input           {args.input} ({n}×{m}, {nnz} nonzeros, density {nnz / (n * m):.4g})",
        f"method          {args.method}{where}, k={result.n_components}, "
        f"{_plural(result.n_iter, 'iteration')}, {result.seconds:.2f} s"
        + (
            f" (+ {compiling:.1f} s compiling kernels, first run only)" if compiling >= 0.05 else ""
        ),
        f"error           {result.error} ({fn} ones missed, {fp} zeros covered)"
        + (f" on the {observed_cells} cells fitted" if observed_cells < n * m else ""),
        f"relative error  {result.relative_error:.4f} (error / "
        + (f"the {fitted_ones} ones fitted, of {nnz})" if fitted_ones < nnz else "nnz)"),
    ]
    if unknown:
        lines.insert(
            1,
            f"unknown         {_plural(unknown, 'cell')} ({100 * unknown / (n * m):.3g} %), "
            "left out of the fit",
        )
    return lines


def _refinement_lines(info: dict, record: dict) -> list[str]:
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


def _blocks_input(args):
    """The input of a distributed fit: ``(blocks, data, masks)``. Row-block files (a folder or
    a glob pattern) give ``data`` and ``masks`` None; one matrix file is read and cut into
    blocks here, and ``data`` is its dataset, ``masks`` its unknown cells as one machine's
    fit takes them."""
    from .distributed import BlockMatrix, read_blocks

    path = Path(args.input)
    if path.is_dir() or (not path.exists() and any(c in args.input for c in "*?[")):
        if args.missing or args.observed:
            raise UsageError("--missing/--observed: row-block files carry their unknown cells")
        try:
            return read_blocks(args.input), None, None
        except (FileNotFoundError, ValueError) as exc:
            raise UsageError(f"{args.input}: {exc}") from None
    ds = _read_input(args.input, args.format)
    masks = _unknown_cells(args, ds)
    return BlockMatrix.from_matrix(ds.X, **masks), ds, masks


def _connect(args, err):
    """The Dask client of ``--scheduler``: a new LocalCluster for "local", else the scheduler
    at that address, waited for as long as Dask's connect timeout
    (``distributed.comm.timeouts.connect``, 30 s unless set), said on stderr first."""
    import dask
    from dask.utils import parse_timedelta
    from distributed import Client, LocalCluster

    timeout = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
    say = (lambda text: err.write(text + "\n")) if not args.quiet else (lambda text: None)
    cluster = None
    try:
        if args.scheduler == "local":
            say("starting a local Dask cluster")
            cluster = LocalCluster(processes=True, dashboard_address=":0")
            return Client(cluster), cluster
        say(
            f"connecting to {args.scheduler} (giving up after {timeout:g} s; "
            "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT sets it)"
        )
        return Client(args.scheduler, timeout=timeout), None
    except OSError as exc:
        if cluster is not None:
            cluster.close()
        raise UsageError(f"--scheduler {args.scheduler}: cannot connect ({exc})") from None


def _factorize_distributed(args, out, err, params) -> int:
    """``banmf factorize --scheduler``: BANMF on a Dask cluster (:mod:`banmf.distributed`),
    with the summary, the saved result and its record of a fit on one machine."""
    from . import __version__
    from ._validation import check_binary_matrix, check_unknown
    from .io import EMBED_MAX_NNZ, jsonable
    from .result import Factorization

    if args.method != "banmf":
        raise UsageError(f"--scheduler: only banmf runs on a cluster, not {args.method}")
    if args.hold_out:
        raise UsageError("--hold-out does not run on a cluster yet")
    if args.show:
        raise UsageError("--show needs the data in memory: run banmf show on the saved result")
    try:
        import banmf.distributed as bd
    except ImportError:
        raise UsageError("--scheduler needs Dask: pip install 'banmf[distributed]'") from None
    if args.out:
        _check_output(args.out, "--out", inputs=[args.input, args.missing, args.observed])
    blocks, ds, masks = _blocks_input(args)
    n, m = blocks.shape
    client, cluster = _connect(args, err)
    progress = Progress(err, "fitting banmf on the cluster", enabled=not args.quiet)
    signalled = False
    with progress:
        try:
            model = bd.BANMF(args.k, random_state=args.seed, client=client, **params)
            start = time.perf_counter()
            try:
                model.fit(blocks)
            except KeyboardInterrupt:
                if not hasattr(model, "W_"):  # nothing fitted yet
                    raise
                signalled = True  # the first signal: the best result so far
            seconds = time.perf_counter() - start
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    if model.polish is True and args.k > 0 and not args.quiet:
        from .distributed.estimator import _Shape
        from .polish import resolve_polish

        # One machine's polish=True is "auto": the exact polish wherever it is cheap.
        if resolve_polish("auto", _Shape(n, m, model.nnz_), args.k) == "exact":
            err.write(
                f"banmf: note: on one machine banmf polishes these factors exactly (k={args.k}); "
                "the exact polish is not distributed and the cluster flips bits, so W and H may "
                "differ from a fit without --scheduler (with --param polish=flip they do not)\n"
            )
    # The data as one machine's result keeps it (banmf.io.save_result keeps a copy of small
    # data): read here from a matrix file, gathered from small row-block files.
    meta = {"input": str(args.input), "seed": args.seed, "scheduler": args.scheduler}
    X = labels = None
    if ds is not None:
        masks = {
            name: None if mask is None else check_binary_matrix(mask, name)
            for name, mask in masks.items()
        }
        X, _ = check_unknown(check_binary_matrix(ds.X), **masks)
        labels = {"row_labels": ds.row_labels, "col_labels": ds.col_labels}
        meta["input_sha256"] = _sha256(args.input)
    elif model.nnz_ <= EMBED_MAX_NNZ:
        X, missing, observed = blocks.gather()
        masks = {"missing": missing, "observed": observed}
    result = Factorization.from_estimator(
        model, method="banmf", seconds=seconds, X=X, **(masks or {}), **(labels or {})
    )
    result = result.replace(
        params={k: v for k, v in result.params.items() if k != "client"},
        estimator=None,
        meta=meta,
    )
    nnz = model.nnz_ if ds is None else int(ds.X.nnz)
    observed_cells = int(model.n_observed_)
    split = (model.false_negatives_, model.false_positives_)
    record = {
        "input": args.input,
        "shape": [n, m],
        "nnz": nnz,
        "method": "banmf",
        "n_components": result.n_components,  # capped at min(n, m): the k fitted
        "n_components_asked": args.k,
        "seed": args.seed,
        "unknown_cells": n * m - observed_cells,
        "observed_cells": observed_cells,
        "error": result.error,
        "relative_error": result.relative_error,
        "false_negatives": split[0],
        "false_positives": split[1],
        "n_iter": result.n_iter,
        "seconds": round(seconds, 4),
        "compile_seconds": round(progress.compile_seconds, 4),
        "interrupted": result.interrupted,
        "signal": args.signals.name if signalled else None,
        "out": args.out,
        "params": jsonable(result.params),
        "version": __version__,
        "scheduler": args.scheduler,
        "blocks": int(model.n_blocks_),
        "recoveries": int(model.recoveries_),
        "traffic": dict(model.traffic_),
    }
    if args.out:
        result.save(args.out)
        args.written = args.out
    lines = _fit_lines(
        args,
        result,
        nnz=nnz,
        fitted_ones=model.nnz_,
        observed_cells=observed_cells,
        unknown=n * m - observed_cells,
        split=split,
        where=f" on {args.scheduler}",
    )
    lines += _refinement_lines(result.info, record)
    traffic = model.traffic_
    lines.append(
        f"cluster         {_plural(model.n_blocks_, 'row block')}; "
        f"{traffic['sent_bytes'] / 1e6:.1f} MB sent, "
        f"{traffic['received_bytes'] / 1e6:.1f} MB received, "
        f"{_plural(traffic['round_trips'], 'round trip')}"
        + (f"; {_plural(model.recoveries_, 'lost worker')} survived" if model.recoveries_ else "")
    )
    if record["interrupted"]:
        why = f"by {record['signal']}" if signalled else "by request"
        lines.append(f"interrupted     {why}: the best result so far")
    if args.out:
        lines.append(f"saved           {args.out}")
    _emit(args, record, lines, out)
    return args.signals.exit_code if signalled else EXIT_OK


def _pattern_lines(found: list) -> list[str]:
    """The text of ``banmf show``: a head line per pattern, its columns, its rows."""
    lines = []
    for rank, p in enumerate(found, 1):
        if p.unknown:
            ones = f"{p.ones} of {p.cells - p.unknown} known cells are ones ({p.unknown} unknown"
        else:
            ones = f"{p.ones} of {p.cells} cells are ones ("
        lines.append(
            f"pattern {rank} (factor {p.factor}): {_plural(p.n_rows, 'row')} × "
            f"{_plural(p.n_cols, 'column')}, {ones}{'; ' if p.unknown else ''}"
            f"precision {p.precision:.2f}); "
            f"{p.ones_alone} ones covered by it alone; without it the error rises by "
            f"{p.contribution}"
        )
        for what, names, total in (
            ("columns", p.col_names, p.n_cols),
            ("rows", p.row_names, p.n_rows),
        ):
            more = f" (+{total - len(names)} more)" if total > len(names) else ""
            lines.append(f"  {what:<8}{', '.join(names)}{more}")
    return lines


def cmd_show(args, out, err) -> int:
    from .result import Factorization

    saved = Factorization.load(args.result)
    X = saved.X
    if args.data:
        ds = _read_input(args.data, args.format)
        X = ds.X
        _matching_data(X, args.data, saved, args.result)
        if saved.row_labels is None and saved.col_labels is None:
            saved = saved.replace(row_labels=ds.row_labels, col_labels=ds.col_labels)
    if X is None:
        raise UsageError(
            f"{args.result} holds no copy of its data (it is too large to keep): give --data"
        )
    found = saved.patterns(X, top=args.top)
    if args.csv:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(
            [
                "pattern",
                "factor",
                "rows",
                "columns",
                "cells",
                "unknown",
                "ones",
                "precision",
                "ones_alone",
                "contribution",
                "column_names",
                "row_names",
            ]
        )
        for rank, p in enumerate(found, 1):
            writer.writerow(
                [
                    rank,
                    p.factor,
                    p.n_rows,
                    p.n_cols,
                    p.cells,
                    p.unknown,
                    p.ones,
                    f"{p.precision:.4f}",
                    p.ones_alone,
                    p.contribution,
                    "; ".join(p.col_names),
                    "; ".join(p.row_names),
                ]
            )
        return EXIT_OK
    record = {
        "result": args.result,
        "method": saved.method,
        "n_components": saved.n_components,
        "patterns": [p.to_dict() for p in found],
    }
    _emit(args, record, _pattern_lines(found), out)
    return EXIT_OK


def cmd_info(args, out, err) -> int:
    ds = _read_input(args.input, args.format)
    X = ds.X
    n, m = X.shape
    unknown = _unknown_count(_unknown_cells(args, ds), X.shape)
    from .io import matrix_stats  # nothing of the shape's size: a huge header answers at once

    record = {
        "input": args.input,
        "shape": [n, m],
        "nnz": int(X.nnz),
        "density": X.nnz / (n * m),
        **matrix_stats(X),
        "has_labels": ds.row_labels is not None or ds.col_labels is not None,
        "unknown_cells": unknown,
    }
    shown = {
        **record,
        "shape": f"{n}×{m}",
        "density": f"{record['density']:.4g}",
        "has_labels": "yes" if record["has_labels"] else "no",
        "unknown_cells": f"{unknown} ({100 * unknown / (n * m):.3g} %)" if unknown else "none",
    }
    lines = [f"{k.replace('_', ' '):<15} {v}" for k, v in shown.items()]
    _emit(args, record, lines, out)
    return EXIT_OK


def cmd_generate(args, out, err) -> int:
    from .datasets import make_boolean
    from .io import FORMATS, write_matrix
    from .result import Factorization

    suffixes = tuple(f".{f}" for f in FORMATS) + (".mtx.gz",)
    _check_output(args.output, "OUTPUT", suffixes=suffixes)
    if args.factors:
        if Path(args.factors).resolve() == Path(args.output).resolve():
            raise UsageError(
                f"--factors {args.factors} is OUTPUT itself; give the planted factors a file "
                "of their own"
            )
        _check_output(args.factors, "--factors", inputs=[args.output])
    X, W, H = make_boolean(
        args.n, args.m, args.k, args.density, noise=args.noise, random_state=args.seed
    )
    write_matrix(X, args.output)
    record = {
        "output": args.output,
        "shape": [args.n, args.m],
        "nnz": int(X.nnz),
        "k": args.k,
        "density": args.density,
        "noise": args.noise,
        "seed": args.seed,
        "factors": args.factors,
    }
    if args.factors:
        planted = Factorization.from_factors(
            X,
            W,
            H,
            method="planted",
            meta={"input": args.output, "input_sha256": _sha256(args.output)},
            params={
                "n": args.n,
                "m": args.m,
                "k": args.k,
                "density": args.density,
                "noise": args.noise,
                "seed": args.seed,
            },
        )
        planted.save(args.factors)
        record["planted_error"] = planted.error
    lines = [f"wrote {args.output}: {args.n}×{args.m}, {X.nnz} nonzeros (planted k={args.k})"]
    if args.factors:
        lines.append(
            f"wrote {args.factors}: planted factors (error {record['planted_error']} against X)"
        )
    _emit(args, record, lines, out)
    return EXIT_OK


def cmd_evaluate(args, out, err) -> int:
    from ._validation import check_unknown
    from .booleanize import error_counts
    from .result import Factorization, relative_error

    saved = Factorization.load(args.result)
    ds = _read_input(args.input, args.format)
    X = ds.X
    _matching_data(X, args.input, saved, args.result)
    masks = _unknown_cells(args, ds)
    if not args.missing and not args.observed and ds.missing is None:
        masks = {"missing": saved.missing, "observed": saved.observed}  # as it was fitted
    fn, fp = error_counts(X, saved.W, saved.H, **masks)
    X = check_unknown(X, **masks)[0]
    error = fn + fp
    record = {
        "input": args.input,
        "result": args.result,
        "method": saved.method,
        "n_components": saved.n_components,
        "error": error,
        "relative_error": relative_error(error, X.nnz),
        "false_negatives": fn,
        "false_positives": fp,
        "unknown_cells": _unknown_count(masks, X.shape),
        "recorded_error": saved.error,
    }
    lines = [
        f"error           {error} ({fn} ones missed, {fp} zeros covered)",
        f"relative error  {record['relative_error']:.4f} (error / nnz)",
        f"factorization   {saved.method}, k={saved.n_components}",
    ]
    _emit(args, record, lines, out)
    return EXIT_OK


def cmd_complete(args, out, err) -> int:
    from ._boolean import cell_keys, mask_difference
    from .io import FORMATS, write_matrix
    from .result import Factorization

    if args.out:
        suffixes = tuple(f".{f}" for f in FORMATS) + (".mtx.gz", ".csv.gz", ".tsv.gz")
        _check_output(
            args.out,
            "--out",
            inputs=[args.input, args.result, args.missing, args.observed],
            suffixes=suffixes,
        )
    saved = Factorization.load(args.result)
    ds = _read_input(args.input, args.format)
    X = ds.X
    _matching_data(X, args.input, saved, args.result)
    masks = _unknown_cells(args, ds)
    if masks["missing"] is None and masks["observed"] is None:
        masks = {"missing": saved.missing, "observed": saved.observed}  # as it was fitted
    if masks["missing"] is None and masks["observed"] is None:
        raise UsageError(
            f"{args.input} has no unknown cells to fill in: mark them in the file (?, NA or "
            "blank cells) or give --missing FILE / --observed FILE"
        )
    completed = saved.replace(**masks).complete(X)
    _, unknown = saved.replace(**masks).unknown(X)
    n, m = X.shape
    rows_named = ds.row_labels or saved.row_labels
    cols_named = ds.col_labels or saved.col_labels
    if unknown.observed:
        # Every unobserved cell is filled: list the ones (a recommendation list), not n·m.
        filled = mask_difference(mask_difference(completed, X), unknown.cells)
        keys, values = cell_keys(filled), None
    else:
        keys = cell_keys(unknown.cells)
        values = saved.predict(keys // m, keys % m)
    ones = int(len(keys) if values is None else values.sum())
    record = {
        "input": args.input,
        "result": args.result,
        "unknown_cells": _unknown_count(masks, X.shape),
        "filled_ones": ones,
        "out": args.out,
    }
    if args.out:
        write_matrix(completed, args.out, row_labels=rows_named, col_labels=cols_named)
        args.written = args.out
    if args.json or not args.out:
        entries = [
            {
                "row": rows_named[i] if rows_named else int(i),
                "column": cols_named[j] if cols_named else int(j),
                "value": 1 if values is None else int(values[q]),
            }
            for q, (i, j) in enumerate(zip(keys // m, keys % m))
        ]
    if args.json:
        if not args.out:
            record["filled"] = entries
        out.write(json.dumps(record, indent=2, default=str) + "\n")
        return EXIT_OK
    what = "unobserved cells predicted 1" if values is None else "unknown cells filled in"
    if args.out:
        out.write(
            f"wrote {args.out}: {n}×{m}, {_plural(record['unknown_cells'], 'unknown cell')} "
            f"filled in by {saved.method} (k={saved.n_components}), {ones} of them as 1\n"
        )
        return EXIT_OK
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["row", "column", "value"])
    for entry in entries:
        writer.writerow([entry["row"], entry["column"], entry["value"]])
    err.write(f"banmf: {len(entries)} {what}\n")
    return EXIT_OK


def _ks(text: str) -> list:
    """``--ks``: ``1:20`` (both ends in), ``1:20:2`` (a step) or ``3,5,8``."""
    try:
        if ":" in text:
            parts = [int(p) for p in text.split(":")]
            if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] < 1):
                raise ValueError
            ks = list(range(parts[0], parts[1] + 1, parts[2] if len(parts) == 3 else 1))
        else:
            ks = [int(p) for p in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected ranks as FIRST:LAST[:STEP] or K,K,..., got {text!r}"
        ) from None
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"expected positive ranks, got {text!r}")
    return ks


def cmd_select_k(args, out, err) -> int:
    from .io import jsonable
    from .model_selection import CRITERIA, select_rank
    from .models import METHODS

    if args.method not in METHODS:
        raise UsageError(
            f"--method: unknown method {args.method!r}; choose one of {', '.join(METHODS)}"
        )
    criteria = [c.strip() for c in args.criteria.split(",") if c.strip()]
    bad = [c for c in criteria if c not in CRITERIA]
    if bad or not criteria:
        raise UsageError(f"--criteria: choose among {', '.join(CRITERIA)}, got {args.criteria!r}")
    params = _estimator_params(args, METHODS[args.method])
    jobs = params.pop("n_jobs", None)
    if args.plot:
        from .plotting import IMAGE_FORMATS

        _check_output(
            args.plot, "--plot", inputs=[args.input], suffixes=tuple(f".{f}" for f in IMAGE_FORMATS)
        )
    ds = _read_input(args.input, args.format)
    masks = _unknown_cells(args, ds)

    def report(row: dict) -> None:
        if not args.quiet:
            err.write("banmf: " + _rank_line(row) + "\n")
            err.flush()

    class Fits(logging.Handler):  # within a rank: select_rank's "fits" records
        def emit(self, record) -> None:
            if getattr(record, "banmf", {}).get("event") == "fits":
                err.write(f"banmf: {record.getMessage()}\n")
                err.flush()

    _start_numba()
    listen = contextlib.nullcontext() if args.quiet else _listening(Fits())
    with listen:
        sel = select_rank(
            ds.X,
            args.ks,
            criteria=criteria,
            method=args.method,
            folds=args.folds,
            patience=None if args.all else args.patience,
            n_jobs=jobs,
            random_state=args.seed,
            callback=report,
            **masks,
            **params,
        )
    record = {"input": args.input, "method": args.method, **jsonable(sel.to_dict())}
    lines = [
        f"input           {args.input} ({ds.X.shape[0]}×{ds.X.shape[1]}, {ds.X.nnz} nonzeros)",
        f"method          {args.method}; criteria {', '.join(criteria)}; "
        f"ks {sel.ks[0]}..{sel.ks[-1]} ({len(sel.ks)} tried, {sel.seconds:.1f} s)",
        "",
        *_rank_table(sel),
        "",
        f"chosen k        {sel.best_k}: {sel.reason}",
    ]
    if sel.interrupted:
        lines.append("interrupted     the ranks done so far decided")
    if args.plot:
        from .plotting import plot_rank_selection

        plot_rank_selection(sel, args.plot)
        args.written = args.plot
        record["plot"] = args.plot
        lines.append(f"plot            {args.plot}")
    _emit(args, record, lines, out)
    return args.signals.exit_code if sel.interrupted else EXIT_OK


@contextlib.contextmanager
def _listening(handler: logging.Handler):
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


def _rank_line(row: dict) -> str:
    """One k's evidence in words, for the progress on stderr."""
    parts = [f"k={row['k']}: error {row['training_error']}"]
    if "description_length" in row:
        parts.append(f"{row['description_length']:.0f} bits")
    if "held_out_error" in row:
        parts.append(f"held-out {row['held_out_error']:.4f} ± {row['held_out_se']:.4f}")
    if "stability" in row:
        parts.append(f"agreement {row['stability']:.3f}")
    return ", ".join(parts)


def _rank_table(sel) -> list:
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


def cmd_export(args, out, err) -> int:
    from .io import EXPORT_FORMATS, export_factors, export_paths
    from .result import Factorization

    if args.to not in EXPORT_FORMATS:
        raise UsageError(f"--to: choose one of {', '.join(EXPORT_FORMATS)}, got {args.to!r}")
    prefix = args.out or str(Path(args.result).with_suffix(""))
    targets = export_paths(prefix, args.to)
    for target in targets:
        _check_output(str(target), "--out", inputs=[args.result], suffixes=())
    saved = Factorization.load(args.result)
    written = [str(p) for p in export_factors(saved, prefix, args.to)]
    _emit(
        args,
        {"result": args.result, "format": args.to, "written": written},
        [f"wrote {p}" for p in written],
        out,
    )
    return EXIT_OK


def cmd_plot(args, out, err) -> int:
    from .plotting import IMAGE_FORMATS, plot_result
    from .result import Factorization

    target = args.out or str(Path(args.result).with_suffix(".png"))
    _check_output(
        target,
        "--out",
        inputs=[args.result, args.data],
        suffixes=tuple(f".{f}" for f in IMAGE_FORMATS),
    )
    saved = Factorization.load(args.result)
    X = saved.X
    if args.data:
        X = _read_input(args.data, args.format).X
        _matching_data(X, args.data, saved, args.result)
    kind = plot_result(saved, target, X=X)
    _emit(
        args,
        {"result": args.result, "image": target, "kind": kind},
        [f"wrote {target} ({kind} view)"],
        out,
    )
    return EXIT_OK


def _int_at_least(low: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    return parse


def _fraction(low_open: bool):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        ok = (0 < value < 1) if low_open else (0 <= value < 1)
        if not ok:
            raise argparse.ArgumentTypeError(
                f"expected a number in {'(0, 1)' if low_open else '[0, 1)'}, got {text}"
            )
        return value

    return parse


_SEED_HELP = (
    "random seed (default 0: a command repeats exactly; the Python API's random_state "
    "defaults to None, fresh randomness, as in scikit-learn)"
)


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors reported as every other error: one line, exit 2."""

    def error(self, message: str):
        raise UsageError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    from .io import FORMATS
    from .models import METHODS

    parser = _Parser(
        prog="banmf", description="Boolean matrix factorization of sparse binary data."
    )
    parser.add_argument("--version", action="version", version=f"banmf {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    positive = _int_at_least(1, "a positive integer")
    formats = ", ".join(FORMATS)
    extensions = ", ".join(f".{f}" for f in FORMATS)

    def add_show(p, text):
        p.add_argument("--show", action="store_true", help=text)
        p.add_argument(
            "--top",
            type=positive,
            default=10,
            metavar="N",
            help="with --show: names per pattern (default 10)",
        )

    def add_masks(p):
        masks = p.add_mutually_exclusive_group()
        masks.add_argument(
            "--missing",
            metavar="FILE",
            help="a 0/1 matrix file of the data's shape: 1 marks a cell of unknown value "
            "(besides the ?, NA and blank cells of a text file)",
        )
        masks.add_argument(
            "--observed",
            metavar="FILE",
            help="its complement, for data where most cells are unknown: 1 marks an observed cell",
        )

    def add_format(p, what="INPUT"):
        p.add_argument(
            "--format",
            choices=FORMATS,
            metavar="FORMAT",
            help=f"format of {what} ({formats}; default: from its extension, .gz looked through)",
        )

    p = sub.add_parser("factorize", help="factorize a 0/1 matrix file")
    p.add_argument("input", help=f"matrix file: {extensions} (.gz looked through)")
    p.add_argument("-k", type=positive, required=True, help="rank (number of factors)")
    p.add_argument(
        "--method",
        default="banmf",
        metavar="NAME",
        help=f"one of {', '.join(METHODS)} (default banmf)",
    )
    p.add_argument(
        "--max-iter",
        type=positive,
        dest="max_iter",
        metavar="N",
        help="iterations at most, per start (default: the method's own, 1000 for banmf)",
    )
    p.add_argument(
        "--seed", type=_int_at_least(0, "a nonnegative integer"), default=0, help=_SEED_HELP
    )
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="thread budget (scikit-learn's n_jobs: -1 all CPUs, 1 one thread; "
        "default: what the environment allows)",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other estimator parameter, e.g. --param regularization=logspace (repeatable)",
    )
    p.add_argument(
        "--out", metavar="RESULT.npz", help="save the factorization here (checked before the fit)"
    )
    add_format(p)
    add_masks(p)
    p.add_argument(
        "--hold-out",
        type=_fraction(True),
        dest="hold_out",
        metavar="FRACTION",
        help="hide this share of the observed ones and zeros (drawn with --seed), fit the "
        "rest and report how well the hidden cells are predicted",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="fit on a Dask cluster (banmf only; needs banmf[distributed]): a scheduler's "
        "address such as tcp://host:8786, or 'local' for a cluster of this machine's cores. "
        "INPUT may then be a folder or glob of row-block .npz files (banmf.distributed)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    add_show(p, "after the summary, list every factor as a pattern (as banmf show)")
    p.set_defaults(func=cmd_factorize)

    p = sub.add_parser(
        "info", help="shape, nnz, density, empty rows/columns, duplicate rows, unknown cells"
    )
    p.add_argument("input", help="matrix file")
    add_format(p)
    add_masks(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("generate", help="write a planted synthetic matrix (the paper's generator)")
    p.add_argument("output", help=f"matrix file to write: {extensions}, or .gz of a text format")
    p.add_argument("-n", type=positive, required=True, help="rows")
    p.add_argument("-m", type=positive, required=True, help="columns")
    p.add_argument("-k", type=positive, required=True, help="planted rank")
    p.add_argument(
        "--density",
        type=_fraction(True),
        default=0.5,
        help="expected density of the noiseless matrix, in (0, 1) (default 0.5)",
    )
    p.add_argument(
        "--noise",
        type=_fraction(False),
        default=0.0,
        help="probability of flipping each entry, in [0, 1) (default 0)",
    )
    p.add_argument(
        "--seed", type=_int_at_least(0, "a nonnegative integer"), default=0, help=_SEED_HELP
    )
    p.add_argument("--factors", metavar="PLANTED.npz", help="also save the planted W, H here")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("evaluate", help="Boolean error of a saved factorization against a matrix")
    p.add_argument("input", help="matrix file")
    p.add_argument("result", help="a result saved by factorize --out")
    add_format(p)
    add_masks(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser(
        "complete", help="fill in a matrix's unknown cells from a saved factorization"
    )
    p.add_argument("input", help="matrix file (unknown cells: ?, NA or blank, or --missing)")
    p.add_argument("result", help="a result saved by factorize --out")
    add_format(p)
    add_masks(p)
    p.add_argument(
        "--out",
        metavar="FILE",
        help="write the completed matrix here (any matrix format; default: print the filled-in "
        "cells as CSV: row, column, value)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_complete)

    p = sub.add_parser("show", help="every factor of a saved factorization as a pattern")
    p.add_argument("result", help="a result saved by factorize --out")
    p.add_argument("--data", help="the matrix, if not kept in the result (and its labels)")
    add_format(p, "--data")
    p.add_argument(
        "--top",
        type=positive,
        default=10,
        metavar="N",
        help="names listed per pattern (default 10)",
    )
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print JSON")
    output.add_argument("--csv", action="store_true", help="print CSV, a row per pattern")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser(
        "select-k", help="choose the rank: description length, held-out error, stability"
    )
    p.add_argument("input", help="matrix file")
    p.add_argument(
        "--ks",
        type=_ks,
        default=list(range(1, 21)),
        metavar="RANKS",
        help="ranks to try: FIRST:LAST[:STEP] or K,K,... (default 1:20)",
    )
    p.add_argument(
        "--criteria",
        default="mdl,cv,stability",
        metavar="LIST",
        help="some of mdl, cv, stability, comma-separated (default all three)",
    )
    p.add_argument(
        "--method", default="banmf", metavar="NAME", help="the method fitted (default banmf)"
    )
    p.add_argument(
        "--folds",
        type=_int_at_least(2, "an integer >= 2"),
        default=5,
        help="parts of the observed cells, for cv and stability (default 5)",
    )
    p.add_argument(
        "--patience",
        type=positive,
        default=3,
        help="stop once mdl and cv have had their best k this many ranks back (default 3)",
    )
    p.add_argument("--all", action="store_true", help="try every rank of --ks (no early stop)")
    p.add_argument(
        "--seed", type=_int_at_least(0, "a nonnegative integer"), default=0, help=_SEED_HELP
    )
    p.add_argument("--jobs", type=int, metavar="N", help="thread budget shared by the fits")
    p.add_argument(
        "--max-iter",
        type=positive,
        dest="max_iter",
        metavar="N",
        help="iterations at most, per fit",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other parameter of the method (repeatable)",
    )
    add_format(p)
    add_masks(p)
    p.add_argument(
        "--plot", metavar="IMAGE", help="also draw every criterion against k: .png, .pdf or .svg"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_select_k)

    p = sub.add_parser("export", help="write a saved factorization's W and H, with names")
    p.add_argument("result", help="a result saved by factorize --out")
    p.add_argument(
        "--to",
        default="csv",
        metavar="FORMAT",
        help="csv (PREFIX_W.csv, PREFIX_H.csv), mtx (with .json names) or npz "
        "(PREFIX_factors.npz); default csv",
    )
    p.add_argument(
        "--out", metavar="PREFIX", help="path and stem of the files (default: RESULT without .npz)"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("plot", help="picture of a saved factorization (needs matplotlib)")
    p.add_argument("result", help="a result saved by factorize --out")
    p.add_argument("--data", help="the matrix, if not embedded in the result")
    p.add_argument("--out", help="image path: .png, .pdf or .svg (default: RESULT with .png)")
    add_format(p, "--data")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_plot)
    return parser


def _warnings_to(err):
    """Show warnings as one line each, ``banmf: warning: ...``, each message once."""
    shown = set()

    def show(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if text not in shown:
            shown.add(text)
            err.write(
                ("\r\033[K" if getattr(err, "isatty", lambda: False)() else "")
                + f"banmf: warning: {text}\n"
            )

    return show


def _announce(err):
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


def _attach_dashed_values(argv) -> list:
    """argparse takes a value that starts with a dash but is no plain number (``--ks -1:2``)
    for an option and then says only "expected one argument": attach such a value to the long
    option before it (``--ks=-1:2``), so that the option's own check says what is wrong."""
    joined = []
    for token in argv:
        previous = joined[-1] if joined else ""
        if previous.startswith("--") and "=" not in previous and re.match(r"-[\d.]", token):
            joined[-1] = f"{previous}={token}"
        else:
            joined.append(token)
    return joined


def main(argv=None, *, stdout=None, stderr=None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 internal error, 2 bad input,
    130/143 interrupted by SIGINT/SIGTERM)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(_attach_dashed_values(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # argparse: --help or --version
        return int(exc.code or 0)
    except UsageError as exc:
        err.write(f"banmf: error: {exc}\n")
        return EXIT_USAGE
    with signals_interrupt(_announce(err)) as args.signals, warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _warnings_to(err)
        try:
            return args.func(args, out, err)
        except (
            UsageError,
            ValueError,
            TypeError,
            FileNotFoundError,
            IsADirectoryError,
            PermissionError,
        ) as exc:
            err.write(f"banmf: error: {exc}\n")
            return EXIT_USAGE
        except KeyboardInterrupt:
            # Before any result existed, or a second signal: atomic writes leave no partial file.
            what, written = args.signals.name, getattr(args, "written", None)
            done = f"{written} was written" if written else "nothing written"
            if len(args.signals.received) > 1:
                err.write(f"banmf: aborted by a second signal ({what} first); {done}\n")
            else:
                err.write(f"banmf: interrupted by {what}; {done}\n")
            if getattr(args, "json", False):
                out.write(
                    json.dumps(
                        {
                            "command": args.command,
                            "interrupted": True,
                            "signal": what,
                            "aborted": True,
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
            err.write(f"banmf: internal error: {type(exc).__name__}: {exc} (please report it)\n")
            return EXIT_INTERNAL


def main_entry() -> None:
    """Console-script entry point (``banmf``)."""
    try:
        code = main()
    except KeyboardInterrupt:
        # Ctrl-C while starting (parsing, before the command's own handling is in place).
        sys.stderr.write("\nbanmf: interrupted while starting; nothing written\n")
        code = 128 + signal.SIGINT
    sys.exit(code)
