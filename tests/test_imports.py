"""The package's import graph, read from the source: no import cycle (imports inside functions
count), no module importing a private module (``_x``) of another package, and no private
name imported from another module.

The graph is built here with ``ast``, from every ``import`` and ``from ... import`` of every
module of ``banmf/`` (relative imports resolved), except under ``if TYPE_CHECKING:``, which
never runs.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "banmf"


def _modules() -> dict[str, Path]:
    """Dotted name → file, for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules) -> list[tuple[str, str]]:
    """``(module imported, what is named)`` for each import of ``name``: ``what`` is the name
    taken from the module (``from m import x``), or the module itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                # `from . import x` names a submodule; `from .m import f` a name of m.
                found.append((full, full) if full in modules else (target, full))
    return [(target, what) for target, what in found if target in modules and target != name]


@functools.cache  # parsed once for all the tests
def _graph():
    modules = _modules()
    return modules, {name: _imports(name, path, modules) for name, path in sorted(modules.items())}


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, as the modules around it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _private_part(dotted: str) -> int | None:
    """Index of the first private part (``_x``, not ``__x__``) of a dotted name, or None."""
    for i, part in enumerate(dotted.split(".")):
        if part.startswith("_") and not part.startswith("__"):
            return i
    return None


def test_the_graph_sees_every_kind_of_import():
    modules, graph = _graph()
    assert len(modules) > 30
    targets = {target for imports in graph.values() for target, _ in imports}
    # Relative (one and two levels), from a package's __init__, and inside a function.
    assert "banmf.result" in {t for t, _ in graph["banmf.io"]}
    assert "banmf.data.dataset" in {t for t, _ in graph["banmf.models._base"]}
    assert "banmf.models.asso" in {t for t, _ in graph["banmf.models"]}
    assert "banmf.exceptions" in {t for t, _ in graph["banmf.runtime.files"]}  # in atomic_path
    assert "banmf._kernels.boolean" in targets


def test_no_import_cycle():
    _, graph = _graph()
    cycle = _cycle({name: {target for target, _ in imports} for name, imports in graph.items()})
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_private_module_of_another_package():
    modules, graph = _graph()
    found = set()
    for name, imports in graph.items():
        for target, what in imports:
            i = _private_part(what)
            if i is None:
                continue
            parts = what.split(".")
            if what == target or ".".join(parts[: i + 1]) in modules:
                # A private module: allowed inside the package that holds it.
                owner = ".".join(parts[:i])
                if name == owner or name.startswith(owner + "."):
                    continue
            found.add((name, what))  # a private module elsewhere, or a private name
    unexpected = sorted(found)
    assert not unexpected, "private imports across packages: " + ", ".join(
        f"{name} imports {what}" for name, what in unexpected
    )


@pytest.mark.parametrize(
    "edges, expected",
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"a"}}, ["a", "a"]),
    ],
)
def test_cycle_finder(edges, expected):
    assert _cycle(edges) == expected
