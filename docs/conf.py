"""Sphinx configuration for the banmf documentation.

Why Sphinx: autodoc with numpydoc renders the package's numpydoc docstrings as they are, and
``-W`` turns every docstring formatting problem into a build failure; MyST keeps the guide in
Markdown like the rest of the repository (RESULTS.md and the CHANGELOG are included as they are).

Build: ``pip install -e ".[docs]" && sphinx-build -W --keep-going -b html docs docs/_build/html``
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the package itself, installed or not

import banmf

project = "banmf"
author = "banmf developers"
copyright = "banmf developers"
release = banmf.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
]
# No sphinx.ext.intersphinx: the build has no network beyond the package registries.

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the numpydoc sections give the types, with shapes
autodoc_default_options = {"members": True}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "alabaster"
html_title = f"banmf {release}"
html_theme_options = {"description": "Boolean matrix factorization of large sparse 0/1 data"}
html_static_path: list[str] = []


# --- the API reference --------------------------------------------------------------------
# The page of banmf is generated from banmf.__all__, so that it follows the code as names come
# and go: each name goes under the first group that lists it, and a name no group lists goes
# under "More". banmf.io and banmf.datasets re-export a few names that banmf exports too
# (DataWarning, make_boolean, ...); an object documented on two pages is a duplicate in Sphinx,
# so their pages leave out what the page of banmf documents.

API_GROUPS = {
    "Estimators": [
        "BANMF",
        "RegularizedBANMF",
        "NMF",
        "RegularizedNMF",
        "ASSO",
        "PNLPF",
        "ZhangThreshold",
        "GreConD",
        "PaNDa",
        "OrMachine",
        "MessagePassing",
        "ELBMF",
    ],
    "One call for every method": ["factorize", "fit_many", "Factorization"],
    "Booleanization and refinement": [
        "booleanize",
        "Booleanization",
        "balance",
        "refine_thresholds",
        "Thresholds",
        "polish",
        "Polished",
        "swap_factors",
    ],
    "Reading the factors": ["patterns", "Pattern"],
    "Choosing k": ["select_rank", "RankSelection"],
    "Boolean errors, products and predictions": [
        "boolean_error",
        "error_counts",
        "boolean_product",
        "predict_cells",
    ],
    "Synthetic data": [
        "make_boolean",
        "make_sparse_uniform",
        "make_sparse_degrees",
        "make_sparse_tiles",
    ],
    "Threads": ["effective_n_jobs"],
    "Exceptions and warnings": [
        "BanmfError",
        "InputError",
        "ConvergenceWarning",
        "DataWarning",
        "Interrupted",
        "InvalidParameterError",
        "MissingDependencyError",
        "NotFittedError",
    ],
}
# Names documented by hand on the page (no docstring of their own).
API_BY_HAND = {"METHODS", "PAPER_CONFIG", "__version__"}
# Estimators get their methods; the first also the ones every estimator shares.
_ESTIMATOR_MEMBERS = (
    "fit, fit_transform, transform, inverse_transform, score, get_params, set_params"
)


def _entry(name: str, first_estimator: bool) -> str:
    obj = getattr(banmf, name)
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return f".. autoexception:: banmf.{name}\n"
    if isinstance(obj, type):
        if hasattr(obj, "fit"):
            members = _ESTIMATOR_MEMBERS if first_estimator else ""
            return f".. autoclass:: banmf.{name}\n   :members: {members}\n".replace(": \n", ":\n")
        return f".. autoclass:: banmf.{name}\n"
    if callable(obj):
        return f".. autofunction:: banmf.{name}\n"
    return f".. autodata:: banmf.{name}\n"


def _banmf_api() -> str:
    names = [name for name in banmf.__all__ if name not in API_BY_HAND]
    grouped = {title: [n for n in group if n in names] for title, group in API_GROUPS.items()}
    listed = {n for group in grouped.values() for n in group}
    grouped["More"] = [n for n in names if n not in listed]
    out, first_estimator = [], True
    for title, group in grouped.items():
        if not group:
            continue
        out += [title, "-" * len(title), ""]
        for name in group:
            is_estimator = isinstance(getattr(banmf, name), type) and hasattr(
                getattr(banmf, name), "fit"
            )
            out += [_entry(name, first_estimator and is_estimator)]
            first_estimator = first_estimator and not is_estimator
    return "\n".join(out)


def _shared_names(module_name: str) -> str:
    module = importlib.import_module(module_name)
    top = {id(getattr(banmf, name)) for name in banmf.__all__ if name not in API_BY_HAND}
    shared = [
        name for name in getattr(module, "__all__", []) if id(getattr(module, name, None)) in top
    ]
    return ", ".join(shared) or "__no_such_member__"


def _fill_api(app, docname, source):
    if docname.startswith("api/"):
        source[0] = source[0].replace("@BANMF_API@", _banmf_api())
        for module_name in ("banmf.io", "banmf.datasets"):
            source[0] = source[0].replace(f"@SHARED:{module_name}@", _shared_names(module_name))


def _check_methods_page(app):
    """The guide's method page must name every method of the registry (banmf.METHODS)."""
    from sphinx.util import logging

    text = (Path(__file__).resolve().parent / "methods.md").read_text(encoding="utf-8")
    missing = [name for name in banmf.METHODS if f"`{name}`" not in text]
    if missing:
        logging.getLogger(__name__).warning(
            "docs/methods.md does not describe: %s", ", ".join(missing)
        )


def setup(app):
    app.connect("source-read", _fill_api)
    app.connect("builder-inited", _check_methods_page)
