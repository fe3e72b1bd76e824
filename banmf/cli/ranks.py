"""``banmf select-k``: the rank chosen by description length, held-out error and stability."""

from __future__ import annotations

import contextlib
import json
import logging

from .exits import EXIT_OK, UsageError
from .inputs import check_target, estimator_params, input_data, read_input, sha256
from .render import emit, listening, rank_line, rank_table, start_numba


def cmd_select_k(args, out, err) -> int:
    from ..io import jsonable
    from ..model_selection import CRITERIA, select_rank
    from ..models import METHODS

    if args.method not in METHODS:
        raise UsageError(
            f"--method: unknown method {args.method!r}; choose one of {', '.join(METHODS)}"
        )
    criteria = [c.strip() for c in args.criteria.split(",") if c.strip()]
    bad = [c for c in criteria if c not in CRITERIA]
    if bad or not criteria:
        raise UsageError(f"--criteria: choose among {', '.join(CRITERIA)}, got {args.criteria!r}")
    params = estimator_params(args, METHODS[args.method])
    jobs = params.pop("n_jobs", None)
    if args.plot:
        from ..report.plots import IMAGE_FORMATS

        check_target(
            args.plot, "--plot", inputs=[args.input], suffixes=tuple(f".{f}" for f in IMAGE_FORMATS)
        )
    if args.out:
        check_target(args.out, "--out", inputs=[args.input], suffixes=(".json",))
    ds = read_input(args.input, args.format)
    data = input_data(args, ds)

    def report(row: dict) -> None:
        if not args.quiet:
            err.write("banmf: " + rank_line(row) + "\n")
            err.flush()

    class Fits(logging.Handler):  # within a rank: select_rank's "fits" records
        def emit(self, record) -> None:
            if getattr(record, "banmf", {}).get("event") == "fits":
                err.write(f"banmf: {record.getMessage()}\n")
                err.flush()

    start_numba()
    listen = contextlib.nullcontext() if args.quiet else listening(Fits())
    with listen:
        sel = select_rank(
            data,
            args.ks,
            criteria=criteria,
            method=args.method,
            folds=args.folds,
            patience=None if args.all else args.patience,
            n_jobs=jobs,
            random_state=args.seed,
            callback=report,
            **params,
        )
    # The data's shape and checksum: banmf report --selection refuses a selection of other data.
    record = {
        "input": args.input,
        "shape": list(ds.X.shape),
        "input_sha256": sha256(args.input),
        "method": args.method,
        **jsonable(sel.to_dict()),
    }
    lines = [
        f"input           {args.input} ({ds.X.shape[0]}×{ds.X.shape[1]}, {ds.X.nnz} nonzeros)",
        f"method          {args.method}; criteria {', '.join(criteria)}; "
        f"ks {sel.ks[0]}..{sel.ks[-1]} ({len(sel.ks)} tried, {sel.seconds:.1f} s)",
        "",
        *rank_table(sel),
        "",
        f"chosen k        {sel.best_k}: {sel.reason}",
    ]
    if sel.interrupted:
        lines.append("interrupted     the ranks done so far decided")
    if args.out:
        # The record as --json prints it: what banmf report --selection reads.
        from ..io import atomic_path

        with atomic_path(args.out) as tmp, open(tmp, "w", encoding="utf-8") as fh:
            json.dump(record, fh, indent=1)
            fh.write("\n")
        args.written = args.out
        lines.append(f"saved           {args.out}")
    if args.plot:
        from ..report.plots import plot_rank_selection

        plot_rank_selection(sel, args.plot)
        args.written = args.plot
        record["plot"] = args.plot
        lines.append(f"plot            {args.plot}")
    emit(args, record, lines, out)
    return args.signals.exit_code if sel.interrupted else EXIT_OK
