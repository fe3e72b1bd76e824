"""A factorization as one self-contained HTML page, to read and to pass on.

:func:`write_report` (and :meth:`banmf.Factorization.report`, ``banmf report``) writes a
single file with no outside reference: inline CSS, images as inline SVG around base64 PNGs
encoded here (zlib and struct; matplotlib is not needed), and one small inline script that
opens the folded lists before printing. It holds a summary of the data and the fit, the data
reordered by factor as an image binned from the CSR support (never densified), one card per
pattern (:func:`banmf.patterns`) and, when given, the evidence of a rank selection. Every
label, method name and parameter is escaped (:func:`html.escape`), and every attribute value
is quoted (:func:`_tag`).
"""

from __future__ import annotations

import base64
import html
import json
import struct
import time
import zlib

import numpy as np
import scipy.sparse as sp

from ..data.masks import product_at, product_mask
from ..exceptions import InputError
from ..runtime.files import atomic_path, check_output, jsonable, versions
from .patterns import patterns

__all__ = ["report_html", "write_report"]

#: The data image is binned to at most this many pixels across and down (it is shown at up to
#: 1,200 CSS pixels wide: readable at 1280 px).
IMAGE_WIDTH, IMAGE_HEIGHT = 1000, 700
#: A pattern's own image (its rows × its columns, best fitting first) at most this size.
TILE_WIDTH, TILE_HEIGHT = 240, 160
#: Covered zeros are drawn when the factors' tiles hold at most this many cells in all (the
#: product's support is built to count them per pixel); beyond, the summary counts them.
PRODUCT_MAX_CELLS = 20_000_000
#: Names shown in a card's table, per side (the best fitting first); its folded lists have more.
TOP_NAMES = 8
#: The image of all the data comes after that of the patterns' rows and columns when fewer
#: than this share of its pixels are at least half as dark as its darkest: a large sparse
#: matrix binned tens of cells to a pixel is then faint dust, its patterns a few dark pixels.
LEGIBLE_SHARE = 0.002
#: Names listed per row or column list of a card; the rest are counted (``banmf show --csv``
#: and ``banmf export`` list them all). Keeps the file small for factors of 10^5 rows.
MAX_NAMES = 5_000
#: Nonzeros binned at a time (the per-nonzero arrays stay a few tens of MB).
_CHUNK = 1 << 20

#: Cell colours: a covered one, a missed one, a covered zero, an unknown cell, an empty cell.
_HIT, _MISS, _FALSE, _UNKNOWN, _EMPTY = (
    np.array(c, dtype=np.float64)
    for c in ((25, 25, 25), (30, 110, 230), (225, 55, 40), (185, 185, 185), (255, 255, 255))
)
#: Outline colours of the patterns (they repeat after ten).
_PALETTE = (
    "#e6194b",
    "#3cb44b",
    "#f58231",
    "#911eb4",
    "#42d4f4",
    "#f032e6",
    "#9a6324",
    "#469990",
    "#808000",
    "#000075",
)


def write_report(result, path, X=None, *, selection=None, title: str | None = None) -> None:
    """Write an HTML report of a factorization to ``path``, atomically.

    Parameters
    ----------
    result : Factorization
    path : str or Path
        The ``.html`` file to write; checked before any work (its folder exists and takes
        files), replaced only once the report is complete.
    X : array-like or sparse of shape (n, m), optional
        The data (default ``result.X``, kept in results up to 2,000,000 nonzeros). Without
        it the report has the summary and the factors' sizes only.
    selection : RankSelection or dict, optional
        A rank selection (:func:`banmf.select_rank`, or the JSON of ``banmf select-k --json``)
        of the factorization's data: its criteria are drawn against k with the chosen k
        marked.
    title : str, optional
        The page's title (default: the method, k and the input's name).

    Raises
    ------
    banmf.exceptions.InputError
        ``X`` does not match the factorization, or ``selection`` is not a rank selection or
        is one of other data: another shape, or another input file (the sha256 that
        ``banmf select-k`` and ``banmf factorize`` record).
    FileNotFoundError, PermissionError
        ``path`` cannot be written.
    """
    check_output(path)
    text = report_html(result, X, selection=selection, title=title)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def report_html(result, X=None, *, selection=None, title: str | None = None) -> str:
    """The page :func:`write_report` writes, as a string."""
    selection = selection_record(selection, result)
    data = None
    if X is not None or result.X is not None:
        data = result.data(X)
        if data.shape != result.shape:
            raise InputError(
                f"X is {data.shape[0]}×{data.shape[1]} but the factorization is of a "
                f"{result.shape[0]}×{result.shape[1]} matrix"
            )
    name = result.meta.get("input")
    if title is None:
        title = f"banmf report: {result.method or 'factorization'}, k = {result.n_components}"
        if name:
            title += f", {name}"
    found = scores = None
    if data is not None:
        found, scores = patterns(result, X), result.evaluate(X)
    sections = [f"<h1>{_e(title)}</h1>", _summary(result, data, scores)]
    if data is not None:
        image, unoutlined = _data_image(result, data, found)
        sections.append(image)
        sections.append(_cards(result, data, found, scores["error"], unoutlined))
    else:
        sections.append(
            "<section><h2>Patterns</h2>"
            + _tag(
                "p",
                "This result holds no copy of its data (it is kept up to 2,000,000 nonzeros): "
                "give the data (<code>--data</code>, or <code>X</code>) for the image and the "
                "patterns.",
                class_="note",
            )
            + _sizes_only(result)
            + "</section>"
        )
    if selection is not None:
        sections.append(_selection(selection))
    sections.append(
        f"<footer>Written by banmf {_e(versions()['banmf'])} on "
        f"{_e(time.strftime('%Y-%m-%d %H:%M:%S %z'))}. Self-contained: no network access, "
        "no external files.</footer>"
    )
    return _PAGE.format(title=_e(title), css=_CSS, body="\n".join(sections))


