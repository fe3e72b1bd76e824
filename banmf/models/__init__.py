"""Factorization methods, one module each, behind one name → class registry.

Besides the estimators (``__all__``), the estimators' ``budgeted`` and ``declared_init``,
which :mod:`banmf.distributed`'s estimator shares.
"""

from ..result import METHODS
from ._base import budgeted as budgeted
from ._base import declared_init as declared_init
from .asso import ASSO
from .banmf import BANMF, PAPER_CONFIG
from .elbmf import ELBMF
from .grecond import GreConD
from .message_passing import MessagePassing
from .nmf import NMF, RegularizedBANMF, RegularizedNMF
from .ormachine import OrMachine
from .panda import PaNDa
from .pnlpf import PNLPF
from .zhang import ZhangThreshold

#: Every registered method by name; it feeds :func:`banmf.factorize`, the CLI and the tests
#: (the dict of :mod:`banmf.result`, which names the method of a result from it).
METHODS.update(
    {
        "banmf": BANMF,
        "reg-banmf": RegularizedBANMF,
        "nmf": NMF,
        "reg-nmf": RegularizedNMF,
        "asso": ASSO,
        "pnlpf": PNLPF,
        "zhang-threshold": ZhangThreshold,
        "grecond": GreConD,
        "ormachine": OrMachine,
        "message-passing": MessagePassing,
        "panda": PaNDa,
        "elbmf": ELBMF,
    }
)

__all__ = [
    "ASSO",
    "BANMF",
    "ELBMF",
    "METHODS",
    "NMF",
    "PAPER_CONFIG",
    "PNLPF",
    "OrMachine",
    "PaNDa",
    "GreConD",
    "MessagePassing",
    "RegularizedBANMF",
    "RegularizedNMF",
    "ZhangThreshold",
]
