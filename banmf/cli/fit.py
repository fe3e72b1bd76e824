"""``banmf factorize``: a fit on this machine, or BANMF on a Dask cluster (``--scheduler``),
by one path: the library call differs by its ``client`` only."""

from __future__ import annotations

import time
from pathlib import Path

from .data import predictor_rule
from .exits import EXIT_OK, UsageError
from .inputs import (
    check_target,
    estimator_params,
    input_data,
    read_input,
    sha256,
)
from .render import Progress, emit, fit_lines, pattern_lines, plural, refinement_lines, start_numba


def cmd_factorize(args, out, err) -> int:
    """``banmf factorize``: read, fit (on this machine, or with ``--scheduler`` on a Dask
    cluster, by the same library call), summarize, save."""
    from ..runtime.warmup import Ahead

    # Started by main() before the parser on a first run (ahead_for), else none.
    early = getattr(args, "early", None) or Ahead()
    try:
        return _factorize(args, early, out, err)
    finally:
        early.stop()


def _factorize(args, early, out, err) -> int:
    """:func:`cmd_factorize` beside ``early``, the second process compiling ahead
    (:func:`ahead_for`), which is given its fit once the data is read."""
    from ..api import factorize
    from ..exceptions import InputError, Interrupted
    from ..models import METHODS

    if args.method not in METHODS:
        raise UsageError(
            f"--method: unknown method {args.method!r}; choose one of {', '.join(METHODS)}"
        )
    params = estimator_params(args, METHODS[args.method])
    if args.scheduler:
        _check_scheduler(args)
    if args.out:
        check_target(args.out, "--out", inputs=[args.input, args.missing, args.observed])
    blocks = _row_blocks(args) if args.scheduler else None
    ds = data = fitted = X = None
    if blocks is None:
        ds = read_input(args.input, args.format)
        X = ds.X
        data = fitted = input_data(args, ds)
    hidden = None
    if args.hold_out:
        from ..model_selection import hold_out

        try:
            hidden = hold_out(data, args.hold_out, random_state=args.seed)[1]
        except InputError as exc:  # the data's masks are checked: this is about the fraction
            raise UsageError(f"--hold-out {exc}") from None
        fitted = data.hide(hidden)
    client = cluster = None
    if args.scheduler:
        client, cluster = _connect(args, err)
    where = f" on {args.scheduler}" if args.scheduler else ""
    progress = Progress(
        err,
        f"fitting {args.method}" + (" on the cluster" if args.scheduler else ""),
        enabled=not args.quiet,
        ahead=None if args.scheduler else _ahead(args, params, fitted, early),
    )
    signalled = False
    with progress:
        start_numba()
        start = time.perf_counter()
        try:
            result = factorize(
                fitted if blocks is None else blocks,
                args.k,
                args.method,
                random_state=args.seed,
                **({"client": client} if client is not None else {}),
                **params,
            )
        except Interrupted as exc:  # the first signal: the best result so far
            result, signalled = exc.result, True
        finally:
            if client is not None:
                client.close()
            if cluster is not None:
                cluster.close()
    # The fit's own time: the first run's compilation is reported apart.
    seconds = time.perf_counter() - start - progress.compile_seconds
    model = result.estimator
    if args.scheduler and not args.quiet:
        _polish_note(args, model, err)
    meta = {"input": str(args.input), "seed": args.seed}
    if ds is not None:
        meta["input_sha256"] = sha256(args.input)
    if args.scheduler:
        meta["scheduler"] = args.scheduler
    if hidden is not None:
        from ..model_selection import held_out_scores

        # The hidden cells are unknown cells of the fit: scored as predict and complete guess
        # them, by the predictor it chose, and by W⊗H beside it when that is another.
        predictor = result.predictor
        scores = held_out_scores(X, result.W, result.H, hidden, predictor=predictor)
        kind = "product" if predictor is None else predictor.kind
        # Kept with the result, so that the report shows them.
        meta["held_out"] = {
            "fraction": args.hold_out,
            "seed": args.seed,
            **scores,
            "predictor": kind,
        }
        if kind != "product":
            meta["held_out"]["product"] = held_out_scores(X, result.W, result.H, hidden)
    labels = {} if ds is None else {"row_labels": ds.row_labels, "col_labels": ds.col_labels}
    result = result.replace(seconds=seconds, meta=meta, **labels)
    n, m = result.shape
    if X is not None:
        counts = result.evaluate(X)  # with the unknown cells it was fitted with, hidden ones too
        split = (counts["false_negatives"], counts["false_positives"])
        nnz, unknown = int(X.nnz), n * m - data.n_observed
    else:  # row-block files: the cluster counted the error's parts
        split = (model.false_negatives_, model.false_positives_)
        nnz, unknown = int(model.nnz_), n * m - int(model.n_observed_)
    observed_cells = result.n_observed
    # The relative error divides by the observed ones the fit saw: fewer than X's nonzeros
    # when some are unknown or held out.
    fitted_ones = int(model.nnz_) if result.X is None else int(result.X.nnz)
    record = _record(
        args,
        result,
        nnz=nnz,
        unknown=unknown,
        observed_cells=observed_cells,
        split=split,
        compiling=progress.compile_seconds,
        signalled=signalled,
    )
    if args.scheduler:
        record.update(
            scheduler=args.scheduler,
            blocks=int(model.n_blocks_),
            recoveries=int(model.recoveries_),
            traffic=dict(model.traffic_),
        )
    if args.out:
        result.save(args.out)
        args.written = args.out
    compiling = progress.compile_seconds
    selection = getattr(model, "rank_selection_", None)
    choosing = None
    if selection is not None:  # -k auto: the selection's time, without its compilation
        choosing = max(selection.seconds - progress.selection_compile_seconds, 0.0)
        record["selection_seconds"] = round(choosing, 4)
    lines = fit_lines(
        args,
        result,
        nnz=nnz,
        fitted_ones=fitted_ones,
        observed_cells=observed_cells,
        unknown=unknown,
        split=split,
        compiling=compiling,
        compiled=progress.compiled,
        where=where,
        choosing=choosing,
    )
    if hidden is not None:
        record["held_out"] = meta["held_out"]
        lines += _held_out_lines(meta["held_out"], predictor)
    if selection is not None:  # -k auto
        from ..io import jsonable

        record["rank_selection"] = jsonable(selection.to_dict())
        method_line = next(i for i, line in enumerate(lines) if line.startswith("method"))
        shown = _auto_lines(selection) + (_curve_lines(selection) if args.verbose else [])
        lines[method_line + 1 : method_line + 1] = shown
    lines += refinement_lines(result.info, record)
    if args.scheduler:
        lines.append(_cluster_line(model))
    lines += _ending_lines(args, record, signalled, selection)
    if args.show:
        found = result.patterns(X, top=args.top)
        record["patterns"] = [pattern.to_dict() for pattern in found]
        lines += ["", *pattern_lines(found)]
    emit(args, record, lines, out)
    return args.signals.exit_code if signalled else EXIT_OK


