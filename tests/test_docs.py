"""The examples of README.md and docs/*.md run, and print what they show.

Every fenced block of those files is one of:

- **Python** (```` ```python ````): run in order, one namespace per file (a page reads as one
  session), with the repository's warning policy (a warning is an error). A block with ``>>>``
  prompts runs as a doctest, its outputs compared (ELLIPSIS, NORMALIZE_WHITESPACE).
- **Shell** (```` ```bash ````, ```` ```console ````, or a plain block whose first line starts
  with ``$ ``): each ``banmf ...`` (or ``python -m banmf ...``) command runs through
  ``banmf.cli.main`` in a temporary folder per file, whose ``data/`` holds the bundled
  datasets; ``| head -N`` and ``| tail -N`` are applied to its output. In a console block the
  lines after a ``$`` command are its output; a bash block's output is the plain (or
  ```` ```text ````) block right after it, with only blank lines between. A command must exit 0,
  unless its output shown is a ``banmf: error: ...`` line, which is then compared with stderr;
  otherwise the output shown is compared with stdout. Any other command (``pip``, ``python
  scripts/...``) fails the test unless the block is marked ``skip``.
- **Text**: other plain blocks (file contents, diagrams), ```` ```json ```` and MyST directives,
  not run. A plain block that looks like banmf's output (``input``, ``pattern 1``,
  ``banmf: ...``) but follows no command fails: attach it with ``output of``.

Outputs are compared line by line after one normalisation: times are not compared (a number
followed by `` s``, e.g. ``0.15 s``, and the ``(+ 6.0 s compiling serial float64 kernels, once)``
note are dropped). Every other number must match exactly. A line ``...`` in an output stands
for any number of lines.

Markers, HTML comments on the lines right before a block (invisible when rendered):

- ``<!-- docs-test: skip (why) -->``: not run (installs, clusters, benchmarks); the reason
  is required and shows in pytest's summary of skips.
- ``<!-- docs-test: output of banmf ... -->``: the plain block is the output of that command
  (for a command given in prose, or inside a skipped install line).
- ``<!-- docs-test: before banmf ...; banmf ... -->``: commands run first, output not shown
  (e.g. to write the files a "your own data" example reads).
- ``<!-- docs-test: setup PYTHON -->``: Python run first in the page's namespace (e.g. an
  ``X`` for a snippet about any X).
- ``<!-- docs-test: file NAME -->``: the block's text is written to NAME in the folder.
- ``<!-- docs-test: slow (why) -->``: the block's test is marked ``slow``, so the default
  ``python -m pytest -q`` deselects it and ``-m slow`` runs it (.ci/run does); it runs on its
  own after the page, so later blocks must not need it.
- ``<!-- docs-test: synopsis -->``: a command synopsis; every subcommand must be listed and
  every option shown must exist (``synopsis, every option``: also every option of every
  subcommand must be shown).

Blocks that need an optional package that is absent (matplotlib, scikit-learn, pandas,
anndata, dask) are skipped with that reason.
"""

from __future__ import annotations

import doctest
import importlib.util
import io
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,})\s*(\S*)\s*$")
SHELL_LANGS = {"bash", "sh", "shell", "console"}
PLAIN_LANGS = {"", "text"}
LOOKS_LIKE_OUTPUT = re.compile(r"^(input {2,}|pattern \d+ |banmf: |k +error|row,column,value)")
TIME = re.compile(r"\s*\(\+ [\d.]+ s compiling [a-z0-9 ]*kernels, once\)|\b\d+(?:\.\d+)? s\b")
OPTIONAL = {  # what a block uses → the module it needs
    "matplotlib": "matplotlib",
    "sklearn": "sklearn",
    "pandas": "pandas",
    "anndata": "anndata",
    "dask": "dask",
    "distributed": "distributed",
}


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    markers: list[str]
    follows_block: bool  # only blank lines since the previous block
    kind: str = ""
    commands: list[str] = field(default_factory=list)  # shell: the commands
    outputs: list[list[str] | None] = field(default_factory=list)  # and their outputs shown

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def marker(self, name: str) -> str | None:
        for m in self.markers:
            if m == name or m.startswith(name + " ") or m.startswith(name + ","):
                return m[len(name) :].strip(" ,")
        return None