# -- the parts of the page -------------------------------------------------------------------


def _summary(result, data, scores) -> str:
    n, m = result.shape
    rows = [("shape", f"{_count(n, 'row')} × {_count(m, 'column')}")]
    if data is not None:
        unknown = n * m - data.n_observed
        rows += [
            ("ones", f"{data.nnz:,} (density {data.nnz / max(1, n * m):.4g})"),
            ("unknown cells", f"{unknown:,}" if unknown else "none: every cell observed"),
        ]
    rows += [
        ("method", result.method or "unknown"),
        ("k", str(result.n_components)),
        ("parameters", _params(result.params)),
    ]
    if data is not None:
        rows += [
            (
                "error",
                f"{scores['error']:,} cells: {scores['false_negatives']:,} ones missed, "
                f"{scores['false_positives']:,} zeros covered",
            ),
            ("relative error", f"{scores['relative_error']:.4f} (error / observed ones)"),
        ]
    else:
        rows += [
            ("error", f"{result.error:,} cells"),
            ("relative error", f"{result.relative_error:.4f}"),
        ]
    rows += [
        ("time", f"{result.seconds:.3g} s, {result.n_iter} iterations or steps"),
    ]
    if result.interrupted:
        rows.append(("interrupted", "yes: the best result when the fit was stopped"))
    meta = result.meta
    for key, label in (
        ("input", "input"),
        ("input_sha256", "input sha256"),
        ("seed", "seed"),
        ("created", "created"),
    ):
        if meta.get(key) is not None:
            rows.append((label, str(meta[key])))
    held = meta.get("held_out")
    if isinstance(held, dict) and "cells" in held:
        # From banmf factorize --hold-out: cells hidden from the fit, scored after it.
        f1 = "n/a, no ones held out" if held.get("f1") is None else f"{held['f1']:.4f}"
        rows.append(
            (
                "held out",
                f"{held['cells']} observed cells ({100 * held['fraction']:g} %, seed "
                f"{held['seed']}): {held['errors']} wrong (accuracy {held['accuracy']:.4f}, "
                f"F1 on the ones {f1})",
            )
        )
    if result.predictor is not None:
        # The fit chose how to predict its unknown cells (docs/missing.md, "The predictor").
        report = result.predictor.report
        rates = ", ".join(f"{kind} {rate:.4f}" for kind, rate in report["error_rates"].items())
        rows.append(
            (
                "predictor",
                f"{result.predictor.kind}, threshold {result.predictor.threshold:.4g}: chosen "
                f"on {result.predictor.chosen_on()} (error rate {rates}; Brier score "
                f"{report['brier']:.4f})",
            )
        )
    found = meta.get("versions")
    if isinstance(found, dict):
        rows.append(("versions", ", ".join(f"{k} {v}" for k, v in found.items())))
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f"<section><h2>Summary</h2>{_tag('table', body, class_='summary')}</section>"


def _params(params: dict) -> str:
    if not params:
        return "none recorded"
    return ", ".join(f"{k}={json.dumps(jsonable(v))}" for k, v in params.items())


