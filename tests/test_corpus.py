"""The corpus of seeded fits: every fixed-configuration result must not change.

``tests/corpus.json`` holds, for a set of seeded fits of every registered method (BANMF in the
paper's configuration, :data:`banmf.PAPER_CONFIG`, and in its default pipeline; every baseline
with fixed parameters) on three small inputs (the bundled Zoo, planted data with noise from
:func:`banmf.make_boolean`, a sparse :func:`banmf.make_sparse_tiles` matrix), each with every
cell observed, with a random 5% of cells unknown (``missing=``) and, for a few methods, with
40% of cells observed (``observed=``), a digest of the result: the shapes and the sha256 of W
and H as packed bits, the Boolean error, ``n_iter``, for BANMF the starts' errors and the start
kept, and for the methods with a relaxed objective its last value.

Each fit is recomputed with ``n_jobs=1`` and ``n_jobs=2`` (the same seed gives the same
result whatever the thread budget: a promise of the package), and compared with the record;
a failure names the fit, the thread budget and the fields that differ. Under pytest, the
conftest makes BANMF run its starts side by side (``PARALLEL_STARTS_MIN_COST = 0``), while
``--record`` runs them as a user's small fit would (one after the other): the record and the
test together check that both give the same. The test takes ~11 s of CPU for its fits
(~20 s for the whole module with imports, warm numba cache, on 2 cores).

How exact the comparison is (a test must hold on any x86-64 CPU, not only on the one that
recorded it):

- float64 fits: every field exactly, except the relaxed objective, to a relative 1e-9 (a change
  of code that keeps the factors may reassociate its float sums). Their order of summation is
  fixed by the code (explicit vectors of a fixed width), so no CPU moves their Boolean
  decisions.
- float32 fits: the objective to a relative ``cells · u`` (:func:`float32_rtol`, u = 2⁻²⁴ the
  unit roundoff of float32, cells = n·m the length of the objective's sums): the sums are
  reassociated by LLVM (``fastmath`` reassociation), so their bits follow the CPU's vector
  width (AVX2, AVX-512, the generic x86-64 target under ``NUMBA_CPU_NAME=generic``). Where
  the objective reproduces to 1e-9 the float arithmetic was the recorded one, and the
  factors, errors, iterations and starts must then be exactly the recorded ones too. Where
  it does not, a float32 rounding may flip a threshold decision, so the guarantee checked is
  the cross-machine one: the Boolean error within :func:`float32_error_slack` of the record,
  the iteration count within 10 %, and, on this machine, the same factors for ``n_jobs=1``
  and ``n_jobs=2`` (the same seed gives the same result whatever the thread budget).
- Other numpy, scipy and numba versions (CI also runs the lowest supported ones: numpy
  1.26.0, scipy 1.11.1, numba 0.59.0) are held to the same rules: the factors of every fit
  were found identical there. The Boolean-only greedy methods (asso, grecond, panda) have no
  objective. If another version moves a float64 fit, the failure says which versions were
  recorded and which ran: decide then whether it is legitimate.

To re-record (only when a change of results is intended, and say why in the commit)::

    python tests/test_corpus.py --record

which refits every case with ``n_jobs=1``, checks that ``n_jobs=2`` gives the same, and
rewrites ``tests/corpus.json`` (one line per fit) with the library versions it used.
``python tests/test_corpus.py --check`` runs the comparison without pytest and prints every
difference. (Two numba versions run on one source tree overwrite each other's kernel cache:
the first run after switching recompiles, minutes.)
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import platform
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import banmf

CORPUS = Path(__file__).with_name("corpus.json")

#: Relative tolerance of a float64 fit's relaxed objective (everything else is compared
#: exactly; module docstring).
OBJECTIVE_RTOL = 1e-9

#: The unit roundoff of float32: the relative error of one rounding.
FLOAT32_U = float(np.finfo(np.float32).eps) / 2

K = 4


# --------------------------------------------------------------------------- inputs


@functools.cache
def dataset(name: str):
    """The inputs, as canonical 0/1 CSR arrays (deterministic: seeds fixed here)."""
    if name == "zoo":
        return banmf.datasets.load_zoo().X  # 101×15, 660 ones
    if name == "planted":
        X, _, _ = banmf.make_boolean(40, 30, K, density=0.3, noise=0.05, random_state=0)
        return X  # 40×30, 271 ones
    if name == "tiles":
        X, _, _ = banmf.make_sparse_tiles(150, 80, 500, K, random_state=0)
        return X  # 150×80, 477 ones
    raise KeyError(name)


@functools.cache
def unknown_cells(name: str, form: str):
    """``{"missing": mask}`` (5% of cells unknown), ``{"observed": mask}`` (40% observed),
    or ``{}``; the masks are seeded, as bool CSR arrays."""
    if form == "all":
        return {}
    shape = dataset(name).shape
    rng = np.random.default_rng(12345)
    if form == "missing":
        return {"missing": sp.csr_array(rng.random(shape) < 0.05)}
    if form == "observed":
        return {"observed": sp.csr_array(rng.random(shape) < 0.4)}
    raise KeyError(form)


# --------------------------------------------------------------------------- the fits

#: name -> (method, fixed parameters). Iteration counts are capped where a default fit would
#: take long; BANMF's "default" keeps every default (the pipeline users get).
CONFIGS = {
    "banmf-paper": ("banmf", dict(banmf.PAPER_CONFIG)),
    "banmf-default": ("banmf", {}),
    "banmf-paper-float32": ("banmf", {**banmf.PAPER_CONFIG, "dtype": "float32"}),
    "banmf-default-float32": ("banmf", {"dtype": "float32"}),
    "banmf-grecond-start": ("banmf", {"n_init": 2, "extra_starts": ("grecond",)}),
    "reg-banmf": ("reg-banmf", {"n_init": 2, "max_iter": 300}),
    "nmf": ("nmf", {}),
    "reg-nmf": ("reg-nmf", {}),
    "asso": ("asso", {}),
    "asso-tau-polish": ("asso", {"tau": 0.6, "polish": True}),
    "pnlpf": ("pnlpf", {}),
    "zhang-threshold": ("zhang-threshold", {}),
    "grecond": ("grecond", {}),
    "grecond-k-none": ("grecond", {"n_components": None}),
    "message-passing": ("message-passing", {}),
    "ormachine": ("ormachine", {"max_iter": 100}),
    "ormachine-2-chains": ("ormachine", {"max_iter": 50, "n_init": 2}),
    "panda": ("panda", {}),
    "panda-polish": ("panda", {"polish": True}),
    "elbmf": ("elbmf", {"max_iter": 500}),
    "elbmf-float32": ("elbmf", {"max_iter": 500, "dtype": "float32"}),
}

DATASETS = ("zoo", "planted", "tiles")

#: Configurations also fitted with ``observed=`` (ASSO and GreConD take ``missing`` only), on
#: the inputs named (BANMF's default pipeline, its slowest fit, on one).
OBSERVED_FORM = {
    "banmf-paper": DATASETS,
    "banmf-default": ("planted",),
    "nmf": DATASETS,
    "message-passing": DATASETS,
    "panda": DATASETS,
    "elbmf": DATASETS,
}

#: Variants fitted on one input only (to keep the test short).
ONE_INPUT = {
    "banmf-paper-float32": "planted",
    "banmf-default-float32": "zoo",
    "banmf-grecond-start": "zoo",
    "asso-tau-polish": "tiles",
    "grecond-k-none": "planted",
    "ormachine-2-chains": "planted",
    "panda-polish": "zoo",
    "elbmf-float32": "planted",
}


def inputs() -> dict:
    """The sha256 of every input and mask, as dense packed bits (recorded too: a failure of
    the fits then tells a changed generator from a changed method)."""
    out = {}
    for data in DATASETS:
        for form in ("all", "missing", "observed"):
            X = dataset(data) if form == "all" else unknown_cells(data, form)[form]
            out[f"{data}/{form}"] = _sha(X.toarray().astype(bool))
    return out


def cases() -> list[str]:
    """Every fit of the corpus, as ``"input/configuration/unknown cells"``."""
    out = []
    for config in CONFIGS:
        for data in DATASETS:
            if ONE_INPUT.get(config, data) != data:
                continue
            observed = data in OBSERVED_FORM.get(config, ())
            forms = ("all", "missing") + (("observed",) if observed else ())
            out += [f"{data}/{config}/{form}" for form in forms]
    return out


def fit(case: str, n_jobs: int) -> banmf.Factorization:
    data, config, form = case.split("/")
    method, params = CONFIGS[config]
    params = dict(params)
    k = params.pop("n_components", K)
    if "dtype" in params:
        params["dtype"] = np.dtype(params["dtype"]).type
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", banmf.ConvergenceWarning)
        return banmf.factorize(
            dataset(data),
            k,
            method,
            random_state=0,
            n_jobs=n_jobs,
            **unknown_cells(data, form),
            **params,
        )


def _sha(a: np.ndarray) -> str:
    a = np.asarray(a)
    assert a.dtype == np.bool_, a.dtype
    h = hashlib.sha256(repr(a.shape).encode())
    h.update(np.packbits(np.ascontiguousarray(a), axis=None).tobytes())
    return h.hexdigest()


def digest(result: banmf.Factorization) -> dict:
    """What the corpus keeps of a fit (JSON-able)."""
    d = {
        "W_shape": list(result.W.shape),
        "H_shape": list(result.H.shape),
        "W_sha256": _sha(result.W),
        "H_sha256": _sha(result.H),
        "error": int(result.error),
        "n_iter": int(result.n_iter),
    }
    est = result.estimator
    if isinstance(est, banmf.BANMF):
        d["init_errors"] = [int(e) for e in est.init_errors_]
        d["extra_start_errors"] = {k: int(v) for k, v in est.extra_start_errors_.items()}
        d["best_start"] = est.best_start_
        d["unpolished_err"] = int(est.unpolished_err_)
    curve = result.loss_curve
    if curve is not None and len(curve):
        d["objective"] = float(curve[-1])
    return d


def differences(expected: dict, got: dict, rtol: float = OBJECTIVE_RTOL) -> list[str]:
    """The fields where ``got`` differs from ``expected``, described (the objective compared
    to a relative ``rtol``, everything else exactly)."""
    out = []
    for name in sorted(set(expected) | set(got)):
        a, b = expected.get(name), got.get(name)
        if name == "objective" and isinstance(a, float) and isinstance(b, float):
            if math.isclose(a, b, rel_tol=rtol, abs_tol=1e-300):
                continue
        elif a == b:
            continue
        out.append(f"{name}: recorded {a!r}, got {b!r}")
    return out


def float32_rtol(case: str) -> float:
    """The relative tolerance of a float32 fit's objective: ``cells · u``, the classic bound
    on the relative error of a sum of ``cells`` nonnegative terms reassociated in float32."""
    n, m = dataset(case.split("/")[0]).shape
    return n * m * FLOAT32_U


def float32_error_slack(error: int) -> int:
    """How far a float32 fit's Boolean error may move when a rounding flips a threshold
    decision on another CPU: 2 % of the recorded error, at least 2 cells."""
    return max(2, math.ceil(0.02 * error))


def float32_differences(expected: dict, got: dict, case: str) -> list[str]:
    """:func:`differences` for a float32 fit, under the guarantee its arithmetic allows
    (module docstring): exact where the objective reproduces to 1e-9; else the objective
    within :func:`float32_rtol`, the error within :func:`float32_error_slack` and the
    iterations within 10 %."""
    exact = differences(expected, got)
    if not any(line.startswith("objective:") for line in exact):
        return exact
    out = [
        line
        for line in differences(expected, got, float32_rtol(case))
        if line.startswith("objective:")
    ]
    a, b = expected["error"], got["error"]
    if abs(a - b) > float32_error_slack(a):
        out.append(f"error: recorded {a}, got {b} (more than {float32_error_slack(a)} apart)")
    a, b = expected["n_iter"], got["n_iter"]
    if abs(a - b) > 0.1 * a:
        out.append(f"n_iter: recorded {a}, got {b} (more than 10 % apart)")
    return out


def is_float32(case: str) -> bool:
    return "float32" in str(CONFIGS[case.split("/")[1]][1].get("dtype"))


def compare(expected: dict, got: dict, case: str) -> list[str]:
    """The differences that fail ``case`` (module docstring: how exact)."""
    if is_float32(case):
        return float32_differences(expected, got, case)
    return differences(expected, got)


def versions() -> dict:
    import numba
    import scipy

    return {"numpy": np.__version__, "scipy": scipy.__version__, "numba": numba.__version__}


@functools.cache
def corpus() -> dict:
    return json.loads(CORPUS.read_text(encoding="utf-8"))


def same_versions() -> bool:
    return corpus()["versions"] == versions()


# --------------------------------------------------------------------------- tests


def test_the_corpus_covers_every_method_and_every_case():
    fitted = {CONFIGS[case.split("/")[1]][0] for case in cases()}
    assert fitted == set(banmf.METHODS), "a method of banmf.METHODS has no fit in the corpus"
    assert set(corpus()["fits"]) == set(cases()), (
        "tests/corpus.json does not hold the cases of this module: re-record it "
        "(python tests/test_corpus.py --record)"
    )


def test_the_inputs_are_those_recorded():
    assert inputs() == corpus()["inputs"], (
        "an input of the corpus changed (a generator, the bundled Zoo or the masks): the fits "
        "below are then not comparable"
    )


@pytest.mark.parametrize("case", cases())
def test_fit_matches_the_corpus(case):
    expected = corpus()["fits"][case]
    problems, digests = [], []
    for n_jobs in (1, 2):
        digests.append(digest(fit(case, n_jobs)))
        problems += [f"n_jobs={n_jobs}: {p}" for p in compare(expected, digests[-1], case)]
    # The thread budget never changes a result, on any machine and in any precision.
    problems += [f"n_jobs=2 against n_jobs=1: {p}" for p in differences(*digests)]
    where = (
        "" if same_versions() else f" (recorded with {corpus()['versions']}, running {versions()})"
    )
    assert not problems, f"{case} differs from the corpus{where}:\n  " + "\n  ".join(problems)


def test_float32_comparison_holds_its_guarantee():
    """A float32 fit whose sums came out in other bits passes with the same factors or a
    flipped decision within the slack, and fails past the slack or the objective's bound."""
    case = "zoo/banmf-default-float32/all"
    recorded = {"W_sha256": "a", "error": 100, "n_iter": 50, "objective": 30.0}
    rounded = {**recorded, "objective": 30.0 * (1 + 1e-7)}
    assert compare(recorded, rounded, case) == []
    assert compare(recorded, {**rounded, "W_sha256": "b", "error": 102}, case) == []
    assert compare(recorded, {**rounded, "error": 103}, case)  # past 2 % of 100
    assert compare(recorded, {**rounded, "n_iter": 60}, case)
    assert compare(recorded, {**recorded, "objective": 30.0 * (1 + 1e-3)}, case)
    # Reproduced to 1e-9: the arithmetic was the recorded one, so the factors must be too.
    assert compare(recorded, {**recorded, "W_sha256": "b"}, case)
    # float64: exact but for the objective's 1e-9.
    assert compare(recorded, rounded, "zoo/banmf-default/all")