def parse(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i, last_end = 0, -2
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, ticks, lang = opening.groups()
        j = i + 1
        while j < len(lines) and not re.match(rf"^\s*{ticks}`*\s*$", lines[j]):
            j += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : j]
        ]
        markers, k = [], i - 1
        while k >= 0 and (MARKER.match(lines[k]) or not lines[k].strip()):
            if MARKER.match(lines[k]):
                markers.insert(0, MARKER.match(lines[k]).group(1))
            elif markers:
                break
            k -= 1
        between = lines[last_end + 1 : i]
        follows = last_end >= 0 and all(not s.strip() or MARKER.match(s) for s in between)
        blocks.append(Block(path, i + 1, lang, "\n".join(body), markers, follows))
        last_end, i = j, j + 1
    _classify(blocks)
    return blocks


def _classify(blocks: list[Block]) -> None:
    previous = None
    for b in blocks:
        first = b.text.lstrip().splitlines()[0] if b.text.strip() else ""
        if b.marker("skip") is not None:
            b.kind = "skip"
        elif b.marker("synopsis") is not None:
            b.kind = "synopsis"
        elif b.marker("file") is not None:
            b.kind = "file"
        elif b.lang.startswith("{") or b.lang == "json":
            b.kind = "text"
        elif b.lang in ("python", "py"):
            b.kind = "doctest" if re.search(r"^\s*>>> ", b.text, re.M) else "python"
        elif b.lang == "console" or (b.lang in PLAIN_LANGS and first.startswith("$ ")):
            b.kind = "shell"
            for line in b.text.splitlines():
                if line.startswith("$ "):
                    b.commands.append(line[2:])
                    b.outputs.append([])
                elif b.outputs:
                    b.outputs[-1].append(line)
            b.outputs = [out if out else None for out in b.outputs]
        elif b.lang in SHELL_LANGS:
            b.kind = "shell"
            b.commands = [
                c for c in b.text.splitlines() if c.strip() and not c.lstrip().startswith("#")
            ]
            b.outputs = [None] * len(b.commands)
        elif b.lang in PLAIN_LANGS and b.marker("output of") is not None:
            b.kind = "output"
            b.commands, b.outputs = [b.marker("output of")], [b.text.splitlines()]
        elif (
            b.lang in PLAIN_LANGS
            and b.follows_block
            and previous is not None
            and previous.kind == "shell"
            and previous.lang in SHELL_LANGS - {"console"}
            and previous.outputs
            and previous.outputs[-1] is None
        ):
            b.kind = "output-of-previous"
            previous.outputs[-1] = b.text.splitlines()
        elif b.lang in PLAIN_LANGS and LOOKS_LIKE_OUTPUT.match(first):
            b.kind = "orphan-output"
        elif b.lang in PLAIN_LANGS:
            b.kind = "text"
        else:
            b.kind = "unknown"
        previous = b


# --- running -------------------------------------------------------------------------------


class Failure(Exception):
    pass


def normalise(lines: list[str]) -> list[str]:
    return [TIME.sub("", line).rstrip() for line in lines]


def compare(expected: list[str], actual: list[str]) -> str | None:
    """None when they match (``...`` lines match any run of lines), else a readable diff."""
    exp, act = normalise(expected), normalise(actual)
    while exp and not exp[-1]:
        exp.pop()
    while act and not act[-1]:
        act.pop()

    def match(i: int, j: int) -> bool:
        if i == len(exp):
            return j == len(act)
        if exp[i].strip() in ("...", "…"):
            return any(match(i + 1, jj) for jj in range(j, len(act) + 1))
        return j < len(act) and exp[i] == act[j] and match(i + 1, j + 1)

    if match(0, 0):
        return None
    import difflib

    return "\n".join(difflib.unified_diff(exp, act, "shown", "printed", lineterm="", n=1))


def _needs(text: str) -> str | None:
    """The first optional package the text uses that is not installed."""
    for word, module in OPTIONAL.items():
        if (
            re.search(rf"\b(import|from) {word}\b", text)
            and importlib.util.find_spec(module) is None
        ):
            return module
    return None