def _held_out_lines(held: dict, predictor) -> list[str]:
    """The summary's lines for ``--hold-out``: the hidden cells predicted wrong by the fit's
    predictor, and by W⊗H alone when the predictor is another (``held``: meta["held_out"])."""

    def wrong(scores: dict) -> str:
        f1 = "n/a, no ones held out" if scores["f1"] is None else f"{scores['f1']:.4f}"
        return f"{scores['errors']} wrong (accuracy {scores['accuracy']:.4f}, F1 on the ones {f1})"

    line = f"held out        {held['cells']} observed cells ({100 * held['fraction']:g} %): "
    if "product" not in held:
        return [line + wrong(held)]
    return [
        line + f"{wrong(held)} by the fit's predictor ({predictor_rule(predictor)})",
        f"held out W⊗H    {wrong(held['product'])} by the kept start's product alone",
    ]


#: The trivial predictors of -k auto's baseline, in words.
_TRIVIAL = {"zeros": "the all-zeros prediction", "majority": "the column majority"}


def _auto_lines(selection) -> list[str]:
    """The summary's lines for the k that ``-k auto`` chose (:func:`banmf.select_rank`): the
    choice, and what it optimizes."""
    k, ks, rates = selection.best_k, selection.ks, selection.held_out_error
    tried = f"k={ks[0]}..{ks[-1]} ({selection.folds} folds)"
    base = selection.baseline
    trivial = "" if base is None else f"{_TRIVIAL[base['kind']]} {base['error']:.4f}"
    if not selection.generalizes:
        best = min(rates, key=lambda r: (rates[r], r))
        return [
            f"chosen k        {k} (-k auto): no rank generalizes: none of {tried} predicts "
            f"held-out cells better than {trivial} by a margin (the best, k={best}: "
            f"{rates[best]:.4f}), so the smallest",
            "k chosen by     held-out error: the share of observed cells, hidden from the fits "
            "fold by fold, that they predict wrong (not the fit's own error, which falls with "
            "every k)",
        ]
    # With unknown cells the folds are scored by the predictor the fit would use.
    kind = (selection.predictor or {}).get(k)
    by = f" (by the {kind} predictor)" if kind else ""
    # Among near-equal ranks scored by a vote or NMF predictor, the largest (cv_margin).
    margin = selection.cv_margin
    if margin is None or margin["k"] == margin["lowest_k"]:
        how = f"the lowest held-out error{by}, {rates[k]:.4f},"
    else:
        low = margin["lowest_k"]
        how = (
            f"held-out error {rates[k]:.4f}{by}, the largest k within {margin['margin']:g} SE "
            f"of the lowest (k={low}, {rates[low]:.4f}),"
        )
    line = f"chosen k        {k} (-k auto): {how} of {tried}"
    line += f"; {selection.edge}" if selection.edge else ""
    said = "k chosen by     held-out error: the share of observed cells, hidden from the fits "
    said += "fold by fold, that they predict wrong (not the fit's own error)"
    if trivial:
        said += f"; {trivial} for comparison"
    return [line, said]


