"""banmf: Boolean matrix factorization of large sparse binary data.

The core method is BANMF (Truong, Skau, Desantis, Alexandrov): multiplicative NMF updates
against an auxiliary matrix Y bounded on the support of X, then a threshold search.

The public names are listed once, in ``__init__.pyi`` (which type checkers read); each is
imported on first use, so that ``import banmf`` (and the ``banmf`` command's start, where
Ctrl-C must already be handled) does not wait for numpy, scipy and numba.
"""

import ast as _ast
import importlib as _importlib
from pathlib import Path as _Path


def _exports() -> dict[str, tuple[str, str | None]]:
    """name → (submodule, attribute; None for the submodule itself), from ``__init__.pyi``."""
    stub = _ast.parse((_Path(__file__).parent / "__init__.pyi").read_text(encoding="utf-8"))
    found = {}
    for node in stub.body:
        if isinstance(node, _ast.ImportFrom):
            for alias in node.names:
                if node.module is None:  # from . import submodule
                    found[alias.asname or alias.name] = (alias.name, None)
                else:
                    found[alias.asname or alias.name] = (node.module, alias.name)
    return found


_EXPORTS = _exports()


# The names, not the submodules (banmf.model_selection has a page of its own).
__all__ = sorted([*(n for n, (_, a) in _EXPORTS.items() if a), "__version__"], key=str.lower)


def __getattr__(name: str):
    if name == "__version__":
        from importlib import metadata as _metadata

        # Defined once, in pyproject.toml; a source tree that is not installed has none.
        try:
            value = _metadata.version("banmf")
        except _metadata.PackageNotFoundError:
            value = "0+unknown"
    elif name in _EXPORTS:
        module, attribute = _EXPORTS[name]
        value = _importlib.import_module(f".{module}", __name__)
        if attribute is not None:
            value = getattr(value, attribute)
    elif name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        try:  # any submodule (banmf.io, banmf.datasets, ...), as an eager import made them
            value = _importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, "__version__"})
