"""The ``banmf`` command: factorize, info, generate, evaluate, plot.

Results go to stdout (a short table, or JSON with ``--json``); progress and diagnostics go to
stderr. Exit codes: 0 ok, 2 bad usage or bad input (one line, no traceback), 1 internal error,
130 interrupted by Ctrl-C.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


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
        value = raw  # a bare word such as logspace or float32
    return key.strip(), value


class Progress:
    """A one-line bar on a terminal, otherwise a line every 10 % once a run passes 1 s.

    Used as the estimator's ``callback``; an iteration count that starts again marks the next
    random start (``n_init``).
    """

    def __init__(self, total: int, stream, enabled: bool = True):
        self.total, self.stream, self.enabled = total, stream, enabled
        self.tty = enabled and hasattr(stream, "isatty") and stream.isatty()
        self.start = self.last = time.monotonic()
        self.next_pct = 10
        self.run, self.prev = 1, 0

    def __call__(self, t: int, objective: float) -> bool:
        if not self.enabled:
            return False
        if t <= self.prev:
            self.run, self.next_pct = self.run + 1, 10
        self.prev = t
        now = time.monotonic()
        label = f"start {self.run}, " if self.run > 1 else ""
        if self.tty:
            if now - self.last >= 0.1 or t == self.total:
                width = 30
                done = int(width * t / self.total)
                self.stream.write(
                    f"\r{label}[{'#' * done}{'.' * (width - done)}] {t}/{self.total} "
                    f"objective {objective:.6g} ({now - self.start:.1f} s)"
                )
                self.stream.flush()
                self.last = now
        elif (self.run == 1 and now - self.start >= 1.0 and 100 * t >= self.next_pct * self.total) or (
            self.run > 1 and t == self.total and now - self.start >= 5.0
        ):
            # quick runs stay quiet; long ones log every 10 % of the first start, then one line
            # per further start once the whole fit has taken a few seconds
            self.stream.write(
                f"{label}iteration {t}/{self.total}: objective {objective:.6g} ({now - self.start:.1f} s)\n"
            )
            self.stream.flush()
            while self.next_pct * self.total <= 100 * t:
                self.next_pct += 10
        return False

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _read_input(path: str):
    from .io import read_dataset

    return read_dataset(path)


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _emit(args, record: dict, lines: list[str], out) -> None:
    if args.json:
        out.write(json.dumps(record, indent=2, default=str) + "\n")
    else:
        out.write("\n".join(lines) + "\n")


def cmd_factorize(args, out, err) -> int:
    from .api import Factorization
    from .booleanize import error_counts
    from .io import save_result
    from .models import METHODS

    if args.method not in METHODS:
        raise UsageError(f"unknown method {args.method!r}; choose one of {', '.join(sorted(METHODS))}")
    cls = METHODS[args.method]
    valid = set(cls._param_names())
    params = dict(_parse_param(p) for p in args.param)
    unknown = set(params) - valid
    if unknown:
        raise UsageError(f"method {args.method} has no parameter(s) {sorted(unknown)}; valid: {sorted(valid)}")
    if args.max_iter is not None:
        if "max_iter" not in valid:
            raise UsageError(f"method {args.method} has no --max-iter")
        params["max_iter"] = args.max_iter
    ds = _read_input(args.input)
    X = ds.X
    progress = None
    if "callback" in valid:
        total = params.get("max_iter", cls().max_iter)
        progress = Progress(total, err, enabled=not args.quiet)
        params["callback"] = progress
    est = cls(n_components=args.k, random_state=args.seed, **params)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est.fit(X)
        except KeyboardInterrupt:
            if progress:
                progress.close()
            err.write("banmf: interrupted before any result existed; nothing written\n")
            return EXIT_INTERRUPTED
    seconds = time.perf_counter() - start
    if progress:
        progress.close()
    for w in caught:
        err.write(f"banmf: warning: {w.message}\n")
    interrupted = bool(getattr(est, "interrupted_", False))
    result = Factorization(
        W=est.W_, H=est.components_, error=int(est.reconstruction_err_),
        relative_error=float(est.relative_error_), seconds=seconds, n_iter=int(est.n_iter_),
        method=args.method, params={k: v for k, v in est.get_params().items() if k != "callback"},
        estimator=est,
    )
    n, m = X.shape
    fn, fp = error_counts(X, result.W, result.H)
    record = {
        "input": args.input, "shape": [n, m], "nnz": int(X.nnz), "method": args.method,
        "n_components": args.k, "error": result.error, "relative_error": result.relative_error,
        "false_negatives": fn, "false_positives": fp, "n_iter": result.n_iter,
        "seconds": round(seconds, 4), "interrupted": interrupted, "out": args.out,
    }
    if args.out:
        save_result(result, args.out, X=X, extra={"input": str(args.input), "input_sha256": _sha256(args.input)})
    lines = [
        f"input           {args.input} ({n}×{m}, {X.nnz} nonzeros, density {X.nnz / (n * m):.4g})",
        f"method          {args.method}, k={args.k}, {result.n_iter} iterations, {seconds:.2f} s",
        f"error           {result.error} ({fn} ones missed, {fp} zeros covered)",
        f"relative error  {result.relative_error:.4f} (error / nnz)",
    ]
    if hasattr(est, "booleanized_err_"):
        steps = {"grid": est.booleanized_err_, "thresholds": est.unpolished_err_, "polish": result.error}
        record.update(refinement=steps, n_init=getattr(est, "n_init_", 1))
        lines.append(
            f"refinement      grid {steps['grid']} → per-factor thresholds {steps['thresholds']} → "
            f"polish {steps['polish']} (best of {record['n_init']} start(s))"
        )
    if interrupted:
        lines.append("interrupted     yes: the result is that of the factors at the interruption")
    if args.out:
        lines.append(f"saved           {args.out}")
    _emit(args, record, lines, out)
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


def cmd_info(args, out, err) -> int:
    ds = _read_input(args.input)
    X = ds.X
    n, m = X.shape
    row_nnz = np.diff(X.indptr)
    col_nnz = np.bincount(X.indices, minlength=m)
    # duplicate rows: rows equal to an earlier row (hash the column lists)
    seen, dups = set(), 0
    for i in range(n):
        key = X.indices[X.indptr[i]:X.indptr[i + 1]].tobytes()
        if key in seen:
            dups += 1
        seen.add(key)
    record = {
        "input": args.input, "shape": [n, m], "nnz": int(X.nnz), "density": X.nnz / (n * m),
        "empty_rows": int((row_nnz == 0).sum()), "empty_columns": int((col_nnz == 0).sum()),
        "duplicate_rows": dups, "max_row_nnz": int(row_nnz.max()), "max_column_nnz": int(col_nnz.max()),
        "has_labels": ds.row_labels is not None or ds.col_labels is not None,
    }
    lines = [f"{k:<15} {v}" for k, v in record.items()]
    _emit(args, record, lines, out)
    return EXIT_OK


def cmd_generate(args, out, err) -> int:
    from .api import Factorization
    from .booleanize import boolean_error
    from .datasets import make_boolean
    from .io import save_result, write_matrix

    X, W, H = make_boolean(args.n, args.m, args.k, args.density, noise=args.noise, random_state=args.seed)
    write_matrix(X, args.output)
    record = {"output": args.output, "shape": [args.n, args.m], "nnz": int(X.nnz), "k": args.k,
              "density": args.density, "noise": args.noise, "seed": args.seed, "factors": args.factors}
    if args.factors:
        error = boolean_error(X, W, H)
        planted = Factorization(W=W, H=H, error=error, relative_error=error / max(X.nnz, 1), seconds=0.0,
                                n_iter=0, method="planted",
                                params={"n": args.n, "m": args.m, "k": args.k, "density": args.density,
                                        "noise": args.noise, "seed": args.seed})
        save_result(planted, args.factors, X=X)
        record["planted_error"] = error
    lines = [f"wrote {args.output}: {args.n}×{args.m}, {X.nnz} nonzeros (planted k={args.k})"]
    if args.factors:
        lines.append(f"wrote {args.factors}: planted factors (error {record['planted_error']} against X)")
    _emit(args, record, lines, out)
    return EXIT_OK


def cmd_evaluate(args, out, err) -> int:
    from .booleanize import error_counts
    from .io import load_result
    from .models.banmf import relative_error

    X = _read_input(args.input).X
    saved = load_result(args.result)
    if X.shape != (saved.W.shape[0], saved.H.shape[1]):
        raise UsageError(
            f"{args.input} is {X.shape[0]}×{X.shape[1]} but {args.result} factorizes a "
            f"{saved.W.shape[0]}×{saved.H.shape[1]} matrix"
        )
    fn, fp = error_counts(X, saved.W, saved.H)
    error = fn + fp
    record = {"input": args.input, "result": args.result, "method": saved.meta.get("method"),
              "n_components": saved.W.shape[1], "error": error,
              "relative_error": relative_error(error, X.nnz),
              "false_negatives": fn, "false_positives": fp, "recorded_error": saved.meta.get("error")}
    lines = [f"error           {error} ({fn} ones missed, {fp} zeros covered)",
             f"relative error  {record['relative_error']:.4f} (error / nnz)",
             f"factorization   {saved.meta.get('method')}, k={saved.W.shape[1]}"]
    _emit(args, record, lines, out)
    return EXIT_OK


def cmd_plot(args, out, err) -> int:
    from .io import load_result
    from .plotting import plot_result

    saved = load_result(args.result)
    X = _read_input(args.data).X if args.data else saved.X
    target = args.out or str(Path(args.result).with_suffix(".png"))
    kind = plot_result(saved, target, X=X)
    _emit(args, {"result": args.result, "png": target, "kind": kind},
          [f"wrote {target} ({kind} view)"], out)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="banmf", description="Boolean matrix factorization of sparse binary data.")
    parser.add_argument("--version", action="version", version=f"banmf {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("factorize", help="factorize a 0/1 matrix file")
    p.add_argument("input", help="matrix file: .mtx[.gz], .npz, .csv, .tsv or .dat")
    p.add_argument("-k", type=int, required=True, help="rank (number of factors)")
    p.add_argument("--method", default="banmf", help="banmf (default), reg-banmf, nmf, reg-nmf, asso, pnlpf, zhang-threshold, grecond")
    p.add_argument("--max-iter", type=int, dest="max_iter")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="any estimator parameter, e.g. --param regularization=logspace")
    p.add_argument("--out", help="save the factorization here (.npz)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_factorize)

    p = sub.add_parser("info", help="shape, nnz, density, empty rows/columns, duplicate rows")
    p.add_argument("input")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("generate", help="write a planted synthetic matrix (the paper's generator)")
    p.add_argument("output", help="matrix file to write (.mtx, .mtx.gz, .npz, .csv, .tsv, .dat)")
    p.add_argument("-n", type=int, required=True)
    p.add_argument("-m", type=int, required=True)
    p.add_argument("-k", type=int, required=True)
    p.add_argument("--density", type=float, default=0.5)
    p.add_argument("--noise", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--factors", help="also save the planted W, H here (.npz)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("evaluate", help="Boolean error of a saved factorization against a matrix")
    p.add_argument("input")
    p.add_argument("result")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("plot", help="PNG of a saved factorization (needs matplotlib)")
    p.add_argument("result")
    p.add_argument("--data", help="the matrix, if not embedded in the result")
    p.add_argument("--out", help="PNG path (default: RESULT with .png)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plot)
    return parser


def main(argv=None, *, stdout=None, stderr=None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 internal error, 2 bad input)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
        return int(exc.code or 0)
    try:
        return args.func(args, out, err)
    except (UsageError, ValueError, TypeError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        err.write(f"banmf: error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.write("banmf: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:  # anything else is our bug: say so, briefly
        err.write(f"banmf: internal error: {type(exc).__name__}: {exc} (please report it)\n")
        return EXIT_INTERNAL


def main_entry() -> None:
    """Console-script entry point (``banmf``)."""
    sys.exit(main())
