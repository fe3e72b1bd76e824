"""Sphinx configuration for the banmf documentation.

Why Sphinx: autodoc with numpydoc renders the package's numpydoc docstrings as they are, and
``-W`` turns every docstring formatting problem into a build failure; MyST keeps the guide in
Markdown like the rest of the repository (RESULTS.md and the CHANGELOG are included as they are).

Build: ``pip install -e ".[docs]" && sphinx-build -W --keep-going -b html docs docs/_build/html``
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

from sphinx.util import logging

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the package itself, installed or not

import banmf

logger = logging.getLogger(__name__)

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
autodoc_default_options = {"members": True, "show-inheritance": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "alabaster"
html_title = f"banmf {release}"
html_theme_options = {"description": "Boolean matrix factorization of large sparse 0/1 data"}
html_static_path: list[str] = []


# --- the API reference --------------------------------------------------------------------
# banmf.io and banmf.datasets re-export a few names that banmf itself exports too (DataWarning,
# make_boolean, ...). An object documented on two pages is a duplicate in Sphinx, so the pages of
# the submodules leave out what the page of banmf documents (the list is computed, so it follows
# the code as names move), and the build fails if a name of banmf.__all__ has no entry.

API_DIR = Path(__file__).resolve().parent / "api"
_DIRECTIVE = re.compile(r"^\.\. (?:auto)?(?:class|function|data|exception)::\s+banmf\.(\w+)\s*$", re.MULTILINE)


def _shared_names(module_name: str) -> str:
    module = importlib.import_module(module_name)
    top = {id(getattr(banmf, name)) for name in banmf.__all__ if name != "__version__"}
    shared = [name for name in getattr(module, "__all__", []) if id(getattr(module, name, None)) in top]
    return ", ".join(shared) or "__no_such_member__"


def _fill_exclusions(app, docname, source):
    if docname.startswith("api/"):
        for module_name in ("banmf.io", "banmf.datasets"):
            source[0] = source[0].replace(f"@SHARED:{module_name}@", _shared_names(module_name))


def _check_api_coverage(app):
    documented = set()
    for page in API_DIR.glob("*.rst"):
        documented.update(_DIRECTIVE.findall(page.read_text(encoding="utf-8")))
    missing = sorted(set(banmf.__all__) - documented)
    if missing:
        logger.warning("docs/api: banmf.__all__ names without an entry: %s", ", ".join(missing))


def setup(app):
    app.connect("source-read", _fill_exclusions)
    app.connect("builder-inited", _check_api_coverage)