# --------------------------------------------------------------------------- recording


def dumps(payload: dict) -> str:
    """JSON with one line per fit and per input (diffs of a re-recording stay readable)."""
    lines = ["{"]
    for i, (key, value) in enumerate(sorted(payload.items())):
        end = "," if i < len(payload) - 1 else ""
        if isinstance(value, dict) and key in ("fits", "inputs"):
            items = [
                f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}"
                for k, v in sorted(value.items())
            ]
            lines += [f" {json.dumps(key)}: {{", ",\n".join(items), f" }}{end}"]
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, sort_keys=True)}{end}")
    return "\n".join(lines + ["}"]) + "\n"


def record() -> int:
    fits, unstable = {}, []
    for case in cases():
        one = digest(fit(case, 1))
        two = digest(fit(case, 2))
        if differences(one, two):
            unstable.append(f"{case}: n_jobs=2 differs: {differences(one, two)}")
        fits[case] = one
        print(f"{case:45} error {one['error']:4} n_iter {one['n_iter']}", file=sys.stderr)
    payload = {
        "about": "Digests of seeded fits; see tests/test_corpus.py (re-record with --record).",
        "versions": versions(),
        "python": platform.python_version(),
        "banmf": banmf.__version__,
        "inputs": inputs(),
        "fits": fits,
    }
    CORPUS.write_text(dumps(payload), encoding="utf-8")
    print(f"wrote {len(fits)} fits to {CORPUS}", file=sys.stderr)
    for line in unstable:
        print("NOT DETERMINISTIC:", line, file=sys.stderr)
    return 1 if unstable else 0


def check() -> int:
    bad = 0
    for case in cases():
        expected = corpus()["fits"].get(case)
        for n_jobs in (1, 2):
            got = digest(fit(case, n_jobs))
            diff = ["not recorded"] if expected is None else compare(expected, got, case)
            if diff:
                bad += 1
                print(f"{case} n_jobs={n_jobs}: " + "; ".join(diff))
    print(f"{bad} differences; recorded with {corpus()['versions']}, running {versions()}")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--record"]:
        sys.exit(record())
    if sys.argv[1:] == ["--check"]:
        sys.exit(check())
    sys.exit(f"usage: python {sys.argv[0]} --record | --check")
