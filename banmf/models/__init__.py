"""Factorization methods, one module each, behind one name → class registry."""

from .asso import ASSO
from .banmf import BANMF, PAPER_CONFIG
from .grecond import GreConD
from .nmf import NMF, RegularizedBANMF, RegularizedNMF
from .pnlpf import PNLPF
from .zhang import ZhangThreshold

#: Every registered method by name; it feeds :func:`banmf.factorize`, the CLI and the tests.
METHODS: dict[str, type] = {
    "banmf": BANMF,
    "reg-banmf": RegularizedBANMF,
    "nmf": NMF,
    "reg-nmf": RegularizedNMF,
    "asso": ASSO,
    "pnlpf": PNLPF,
    "zhang-threshold": ZhangThreshold,
    "grecond": GreConD,
}

__all__ = [
    "ASSO",
    "BANMF",
    "METHODS",
    "NMF",
    "PAPER_CONFIG",
    "PNLPF",
    "GreConD",
    "RegularizedBANMF",
    "RegularizedNMF",
    "ZhangThreshold",
]
