"""Commands about a matrix file: ``info``, ``generate``, ``evaluate``, ``complete``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from .exits import EXIT_OK, UsageError
from .inputs import (
    check_target,
    input_data,
    matching_data,
    read_input,
    sha256,
    with_unknown_cells,
)
from .render import emit, plural


def cmd_info(args, out, err) -> int:
    ds = read_input(args.input, args.format)
    X = ds.X
    n, m = X.shape
    from ..io import matrix_stats  # nothing of the shape's size: a huge header answers at once

    unknown = n * m - input_data(args, ds).n_observed

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
    emit(args, record, lines, out)
    return EXIT_OK


def cmd_generate(args, out, err) -> int:
    from ..datasets import make_boolean
    from ..io import OUTPUT_SUFFIXES, write_matrix
    from ..result import Factorization

    check_target(args.output, "OUTPUT", suffixes=OUTPUT_SUFFIXES)
    if args.factors:
        if Path(args.factors).resolve() == Path(args.output).resolve():
            raise UsageError(
                f"--factors {args.factors} is OUTPUT itself; give the planted factors a file "
                "of their own"
            )
        check_target(args.factors, "--factors", inputs=[args.output])
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
            meta={"input": args.output, "input_sha256": sha256(args.output)},
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
    emit(args, record, lines, out)
    return EXIT_OK


def cmd_evaluate(args, out, err) -> int:
    from ..result import Factorization

    saved = Factorization.load(args.result)
    ds = read_input(args.input, args.format)
    matching_data(ds.X, args.input, saved, args.result)
    scores = with_unknown_cells(saved, args, ds).evaluate(ds.X)
    error, fn, fp = scores["error"], scores["false_negatives"], scores["false_positives"]
    record = {
        "input": args.input,
        "result": args.result,
        "method": saved.method,
        "n_components": saved.n_components,
        **scores,
        "recorded_error": saved.error,
    }
    lines = [
        f"error           {error} ({fn} ones missed, {fp} zeros covered)",
        f"relative error  {record['relative_error']:.4f} (error / nnz)",
        f"factorization   {saved.method}, k={saved.n_components}",
    ]
    emit(args, record, lines, out)
    return EXIT_OK


def cmd_complete(args, out, err) -> int:
    from ..io import OUTPUT_SUFFIXES, write_matrix
    from ..result import Factorization

    if args.out:
        check_target(
            args.out,
            "--out",
            inputs=[args.input, args.result, args.missing, args.observed],
            suffixes=OUTPUT_SUFFIXES,
        )
    saved = Factorization.load(args.result)
    ds = read_input(args.input, args.format)
    X = ds.X
    matching_data(X, args.input, saved, args.result)
    fitted = with_unknown_cells(saved, args, ds)
    if fitted.missing is None and fitted.observed is None:
        raise UsageError(
            f"{args.input} has no unknown cells to fill in: mark them in the file (?, NA or "
            "blank cells) or give --missing FILE / --observed FILE"
        )
    keys, values = fitted.filled(X)  # values None: the predicted ones off observed cells
    n, m = X.shape
    rows_named = ds.row_labels or saved.row_labels
    cols_named = ds.col_labels or saved.col_labels
    ones = int(len(keys) if values is None else values.sum())
    predictor = fitted.predictor
    record = {
        "input": args.input,
        "result": args.result,
        "unknown_cells": n * m - fitted.n_observed,
        "filled_ones": ones,
        "predictor": None if predictor is None else predictor.to_json(),
        "out": args.out,
    }
    if args.proba and predictor is None:
        raise UsageError(
            f"{args.result} has no calibrated predictor for --proba (BANMF's fits with unknown "
            "cells and more than one start have one)"
        )
    if args.out:
        completed = fitted.complete(X)
        write_matrix(completed, args.out, row_labels=rows_named, col_labels=cols_named)
        args.written = args.out
    if args.json or not args.out:
        proba = fitted.predict_proba(keys // m, keys % m) if args.proba else None
        entries = [
            {
                "row": rows_named[i] if rows_named else int(i),
                "column": cols_named[j] if cols_named else int(j),
                "value": 1 if values is None else int(values[q]),
                **({} if proba is None else {"probability": float(proba[q])}),
            }
            for q, (i, j) in enumerate(zip(keys // m, keys % m))
        ]
    if args.json:
        if not args.out:
            record["filled"] = entries
        if args.proba:
            rule = predictor_rule(predictor)
            record["meaning"] = {
                "value": rule if rule.startswith("every") else f"0/1 by {rule}",
                "probability": "the score calibrated on the held-out observed cells",
            }
        out.write(json.dumps(record, indent=2, default=str) + "\n")
        return EXIT_OK
    what = "unobserved cells predicted 1" if values is None else "unknown cells filled in"
    how = predictor_rule(predictor)
    report = _calibration_lines(predictor) if args.verbose and predictor is not None else []
    if args.out:
        out.write(
            f"wrote {args.out}: {n}×{m}, {plural(record['unknown_cells'], 'unknown cell')} "
            f"filled in by {saved.method} (k={saved.n_components}; {how}), {ones} of them as 1\n"
        )
        out.writelines(report)
        return EXIT_OK
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["row", "column", "value", *(["probability"] if args.proba else [])])
    for entry in entries:
        writer.writerow(list(entry.values()))
    err.write(f"banmf: {len(entries)} {what} ({how})\n")
    if args.proba:
        err.write(_proba_note(entries))
    err.writelines(report)
    return EXIT_OK


#: How ``banmf complete`` names each kind of predictor.
_PREDICTORS = {
    "product": "W⊗H",
    "vote": "the share of the starts predicting 1",
    "nmf": "the NMF start's continuous product",
    "majority": "the column majority",
    "folds": "the mean probability of the rank selection's fold fits",
}


def predictor_rule(predictor) -> str:
    """Which cells the predictor calls 1, in words: its score above its threshold, or all or
    none where the threshold lies outside the score's range (where predicting one value
    everywhere made the fewest errors on the held-out cells)."""
    if predictor is None:
        return "W⊗H"
    score = _PREDICTORS[predictor.kind]
    if predictor.kind in ("product", "majority", "folds"):
        return score
    threshold, edges = predictor.threshold, predictor.edges
    # Both scores are at least 0, a share at most 1. A threshold outside the held-out scores
    # lies 1 beyond the extreme one (banmf.selection.predictor.best_threshold), past every bin edge.
    if predictor.kind == "vote":
        above = threshold >= 1.0
    else:
        above = len(edges) > 0 and threshold - 1.0 >= edges[-1]
    if threshold < 0.0:
        return f"every cell 1: on held-out cells, 1 everywhere beat any threshold on {score}"
    if above:
        return f"every cell 0: on held-out cells, 0 everywhere beat any threshold on {score}"
    return f"{score} above {threshold:.4g}"


def _proba_note(entries: list) -> str:
    """``banmf complete --proba``: what the value and the probability columns are, and on how
    many cells they fall on either side of one half."""
    split = sum((e["value"] == 1) != (e["probability"] > 0.5) for e in entries)
    note = (
        "banmf: value: the predictor's 0/1 (as --out writes it), chosen for the fewest errors "
        "on held-out cells; probability: its score calibrated on them"
    )
    if split:
        note += f" ({plural(split, 'cell')} near the threshold on the other side of 0.5)"
    return note + "\n"


def _calibration_lines(predictor) -> list[str]:
    """The predictor's choice and calibration report (``banmf complete --verbose``)."""
    report = predictor.report
    rates = ", ".join(f"{kind} {rate:.4f}" for kind, rate in report["error_rates"].items())
    lines = [
        f"predictor chosen on {predictor.chosen_on()}: error rate {rates}\n",
        f"calibration on them (out of sample): Brier score {report['brier']:.4f}\n",
        "  probability   cells  mean score  frequency of ones\n",
    ]
    for row in report["bins"]:
        low, high = row["bin"]
        lines.append(
            f"  {low:.1f}-{high:.1f}  {row['cells']:>9}  {row['mean_probability']:>10.3f}"
            f"  {row['frequency']:>17.3f}\n"
        )
    return lines
