"""Reading and writing 0/1 matrices and factorizations.

Matrices: Matrix Market (coordinate pattern/integer/real or dense array, general or symmetric,
``.gz`` too), scipy ``.npz``, dense 0/1 CSV/TSV (optional header row and index column; the
separator is detected among ``,``, tab and ``;``) and FIMI transaction files (``.dat``: one line
per row, space-separated item ids). Labels, the shape and the unknown cells of ``.mtx``, ``.npz``
and ``.dat`` files are kept in a sidecar that belongs to one file, its name + ``.json``
(``a.mtx.json``); the shared ``NAME.json`` of older versions (and of the bundled data) is read
when it can only be that file's. Every reader
returns a canonical support mask in memory O(nnz + n + m); a malformed file gets one line naming
the file, the line where there is one, and the problem (rows and columns counted from 1). A
reader estimates what the matrix will take from the file's header before allocating it, and
refuses a matrix larger than the memory available (:mod:`banmf.runtime.memory`, ``BANMF_MEMORY_LIMIT``).
Oddities that the readers read past, such as duplicate entries, raise a :class:`DataWarning`.

What a format is lives in one place, :data:`REGISTRY` (name → :class:`Format`: its suffixes,
reader, writer, the reader's options, where it keeps labels and unknown cells, whether it has a
sidecar and takes exported factors), which :func:`format_of`, the readers, the writer, the
export, the command line's ``--format`` and the docs' table of formats all read.

Factorizations are saved as one self-describing ``.npz`` (W, H, the loss curve, metadata as
JSON: method, parameters, errors, versions) that :func:`load_result` reads back, refusing in one
line anything else; the format is :class:`banmf.Factorization`'s own (:mod:`banmf.result`).
All writes are atomic (:mod:`banmf.runtime.files`): a temporary file in the same folder, renamed over
the target when complete, with the permissions a plain ``open()`` would give (or those of the file
it replaces). :func:`check_output` checks a destination before any work is done.
"""

from __future__ import annotations

from ..data.dataset import Dataset
from ..exceptions import DataWarning
from ..result import EMBED_MAX_NNZ as EMBED_MAX_NNZ  # the result files' names, as before
from ..result import RESULT_FORMAT as RESULT_FORMAT
from ..result import RESULT_VERSION as RESULT_VERSION
from ..runtime.files import atomic_path, check_output
from ..runtime.files import jsonable as jsonable  # banmf.io.jsonable, as before
from . import _dat, _delimited, _formats, _h5ad, _mtx, _npz
from ._delimited import MISSING_CELLS as MISSING_CELLS
from ._formats import REGISTRY, Format, format_of
from ._formats import reading_format as reading_format
from ._matrices import read_dataset, read_matrix, write_matrix
from ._npz import npz_shape
from ._results import export_factors as export_factors
from ._results import export_paths as export_paths
from ._results import load_result, save_result
from ._results import prefix_path as prefix_path
from ._stats import matrix_stats as matrix_stats

__all__ = [
    "FORMATS",
    "REGISTRY",
    "DataWarning",
    "Dataset",
    "Format",
    "atomic_path",
    "check_output",
    "format_of",
    "load_result",
    "npz_shape",
    "read_dataset",
    "read_matrix",
    "save_result",
    "write_matrix",
]

# The one list of formats (a new format is a module and an entry here), in the order every
# list of them shows.
REGISTRY.update(
    (spec.name, spec)
    for spec in (_mtx.MTX, _npz.NPZ, _delimited.CSV, _delimited.TSV, _dat.DAT, _h5ad.H5AD)
)
#: The formats' names, in the registry's order: ``format=`` and ``--format`` take them.
FORMATS = tuple(REGISTRY)
#: The formats :func:`export_factors` writes (``banmf export --to``).
EXPORT_FORMATS = _formats.export_formats()
#: The endings of the files :func:`write_matrix` writes (``.mtx``, ..., ``.mtx.gz``, ...).
OUTPUT_SUFFIXES = _formats.output_suffixes()