def _curve_lines(selection) -> list[str]:
    """``-v``: each rank's evidence (the curve ``-k auto`` read), the chosen one marked."""
    lines = ["rank selection  k: the fit's error (all observed cells), held-out error ± SE"]
    for row in selection.to_dict()["per_k"]:
        k = row["k"]
        text = f"  k={k:<3} {row['training_error']:>9}  {row['held_out_error']:.4f} ± "
        text += f"{row['held_out_se']:.4f}"
        if "predictor" in row:
            text += f" ({row['predictor']})"
        lines.append(text + ("  *" if k == selection.best_k else ""))
    if selection.baseline is not None:
        rates = selection.baseline["errors"]
        lines.append(
            "  trivial        "
            + ", ".join(f"{_TRIVIAL[kind]} {rate:.4f}" for kind, rate in rates.items())
        )
    return lines


def _check_scheduler(args) -> None:
    """What ``--scheduler`` refuses, before anything is read or started."""
    if args.method != "banmf":
        raise UsageError(f"--scheduler: only banmf runs on a cluster, not {args.method}")
    if args.k == "auto":
        raise UsageError(
            "-k auto does not run on a cluster (eleven fits per rank tried): choose k on a sample "
            "with banmf select-k or factorize -k auto without --scheduler, and pass it"
        )
    try:
        import distributed  # noqa: F401

        import banmf.distributed  # noqa: F401
    except ImportError:
        raise UsageError("--scheduler needs Dask: pip install 'banmf[distributed]'") from None


def _row_blocks(args):
    """Row-block files (a folder or a glob pattern) as a :class:`banmf.distributed.BlockMatrix`;
    None for one matrix file, which is read as on one machine. ``--hold-out`` and ``--show``
    need the data in memory: refused with row-block files."""
    from ..distributed import read_blocks

    path = Path(args.input)
    if not (path.is_dir() or (not path.exists() and any(c in args.input for c in "*?["))):
        return None
    if args.missing or args.observed:
        raise UsageError("--missing/--observed: row-block files carry their unknown cells")
    for option, given in (("--hold-out", args.hold_out), ("--show", args.show)):
        if given:
            raise UsageError(
                f"{option} needs the data in memory, and row-block files stay on the workers: "
                "give one matrix file, or run banmf show on the saved result"
            )
    try:
        return read_blocks(args.input)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(f"{args.input}: {exc}") from None


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
    except ValueError as exc:  # an address Dask cannot parse, e.g. of an unknown protocol
        raise UsageError(
            f"--scheduler {args.scheduler}: not an address Dask takes ({exc}); "
            "expected 'local' or e.g. tcp://host:8786"
        ) from None


def _polish_note(args, model, err) -> None:
    """Say why a cluster fit's factors may differ from one machine's: one machine's
    ``polish=True`` is "auto", the exact polish wherever it is cheap, which is not
    distributed."""
    from ..engine.polish import resolve_polish

    n, m = model.W_.shape[0], model.n_features_in_
    k = model.n_components_
    if k > 0 and model.polish is True and resolve_polish("auto", (n, m), model.nnz_, k) == "exact":
        err.write(
            f"banmf: note: on one machine banmf polishes these factors exactly (k={k}), "
            "which is not distributed, so W and H may differ from a fit without --scheduler "
            "(with --param polish=flip they agree)\n"
        )