def _data_image(result, data, found) -> tuple[str, dict]:
    """The section of the data's image(s), and why a pattern has no outline in them: pattern's
    factor → words, for its card (:func:`_unoutlined`)."""
    W, H = result.W.astype(bool), result.H.astype(bool)
    order = [p.factor for p in found]  # largest contribution first, empty factors last
    rows, row_group = _order(data.X, W, H.T, order)
    cols, col_group = _order(data.T.X, H.T, W, order)
    n, m = data.shape
    groups = (row_group, col_group, order)
    svg, caption, binned, drawn, legible = _matrix(data, W, H, rows, cols, groups)
    figures = [(svg, f"All {_count(n, 'row')} × {_count(m, 'column')}: {caption}.")]
    in_rows, in_cols = rows[row_group[rows] >= 0], cols[col_group[cols] >= 0]
    patterns_first = False
    if binned and len(in_rows) and len(in_cols) and (len(in_rows) < n / 2 or len(in_cols) < m / 2):
        # Patterns that hold a small part of the data are a few pixels of the whole: again,
        # with only their rows and columns; first, when the whole is too faint to read.
        svg, caption, _, _, _ = _matrix(data, W, H, in_rows, in_cols, groups)
        figures.append(
            (
                svg,
                f"Only the {_count(len(in_rows), 'row')} and {_count(len(in_cols), 'column')} "
                f"in a pattern: {caption}.",
            )
        )
        if legible < LEGIBLE_SHARE:
            figures.reverse()
            patterns_first = True
    unoutlined = _unoutlined(found, row_group, col_group)
    keys = [
        (_HIT, "one covered by W⊗H"),
        (_MISS, "one missed (X = 1, W⊗H = 0)"),
        (_FALSE, "zero covered (X = 0, W⊗H = 1)"),
    ]
    if data.unknown is not None:
        keys.append((_UNKNOWN, "unknown cell"))
    legend = "".join(
        _tag(
            "span",
            _tag("span", "", class_="swatch", style=f"background:rgb{tuple(int(v) for v in c)}")
            + _e(text),
            class_="key",
        )
        for c, text in keys
    )
    notes = [
        "Rows and columns grouped by the pattern that covers most of their ones (patterns in "
        "the order of the cards below; rows and columns in no pattern last), each pattern's "
        "group outlined."
    ]
    if binned:
        notes.append(
            "A pixel's colour mixes those of its cells; its darkness grows with the share of "
            "its cells that are ones, errors or unknown (square-root scale, the fullest pixel "
            "darkest)."
        )
    if patterns_first:
        notes.append(
            f"The image of the patterns' rows and columns comes first: in that of all the data, "
            f"fewer than 1 pixel in {round(1 / LEGIBLE_SHARE)} is half as dark as the darkest "
            "(too faint to read)."
        )
    if unoutlined:
        ranks = [i for i, p in enumerate(found, 1) if p.factor in unoutlined]
        one = len(ranks) == 1
        notes.append(
            f"{_series('Pattern', ranks)} {'has' if one else 'have'} no outline: all of "
            f"{'its' if one else 'their'} rows or all of {'its' if one else 'their'} columns are "
            f"grouped with other patterns (see {'its card' if one else 'their cards'})."
        )
    if not drawn:
        notes.append(
            "Covered zeros are not drawn (the factors' tiles are too large to list their "
            "cells); the summary counts them."
        )
    body = "".join(
        f"<figure>{_tag('div', svg, class_='figure')}<figcaption>{_e(caption)}</figcaption></figure>"
        for svg, caption in figures
    )
    section = (
        f"<section><h2>The data, reordered by factor</h2>{body}"
        + _tag("p", legend, class_="legend")
        + _tag("p", _e(" ".join(notes)), class_="note")
        + "</section>"
    )
    return section, unoutlined


def _unoutlined(found, row_group: np.ndarray, col_group: np.ndarray) -> dict:
    """The patterns (with cells) that have no group of rows or of columns of their own, each
    of those rows or columns grouped with a pattern that covers at least as many of its ones:
    factor → where they went, in words."""
    rank_of = {p.factor: i for i, p in enumerate(found, 1)}
    reasons = {}
    for p in found:
        if p.cells == 0:
            continue
        lost = []
        for noun, members, group in (("row", p.rows, row_group), ("column", p.cols, col_group)):
            if (group[members] == p.factor).any():
                continue
            others = sorted({rank_of[int(g)] for g in group[members]})
            many = len(members) > 1
            lost.append(
                f"its {noun}{'s are' if many else ' is'} grouped with {_series('pattern', others)}"
                f", which cover{'' if len(others) > 1 else 's'} at least as many of "
                f"{'their' if many else 'its'} ones"
            )
        if lost:
            reasons[p.factor] = f"none in the image: {'; '.join(lost)}"
    return reasons


def _series(noun: str, numbers: list) -> str:
    """``pattern 1``, ``patterns 1 and 2``, ``patterns 1, 2 and 4``."""
    if len(numbers) == 1:
        return f"{noun} {numbers[0]}"
    head = ", ".join(map(str, numbers[:-1]))
    return f"{noun}s {head} and {numbers[-1]}"