def run_command(command: str, cwd: Path) -> tuple[int, list[str], list[str]]:
    """Run one ``banmf ...`` command line (with ``| head -N`` / ``| tail -N``) through
    ``banmf.cli.main`` in ``cwd``; returns the exit code and the lines of stdout and stderr."""
    from banmf.cli import main

    words = shlex.split(command, comments=True)
    pipes = []
    while "|" in words:
        at = len(words) - 1 - words[::-1].index("|")
        pipes.insert(0, words[at + 1 :])
        words = words[:at]
    if words[:3] == ["python", "-m", "banmf"]:
        words = ["banmf", *words[3:]]
    if not words or words[0] != "banmf" or any(w in ("&&", ";", ">", "<") for w in words):
        raise Failure(f"cannot run {command!r} here: mark the block skip (why)")
    if ("plot" in words[1:2] or "--plot" in words) and importlib.util.find_spec(
        "matplotlib"
    ) is None:
        pytest.skip(f"needs matplotlib: {command}")
    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    os.chdir(cwd)
    try:
        code = main(words[1:], stdout=out, stderr=err)
    finally:
        os.chdir(here)
    lines = out.getvalue().splitlines()
    for pipe in pipes:
        if len(pipe) == 2 and pipe[0] in ("head", "tail") and re.fullmatch(r"-\d+", pipe[1]):
            count = int(pipe[1][1:])
            lines = lines[:count] if pipe[0] == "head" else lines[-count:]
        else:
            raise Failure(f"cannot run {command!r} here: only | head -N and | tail -N are applied")
    return code, lines, err.getvalue().splitlines()


def check_command(command: str, shown: list[str] | None, cwd: Path) -> None:
    code, out, err = run_command(command, cwd)
    if shown is not None and any(line.startswith("banmf: error:") for line in shown):
        if code == 0:
            raise Failure(f"`{command}` succeeded; the docs show an error")
        diff = compare(shown, err)
    else:
        if code != 0:
            raise Failure(f"`{command}` exited {code}:\n" + "\n".join(err[-5:]))
        diff = None if shown is None else compare(shown, out)
    if diff:
        raise Failure(f"`{command}` printed something else:\n{diff}")


def check_synopsis(block: Block) -> None:
    from banmf.cli import build_parser

    parser = build_parser()
    subcommands = parser._subparsers._group_actions[0].choices
    shown: dict[str, set[str]] = {}
    current = None
    for raw in block.text.splitlines():
        line = raw.split("  #")[0]
        words = line.split()
        if words[:1] == ["banmf"]:
            current = words[1] if len(words) > 1 and not words[1].startswith("-") else ""
            shown.setdefault(current, set())
        if current is None:
            raise Failure(f"synopsis line before any `banmf` line: {raw!r}")
        shown[current] |= set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", line))
    problems = []
    for name in subcommands:
        if name not in shown:
            problems.append(f"subcommand {name} is not listed")
    for name, options in shown.items():
        if name and name not in subcommands:
            problems.append(f"no subcommand {name}")
            continue
        actions = (subcommands[name] if name else parser)._actions
        accepted = {o for action in actions for o in action.option_strings}
        problems += [f"{name or 'banmf'}: no option {o}" for o in sorted(options - accepted)]
        if "every option" in block.marker("synopsis") and name:
            for action in actions:
                strings = set(action.option_strings)
                if strings and not strings & (options | {"-h", "--help"}):
                    problems.append(f"{name}: option {'/'.join(sorted(strings))} not shown")
    if problems:
        raise Failure("synopsis out of date: " + "; ".join(problems))


