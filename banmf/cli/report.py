"""``banmf report``: a saved factorization as one self-contained HTML page."""

from __future__ import annotations

import json
from pathlib import Path

from .exits import EXIT_OK, UsageError
from .inputs import check_target, saved_with_data
from .render import emit


def cmd_report(args, out, err) -> int:

    target = args.out or str(Path(args.result).with_suffix(".html"))
    check_target(
        target,
        "--out",
        inputs=[args.result, args.data, args.selection],
        suffixes=(".html", ".htm"),
    )
    saved, X = saved_with_data(args, other_file="refuse")
    selection = None
    if args.selection:
        selection = _selection(args.selection, saved)
    saved.report(target, X, selection=selection)
    args.written = target
    emit(
        args,
        {"result": args.result, "report": target, "data": X is not None},
        [f"wrote {target}"]
        + ([] if X is not None else ["(no data at hand: summary and factor sizes only)"]),
        out,
    )
    return EXIT_OK


def _selection(path: str, saved) -> dict:
    """The JSON that ``banmf select-k --json`` printed, read from ``path``; refused unless it
    is a rank selection of the data ``saved`` was fitted to."""
    from ..exceptions import InputError
    from ..report.html import selection_record

    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        with open(path, encoding="utf-8") as fh:
            selection = json.load(fh)
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(
            f"--selection {path}: not the JSON of banmf select-k --json ({exc})"
        ) from None
    try:
        return selection_record(selection, saved)
    except InputError as exc:
        raise UsageError(f"--selection {path}: {exc}") from None