def _matrix(data, W, H, rows, cols, groups) -> tuple[str, str, bool, bool, float]:
    """The cells of ``rows`` × ``cols`` (display order) binned into an inline SVG image with
    the patterns' groups outlined; its caption (the size of a pixel), whether a pixel holds
    several cells, whether covered zeros are drawn, and the share of its pixels at least half
    as dark as the darkest (see :data:`LEGIBLE_SHARE`)."""
    row_group, col_group, order = groups
    n, m = data.shape
    sr, sc = -(-len(rows) // IMAGE_HEIGHT), -(-len(cols) // IMAGE_WIDTH)
    h, w = -(-len(rows) // sr), -(-len(cols) // sc)
    bin_r, bin_c = np.full(n, -1, np.int64), np.full(m, -1, np.int64)
    bin_r[rows], bin_c[cols] = np.arange(len(rows)) // sr, np.arange(len(cols)) // sc
    counts, drawn = _counts(data, W, H, bin_r, bin_c, (h, w))
    rgb, darkness = _colour(counts, _cells(bin_r, bin_c, (h, w)))
    png = _png(rgb)
    # Cells drawn as squares of up to 12 px; a narrow matrix's columns widened to 480 px in all.
    zoom = max(1, min(IMAGE_WIDTH // w, IMAGE_HEIGHT // h, 12))
    zoom_x = max(zoom, min(IMAGE_WIDTH // w, 480 // w))
    outlines = []
    for rank, l in enumerate(order):
        r = np.flatnonzero(row_group[rows] == l)
        c = np.flatnonzero(col_group[cols] == l)
        if not len(r) or not len(c):
            continue
        x0, x1 = c[0] / sc, (c[-1] + 1) / sc
        y0, y1 = r[0] / sr, (r[-1] + 1) / sr
        tooltip = (
            f"pattern {rank + 1} (factor {l}): {_count(len(r), 'row')} × "
            f"{_count(len(c), 'column')} best covered by it"
        )
        outlines.append(
            _tag(
                "rect",
                _tag("title", _e(tooltip)),
                x=f"{x0:.3f}",
                y=f"{y0:.3f}",
                width=f"{x1 - x0:.3f}",
                height=f"{y1 - y0:.3f}",
                stroke=_PALETTE[rank % len(_PALETTE)],
            )
        )
    pixel = (
        "one pixel is one cell"
        if sr == sc == 1
        else f"one pixel is {_count(sr, 'row')} × {_count(sc, 'column')}"
    )
    image = _tag(
        "image", width=w, height=h, preserveAspectRatio="none", href=f"data:image/png;base64,{png}"
    )
    group = _tag("g", "".join(outlines), class_="outlines", fill="none", stroke_width=2)
    svg = _tag(
        "svg",
        image + group,
        class_="matrix",
        viewBox=f"0 0 {w} {h}",
        width=w * zoom_x,
        height=h * zoom,
        preserveAspectRatio="none",
        role="img",
        aria_label="the data reordered by factor",
    )
    legible = float((darkness >= 0.5).mean())
    return svg, f"{pixel} ({w:,} × {h:,} pixels)", sr * sc > 1, drawn, legible


def _cells(bin_r: np.ndarray, bin_c: np.ndarray, shape) -> np.ndarray:
    """Cells per pixel (rows and columns with bin -1 are not drawn)."""
    h, w = shape
    return np.outer(
        np.bincount(bin_r[bin_r >= 0], minlength=h), np.bincount(bin_c[bin_c >= 0], minlength=w)
    )


def _order(X: sp.csr_array, F: np.ndarray, G: np.ndarray, order: list) -> tuple:
    """The rows of X (CSR) in display order, and each row's group: of the factors the row is in
    (F, one row of bits per row of X), the one whose other side (G, one row per column of X)
    covers most of its ones; ties and ones covered by none go to the factor shown first.
    Groups follow ``order``; rows in no factor come last. Returns ``(rows, group)``, group -1
    for those in none."""
    n, k = F.shape
    if k == 0:
        return np.arange(n), np.full(n, -1)
    covered = (X.astype(np.int32) @ G[:, order].astype(np.int32)).astype(np.int64)
    inside = F[:, order]
    covered[~inside] = -1
    best = np.argmax(covered, axis=1)
    none = ~inside.any(axis=1)
    position = np.where(none, k, best)
    strength = np.where(none, 0, covered[np.arange(n), best])
    rows = np.lexsort((np.arange(n), -strength, position))
    group = np.where(none, -1, np.asarray(order)[best])
    return rows, group


def _binned(M: sp.csr_array, bin_r, bin_c, shape, W, H) -> tuple[np.ndarray, np.ndarray]:
    """The nonzeros of the CSR mask M per pixel, all and those W⊗H covers, a chunk of rows at
    a time (O(nnz) in all, never the dense matrix); rows and columns of bin -1 are left out."""
    h, w = shape
    every = np.zeros(h * w, dtype=np.int64)
    covered = np.zeros(h * w, dtype=np.int64)
    indptr, n = M.indptr, M.shape[0]
    start = 0
    while start < n:
        stop = int(np.searchsorted(indptr, indptr[start] + _CHUNK, side="right"))
        stop = min(n, max(stop - 1, start + 1))
        lo, hi = indptr[start], indptr[stop]
        r = np.repeat(np.arange(start, stop), np.diff(indptr[start : stop + 1]))
        c = M.indices[lo:hi]
        drawn = (bin_r[r] >= 0) & (bin_c[c] >= 0)
        r, c = r[drawn], c[drawn]
        pixel = bin_r[r] * w + bin_c[c]
        every += np.bincount(pixel, minlength=h * w)
        covered += np.bincount(pixel[product_at(W, H, r, c)], minlength=h * w)
        start = stop
    return every.reshape(h, w), covered.reshape(h, w)


def _counts(data, W, H, bin_r, bin_c, shape) -> tuple[dict, bool]:
    """Per pixel: ones covered and missed, observed zeros covered, unknown cells; and whether
    the covered zeros could be counted (see :data:`PRODUCT_MAX_CELLS`)."""
    ones, hits = _binned(data.X, bin_r, bin_c, shape, W, H)
    counts = {"hit": hits, "miss": ones - hits, "unknown": np.zeros(shape, np.int64)}
    u = data.unknown
    drawn = True
    if u is not None and u.observed:
        # Most cells unknown: the observed zeros are listed, and so are the covered ones.
        observed_zeros, covered_zeros = _binned(u.cells, bin_r, bin_c, shape, W, H)
        counts["false"] = covered_zeros
        counts["unknown"] = _cells(bin_r, bin_c, shape) - ones - observed_zeros
        return counts, drawn
    tiles = int(W.sum(axis=0) @ H.sum(axis=1))
    if tiles <= PRODUCT_MAX_CELLS:
        product, _ = _binned(product_mask(W, H), bin_r, bin_c, shape, W, H)
        counts["false"] = product - hits
    else:
        counts["false"] = np.zeros(shape, np.int64)
        drawn = False
    if u is not None:
        unknown, unknown_covered = _binned(u.cells, bin_r, bin_c, shape, W, H)
        counts["unknown"] = unknown
        if drawn:
            counts["false"] = counts["false"] - unknown_covered
    return counts, drawn


def _colour(counts: dict, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RGB pixels (uint8): each pixel the mix of its cells' colours by their shares, its
    darkness the share of cells that are not empty zeros (square-root scale, normalised to the
    fullest pixel when pixels hold several cells); and that darkness, 0 to 1."""
    parts = [(counts["hit"], _HIT), (counts["miss"], _MISS), (counts["false"], _FALSE)]
    parts.append((counts["unknown"], _UNKNOWN))
    ink = sum(c for c, _ in parts).astype(np.float64)
    mix = sum(c[..., None] * colour for c, colour in parts) / np.maximum(ink, 1)[..., None]
    share = ink / np.maximum(cells, 1)
    if cells.max() > 1 and share.max() > 0:
        share = np.sqrt(share / share.max())
    alpha = np.clip(share, 0, 1)[..., None]
    rgb = _EMPTY * (1 - alpha) + mix * alpha
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8), alpha[..., 0]


def _png(rgb: np.ndarray) -> str:
    """An RGB image (h, w, 3) uint8 as a base64 PNG (8-bit truecolour, no filter). zlib level 6:
    level 9 took 6× as long on a 10⁵ × 10⁴ report's images (2.5 s) for a file 6 % smaller."""
    h, w, _ = rgb.shape
    raw = np.concatenate([np.zeros((h, 1), np.uint8), rgb.reshape(h, 3 * w)], axis=1)

    def chunk(tag: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(tag + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", crc)

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(png).decode("ascii")


def _cards(result, data, found, error: int, unoutlined: dict) -> str:
    W, H = result.W.astype(bool), result.H.astype(bool)
    Wi, Hi = W.astype(np.int64), H.astype(np.int64)
    shared = (Wi.T @ Wi) * (Hi @ Hi.T)  # cells two tiles have in common
    rank_of = {p.factor: i + 1 for i, p in enumerate(found)}
    cards, empty = [], []
    for i, p in enumerate(found, 1):
        if p.cells == 0:
            empty.append(p.factor)
            continue
        overlaps = sorted(
            ((int(shared[p.factor, o]), o) for o in range(W.shape[1]) if o != p.factor),
            key=lambda t: (-t[0], rank_of[t[1]]),
        )
        overlaps = [f"pattern {rank_of[o]} ({cells:,} cells)" for cells, o in overlaps if cells > 0]
        facts = [
            ("columns", _top(p.col_names, p.n_cols)),
            ("rows", _top(p.row_names, p.n_rows)),
            (
                "size",
                f"{_count(p.n_rows, 'row')} × {_count(p.n_cols, 'column')} = "
                f"{_count(p.cells, 'cell')}",
            ),
            ("precision", f"{p.precision:.3f} ({_count(p.ones, 'one')} in the tile)"),
            ("without it", _without(p, error)),
            ("overlaps", ", ".join(overlaps) if overlaps else "none"),
        ]
        if p.unknown:
            facts.insert(4, ("unknown cells", f"{p.unknown:,} in the tile"))
        if p.factor in unoutlined:
            facts.append(("outline", unoutlined[p.factor]))
        table = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
        colour = _PALETTE[(i - 1) % len(_PALETTE)]
        body = (
            f"<h3>Pattern {i} <small>(factor {p.factor})</small></h3>"
            + _tag("div", f"<table>{table}</table>{_tile_image(data, p)}", class_="cardbody")
            + _names("column", p.col_names, p.n_cols)
            + _names("row", p.row_names, p.n_rows)
        )
        cards.append(_tag("article", body, class_="card", style=f"border-left-color:{colour}"))
    note = (
        _tag(
            "p",
            _e(f"Empty factors (no rows or no columns): {', '.join(map(str, empty))}."),
            class_="note",
        )
        if empty
        else ""
    )
    return (
        "<section><h2>Patterns, largest contribution first</h2>"
        + _tag(
            "p",
            "Each pattern is a set of columns shared by a set of rows (a factor: a column of W "
            "and a row of H). Rows and columns are listed best fitting first; the image shows "
            "the pattern's tile, ones dark and zeros red.",
            class_="note",
        )
        + "".join(cards)
        + note
        + "</section>"
    )


def _without(p, error: int) -> str:
    """What dropping the pattern does to the error, in words."""
    change = (
        f"the error rises by {p.contribution:,}"
        if p.contribution >= 0
        else f"the error falls by {-p.contribution:,} (the pattern covers more zeros than ones "
        "no other covers)"
    )
    return (
        f"{change}, from {error:,} to {error + p.contribution:,}; {_count(p.ones_alone, 'one')} "
        "covered by it alone"
    )


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _tile_image(data, p) -> str:
    """The pattern's tile of X, rows and columns best fitting first, binned to a small PNG."""
    tile = data.X[p.rows][:, p.cols]
    sr, sc = -(-p.n_rows // TILE_HEIGHT), -(-p.n_cols // TILE_WIDTH)
    h, w = -(-p.n_rows // sr), -(-p.n_cols // sc)
    bin_r, bin_c = np.arange(p.n_rows) // sr, np.arange(p.n_cols) // sc
    ones = np.zeros(h * w, dtype=np.int64)
    r = np.repeat(np.arange(p.n_rows), np.diff(tile.indptr))
    ones += np.bincount(bin_r[r] * w + bin_c[tile.indices], minlength=h * w)
    ones = ones.reshape(h, w)
    cells = np.outer(np.bincount(bin_r, minlength=h), np.bincount(bin_c, minlength=w))
    share = ones / cells
    rgb = _FALSE * (1 - share[..., None]) + _HIT * share[..., None]
    png = _png(np.clip(np.rint(rgb), 0, 255).astype(np.uint8))
    zoom_x, zoom_y = max(1, min(TILE_WIDTH // w, 16)), max(1, min(TILE_HEIGHT // h, 16))
    pixel = "a cell" if sr == sc == 1 else f"{sr:,} × {sc:,} cells"
    return _tag(
        "img",
        None,
        class_="tile",
        width=w * zoom_x,
        height=h * zoom_y,
        alt=f"the tile of the pattern: share of ones, a pixel is {pixel}",
        title=f"a pixel is {pixel}",
        src=f"data:image/png;base64,{png}",
    )


def _top(names: list, total: int) -> str:
    """The first :data:`TOP_NAMES` names, and how many more."""
    shown = names[:TOP_NAMES]
    more = total - len(shown)
    return ", ".join(map(str, shown)) + (f" (+{more:,} more)" if more > 0 else "")


def _names(what: str, names: list, total: int) -> str:
    shown = names[:MAX_NAMES]
    more = (
        f" … and {total - len(shown):,} more (banmf show --csv lists them all)"
        if total > len(shown)
        else ""
    )
    return (
        f"<details><summary>{_count(total, what)}</summary>"
        + _tag("p", _e(", ".join(shown) + more), class_="names")
        + "</details>"
    )


def _sizes_only(result) -> str:
    rows = result.W.sum(axis=0)
    cols = result.H.sum(axis=1)
    body = "".join(
        f"<tr><td>{l}</td><td>{int(rows[l]):,}</td><td>{int(cols[l]):,}</td></tr>"
        for l in range(result.n_components)
    )
    head = "<tr><th>factor</th><th>rows</th><th>columns</th></tr>"
    return _tag("table", head + body, class_="sizes")


# -- rank selection ----------------------------------------------------------------------------

#: The criteria of a rank selection, as drawn: key of a ``per_k`` row, title, the choice's key.
_CRITERIA = (
    ("training_error", "training error (observed cells)", None),
    ("description_length", "description length (bits)", "mdl"),
    ("held_out_error", "held-out error rate (± one standard error)", "cv"),
    ("stability", "agreement of fold fits", "stability"),
)


def selection_record(selection, result) -> dict | None:
    """The selection as the dict ``banmf select-k --json`` prints, checked: a rank selection,
    of the factorization's data (:func:`_same_data`)."""
    if selection is None:
        return None
    if hasattr(selection, "to_dict"):
        # A RankSelection: its fits have the shape of the data it was made on.
        shapes = {fit.shape for fit in (getattr(selection, "fits", None) or {}).values()}
        selection = selection.to_dict()
        if len(shapes) == 1:
            selection["shape"] = list(shapes.pop())
    per_k = selection.get("per_k") if isinstance(selection, dict) else None
    if (
        not isinstance(per_k, list)
        or not per_k
        or not all(isinstance(row, dict) and isinstance(row.get("k"), int) for row in per_k)
        or not isinstance(selection.get("best_k"), int)
    ):
        raise InputError(
            "selection: not a rank selection (a RankSelection, or the JSON that "
            "banmf select-k --json prints)"
        )
    _same_data(selection, result)
    return selection


def _same_data(selection: dict, result) -> None:
    """Refuse a rank selection made on other data than the factorization: another shape, or
    another input file (both record its sha256). A selection that records neither (one
    written by hand, or by an earlier banmf) is taken as it is."""
    shape, theirs = selection.get("shape"), selection.get("input_sha256")
    ours = result.meta.get("input_sha256")
    other_shape = isinstance(shape, (list, tuple)) and tuple(shape) != tuple(result.shape)
    if other_shape or (theirs and ours and theirs != ours):
        raise InputError(
            f"the rank selection is of {_described(selection.get('input'), shape, theirs)} but "
            f"the factorization is of {_described(result.meta.get('input'), result.shape, ours)}"
            "; select the rank on the factorization's data (banmf select-k)"
        )


def _described(name, shape, sha256) -> str:
    """Data in words: its name, shape and checksum, as far as they are known."""
    known = []
    if shape is not None:
        known.append(f"{shape[0]}×{shape[1]}")
    if sha256:
        known.append(f"sha256 {sha256[:12]}…")
    return f"{name or 'unnamed data'}" + (f" ({', '.join(known)})" if known else "")


def _selection(selection: dict) -> str:
    best = selection["best_k"]
    choices = selection.get("choices") or {}
    charts = []
    for key, title, criterion in _CRITERIA:
        points = [
            (row["k"], float(row[key]), float(row.get("held_out_se") or 0))
            for row in selection["per_k"]
            if isinstance(row.get(key), (int, float))
        ]
        if points:
            charts.append(_chart(title, points, best, choices.get(criterion)))
    reason = selection.get("reason")
    return (
        f"<section><h2>Rank selection: k = {best}</h2>"
        + (f"<p>{_e(str(reason))}</p>" if reason else "")
        + _tag("div", "".join(charts), class_="charts")
        + _tag(
            "p",
            "The dashed line marks the chosen k; a square marks each criterion's own choice.",
            class_="note",
        )
        + "</section>"
    )


def _chart(title: str, points: list, best: int, choice) -> str:
    """A small inline SVG line chart of ``(k, value, error bar)`` points."""
    width, height, left, right, top, bottom = 320, 200, 52, 12, 24, 30
    ks = [k for k, _, _ in points]
    low = min(v - e for _, v, e in points)
    high = max(v + e for _, v, e in points)
    span = high - low or 1.0
    k0, k1 = min(ks), max(ks)

    def x(k):
        return left + (width - left - right) * ((k - k0) / (k1 - k0) if k1 > k0 else 0.5)

    def y(v):
        return height - bottom - (height - top - bottom) * (v - low) / span

    def f(value: float) -> str:
        return f"{value:.1f}"

    base = height - bottom
    parts = [
        _tag("text", _e(title), x=f(width / 2), y=14, class_="title"),
        _tag("line", x1=left, y1=base, x2=width - right, y2=base, class_="axis"),
        _tag("line", x1=left, y1=top, x2=left, y2=base, class_="axis"),
    ]
    for value in (high, low):
        parts.append(
            _tag(
                "text",
                f"{value:.4g}",
                x=left - 4,
                y=f(y(value) + 4),
                class_="tick",
                text_anchor="end",
            )
        )
    step = max(1, -(-len(ks) // 12))
    for k in ks[::step]:
        parts.append(
            _tag("text", str(k), x=f(x(k)), y=base + 14, class_="tick", text_anchor="middle")
        )
    parts.append(
        _tag(
            "text",
            "k",
            x=f((left + width - right) / 2),
            y=height - 2,
            class_="tick",
            text_anchor="middle",
        )
    )
    if k0 <= best <= k1:
        parts.append(_tag("line", x1=f(x(best)), y1=top, x2=f(x(best)), y2=base, class_="best"))
    for k, v, e in points:
        if e:
            parts.append(
                _tag("line", x1=f(x(k)), y1=f(y(v - e)), x2=f(x(k)), y2=f(y(v + e)), class_="bar")
            )
    line = " ".join(f"{f(x(k))},{f(y(v))}" for k, v, _ in points)
    parts.append(_tag("polyline", points=line, class_="curve"))
    for k, v, _ in points:
        parts.append(_tag("circle", cx=f(x(k)), cy=f(y(v)), r=2.5, class_="dot"))
        if k == choice:
            parts.append(
                _tag(
                    "rect",
                    x=f(x(k) - 6),
                    y=f(y(v) - 6),
                    width=12,
                    height=12,
                    class_="choice",
                )
            )
    return _tag(
        "svg",
        "".join(parts),
        class_="chart",
        viewBox=f"0 0 {width} {height}",
        width=width,
        height=height,
        role="img",
        aria_label=f"{title} against k",
    )


# -- the page ------------------------------------------------------------------------------


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _tag(name: str, body: str | None = None, /, **attrs) -> str:
    """An element whose attribute values are all quoted and escaped (an unquoted value takes a
    following ``/`` in, and a browser then nests the rest of the page inside the element).
    ``body`` is markup, escaped by the caller; without it the element is written empty,
    ``<name …/>``: only for SVG's elements and HTML's void ones (``img``), as a browser ignores
    the ``/`` of any other HTML element and leaves it open. A keyword's trailing ``_`` is
    dropped and its other ``_`` become ``-`` (``class_``, ``text_anchor``); a value of None
    leaves its attribute out."""
    pairs = "".join(
        f' {key.rstrip("_").replace("_", "-")}="{_e(value)}"'
        for key, value in attrs.items()
        if value is not None
    )
    return f"<{name}{pairs}/>" if body is None else f"<{name}{pairs}>{body}</{name}>"


_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;
max-width:1220px;margin:0 auto;padding:16px 24px}
h1{font-size:1.5em;margin:.3em 0;overflow-wrap:anywhere}h2{font-size:1.2em;margin-top:1.6em;
border-bottom:1px solid #ddd}h3{margin:.2em 0;font-size:1.05em}
table{border-collapse:collapse}th,td{text-align:left;vertical-align:top;padding:2px 10px 2px 0;
overflow-wrap:anywhere}th{font-weight:600;white-space:nowrap}
.note,footer{color:#555;font-size:.9em}footer{margin-top:2em;border-top:1px solid #ddd}
.figure{overflow:auto;max-width:100%}
svg.matrix{max-width:100%;border:1px solid #ccc}figure{margin:0 0 12px}
figcaption{font-size:.9em;color:#333}
svg.matrix image,img.tile{image-rendering:pixelated}
.outlines rect{vector-effect:non-scaling-stroke}
.key{margin-right:1.2em;white-space:nowrap}.swatch{display:inline-block;width:.9em;height:.9em;
margin-right:.35em;border:1px solid #999;vertical-align:-1px}
.card{border:1px solid #ddd;border-left:6px solid #888;border-radius:4px;padding:8px 12px;
margin:10px 0;break-inside:avoid}
.cardbody{display:flex;gap:16px;flex-wrap:wrap;align-items:flex-start}.cardbody table{flex:1 1 520px}
img.tile{border:1px solid #ccc}
details{margin:4px 0}summary{cursor:pointer}.names{overflow-wrap:anywhere;margin:4px 0 4px 1em;
font-size:.92em}
.charts{display:flex;flex-wrap:wrap;gap:12px}svg.chart{border:1px solid #eee}
svg.chart .title{font-size:12px;text-anchor:middle}svg.chart .tick{font-size:10px;fill:#444}
svg.chart .axis{stroke:#888}svg.chart .curve{fill:none;stroke:#1f5fbf;stroke-width:1.5}
svg.chart .dot{fill:#1f5fbf}svg.chart .bar{stroke:#1f5fbf}
svg.chart .best{stroke:#d22;stroke-dasharray:4 3}svg.chart .choice{fill:none;stroke:#f80;stroke-width:2}
@media print{body{max-width:none;padding:0;font-size:11pt}.figure{overflow:visible}
h2{break-after:avoid}}
"""

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
{body}
<script>addEventListener("beforeprint",function(){{document.querySelectorAll("details").forEach(function(d){{d.open=true}})}});</script>
</body>
</html>
"""
