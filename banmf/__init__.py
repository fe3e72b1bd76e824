"""banmf: Boolean matrix factorization of large sparse binary data.

The core method is BANMF (Truong, Skau, Desantis, Alexandrov): multiplicative NMF updates
against an auxiliary matrix Y bounded on the support of X, then a threshold search.
"""

from importlib import metadata as _metadata

from . import model_selection as model_selection  # the submodule, as banmf.model_selection
from ._threads import effective_n_jobs
from .api import factorize, fit_many
from .booleanize import (
    balance,
    boolean_error,
    boolean_product,
    booleanize,
    error_counts,
    predict_cells,
)
from .datasets import make_boolean, make_sparse_degrees, make_sparse_tiles, make_sparse_uniform
from .exceptions import (
    ConvergenceWarning,
    DataWarning,
    Interrupted,
    InvalidParameterError,
    NotFittedError,
)
from .model_selection import RankSelection, select_rank
from .models import (
    ASSO,
    BANMF,
    METHODS,
    NMF,
    PAPER_CONFIG,
    PNLPF,
    GreConD,
    MessagePassing,
    OrMachine,
    PaNDa,
    RegularizedBANMF,
    RegularizedNMF,
    ZhangThreshold,
)
from .patterns import Pattern, patterns
from .polish import polish, refine_thresholds, swap_factors
from .result import Factorization

# The version is defined once, in pyproject.toml; a source tree that is not installed has none.
try:
    __version__ = _metadata.version("banmf")
except _metadata.PackageNotFoundError:
    __version__ = "0+unknown"

__all__ = [
    "ASSO",
    "BANMF",
    "METHODS",
    "NMF",
    "PAPER_CONFIG",
    "PNLPF",
    "ConvergenceWarning",
    "DataWarning",
    "Interrupted",
    "InvalidParameterError",
    "NotFittedError",
    "Factorization",
    "GreConD",
    "OrMachine",
    "PaNDa",
    "MessagePassing",
    "RegularizedBANMF",
    "RegularizedNMF",
    "ZhangThreshold",
    "__version__",
    "balance",
    "boolean_error",
    "boolean_product",
    "booleanize",
    "effective_n_jobs",
    "error_counts",
    "factorize",
    "fit_many",
    "make_boolean",
    "make_sparse_degrees",
    "make_sparse_tiles",
    "make_sparse_uniform",
    "Pattern",
    "RankSelection",
    "patterns",
    "polish",
    "predict_cells",
    "refine_thresholds",
    "select_rank",
    "swap_factors",
]