class Page:
    """One file's blocks, run once in order (later blocks use earlier ones' names and
    files); each block's outcome kept for its test."""

    def __init__(self, path: Path, folder: Path):
        self.blocks = parse(path)
        self.folder = folder
        data = folder / "data"
        data.mkdir()
        for f in (ROOT / "data").iterdir():  # links: a file written to data/ stays here
            (data / f.name).symlink_to(f)
        self.namespace: dict = {"__name__": "__docs__"}
        self.outcomes: dict[int, tuple[str, str]] = {}
        for block in self.blocks:
            if block.marker("slow") is None:
                self.outcomes[block.line] = self._run(block)

    def outcome(self, line: int) -> tuple[str, str]:
        if line not in self.outcomes:  # a slow block, run when its test asks
            self.outcomes[line] = self._run(next(b for b in self.blocks if b.line == line))
        return self.outcomes[line]

    def _run(self, block: Block) -> tuple[str, str]:
        try:
            for command in (block.marker("before") or "").split(";"):
                if command.strip():
                    check_command(command.strip(), None, self.folder)
            if (setup := block.marker("setup")) is not None:
                here = Path.cwd()
                os.chdir(self.folder)
                try:
                    exec(compile(setup, f"{block.id} (setup)", "exec"), self.namespace)
                finally:
                    os.chdir(here)
            self._run_block(block)
        except Failure as exc:
            return "fail", str(exc)
        except pytest.skip.Exception as exc:
            return "skip", str(exc)
        except Exception as exc:  # an example that raises
            import traceback

            return "fail", "".join(traceback.format_exception(exc)[-6:])
        return "ok", ""

    def _run_block(self, block: Block) -> None:
        kind = block.kind
        if kind == "skip":
            reason = block.marker("skip")
            if not re.fullmatch(r"\(.+\)", reason):
                raise Failure("a skip marker needs its reason: <!-- docs-test: skip (why) -->")
            pytest.skip(f"{block.id}: docs-test: skip {reason}")
        if kind in ("python", "doctest") and (module := _needs(block.text)):
            pytest.skip(f"{block.id}: needs {module}")
        here = Path.cwd()
        os.chdir(self.folder)
        try:
            if kind == "python":
                code = compile(block.text, block.id, "exec")
                exec(code, self.namespace)
            elif kind == "doctest":
                test = doctest.DocTestParser().get_doctest(
                    block.text, self.namespace, block.id, str(block.path), block.line
                )
                report = io.StringIO()
                runner = doctest.DocTestRunner(
                    optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
                )
                runner.run(test, out=report.write, clear_globs=False)
                if runner.failures:
                    raise Failure(report.getvalue())
        finally:
            os.chdir(here)
        if kind == "file":
            (self.folder / block.marker("file")).write_text(block.text + "\n", encoding="utf-8")
        elif kind in ("shell", "output"):
            for command, shown in zip(block.commands, block.outputs):
                check_command(command, shown, self.folder)
        elif kind == "synopsis":
            check_synopsis(block)
        elif kind == "orphan-output":
            raise Failure(
                "this looks like banmf's output but follows no command: attach it with "
                "<!-- docs-test: output of banmf ... -->, or put it after the command's block"
            )
        elif kind == "unknown":
            raise Failure(f"cannot run a ```{block.lang} block: mark it skip (why)")


CHECKED = {"python", "doctest", "shell", "output", "synopsis", "skip", "file"}
CHECKED |= {"orphan-output", "unknown"}
CASES = [
    pytest.param(
        path,
        block.line,
        id=block.id,
        marks=[pytest.mark.slow] if block.marker("slow") is not None else [],
    )
    for path in DOCS
    for block in parse(path)
    if block.kind in CHECKED
]


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    cache: dict[Path, Page] = {}

    def get(path: Path) -> Page:
        if path not in cache:
            cache[path] = Page(path, tmp_path_factory.mktemp(path.stem))
        return cache[path]

    return get


@pytest.mark.parametrize(("path", "line"), CASES)
def test_docs_example(pages, path, line):
    status, message = pages(path).outcome(line)
    if status == "skip":
        pytest.skip(message)
    if status == "fail":
        pytest.fail(f"{path.relative_to(ROOT)}:{line}: {message}", pytrace=False)


def test_the_parser_reads_every_kind_of_block(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "\n".join(
            [
                "```bash",
                "banmf info data/zoo_101x15.mtx  # a comment",
                "```",
                "",
                "```",
                "shape 101×15",
                "```",
                "<!-- docs-test: skip (an install) -->",
                "```bash",
                "pip install banmf",
                "```",
                "```console",
                "$ banmf --version",
                "banmf 1",
                "$ banmf info x.mtx | head -2",
                "```",
                "```",
                "input           a (101×15, 660 nonzeros, density 0.4356)",
                "```",
            ]
        )
    )
    kinds = [(b.kind, b.commands, b.outputs) for b in parse(page)]
    assert kinds == [
        ("shell", ["banmf info data/zoo_101x15.mtx  # a comment"], [["shape 101×15"]]),
        ("output-of-previous", [], []),
        ("skip", [], []),
        ("shell", ["banmf --version", "banmf info x.mtx | head -2"], [["banmf 1"], None]),
        ("orphan-output", [], []),
    ]


def test_outputs_compare_all_but_times():
    assert (
        compare(
            ["method  banmf, k=5, 390 iterations, 0.15 s"],
            [
                "method  banmf, k=5, 390 iterations, 2.31 s (+ 6.0 s compiling serial float64 kernels, once)"
            ],
        )
        is None
    )
    assert compare(["k=5, 390 iterations, 0.15 s"], ["k=5, 391 iterations, 0.15 s"])
    assert compare(["a", "...", "d"], ["a", "b", "c", "d"]) is None
    assert compare(["a", "...", "d"], ["a", "b", "c"])
