"""Commands about a saved factorization: ``show``, ``export``, ``plot``."""

from __future__ import annotations

import csv
from pathlib import Path

from .exits import EXIT_OK, UsageError
from .inputs import check_target, matching_data, read_input, saved_with_data
from .render import emit, pattern_lines


def cmd_show(args, out, err) -> int:

    saved, X = saved_with_data(args)
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
                    "" if p.cells == p.unknown else f"{p.precision:.4f}",  # none observed
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
    emit(args, record, pattern_lines(found), out)
    return EXIT_OK


def cmd_export(args, out, err) -> int:
    from ..io import EXPORT_FORMATS, export_factors, export_paths
    from ..result import Factorization

    if args.to not in EXPORT_FORMATS:
        raise UsageError(f"--to: choose one of {', '.join(EXPORT_FORMATS)}, got {args.to!r}")
    prefix = args.out or str(Path(args.result).with_suffix(""))
    targets = export_paths(prefix, args.to)
    for target in targets:
        check_target(str(target), "--out", inputs=[args.result], suffixes=())
    saved = Factorization.load(args.result)
    written = [str(p) for p in export_factors(saved, prefix, args.to)]
    emit(
        args,
        {"result": args.result, "format": args.to, "written": written},
        [f"wrote {p}" for p in written],
        out,
    )
    return EXIT_OK


def cmd_plot(args, out, err) -> int:
    from ..report.plots import IMAGE_FORMATS, plot_result
    from ..result import Factorization

    target = args.out or str(Path(args.result).with_suffix(".png"))
    check_target(
        target,
        "--out",
        inputs=[args.result, args.data],
        suffixes=tuple(f".{f}" for f in IMAGE_FORMATS),
    )
    saved = Factorization.load(args.result)
    X = saved.X
    if args.data:
        X = read_input(args.data, args.format).X
        matching_data(X, args.data, saved, args.result)
    kind = plot_result(saved, target, X=X)
    emit(
        args,
        {"result": args.result, "image": target, "kind": kind},
        [f"wrote {target} ({kind} view)"],
        out,
    )
    return EXIT_OK
