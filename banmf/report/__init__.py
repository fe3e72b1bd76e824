"""A factorization read by people: the HTML report (:mod:`~banmf.report.html`), its factors as
named patterns (:mod:`~banmf.report.patterns`) and pictures (:mod:`~banmf.report.plots`, with
matplotlib)."""

from .html import report_html, selection_record, write_report

__all__ = ["report_html", "selection_record", "write_report"]
