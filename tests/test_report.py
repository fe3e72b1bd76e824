"""The HTML report: self-contained, parseable, escaped, its image counts right, the CLI."""

import base64
import io
import json
import re
import shutil
import struct
import subprocess
import sys
import time
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from banmf import (
    Factorization,
    InputError,
    factorize,
    make_boolean,
    make_sparse_tiles,
    select_rank,
)
from banmf.cli import main
from banmf.datasets import data_dir, load_votes
from banmf.io import read_dataset
from banmf.report.html import report_html

ZOO = str(data_dir() / "zoo_101x15.mtx")
VOTES = str(data_dir() / "votes_435x16_yes.mtx")
VOTES_MASK = str(data_dir() / "votes_435x16_missing_mask.mtx")
SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "render_report.py"


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


class Page(HTMLParser):
    """Every element with its attributes, the text, and the scripts' text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements, self.text, self.scripts, self._in_script = [], [], [], False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)

    def all_text(self) -> str:
        return "".join(self.text)


def decode_png(uri: str) -> np.ndarray:
    """An inline PNG (data URI) of ours back to its (h, w, 3) pixels."""
    assert uri.startswith("data:image/png;base64,")
    png = base64.b64decode(uri.split(",", 1)[1], validate=True)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        tag, body = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", png[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(tag + body) & 0xFFFFFFFF
        chunks[tag] = chunks.get(tag, b"") + body
        pos += 12 + length
    w, h, depth, kind = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, kind) == (8, 2)
    raw = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(h, 3 * w + 1)
    assert (raw[:, 0] == 0).all()
    return raw[:, 1:].reshape(h, w, 3)


def check_self_contained(text: str, *, images: bool = True, hostile: bool = False) -> Page:
    """Parses; no reference leaves the file; every image is an inline PNG (there are some
    when ``images``); one script (ours); no URL at all unless the labels hold some."""
    page = Page(text)
    found = 0
    for tag, attrs in page.elements:
        for key in ("src", "href", "xlink:href", "action", "data"):
            value = attrs.get(key)
            if value is not None:
                assert not value.lower().startswith(("http:", "https:", "//", "file:")), value
        if tag in ("img", "image"):
            decode_png(attrs.get("src") or attrs.get("href"))
            found += 1
        assert tag not in ("link", "iframe", "object", "embed")
    assert (found >= 1) == images
    assert sum(tag == "script" for tag, _ in page.elements) == 1
    assert hostile or ("http://" not in text and "https://" not in text)
    return page


def test_zoo_report_from_the_command_line(tmp_path):
    res, sel, html_ = tmp_path / "zoo.npz", tmp_path / "sel.json", tmp_path / "zoo.html"
    assert run("factorize", ZOO, "-k", "4", "-q", "--out", res)[0] == 0
    # A rank selection's JSON as select-k prints it (written here: select-k itself is slow).
    X = read_dataset(ZOO)
    selection = {
        "ks": [1, 2, 3, 4],
        "per_k": [
            {
                "k": k,
                "training_error": 400 - 60 * k,
                "held_out_error": 0.3 - k / 50,
                "held_out_se": 0.01,
            }
            for k in (1, 2, 3, 4)
        ],
        "choices": {"cv": 3},
        "best_k": 3,
        "reason": "cv points to 3",
    }
    sel.write_text(json.dumps(selection))
    code, out, err = run("report", res, "--selection", sel, "--out", html_)
    assert code == 0, err
    assert out.strip() == f"wrote {html_}"
    page = check_self_contained(html_.read_text(encoding="utf-8"))
    text = page.all_text()
    assert "101 rows × 15 columns" in text and "Rank selection: k = 3" in text
    assert text.count("Pattern ") >= 4 and "aardvark" in text and "feathers" in text
    assert sum(tag == "svg" and attrs.get("class") == "chart" for tag, attrs in page.elements) == 2
    for chart in check_structure(html_.read_text(encoding="utf-8"))["chart"]:
        assert len(marks(chart, "circle", "dot")) == 4 and len(marks(chart, "polyline")) == 1
    scores = Factorization.load(res).evaluate(X.X)
    assert f"{scores['false_negatives']:,} ones missed" in text
    # Data from a file (its labels), JSON on stdout.
    code, out, err = run("report", res, "--data", ZOO, "--out", tmp_path / "d.html", "--json")
    assert code == 0 and json.loads(out) == {
        "result": str(res),
        "report": str(tmp_path / "d.html"),
        "data": True,
    }
    # The destination is refused before any work; the input is never overwritten.
    assert run("report", res, "--out", tmp_path / "no" / "r.html")[0] == 2
    assert run("report", res, "--out", tmp_path / "r.txt")[0] == 2
    assert run("report", res, "--selection", res, "--out", tmp_path / "r.html")[0] == 2
    assert not (tmp_path / "r.html").exists()


def test_select_k_saves_the_selection_the_report_draws(tmp_path):
    res, sel, page = tmp_path / "z.npz", tmp_path / "sel.json", tmp_path / "z.html"
    assert run("factorize", ZOO, "-k", "3", "-q", "--out", res)[0] == 0
    # The destination is checked before any fit.
    assert run("select-k", ZOO, "--ks", "1:3", "--out", tmp_path / "sel.txt")[0] == 2
    code, out, err = run(
        "select-k",
        ZOO,
        "--ks",
        "1:3",
        "--criteria",
        "cv",
        "--max-iter",
        "30",
        "-q",
        "--json",
        "--out",
        sel,
    )
    assert code == 0, err
    assert json.loads(sel.read_text(encoding="utf-8")) == json.loads(out)
    assert run("report", res, "--selection", sel, "--out", page)[0] == 0
    text = check_self_contained(page.read_text(encoding="utf-8")).all_text()
    assert f"Rank selection: k = {json.loads(out)['best_k']}" in text
    # As a browser builds the page: each chart with its axes, its curve and a dot per rank.
    charts = check_structure(page.read_text(encoding="utf-8"))["chart"]
    assert len(charts) == 2  # training error, held-out error
    for chart in charts:
        assert len(marks(chart, "line", "axis")) == 2 and len(marks(chart, "polyline")) == 1
        assert len(marks(chart, "circle", "dot")) == len(json.loads(out)["ks"])


def test_held_out_scores_go_with_the_result_into_the_report(tmp_path):
    """factorize --hold-out keeps its scores with the result; the report shows them as the
    command line did."""
    res, page = tmp_path / "h.npz", tmp_path / "h.html"
    code, out, err = run("factorize", ZOO, "-k", "3", "--hold-out", "0.2", "--out", res, "--json")
    assert code == 0, err
    held = json.loads(out)["held_out"]
    assert Factorization.load(res).meta["held_out"] == held
    assert run("report", res, "--out", page)[0] == 0
    text = check_self_contained(page.read_text(encoding="utf-8")).all_text()
    assert f"{held['cells']} observed cells (20 %, seed 0): {held['errors']} wrong" in text


def test_the_image_counts_every_cell_of_a_small_matrix():
    X, W, H = make_boolean(50, 30, 3, density=0.3, noise=0.1, random_state=1)
    res = Factorization.from_factors(X, W, H)
    page = Page(report_html(res))
    (uri,) = [a["href"] for t, a in page.elements if t == "image"]
    pixels = decode_png(uri).reshape(-1, 3)
    assert len(pixels) == 50 * 30  # one pixel a cell
    colours = {tuple(c): n for c, n in zip(*np.unique(pixels, axis=0, return_counts=True))}
    scores = res.evaluate()
    assert colours.get((30, 110, 230), 0) == scores["false_negatives"]
    assert colours.get((225, 55, 40), 0) == scores["false_positives"]
    assert colours.get((25, 25, 25), 0) == X.nnz - scores["false_negatives"]
    assert "one pixel is one cell" in page.all_text()


def test_votes_with_unknown_cells():
    votes = load_votes("435")
    res = factorize(votes, 3, random_state=0, max_iter=50)
    text = report_html(res)
    page = check_self_contained(text)
    assert "unknown cells392" in page.all_text()  # the summary's row
    assert "unknown cell" in page.all_text()  # the legend's key
    (uri,) = [a["href"] for t, a in page.elements if t == "image"]
    pixels = decode_png(uri).reshape(-1, 3)
    assert (pixels == (185, 185, 185)).all(axis=1).sum() == 392


def test_a_larger_sparse_matrix_is_binned_and_small(tmp_path):
    X, W, H = make_sparse_tiles(10_000, 1_000, 60_000, 8, random_state=0)
    res = Factorization.from_factors(X, W, H)
    start = time.perf_counter()
    res.report(tmp_path / "big.html")
    seconds = time.perf_counter() - start
    text = (tmp_path / "big.html").read_text(encoding="utf-8")
    page = check_self_contained(text)
    text_ = page.all_text()
    assert "All 10,000 rows × 1,000 columns: one pixel is 15 rows × 1 column" in text_
    # The patterns hold a small part of the data: a second image has only their rows/columns.
    in_rows, in_cols = int(res.W.any(axis=1).sum()), int(res.H.any(axis=0).sum())
    assert f"Only the {in_rows:,} rows and {in_cols:,} columns in a pattern" in text_
    whole, patterns_only = [a["href"] for t, a in page.elements if t == "image"]
    assert decode_png(whole).shape == (667, 1000, 3)
    assert decode_png(patterns_only).shape[1] == in_cols
    assert len(text.encode()) < 2_000_000 and seconds < 10


def test_a_result_without_labels_or_data():
    X, W, H = make_boolean(20, 12, 2, density=0.4, random_state=2)
    res = Factorization.from_factors(X, W, H)
    text = Page(report_html(res)).all_text()
    assert "(factor 0)" in text and "rows × " in text
    without = res.replace(X=None)
    page = check_self_contained(report_html(without), images=False)
    assert "holds no copy of its data" in page.all_text()


def test_hostile_labels_are_text(tmp_path):
    X, W, H = make_boolean(6, 5, 2, density=0.5, random_state=4)
    W[:, 0] = H[0] = True  # every label is in a pattern
    hostile = [
        "<script>alert(1)</script>",
        "a\"b'c",
        "x" * 5000,
        "é ß 漢字 🙂",
        "</details><img src=https://example.com/x.png>",
        "&amp;",
    ]
    res = Factorization.from_factors(X, W, H, row_labels=hostile, col_labels=hostile[:5])
    res = res.replace(meta={"input": "<b>in.mtx</b>"}, method="<i>m</i>")
    res.report(tmp_path / "h.html", title="<title>t</title>")
    text = (tmp_path / "h.html").read_text(encoding="utf-8")
    page = check_self_contained(text, hostile=True)
    body = page.all_text()
    for label in hostile:
        assert label in body  # the parser gives back the names as they were: text, not markup
    assert "<script>alert" not in text and "<img src=https" not in text
    assert "<b>in.mtx</b>" in body and "<i>m</i>" in body


def test_a_bad_selection_or_other_data_is_refused(tmp_path):
    X, W, H = make_boolean(8, 6, 2, density=0.4, random_state=0)
    res = Factorization.from_factors(X, W, H)
    with pytest.raises(InputError, match="not a rank selection"):
        report_html(res, selection={"ks": [1]})
    with pytest.raises(InputError, match="factorization is of a 8×6"):
        report_html(res, np.ones((8, 7)))
    with pytest.raises(FileNotFoundError):
        res.report(tmp_path / "missing" / "r.html")


BROWSER = next(
    (shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)),
    None,
)


@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium installed")
def test_the_report_renders_in_a_browser(tmp_path):
    X, W, H = make_boolean(60, 40, 3, density=0.3, random_state=0)
    Factorization.from_factors(X, W, H).report(tmp_path / "r.html", selection=SELECTION)
    # The page as Chromium builds it (its DOM, serialized): every SVG element in place and
    # every chart with its marks.
    dom = subprocess.run(
        [
            BROWSER,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            (tmp_path / "r.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    charts = check_structure(dom)
    assert len(charts["chart"]) == 2 and len(charts["matrix"]) == 1
    for chart in charts["chart"]:
        assert len(marks(chart, "circle", "dot")) == 4 and len(marks(chart, "polyline")) == 1
    png = tmp_path / "r.png"
    subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "r.html"), str(png)], check=True, timeout=120
    )
    image = png.read_bytes()
    assert image[:8] == b"\x89PNG\r\n\x1a\n"
    (width,) = struct.unpack(">I", image[16:20])
    assert width == 1280


# -- the page as a browser builds it ---------------------------------------------------------

SVG_NS, HTML_NS = "{http://www.w3.org/2000/svg}", "{http://www.w3.org/1999/xhtml}"
#: SVG's own elements as the report writes them; shapes hold no element but a tooltip.
SVG_ELEMENTS = {"svg", "g", "line", "rect", "circle", "text", "path", "polyline", "image", "title"}
SHAPES = {"line", "rect", "circle", "path", "polyline", "image"}


def browser_tree(text: str):
    """The page parsed by the HTML5 algorithm (html5lib follows the browsers' rules): the root
    and every element with its ancestors, ``(element, ancestors)``, in document order."""
    html5lib = pytest.importorskip("html5lib")
    root = html5lib.parse(text, treebuilder="etree")
    found = []

    def walk(element, ancestors):
        found.append((element, ancestors))
        for child in element:
            if isinstance(child.tag, str):
                walk(child, ancestors + [element])

    walk(root, [])
    return root, found


def local(element) -> str:
    return element.tag.rsplit("}", 1)[-1]


def check_structure(text: str) -> dict:
    """Every SVG element is where it belongs: in the SVG namespace, inside an ``svg`` element,
    a shape holding nothing but a tooltip; no attribute swallowed a ``/``. Returns the ``svg``
    elements by class."""
    _, found = browser_tree(text)
    charts = {}
    for element, ancestors in found:
        name = local(element)
        for key, value in element.attrib.items():
            assert not value.endswith("/"), (name, key, value)
        if element.tag.startswith(SVG_NS):
            assert name in SVG_ELEMENTS, name
            assert name == "svg" or any(local(a) == "svg" for a in ancestors), name
            # A shape holds at most its tooltip, which holds only text.
            inside = ancestors[:-1] if name == "title" else ancestors
            assert not any(local(a) in SHAPES | {"title"} for a in inside), (name, element.attrib)
            if name == "svg":
                charts.setdefault(element.get("class"), []).append(element)
        else:
            assert name not in SVG_ELEMENTS - {"title"}, f"<{name}> outside an svg"
            if name == "title":  # the page's own title, not a tooltip
                assert [local(a) for a in ancestors][-1] == "head"
    return charts


def marks(svg, name: str, cls: str | None = None) -> list:
    return [e for e in svg.iter(SVG_NS + name) if cls is None or e.get("class") == cls]


#: A rank selection as select-k records it: two criteria drawn, k = 1..4, cv's choice 3.
SELECTION = {
    "ks": [1, 2, 3, 4],
    "per_k": [
        {
            "k": k,
            "training_error": 300 - 50 * k,
            "held_out_error": 0.3 - k / 50 + (k == 4) / 20,
            "held_out_se": 0.01,
        }
        for k in (1, 2, 3, 4)
    ],
    "choices": {"cv": 3},
    "best_k": 3,
}


def test_every_svg_element_is_where_a_browser_puts_it():
    X, W, H = make_boolean(60, 40, 3, density=0.3, noise=0.05, random_state=0)
    res = Factorization.from_factors(X, W, H)
    charts = check_structure(report_html(res, selection=SELECTION))
    assert len(charts["chart"]) == 2 and len(charts["matrix"]) == 1
    for chart in charts["chart"]:
        assert len(marks(chart, "line", "axis")) == 2
        assert len(marks(chart, "line", "best")) == 1
        assert len(marks(chart, "circle", "dot")) == 4
        (curve,) = marks(chart, "polyline", "curve")
        assert len(curve.get("points").split()) == 4
        assert [e.text for e in marks(chart, "text", "tick")][-5:] == ["1", "2", "3", "4", "k"]
    # The held-out chart: its error bars and the square on cv's own choice.
    assert len(marks(charts["chart"][1], "line", "bar")) == 4
    assert len(marks(charts["chart"][1], "rect", "choice")) == 1
    (matrix,) = charts["matrix"]
    assert len(marks(matrix, "image")) == 1
    (outlines,) = marks(matrix, "g", "outlines")
    assert len(marks(outlines, "rect")) == 3


def test_a_selection_or_data_of_other_data_is_refused(tmp_path):
    """A rank selection or --data of another file than the result's would be shown under the
    result's name: refused, in one line naming both, with exit code 2."""
    from banmf.io import write_matrix

    X, _, _ = make_boolean(40, 12, 2, density=0.4, random_state=0)
    rng = np.random.default_rng(1)
    p, noise, wide = tmp_path / "p.mtx", tmp_path / "noise.mtx", tmp_path / "wide.mtx"
    write_matrix(X, p)
    write_matrix(rng.random((40, 12)) < 0.3, noise)
    write_matrix(rng.random((40, 13)) < 0.3, wide)
    res, html_ = tmp_path / "p.npz", tmp_path / "p.html"
    assert run("factorize", p, "-k", "2", "-q", "--out", res)[0] == 0
    for data in (p, noise, wide):
        sel = tmp_path / f"sel_{data.stem}.json"
        code, _, err = run("select-k", data, "--ks", "1:2", "--criteria", "mdl", "-q", "--out", sel)
        assert code == 0, err
        record = json.loads(sel.read_text(encoding="utf-8"))
        assert record["input"] == str(data) and record["shape"] == [40, 13 if data == wide else 12]
    code, _, err = run("report", res, "--selection", tmp_path / "sel_p.json", "--out", html_)
    assert code == 0, err
    for other in ("noise", "wide"):
        code, _, err = run("report", res, "--selection", tmp_path / f"sel_{other}.json")
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert f"sel_{other}.json: the rank selection is of {tmp_path / other}.mtx (40×1" in err
        assert f"but the factorization is of {p} (40×12, sha256 " in err
    # Data of the result's shape from another file: refused, where evaluate only warns.
    code, _, err = run("report", res, "--data", noise, "--out", tmp_path / "n.html")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{noise} (sha256 " in err and f"is not the file {res} was fitted to, {p}" in err
    assert not (tmp_path / "n.html").exists()
    assert run("report", res, "--data", p, "--out", tmp_path / "d.html")[0] == 0
    code, _, err = run("evaluate", noise, res)
    assert code == 0 and "not the file" in err
    # In Python: a selection of another shape, as a dict or as select_rank returns it.
    other = select_rank(read_dataset(str(wide)), [1, 2], criteria=["mdl"], random_state=0)
    for selection in (other, json.loads((tmp_path / "sel_wide.json").read_text("utf-8"))):
        with pytest.raises(InputError, match="is of .*40×13.* but the factorization is of"):
            report_html(Factorization.load(res), selection=selection)


def card_facts(text: str) -> list[dict]:
    """Each pattern card's table as a browser shows it (not its folded lists): th → td."""
    root, _ = browser_tree(text)
    cards = []
    for article in root.iter(HTML_NS + "article"):
        table = next(article.iter(HTML_NS + "table"))
        facts = {}
        for tr in table.iter(HTML_NS + "tr"):
            th, td = tr.find(HTML_NS + "th"), tr.find(HTML_NS + "td")
            facts["".join(th.itertext())] = "".join(td.itertext())
        cards.append(facts)
    return cards


def test_a_card_shows_its_top_names_and_counts_in_words():
    """A one-column pattern reads as its column's name in the card itself, its size in the
    singular; a large one shows its first names and how many more."""
    n, m = 40, 12
    X, W, H = make_boolean(n, m, 2, density=0.4, random_state=3)
    W, H = W.copy(), H.copy()
    W[:, 0], H[0] = True, False
    H[0, 5] = True  # factor 0: every row, one column
    X = (W.astype(int) @ H.astype(int) > 0).astype(np.int8)
    cols = [f"pkg{j}" for j in range(m)]
    cols[5] = "libc6"
    res = Factorization.from_factors(
        X, W, H, col_labels=cols, row_labels=[f"host{i}" for i in range(n)]
    )
    text = report_html(res)
    cards = card_facts(text)
    (one,) = [c for c in cards if c["size"].startswith(f"{n} rows × 1 column =")]
    assert one["columns"] == "libc6"
    assert one["rows"] == "host0, host1, host2, host3, host4, host5, host6, host7 (+32 more)"
    assert one["size"] == f"{n} rows × 1 column = {n} cells"
    body = Page(text).all_text()
    assert not re.search(r"(?<![\d,.])1 (rows|columns|cells|ones)\b", body), body


def test_every_pattern_is_outlined_or_says_why_not():
    """A pattern whose columns are all grouped with another (they cover more of their ones)
    has no outline; the image's note and its card say so."""
    W = np.zeros((14, 2), bool)
    W[:10, 0] = W[10:, 1] = True
    H = np.zeros((2, 5), bool)
    H[0, :3] = H[1, :2] = True
    X = (W.astype(int) @ H.astype(int) > 0).astype(np.int8)
    text = report_html(Factorization.from_factors(X, W, H))
    charts = check_structure(text)
    (outlines,) = marks(charts["matrix"][0], "g", "outlines")
    assert len(marks(outlines, "rect")) == 1
    first, second = card_facts(text)
    assert "outline" not in first
    assert second["outline"] == (
        "none in the image: its columns are grouped with pattern 1, which covers at least as "
        "many of their ones"
    )
    assert "Pattern 2 has no outline" in Page(text).all_text()


def test_the_readable_image_comes_first():
    """On a large sparse matrix the image of all the data is faint dust: the patterns' rows
    and columns come first. Where it shows the patterns, it stays first."""
    rng = np.random.default_rng(0)
    n, m = 14_000, 20_000  # 20 × 20 cells a pixel
    rows, cols = rng.integers(0, n, 20_000), rng.integers(0, m, 20_000)
    X = sp.csr_array((np.ones(20_000, np.int8), (rows, cols)), shape=(n, m))
    W, H = np.zeros((n, 1), bool), np.zeros((1, m), bool)
    W[:500, 0] = H[0, :5] = True
    X = ((X + sp.csr_array(W.astype(np.int8)) @ sp.csr_array(H.astype(np.int8))) > 0).astype(
        np.int8
    )
    page = Page(report_html(Factorization.from_factors(X, W, H)))
    captions = [c for c in page.text if "one pixel is" in c]
    assert captions[0].startswith("Only the 500 rows and 5 columns in a pattern")
    assert captions[1].startswith("All 14,000 rows × 20,000 columns")
    assert "comes first: in that of all the data, fewer than 1 pixel in 500" in page.all_text()
