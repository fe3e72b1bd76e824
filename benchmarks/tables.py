"""The tables of the docs, generated from the records under ``benchmarks/results/``.

    python benchmarks/tables.py            # print every table
    python benchmarks/tables.py --write    # rewrite the docs' tables in place
    python benchmarks/tables.py --check    # exit 1, with a diff, if a doc's table is stale

A table sits in a page between two marker comments, which this script owns::

    <!-- table: startup -->
    ... generated ...
    <!-- end table -->

Each table is a markdown table followed by one line that names the record file(s), the host
(CPU model, cores, caches), the dates and commits of the records shown, and whether they were
transcribed from earlier docs or measured by a run.

Which records a table shows:

- **Rows tables** (records with ``"table"`` and ``"key"``, one record per row of the table):
  for each key, the record with the latest ``date`` (a later run of the same configuration
  replaces an earlier one); rows in the order of their first record in the file; columns in
  the order of the first record's ``figures``, which are the cells as text. A table given
  ``keys`` shows only those rows (``TABLES`` names them: e.g. the real-data table shows
  k = 1, 3, 5 and 10 of the ten ranks recorded). Rows of several hosts or commits get a
  column saying each row's own.
- **Stacked tables** (``real``): Rows tables of the same columns one under the other, each
  row led by its table's label.
- **startup** (``startup.jsonl``, written by ``bench_startup.py``): the latest record.
- **sparse** (``sparse_accuracy.jsonl``, written by ``bench_sparse_accuracy.py --out``, and
  ``sparse_accuracy_docs.jsonl``, transcribed): for each (data, k, method), the latest record;
  a record without a date (a run's raw output) counts as later than every dated one, and among
  those the last in the file wins. A dataset's rows are together, by k. The lowest error of a
  row, to the four decimals shown, is in bold (every one of a tie).

The record files hold JSON lines that begin with :func:`_records.provenance` (benchmark, date,
commit, host, versions, command). A record transcribed from the docs of an earlier commit
carries ``"source": "transcribed from docs/<FILE>.md at <commit>: ..."`` and the commit that
put its figures in the docs; a record without ``source`` is a run's own. A missing record file
gives a table that says so, not an error.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs"
MARKER = re.compile(r"<!-- table: (?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- end table -->", re.S)


def read(name: str) -> list[dict]:
    """The records of ``benchmarks/results/<name>`` (none if the file is missing)."""
    path = RESULTS / name
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def host_label(host: dict) -> str:
    """'AMD EPYC, 2 cores, L2 2 MiB (2 instances), L3 32 MiB (1 instance)'."""
    parts = [host.get("Model name", "CPU model not recorded"), f"{host.get('cores', '?')} cores"]
    parts += [f"{key.split()[0]} {host[key]}" for key in ("L2 cache", "L3 cache") if key in host]
    if "memory" in host:
        parts.append(f"{host['memory']} of memory")
    return ", ".join(parts)


def provenance_line(files: list[str], records: list[dict]) -> str:
    """The line under a table: the record files, the hosts, the dates and commits shown."""
    names = ", ".join(f"`benchmarks/results/{name}`" for name in files)
    if not records:
        return f"*Records: {names}.*"
    hosts = sorted({host_label(r.get("host", {})) for r in records})
    dates = sorted(r["date"][:10] for r in records if r.get("date"))
    commits = sorted({r["commit"] for r in records if r.get("commit")})
    transcribed = sum("source" in r for r in records)
    how = (
        "transcribed from the docs of the commits shown, not re-run"
        if transcribed == len(records)
        else "measured"
        if not transcribed
        else f"{transcribed} of {len(records)} transcribed from earlier docs, the rest measured"
    )
    when = dates[0] if dates and dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    return (
        f"*Records: {names} ({how}); host: {'; '.join(hosts)}; "
        f"{when if dates else 'undated'}; commit{'s' if len(commits) > 1 else ''} "
        f"{', '.join(commits) or 'not recorded'}.*"
    )


def markdown(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _latest(records: list[dict], key) -> dict:
    """The latest record per ``key(record)``, keys in the order they first appear. Undated
    records count as later than dated ones; ties go to the later line of the file."""
    best: dict = {}
    for rec in records:
        k = key(rec)
        if k not in best or (rec.get("date") or "~") >= (best[k].get("date") or "~"):
            best[k] = rec
    return best


@dataclass(frozen=True)
class Rows:
    """A table whose records are its rows (``"table": name``, ``"key"``); with ``keys``, only
    those rows (a named selection: the records keep the others)."""

    file: str
    keys: tuple = ()

    def render(self, name: str) -> str:
        records = [r for r in read(self.file) if r.get("table") == name]
        if self.keys:
            records = [r for r in records if r["key"] in self.keys]
        if not records:
            return f"No records yet.\n\n{provenance_line([self.file], [])}"
        shown = list(_latest(records, lambda r: r["key"]).values())
        head = list(shown[0]["figures"])
        rows = [[rec["figures"].get(col, "") for col in head] for rec in shown]
        # Rows of several hosts or commits say each their own.
        if len({host_label(r.get("host", {})) for r in shown}) > 1:
            head.append("host")
            for row, rec in zip(rows, shown):
                row.append(rec.get("host", {}).get("Model name", "not recorded").split(" (")[0])
        return _with_commits(head, rows, shown, self.file)


def _with_commits(head: list, rows: list, shown: list, file: str) -> str:
    """The table in markdown with its provenance line; rows of several commits say each
    their own."""
    if len({r.get("commit") for r in shown}) > 1:
        head.append("commit")
        for row, rec in zip(rows, shown, strict=True):
            row.append(f"{rec.get('commit', '')} ({rec.get('date', '')[:10]})")
    return "\n".join(markdown(head, rows)) + "\n\n" + provenance_line([file], shown)


@dataclass(frozen=True)
class Stacked:
    """Rows tables of the same columns one under the other, each row led by its part's label
    (the parts' first column, the key, becomes the second)."""

    file: str
    parts: tuple  # (label, table name) pairs
    keys: tuple = ()

    def render(self, name: str) -> str:
        records = read(self.file)
        head, rows, shown = [], [], []
        for label, table in self.parts:
            mine = [r for r in records if r.get("table") == table]
            if self.keys:
                mine = [r for r in mine if r["key"] in self.keys]
            latest = list(_latest(mine, lambda r: r["key"]).values())
            for rec in latest:
                cells = list(rec["figures"].values())
                head = head or ["data", "k", *list(rec["figures"])[1:]]
                rows.append([label, *cells])
            shown += latest
        if not shown:
            return f"No records yet.\n\n{provenance_line([self.file], [])}"
        return _with_commits(head, rows, shown, self.file)


@dataclass(frozen=True)
class Startup:
    """The README's command from an empty kernel cache and from a full one."""

    file: str = "startup.jsonl"
    RUNS = (
        ("first", "first run (kernels compiled, a second process compiling ahead)"),
        ("first_no_ahead", "first run with `BANMF_NO_AHEAD=1`"),
        ("later", "later runs (kernels cached)"),
    )

    def render(self, name: str) -> str:
        records = read(self.file)
        if not records:
            return f"No records yet.\n\n{provenance_line([self.file], [])}"
        rec = max(records, key=lambda r: r["date"])
        rows = [
            [label, f"{fig['median_wall_s']:.1f}", f"{fig['median_compile_s']:.1f}"]
            for key, label in self.RUNS
            if (fig := rec["figures"].get(key))
        ]
        head = ["run", "wall s (median)", "of it compiling s"]
        note = f"Median of {rec['pairs']} runs each; command: `{rec['command']}`."
        return "\n".join([*markdown(head, rows), "", note, "", provenance_line([self.file], [rec])])


@dataclass(frozen=True)
class Sparse:
    """Relative training error on large, very sparse data, one column per method."""

    files: tuple = ("sparse_accuracy.jsonl", "sparse_accuracy_docs.jsonl")
    METHODS = (
        "banmf",
        "banmf (no combination)",
        "banmf (1 start)",
        "banmf (paper)",
        "nmf",
        "reg-nmf",
        "asso",
        "grecond",
        "elbmf",
        "sklearn NMF + grid",
    )

    def render(self, name: str) -> str:
        # Transcribed records first, so that a run's records (later) replace them.
        records = [r for f in reversed(self.files) for r in read(f)]
        records = [r for r in records if "relative_error" in r or "refused" in r]
        if not records:
            return f"No records yet.\n\n{provenance_line(list(self.files), [])}"
        shown = _latest(records, lambda r: (r["data"], r["k"], r["method"]))
        methods = [m for m in self.METHODS if any(key[2] == m for key in shown)]
        # A dataset's rows together (datasets in the order they first appear), by k.
        order = list(dict.fromkeys(key[0] for key in shown))
        cells = sorted(
            dict.fromkeys(key[:2] for key in shown), key=lambda c: (order.index(c[0]), c[1])
        )
        rows = []
        for data, k in cells:
            errs = {
                m: shown[data, k, m].get("relative_error") for m in methods if (data, k, m) in shown
            }
            # The lowest as shown (four decimals): transcribed records hold rounded figures,
            # so that an exact tie with a run's figure is a tie here too, every one in bold.
            low = min((f"{e:.4f}" for e in errs.values() if e is not None), default=None)
            row = [data, str(k)]
            for m in methods:
                e = errs.get(m)
                if (data, k, m) not in shown:
                    row.append("")
                elif e is None:
                    row.append("refused")
                else:
                    row.append(f"**{e:.4f}**" if f"{e:.4f}" == low else f"{e:.4f}")
            rows.append(row)
        used = [f for f in self.files if read(f)]
        return (
            "\n".join(markdown(["data", "k", *methods], rows))
            + "\n\n"
            + provenance_line(used, list(shown.values()))
        )


#: Every table: its name (the marker's) and how it is made.
TABLES = {
    "startup": Startup(),
    "iteration": Rows("core.jsonl"),
    "vs-sklearn": Rows("core.jsonl"),
    "vs-sklearn-spread": Rows("core.jsonl"),
    "scale": Rows("scale.jsonl"),
    "contention": Rows("contention.jsonl"),
    "unknown-cells-cost": Rows("completion.jsonl"),
    "distributed": Rows("distributed.jsonl"),
    "distributed-polish": Rows("distributed.jsonl"),
    "density": Rows("paper.jsonl"),
    "noise": Rows("paper.jsonl"),
    "real": Stacked(
        "paper.jsonl",
        parts=(("zoo", "real-zoo"), ("votes", "real-votes"), ("lucap0", "real-lucap0")),
        keys=("1", "3", "5", "10"),
    ),
    "rank-gap": Rows("paper.jsonl"),
    "timing": Rows("paper.jsonl", keys=("100", "500", "1000", "2000")),
    "pnlpf-density": Rows("paper.jsonl"),
    "pnlpf-real": Rows("paper.jsonl"),
    "default-real": Rows("paper.jsonl"),
    "default-rank-gap": Rows("paper.jsonl"),
    "steps": Rows("paper.jsonl"),
    "sparse": Sparse(),
    "completion-3seeds": Rows(
        "completion.jsonl",
        keys=tuple(
            f"{data} / {k} / {share}"
            for data, k in (("lucap0", 10), ("votes", 5), ("votes", 10), ("lucap0", 5))
            for share in ("10 %", "50 %")
        )
        + (
            "mushroom / 5 / 10 % (against NMF only)",
            "mushroom / 5 / 50 %",
            "mushroom / 10 / 10 %",
            "mushroom / 10 / 50 %",
        ),
    ),
    "select-k-zoo": Rows("rank.jsonl"),
    "select-k-planted": Rows("rank.jsonl"),
}


def render(name: str) -> str:
    """The markdown of table ``name``, as it goes between its markers."""
    return TABLES[name].render(name).rstrip("\n") + "\n"


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def regenerate(text: str) -> str:
    """``text`` with every marked table generated afresh."""

    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in TABLES:
            raise KeyError(f"no table {name!r} in benchmarks/tables.py (TABLES)")
        return f"<!-- table: {name} -->\n{render(name)}<!-- end table -->"

    return MARKER.sub(fill, text)


def check() -> list[str]:
    """A unified diff for every page whose tables do not match their records (empty if all
    do), and a line for every table that no page shows."""
    problems, shown = [], set()
    for path in pages():
        text = path.read_text(encoding="utf-8")
        shown.update(m["name"] for m in MARKER.finditer(text))
        new = regenerate(text)
        if new != text:
            rel = path.relative_to(ROOT)
            problems.append(
                "".join(
                    difflib.unified_diff(
                        text.splitlines(keepends=True),
                        new.splitlines(keepends=True),
                        f"{rel} (as it is)",
                        f"{rel} (from the records)",
                    )
                )
            )
    problems += [f"table {name!r} is on no page of docs/" for name in TABLES if name not in shown]
    return problems


def write() -> list[Path]:
    """Rewrite the pages whose tables changed; returns them."""
    changed = []
    for path in pages():
        text = path.read_text(encoding="utf-8")
        new = regenerate(text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the docs' tables in place")
    mode.add_argument("--check", action="store_true", help="exit 1 if a doc's table is stale")
    parser.add_argument("names", nargs="*", help="tables to print (default: all)")
    args = parser.parse_args(argv)
    if args.write:
        for path in write():
            print(f"rewrote {path.relative_to(ROOT)}")
        return 0
    if args.check:
        problems = check()
        for problem in problems:
            print(problem)
        if problems:
            print("stale tables: run python benchmarks/tables.py --write", file=sys.stderr)
        return 1 if problems else 0
    for name in args.names or TABLES:
        print(f"<!-- table: {name} -->\n{render(name)}<!-- end table -->\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