def _cluster_line(model) -> str:
    """The summary's line of what the cluster did: its blocks, traffic and lost workers."""
    traffic = model.traffic_
    return (
        f"cluster         {plural(model.n_blocks_, 'row block')}; "
        f"{traffic['sent_bytes'] / 1e6:.1f} MB sent, "
        f"{traffic['received_bytes'] / 1e6:.1f} MB received, "
        f"{plural(traffic['round_trips'], 'round trip')}"
        + (f"; {plural(model.recoveries_, 'lost worker')} survived" if model.recoveries_ else "")
    )


def _compiles_ahead(args) -> bool:
    """Whether the fit's kernels may compile ahead in a second process: a BANMF fit at a
    fixed rank on this machine (:mod:`banmf.runtime.warmup`)."""
    return args.method == "banmf" and isinstance(args.k, int) and not args.scheduler


def ahead_for(words: list[str]):
    """The second process compiling ahead for ``banmf factorize`` (:mod:`banmf.runtime.warmup`),
    started from the command's words before they are parsed (the parser loads the numerical
    libraries: about half a second), where Numba's cache looks empty (a first run:
    :func:`banmf.runtime.warmup.cache_looks_empty`), so that it is ready about when the fit
    starts compiling; else a handle that does nothing. The parsed arguments then give it its
    fit or stop it (:func:`_ahead`)."""
    from ..runtime.warmup import Ahead, cache_looks_empty, spawn

    command = next((word for word in words if not word.startswith("-")), None)
    remote = any(word.split("=")[0] == "--scheduler" for word in words)
    if command != "factorize" or remote or not cache_looks_empty():
        return Ahead()
    return spawn()


def _ahead(args, params: dict, data, early):
    """For a BANMF fit at a fixed rank: a call that starts compiling its kernels ahead in a
    second process (:func:`banmf.runtime.warmup.ahead`), for the progress to make on the
    fit's first compilation; else None. ``early``, the process started before the data was
    read (:func:`ahead_for`), is given the fit now and returned by the call."""
    if not _compiles_ahead(args):
        early.stop()
        return None
    import numpy as np

    from ..runtime.warmup import ahead

    unknown = data.unknown
    form = "all" if unknown is None else "observed" if unknown.observed else "missing"
    dtype = np.dtype(params.get("dtype", "float64"))
    fit = (dtype, args.k, form, data.X.shape, int(data.X.nnz))
    if early.process is not None:
        early.begin(*fit)
        return lambda: early
    return lambda: ahead(*fit)


def _record(
    args,
    result,
    *,
    nnz: int,
    unknown: int,
    observed_cells: int,
    split: tuple[int, int],
    compiling: float,
    signalled: bool,
) -> dict:
    """The JSON record of ``banmf factorize`` on one machine or a cluster: the input, the fit,
    its error and the error's two parts (``split``: ones missed, zeros covered)."""
    from .. import __version__
    from ..io import jsonable

    return {
        "input": args.input,
        "shape": list(result.shape),
        "nnz": nnz,
        "method": args.method,
        "n_components": result.n_components,  # capped at min(n, m): the k fitted
        "seed": args.seed,
        "n_components_asked": args.k,
        "unknown_cells": unknown,
        "observed_cells": observed_cells,
        "error": result.error,
        "relative_error": result.relative_error,
        "false_negatives": split[0],
        "false_positives": split[1],
        "n_iter": result.n_iter,
        "seconds": round(result.seconds, 4),
        "compile_seconds": round(compiling, 4),
        "interrupted": result.interrupted,
        "signal": args.signals.name if signalled else None,
        "out": args.out,
        "params": jsonable(result.params),
        "version": __version__,
    }


def _ending_lines(args, record: dict, signalled: bool, selection=None) -> list[str]:
    """The summary's last lines: interrupted (by a signal, or by request), and saved; what
    was kept when ``-k auto``'s rank ``selection`` was interrupted."""
    lines = []
    if record["interrupted"]:
        why = f"by {record['signal']}" if signalled else "by request"
        if selection is not None and selection.interrupted:
            ks = selection.ks
            lines.append(
                f"interrupted     {why} while -k auto chose k: kept k={selection.best_k}, the "
                f"best of k={ks[0]}..{ks[-1]} done, as the selection fitted it to all observed "
                "cells (its unknown cells predicted by W⊗H)"
            )
        else:
            lines.append(f"interrupted     {why}: the best result so far")
    if args.out:
        lines.append(f"saved           {args.out}")
    return lines
