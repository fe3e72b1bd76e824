"""The command line's arguments turned into the library's inputs: matrix files, their unknown
cells, the estimator's parameters; destinations and saved results checked before any work."""

from __future__ import annotations

import ast
import hashlib
import warnings
from pathlib import Path

from .exits import UsageError


def read_input(path: str, fmt: str | None = None):
    from ..io import FORMATS, read_dataset, reading_format

    if Path(path).is_dir():
        raise UsageError(f"{path} is a directory, not a matrix file")
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no such file")
    if fmt is None:
        try:
            reading_format(Path(path), None)  # the extension, or a Matrix Market banner
        except ValueError:
            raise UsageError(
                f"{path}: cannot tell the format from the extension; name it with "
                f"--format ({', '.join(FORMATS)})"
            ) from None
    return read_dataset(path, format=fmt)


def input_data(args, ds):
    """The data as the command fits or scores it: the file's dataset ``ds`` with its own
    unknown cells (``?``, ``NA``, blank; a mask it carries) and those of ``--missing FILE``
    or ``--observed FILE`` (a :class:`banmf.io.Dataset`)."""
    from ..data.dataset import Dataset

    n, m = ds.X.shape
    given = {}
    for option in ("missing", "observed"):
        path = getattr(args, option, None)
        if not path:
            continue
        mask = read_input(path).X
        if mask.shape != (n, m):
            raise UsageError(
                f"--{option} {path} is {mask.shape[0]}×{mask.shape[1]} but the data is {n}×{m}"
            )
        given[option] = mask
    return Dataset.of(ds, **given)


def with_unknown_cells(saved, args, ds):
    """The saved factorization with the data's unknown cells (:func:`input_data`), or with
    those it was fitted with when the data has none."""
    data = input_data(args, ds)
    if data.unknown is None:
        return saved
    return saved.replace(missing=data.missing, observed=data.observed)


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_target(path: str, option: str, inputs=(), suffixes=(".npz",)) -> None:
    """Refuse a destination before any work: wrong kind of file, the input itself, a missing
    or read-only folder (:func:`banmf.io.check_output`)."""
    from ..io import check_output

    if suffixes and not path.lower().endswith(suffixes):
        raise UsageError(f"{option} {path}: the file must end in {' or '.join(suffixes)}")
    check_output(path, inputs=[p for p in inputs if p])


def saved_with_data(args, *, other_file: str = "warn"):
    """The factorization saved in ``args.result`` and its data: the copy kept in the file, or
    ``--data`` (``args.data``, of the result's shape; ``other_file`` as in
    :func:`matching_data`), whose labels the result takes when it has none. Returns
    ``(saved, X)``; X is None when neither holds the data."""
    from ..result import Factorization

    saved = Factorization.load(args.result)
    X = saved.X
    if args.data:
        ds = read_input(args.data, args.format)
        X = ds.X
        matching_data(X, args.data, saved, args.result, other_file=other_file)
        if saved.row_labels is None and saved.col_labels is None:
            saved = saved.replace(row_labels=ds.row_labels, col_labels=ds.col_labels)
    return saved, X


def matching_data(X, data_path: str, saved, result_path: str, *, other_file: str = "warn") -> None:
    """Refuse data of another shape than the saved factorization's. If it is not the file the
    factorization was made from (its sha256 is recorded), warn, or with ``other_file="refuse"``
    refuse it too (a report would show it under the recorded file's name and checksum)."""
    n, m = saved.W.shape[0], saved.H.shape[1]
    if X.shape != (n, m):
        raise UsageError(
            f"{data_path} is {X.shape[0]}×{X.shape[1]} but {result_path} factorizes a "
            f"{n}×{m} matrix"
        )
    recorded = saved.meta.get("input_sha256")
    if not recorded:
        return
    found = sha256(data_path)
    if found != recorded and other_file == "refuse":
        raise UsageError(
            f"{data_path} (sha256 {found[:12]}…) is not the file {result_path} was fitted to, "
            f"{saved.meta.get('input', 'its input')} (sha256 {recorded[:12]}…); give that file"
        )
    if found != recorded:
        warnings.warn(
            f"{data_path} is not the file {result_path} was fitted to (its sha256 differs "
            f"from the recorded one, of {saved.meta.get('input', 'the input')})",
            UserWarning,
            stacklevel=2,
        )


def parse_param(text: str) -> tuple[str, object]:
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


#: Estimator parameters that the command line sets with an option of its own (or not at all).
_OWN_OPTIONS = {
    "n_components": "use -k",
    "random_state": "use --seed",
    "max_iter": "use --max-iter",
    "n_jobs": "use --jobs",
    "verbose": "progress is shown on stderr anyway; -q hides it",
    "callback": "a callback cannot be given on the command line",
}


def estimator_params(args, cls) -> dict:
    """The estimator's keyword arguments from --param, --max-iter and --jobs, checked."""
    valid = set(cls._param_names())
    params = {}
    for text in args.param:
        key, value = parse_param(text)
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
        if key == "init" and value == "custom":
            raise UsageError(
                "--param init=custom: the command line has no way to pass starting factors; "
                "leave init at its default, or start from your own W and H in Python: "
                "BANMF(k, init='custom').fit(X, W=W0, H=H0)"
            )
        params[key] = value
    if args.max_iter is not None:
        if "max_iter" not in valid:
            raise UsageError(f"--max-iter: method {args.method} does not iterate")
        params["max_iter"] = args.max_iter
    if args.jobs is not None:
        from ..runtime.threads import effective_n_jobs

        if "n_jobs" not in valid:
            raise UsageError(f"--jobs: method {args.method} runs on one thread")
        try:
            effective_n_jobs(args.jobs)  # a bad value stops here, before the input is read
        except ValueError as exc:
            raise UsageError(f"--jobs: {exc}") from None
        params["n_jobs"] = args.jobs
    return params
