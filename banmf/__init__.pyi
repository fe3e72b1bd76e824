# The public names of banmf and where they live: the one list, read by type checkers and, at
# run time, by banmf/__init__.py (which imports each submodule on first use).
from . import model_selection as model_selection
from .api import factorize as factorize
from .api import fit_many as fit_many
from .datasets import make_boolean as make_boolean
from .datasets import make_sparse_degrees as make_sparse_degrees
from .datasets import make_sparse_tiles as make_sparse_tiles
from .datasets import make_sparse_uniform as make_sparse_uniform
from .engine.booleanize import balance as balance
from .engine.booleanize import boolean_error as boolean_error
from .engine.booleanize import boolean_product as boolean_product
from .engine.booleanize import booleanize as booleanize
from .engine.booleanize import error_counts as error_counts
from .engine.booleanize import predict_cells as predict_cells
from .engine.polish import polish as polish
from .engine.refine import refine_thresholds as refine_thresholds
from .engine.swaps import swap_factors as swap_factors
from .exceptions import BanmfError as BanmfError
from .exceptions import ConvergenceWarning as ConvergenceWarning
from .exceptions import DataWarning as DataWarning
from .exceptions import InputError as InputError
from .exceptions import Interrupted as Interrupted
from .exceptions import InvalidParameterError as InvalidParameterError
from .exceptions import MissingDependencyError as MissingDependencyError
from .exceptions import NotFittedError as NotFittedError
from .model_selection import RankSelection as RankSelection
from .model_selection import select_rank as select_rank
from .models import ASSO as ASSO
from .models import BANMF as BANMF
from .models import ELBMF as ELBMF
from .models import METHODS as METHODS
from .models import NMF as NMF
from .models import PAPER_CONFIG as PAPER_CONFIG
from .models import PNLPF as PNLPF
from .models import GreConD as GreConD
from .models import MessagePassing as MessagePassing
from .models import OrMachine as OrMachine
from .models import PaNDa as PaNDa
from .models import RegularizedBANMF as RegularizedBANMF
from .models import RegularizedNMF as RegularizedNMF
from .models import ZhangThreshold as ZhangThreshold
from .report.patterns import Pattern as Pattern
from .report.patterns import patterns as patterns
from .result import Factorization as Factorization
from .runtime.threads import effective_n_jobs as effective_n_jobs

__version__: str
__all__: list[str]
