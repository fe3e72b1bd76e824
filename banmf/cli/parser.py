"""The command line's options: the parser of every command and the types of its values."""

from __future__ import annotations

import argparse
import re

from .data import cmd_complete, cmd_evaluate, cmd_generate, cmd_info
from .exits import UsageError
from .fit import cmd_factorize
from .ranks import cmd_select_k
from .report import cmd_report
from .results import cmd_export, cmd_plot, cmd_show


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


def _rank(text: str) -> int | str:
    """``-k`` of a fit: a positive integer, or ``auto`` (chosen by held-out error)."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer or auto, got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


#: ``--scheduler``: a protocol, then a host and a port (``tcp://host:8786``, ``[::1]:8786``,
#: ``tls://host:8786``), or a protocol with its own kind of address (``inproc://...``).
_SCHEDULER = re.compile(r"(?:(?:tcp|tls)://|(?!\w+://))(?:\[[0-9A-Fa-f:.]+\]|[^\s/:\[\]]+):\d+/?")
_OTHER_PROTOCOL = re.compile(r"(?!(?:tcp|tls)://)[a-z][a-z0-9+.-]*://\S+")


def _scheduler(text: str) -> str:
    """``--scheduler``: ``local``, or a Dask scheduler's address with its port."""
    if text == "local" or _SCHEDULER.fullmatch(text) or _OTHER_PROTOCOL.fullmatch(text):
        return text
    raise argparse.ArgumentTypeError(
        f"expected 'local' or a Dask scheduler's address with its port, such as "
        f"tcp://host:8786, host:8786 or tls://host:8786; got {text!r}"
    )


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
    from .. import __version__
    from ..io import FORMATS
    from ..models import METHODS

    parser = _Parser(
        prog="banmf", description="Boolean matrix factorization of sparse binary data."
    )
    parser.add_argument("--version", action="version", version=f"banmf {__version__}")
    debug = "on an internal error (exit 1), print the traceback (as BANMF_DEBUG=1 does)"
    parser.add_argument("--debug", action="store_true", help=debug)
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
    p.add_argument(
        "-k",
        type=_rank,
        required=True,
        help="rank (number of factors), or auto: the k in 1..20 whose fits predict held-out "
        "cells best (cross-validated; see banmf select-k), if any beats the column majority",
    )
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
        type=_scheduler,
        metavar="ADDRESS",
        help="fit on a Dask cluster (banmf only; needs banmf[distributed]): a scheduler's "
        "address such as tcp://host:8786, or 'local' for a cluster of this machine's cores. "
        "INPUT may then be a folder or glob of row-block .npz files (banmf.distributed)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="with -k auto, also print each rank's held-out error (the curve the choice read)",
    )
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
    p.add_argument(
        "--proba",
        action="store_true",
        help="add each filled-in cell's calibrated probability of a 1 (a column of the CSV, a "
        "key of --json; the result must have a predictor: BANMF's, fitted with unknown cells)",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print how the predictor was chosen and its calibration report",
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
    p.add_argument(
        "--out",
        metavar="SELECTION.json",
        help="also save the selection (the --json record), for banmf report --selection",
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

    p = sub.add_parser(
        "report", help="a saved factorization as one self-contained HTML page (docs/report.md)"
    )
    p.add_argument("result", help="a result saved by factorize --out")
    p.add_argument("--data", help="the matrix, if not embedded in the result (and its labels)")
    add_format(p, "--data")
    p.add_argument(
        "--selection",
        metavar="SELECTION.json",
        help="what banmf select-k --json printed: its criteria are drawn against k",
    )
    p.add_argument("--out", help="the .html file (default: RESULT with .html)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_report)
    return parser


def attach_dashed_values(argv) -> list:
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
