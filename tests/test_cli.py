"""The banmf command, through main([...]) (and the installed entry point once)."""

import io
import json
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from banmf import boolean_error
from banmf.cli import Progress, main
from banmf.datasets import data_dir
from banmf.io import load_result, read_matrix

ZOO = str(data_dir() / "zoo_101x15.mtx")


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_factorize_summary_json_and_saved_result(tmp_path):
    code, out, err = run("factorize", ZOO, "-k", "3", "--max-iter", "200")
    assert code == 0 and "relative error" in out and "101×15" in out
    assert "refinement      grid" in out and "best of 10 starts" in out
    code, out, _ = run(
        "factorize",
        ZOO,
        "-k",
        "3",
        "--max-iter",
        "200",
        "--json",
        "--param",
        "n_init=1",
        "--param",
        "polish=false",
    )
    rec = json.loads(out)
    assert rec["n_init"] == 1 and rec["refinement"]["per-factor thresholds"] == rec["error"]
    assert "polish" not in rec["refinement"]
    res = tmp_path / "zoo.npz"
    code, out, _ = run(
        "factorize",
        ZOO,
        "-k",
        "3",
        "--method",
        "asso",
        "--param",
        "tau=0.6",
        "--json",
        "--out",
        str(res),
    )
    rec = json.loads(out)
    assert code == 0 and rec["method"] == "asso" and rec["shape"] == [101, 15]
    saved = load_result(res)
    X = read_matrix(ZOO)
    assert (
        rec["error"]
        == boolean_error(X, saved.W, saved.H)
        == rec["false_negatives"] + rec["false_positives"]
    )
    assert saved.params["tau"] == 0.6 and len(saved.meta["input_sha256"]) == 64


def test_progress_with_a_setup_and_an_unknown_total(monkeypatch):
    from banmf.runtime.progress import StartProgress

    stream = io.StringIO()
    monkeypatch.setattr(Progress, "LOG_EVERY", 0.05)
    with Progress(stream, "fitting grecond") as progress:
        reporter = StartProgress(1, 1, None)
        reporter.setup("the candidates")
        time.sleep(0.08)
        assert progress.status == "fitting grecond: the candidates" and not progress.fractions
        reporter.last = -1.0
        reporter.iteration(7, 123.0)
        time.sleep(0.08)
    lines = stream.getvalue().splitlines()
    assert any("the candidates" in line for line in lines)
    step = [line for line in lines if "iteration 7:" in line]
    assert step and all("to go" not in line for line in step)  # no share known: no estimate


def test_progress_says_which_start_where_and_how_long(monkeypatch):
    from banmf.runtime.progress import StartProgress

    stream = io.StringIO()
    progress = Progress(stream, "fitting banmf")
    monkeypatch.setattr(Progress, "LOG_EVERY", 0.05)  # the quiet first seconds, shortened
    with progress:
        reporters = [StartProgress(i, 2, 4) for i in (1, 2)]
        for t in range(1, 5):
            for r in reporters:
                r.last = -1.0  # no throttling here
                r.iteration(t, 10.0 / t)
            time.sleep(0.06)
        reporters[0].phase("polish")
        time.sleep(0.15)
    lines = stream.getvalue().splitlines()
    assert any(
        line.startswith("start ") and "iteration" in line and "objective" in line for line in lines
    )
    assert any("to go" in line for line in lines)  # an estimate of the time left
    assert lines[-1].startswith("start 1/2: polish")


def test_a_quick_run_is_quiet_and_compilation_is_reported_apart():
    code, out, err = run("factorize", ZOO, "-k", "2", "--max-iter", "20", "--json")
    rec = json.loads(out)
    assert code == 0 and rec["compile_seconds"] >= 0 and rec["seconds"] >= 0
    assert "iteration" not in err  # under the 2 s before a non-terminal stream hears anything


def test_jobs_option(tmp_path):
    results = []
    for jobs in ("1", "2", "-1"):
        code, out, err = run(
            "factorize",
            ZOO,
            "-k",
            "3",
            "--max-iter",
            "100",
            "--jobs",
            jobs,
            "--json",
            "--param",
            "n_init=4",
        )
        assert code == 0, err
        results.append(json.loads(out)["error"])
    assert len(set(results)) == 1  # the thread count never changes the result
    code, _, err = run("factorize", ZOO, "-k", "3", "--jobs", "0")
    assert code == 2 and "n_jobs" in err and err.count("\n") == 1
    code, _, err = run("factorize", ZOO, "-k", "3", "--jobs", "two")
    assert code == 2


def test_every_method_runs_from_the_command_line():
    from banmf import METHODS

    for method in METHODS:
        iterates = "max_iter" in METHODS[method]._param_names()
        extra = ["--max-iter", "20"] if iterates else []
        code, out, err = run("factorize", ZOO, "-k", "2", "--method", method, "--json", *extra)
        assert code == 0, err
        assert json.loads(out)["n_components"] == 2


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_writes_the_result_so_far(tmp_path, monkeypatch, jobs):
    import os
    import signal

    emit = Progress.emit
    sent = []

    def interrupting(self, record):
        emit(self, record)
        if record.banmf["event"] == "iteration" and not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, from whichever thread reports

    monkeypatch.setattr(Progress, "emit", interrupting)
    res = tmp_path / "r.npz"
    code, out, err = run("factorize", ZOO, "-k", "3", "--jobs", jobs, "--out", str(res))
    assert code == 130 and "interrupted" in out and "interrupted" in err, err
    saved = load_result(res)
    assert saved.interrupted and 1 <= saved.n_iter < 1000
    assert not list(tmp_path.glob(".*tmp"))


def test_info_generate_evaluate_plot(tmp_path):
    code, out, _ = run("info", ZOO, "--json")
    rec = json.loads(out)
    assert code == 0 and rec["nnz"] == 660 and rec["empty_rows"] == 0 and rec["duplicate_rows"] > 0
    gen, fac = tmp_path / "g.mtx.gz", tmp_path / "planted.npz"
    code, out, _ = run(
        "generate",
        str(gen),
        "-n",
        "60",
        "-m",
        "40",
        "-k",
        "3",
        "--density",
        "0.3",
        "--noise",
        "0.01",
        "--factors",
        str(fac),
        "--json",
    )
    assert code == 0 and read_matrix(gen).shape == (60, 40)
    planted_error = json.loads(out)["planted_error"]
    code, out, _ = run("evaluate", str(gen), str(fac), "--json")
    assert code == 0 and json.loads(out)["error"] == planted_error
    pytest.importorskip("matplotlib")
    png = tmp_path / "p.png"
    code, out, _ = run("plot", str(fac), "--out", str(png))
    assert code == 0 and png.read_bytes()[:4] == b"\x89PNG" and "matrices" in out
    res = tmp_path / "r.npz"
    run("factorize", str(gen), "-k", "3", "--max-iter", "30", "--out", str(res))
    code, out, _ = run("plot", str(res), "--data", str(gen), "--out", str(tmp_path / "q.png"))
    assert code == 0


def test_summary_plot_for_large_or_unembedded_data(tmp_path):
    pytest.importorskip("matplotlib")
    res = tmp_path / "r.npz"
    run("factorize", ZOO, "-k", "3", "--max-iter", "30", "--out", str(res))
    saved = load_result(res)
    from banmf.report.plots import plot_result

    assert plot_result(saved, tmp_path / "s.png", X=None) == "summary"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["factorize", "missing.mtx", "-k", "2"], "no such file"),
        (["factorize", ZOO, "-k", "0"], "argument -k: expected a positive integer, got 0"),
        (["factorize", ZOO, "-k", "2", "--method", "svd"], "unknown method 'svd'"),
        (["factorize", ZOO, "-k", "2", "--param", "alpha=1"], "has no such parameter"),
        (["factorize", ZOO, "-k", "2", "--param", "oops"], "KEY=VALUE"),
        (["factorize", ZOO, "-k", "2", "--method", "asso", "--max-iter", "3"], "does not iterate"),
        (
            ["factorize", ZOO, "-k", "2", "--param", "init=custom"],
            "--param init=custom: the command line has no way to pass starting factors",
        ),
        (["evaluate", ZOO, "missing.npz"], "no such file"),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, message):
    code, out, err = run(*argv)
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


def test_bad_usage_and_help():
    assert run("factorize")[0] == 2
    assert run("frobnicate")[0] == 2
    assert run("--help")[0] == 0


def test_shape_mismatch_in_evaluate(tmp_path):
    res = tmp_path / "r.npz"
    run("factorize", ZOO, "-k", "2", "--max-iter", "10", "--out", str(res))
    code, _, err = run("evaluate", str(data_dir() / "votes_232x16.mtx"), str(res))
    assert code == 2 and "factorizes a 101×15 matrix" in err


def test_internal_error_exits_1(monkeypatch):
    import banmf.cli.data

    monkeypatch.delenv("BANMF_DEBUG", raising=False)
    # A bug in the library below info (its reader, here): exit 1, said as a bug.
    monkeypatch.setattr(banmf.cli.data, "read_input", lambda *args: 1 / 0)
    code, _, err = run("info", ZOO)
    assert code == 1 and "internal error: ZeroDivisionError" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("kind", [ValueError, TypeError, KeyError])
def test_a_plain_exception_inside_a_command_is_an_internal_error(monkeypatch, kind):
    import banmf.api

    def broken(*args, **kwargs):
        raise kind("an invariant broke")

    monkeypatch.delenv("BANMF_DEBUG", raising=False)
    # Only banmf's own errors are the user's: a ValueError from deep in the library is a bug.
    monkeypatch.setattr(banmf.api, "factorize", broken)
    code, out, err = run("factorize", ZOO, "-k", "2")
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert f"internal error: {kind.__name__}: " in err and "an invariant broke" in err
    assert "please report" in err and "--debug or BANMF_DEBUG=1" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["select-k", ZOO, "--ks", "1:2", "--folds", "100"],
            "--folds 100 is more than the input supports",
        ),
        (
            ["factorize", ZOO, "-k", "2", "--method", "pnlpf", "--param", "dense_budget=100"],
            "exceeds dense_budget=100",
        ),
        (["factorize", ZOO, "-k", "2", "--missing", "ALL"], "every cell of the input is unknown"),
        (["evaluate", ZOO, "GARBAGE"], "not a banmf result file"),
        (["factorize", ZOO, "-k", "2", "--out", "FOLDER"], "is a directory"),
    ],
)
def test_the_librarys_refusals_of_the_input_exit_2(tmp_path, argv, message):
    from banmf.io import write_matrix

    every_cell = tmp_path / "all.mtx"
    write_matrix(np.ones((101, 15), dtype=bool), every_cell)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip archive")
    folder = tmp_path / "folder.npz"
    folder.mkdir()
    named = {"ALL": every_cell, "GARBAGE": garbage, "FOLDER": folder}
    argv = [str(named.get(a, a)) for a in argv]
    code, out, err = run(*argv)
    assert code == 2 and message in err, err
    assert err.count("\n") == 1 and "internal error" not in err


def test_a_missing_optional_dependency_is_the_users_to_install(tmp_path, monkeypatch):
    import sys

    res = tmp_path / "r.npz"
    run("factorize", ZOO, "-k", "2", "--max-iter", "10", "--out", str(res))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    code, out, err = run("plot", str(res), "--out", str(tmp_path / "p.png"))
    assert code == 2 and "plotting needs matplotlib: pip install" in err
    assert err.count("\n") == 1 and "internal error" not in err


def test_a_bad_memory_limit_is_the_users_error(monkeypatch):
    monkeypatch.setenv("BANMF_MEMORY_LIMIT", "lots")
    code, _, err = run("info", ZOO)
    assert code == 2 and "BANMF_MEMORY_LIMIT='lots' is not a size" in err


@pytest.mark.parametrize("how", ["option", "environment"])
def test_debug_shows_the_traceback_of_an_internal_error(monkeypatch, how):
    import banmf.cli.data

    monkeypatch.setattr(banmf.cli.data, "read_input", lambda *args: 1 / 0)
    monkeypatch.delenv("BANMF_DEBUG", raising=False)
    if how == "environment":
        monkeypatch.setenv("BANMF_DEBUG", "1")
    code, _, err = run(*(["--debug"] if how == "option" else []), "info", ZOO)
    assert code == 1 and "Traceback (most recent call last)" in err and "1 / 0" in err
    assert err.strip().splitlines()[-1].startswith("banmf: internal error: ZeroDivisionError")
    # Bad input stays one line, with or without --debug.
    monkeypatch.undo()
    code, _, err = run("--debug", "info", "nothere.mtx")
    assert code == 2 and "Traceback" not in err


def test_installed_entry_point_and_module():
    exe = shutil.which("banmf")
    cmd = [exe] if exe else [sys.executable, "-m", "banmf"]
    done = subprocess.run(
        [*cmd, "info", ZOO, "--json"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and json.loads(done.stdout)["nnz"] == 660
    done = subprocess.run(
        [sys.executable, "-m", "banmf", "factorize", "nothere.mtx", "-k", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "no such file" in done.stderr


def test_extra_starts_on_the_command_line():
    """A comma list of bare words is a tuple; the refinement line names the extra starts and,
    when one of them is kept, which."""
    code, out, err = run(
        "factorize", ZOO, "-k", "3", "--param", "n_init=1", "--param", "extra_starts=nmf,columns"
    )
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("refinement"))
    assert line.endswith("best of 1 start + nmf, columns, combined)")
    code, out, err = run(
        "factorize", ZOO, "-k", "3", "--param", "n_init=1", "--param", "extra_starts=grecond,"
    )
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("refinement"))
    assert "+ grecond, combined)" in line
    code, out, err = run("factorize", ZOO, "-k", "3", "--json", "--param", "extra_starts=()")
    rec = json.loads(out)
    assert code == 0 and "extra" not in str(rec["refinement"])
    code, out, err = run("factorize", ZOO, "-k", "3", "--param", "extra_starts=nmf,random")
    assert code == 2 and "extra_starts" in err


def test_factorize_json_holds_the_parameters_and_the_version():
    from banmf import __version__

    code, out, err = run("factorize", ZOO, "-k", "3", "--json", "-q", "--param", "swap=false")
    rec = json.loads(out)
    assert code == 0, err
    assert rec["version"] == __version__
    assert rec["params"]["n_components"] == 3 and rec["params"]["swap"] is False
    assert rec["params"]["random_state"] == 0


VOTES = str(data_dir() / "votes_435x16_yes.mtx")
VOTES_MASK = str(data_dir() / "votes_435x16_missing_mask.mtx")


def test_votes_with_their_unknown_cells_fit_complete_and_hold_out(tmp_path):
    from banmf.datasets import load_votes

    code, out, _ = run("info", VOTES, "--missing", VOTES_MASK)
    assert code == 0 and "unknown cells   392 (5.63 %)" in out
    res = tmp_path / "v.npz"
    code, out, _ = run("factorize", VOTES, "-k", "3", "--missing", VOTES_MASK, "--out", str(res))
    assert code == 0, out
    assert "unknown         392 cells (5.63 %), left out of the fit" in out
    assert "on the 6568 cells fitted" in out
    saved = load_result(res)
    votes = load_votes("435")
    assert saved.missing.nnz == 392
    assert saved.error == boolean_error(votes.X, saved.W, saved.H, missing=votes.missing)
    # evaluate counts the cells the fit saw, as recorded in the result
    code, out, _ = run("evaluate", VOTES, str(res), "--json")
    assert json.loads(out)["error"] == saved.error and json.loads(out)["unknown_cells"] == 392
    # complete: the filled-in cells as CSV, or the completed matrix written
    code, out, err = run("complete", VOTES, str(res))
    lines = out.splitlines()
    assert code == 0 and lines[0] == "row,column,value" and len(lines) == 393
    assert lines[1].startswith("0:republican,") and "392 unknown cells filled in" in err
    filled = tmp_path / "filled.csv"
    code, out, _ = run("complete", VOTES, str(res), "--out", str(filled))
    assert code == 0 and f"wrote {filled}: 435×16, 392 unknown cells filled in" in out
    completed = read_matrix(filled)
    assert (completed.toarray() >= votes.X.toarray()).all()
    assert completed.nnz == votes.X.nnz + sum(int(line.rsplit(",", 1)[1]) for line in lines[1:])
    # --hold-out: the hidden cells are scored
    code, out, _ = run(
        "factorize", VOTES, "-k", "3", "--missing", VOTES_MASK, "--hold-out", "0.1", "--json"
    )
    rec = json.loads(out)
    held = rec["held_out"]
    assert held["cells"] == round(0.1 * 3421) + round(0.1 * (6960 - 3421 - 392))
    assert 0 <= held["errors"] <= held["cells"] and rec["unknown_cells"] == 392


def test_hold_out_scores_the_fits_predictor_and_names_w_h_beside_it(tmp_path):
    from banmf import predict_cells
    from banmf.datasets import load_votes
    from banmf.io import Dataset
    from banmf.model_selection import hold_out

    res = tmp_path / "h.npz"
    argv = ("factorize", VOTES, "-k", "5", "--missing", VOTES_MASK, "--hold-out", "0.2")
    code, out, err = run(*argv, "--seed", "2", "--param", "n_init=3", "-q", "--out", str(res))
    assert code == 0, err
    saved = load_result(res)
    held = saved.meta["held_out"]
    assert held["predictor"] == saved.predictor.kind == "vote"
    # By hand through the Python API: the same hidden cells, guessed as predict guesses them.
    votes = load_votes("435")
    hidden = hold_out(Dataset.of(votes.X, missing=votes.missing), 0.2, random_state=2)[1]
    rows, cols = hidden.nonzero()
    truth = votes.X.toarray()[rows, cols].astype(bool)
    by_predictor = int((saved.predict(rows, cols) != truth).sum())
    by_product = int((predict_cells(saved.W, saved.H, rows, cols) != truth).sum())
    assert (held["errors"], held["product"]["errors"]) == (by_predictor, by_product)
    assert by_predictor != by_product and held["cells"] == len(rows) == 1313
    assert f"held out        1313 observed cells (20 %): {by_predictor} wrong" in out
    assert "by the fit's predictor (the share of the starts predicting 1 above " in out
    assert f"held out W⊗H    {by_product} wrong" in out


def test_unknown_cells_in_a_csv_file_and_the_complete_command_refusals(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("1,1,0\n1,?,0\n0,0,1\n1,1,NA\n")
    code, out, _ = run("info", str(data), "--json")
    assert json.loads(out)["unknown_cells"] == 2
    res = tmp_path / "r.npz"
    code, out, _ = run("factorize", str(data), "-k", "2", "--out", str(res), "--json")
    assert code == 0 and json.loads(out)["unknown_cells"] == 2
    code, out, _ = run("complete", str(data), str(res), "--json")
    filled = json.loads(out)["filled"]
    assert [(f["row"], f["column"]) for f in filled] == [(1, 1), (3, 2)]
    assert [f["value"] for f in filled] == [1, 0]  # rows 0 and 1 are alike; row 3 as row 0
    full = tmp_path / "full.csv"
    full.write_text("1,1,0\n1,1,0\n0,0,1\n1,1,0\n")
    code, _, err = run("complete", str(full), str(res), "--missing", str(full))
    assert code == 0
    code, _, err = run("factorize", str(full), "-k", "2", "--out", str(tmp_path / "f.npz"))
    code, _, err = run("complete", str(full), str(tmp_path / "f.npz"))
    assert code == 2 and "has no unknown cells to fill in" in err
    code, _, err = run("factorize", str(full), "-k", "2", "--missing", ZOO)
    assert code == 2 and "--missing" in err and "101×15 but the data is 4×3" in err
    code, _, err = run("complete", str(full), str(res), "--out", str(tmp_path / "x.txt"))
    assert code == 2 and "--out" in err


def test_a_closed_output_pipe_ends_quietly_with_141():
    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    err = io.StringIO()
    code = main(["info", ZOO], stdout=Closed(), stderr=err)
    assert code == 141 and err.getvalue() == ""


def test_select_k_table_json_and_plot(tmp_path):
    data = tmp_path / "p.mtx"
    code, _, _ = run("generate", str(data), "-n", "60", "-m", "50", "-k", "3", "--density", "0.3")
    assert code == 0
    code, out, err = run("select-k", str(data), "--ks", "1:8", "--folds", "3")
    assert code == 0, err
    assert "chosen k        3:" in out and "k  error" in out
    assert "banmf: k=1: error" in err and "held-out" in err
    code, out, err = run(
        "select-k", str(data), "--ks", "2,3,4", "--criteria", "mdl", "--all", "--json", "-q"
    )
    rec = json.loads(out)
    assert code == 0 and err == "" and rec["ks"] == [2, 3, 4] and rec["best_k"] == 3
    assert set(rec["per_k"][0]) == {"k", "training_error", "description_length"}
    pytest.importorskip("matplotlib")
    image = tmp_path / "k.svg"
    code, out, _ = run("select-k", str(data), "--ks", "1:5", "-q", "--plot", str(image))
    assert code == 0 and image.exists() and "held-out error rate" in image.read_text()
    code, _, err = run("select-k", str(data), "--ks", "0:3")
    assert code == 2 and "expected positive ranks" in err
    code, _, err = run("select-k", str(data), "--criteria", "aic")
    assert code == 2 and "--criteria: choose among mdl, cv, stability" in err


def test_factorize_k_auto_chooses_by_held_out_error_end_to_end(tmp_path):
    data = tmp_path / "p.mtx"
    code, _, _ = run("generate", str(data), "-n", "60", "-m", "40", "-k", "3", "--density", "0.35")
    assert code == 0
    res = tmp_path / "p.npz"
    argv = ("factorize", str(data), "-k", "auto", "--param", "n_init=2", "--max-iter", "200")
    code, out, err = run(*argv, "--out", str(res))
    assert code == 0, err
    assert "method          banmf, k=3," in out
    assert "chosen k        3 (-k auto): the lowest held-out error, 0.0000, of k=1.." in out
    assert load_result(res).n_components == 3
    code, out, _ = run(*argv, "--json", "--hold-out", "0.1", "-q")
    rec = json.loads(out)
    assert code == 0 and rec["n_components"] == 3 and rec["n_components_asked"] == "auto"
    assert rec["rank_selection"]["best_k"] == 3 and rec["rank_selection"]["choices"] == {"cv": 3}
    assert rec["held_out"]["errors"] == 0  # the selection's folds come from the fitted cells


@pytest.mark.parametrize(
    "argv, message",
    [
        (["factorize", ZOO, "-k", "many"], "argument -k: expected a positive integer or auto"),
        (["factorize", ZOO, "-k", "auto", "--scheduler", "local"], "-k auto does not run on a"),
    ],
)
def test_k_auto_refusals_exit_2(argv, message):
    code, out, err = run(*argv)
    assert code == 2 and message in err and out == ""


def test_complete_says_its_predictor_and_gives_calibrated_probabilities(tmp_path):
    res = tmp_path / "v.npz"
    code, out, _ = run("factorize", VOTES, "-k", "3", "--missing", VOTES_MASK, "--out", str(res))
    assert code == 0, out
    predictor = load_result(res).predictor
    assert predictor is not None
    code, out, err = run("complete", VOTES, str(res), "--proba", "-v")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "row,column,value,probability" and len(lines) == 393
    values = [(int(line.split(",")[-2]), float(line.split(",")[-1])) for line in lines[1:]]
    assert all(0 <= p <= 1 for _, p in values)
    assert "392 unknown cells filled in (" in err and "Brier score" in err
    assert f"predictor chosen on {predictor.report['held_out_cells']} observed cells" in err
    code, out, _ = run("complete", VOTES, str(res), "--json", "--proba")
    rec = json.loads(out)
    assert rec["predictor"]["kind"] == predictor.kind
    assert [e["value"] for e in rec["filled"]] == [v for v, _ in values]
    # A result without a predictor (one start: W⊗H alone) has no probabilities to give.
    one = tmp_path / "one.npz"
    code, out, _ = run(
        "factorize", VOTES, "-k", "3", "--missing", VOTES_MASK, "--method", "nmf", "--out", str(one)
    )
    assert code == 0, out
    code, out, err = run("complete", VOTES, str(one))
    assert code == 0 and "(W⊗H)" in err
    code, _, err = run("complete", VOTES, str(one), "--proba")
    assert code == 2 and "no calibrated predictor" in err


@pytest.mark.parametrize("address", ["bogus", "tcp://host", "host", "tcp://"])
def test_scheduler_address_without_a_port_exits_2_naming_the_forms(address):
    code, out, err = run("factorize", ZOO, "-k", "2", "--scheduler", address)
    assert code == 2 and out == ""
    assert "expected 'local' or a Dask scheduler's address with its port" in err
    assert "tcp://host:8786" in err and "internal error" not in err


def test_complete_proba_says_what_the_value_and_the_probability_are(tmp_path):
    res = tmp_path / "v.npz"
    argv = ("factorize", VOTES, "-k", "3", "--missing", VOTES_MASK, "--param", "n_init=3")
    code, out, _ = run(*argv, "--out", str(res), "-q")
    assert code == 0, out
    code, out, err = run("complete", VOTES, str(res), "--proba")
    assert code == 0 and "value: the predictor's 0/1 (as --out writes it)" in err
    assert "probability: its score calibrated" in err
    code, out, _ = run("complete", VOTES, str(res), "--proba", "--json")
    meaning = json.loads(out)["meaning"]
    assert meaning["value"].startswith(("0/1 by ", "every cell")) and "calibrated" in str(meaning)


def test_complete_names_a_threshold_outside_the_scores_range_in_words():
    from banmf.cli.data import predictor_rule
    from banmf.selection.predictor import Predictor

    def rule(kind, threshold, edges=(0.1, 0.3)):
        return predictor_rule(Predictor(kind, threshold, np.array(edges), np.zeros(len(edges) + 1)))

    assert rule("vote", 0.45) == "the share of the starts predicting 1 above 0.45"
    assert rule("vote", 2.0).startswith("every cell 0: on held-out cells, 0 everywhere beat")
    assert rule("vote", -1.0).startswith("every cell 1: on held-out cells, 1 everywhere beat")
    assert rule("nmf", 1.499, (0.2, 0.499)).startswith("every cell 0")
    assert rule("nmf", 0.4022, (0.2, 0.499)) == "the NMF start's continuous product above 0.4022"
    assert rule("product", 0.5) == "W⊗H"


def test_show_escapes_control_characters_in_labels(tmp_path):
    data = tmp_path / "esc.csv"
    data.write_text("name,a,\x1b[31mb\x1b[0m,c\nr1,1,1,0\n\x1b[2Jr2,1,1,0\nr3,0,0,1\nr4,0,1,1\n")
    res = tmp_path / "esc.npz"
    code, _, err = run("factorize", str(data), "-k", "2", "--out", str(res), "-q")
    assert code == 0, err
    code, out, _ = run("show", str(res))
    assert code == 0 and "\x1b" not in out
    assert "\\x1b[31mb\\x1b[0m" in out and "\\x1b[2Jr2" in out
    code, out, _ = run("show", str(res), "--json")  # JSON escapes them itself
    assert "\x1b" not in out and "\\u001b[2Jr2" in out


def test_an_absurd_max_iter_is_refused_saying_what_it_would_allocate(monkeypatch):
    monkeypatch.setenv("BANMF_MEMORY_LIMIT", "1G")
    code, out, err = run("factorize", ZOO, "-k", "2", "--max-iter", "1000000000000")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "BANMF(max_iter=1000000000000): the regularization schedule" in err
    assert "choose a smaller max_iter" in err


def test_k_auto_progress_says_the_rank_the_fold_and_the_time_left_for_the_selection():
    import logging

    from banmf.runtime.progress import StartProgress, fit_label

    log = logging.getLogger("banmf.progress")
    progress = Progress(io.StringIO(), "fitting banmf", enabled=False)

    def record(event, **fields):
        log.info("%s", event, extra={"banmf": {"event": event, **fields}})

    with progress:
        ks = [1, 2, 3, 4]
        record("rank_start", k=1, rank=1, n_ranks=4, ks=ks, n_fits=11)
        with fit_label("fold 3 of 10"):
            StartProgress(2, 13, 100).phase("polish")
        assert progress.status == (
            "fitting banmf, choosing k: rank 1 of 4 (k=1), fold 3 of 10: start 2/13, polish "
            "(0/11 fits of this rank done)"
        )
        assert "left" not in progress._line(time.monotonic())  # nothing done: no estimate
        for done in range(1, 12):
            record("fit_done", k=1, fits_done=done, n_fits=11)
        record("rank", row={"k": 1})
        record("rank_start", k=2, rank=2, n_ranks=4, ks=ks, n_fits=11)
        # A start of another fit with fewer starts: the rank and fold, not a start count, lead.
        with fit_label("all observed cells"):
            StartProgress(1, 8, 100).phase("threshold search")
        assert progress.status.startswith("fitting banmf, choosing k: rank 2 of 4 (k=2), all")
        # The time left is for the whole selection: ranks 2..4 of 10 units of work, 1 done.
        line = progress._line(progress.selection["since"] + 1.0)
        assert "at most about 9 s left in the selection" in line
        record("selected", ks=[1, 2])
        assert progress.selection is None and progress.status == "fitting banmf"


def interrupt_rank(monkeypatch, rank, signum):
    """Send ``signum`` to this process as the selection's ``rank``-th rank begins."""
    import os

    emit = Progress.emit

    def interrupting(self, record):
        emit(self, record)
        data = record.banmf
        if data["event"] == "rank_start" and data["rank"] == rank:
            os.kill(os.getpid(), signum)

    monkeypatch.setattr(Progress, "emit", interrupting)


def test_a_first_signal_during_k_auto_keeps_and_writes_the_best_rank_so_far(tmp_path, monkeypatch):
    import signal

    interrupt_rank(monkeypatch, 3, signal.SIGTERM)
    res = tmp_path / "r.npz"
    argv = ("factorize", ZOO, "-k", "auto", "--param", "n_init=1", "--max-iter", "50")
    code, out, err = run(*argv, "--out", str(res), "--json")
    assert code == 143, err
    rec = json.loads(out)
    assert rec["interrupted"] and rec["signal"] == "SIGTERM" and "aborted" not in rec
    assert rec["rank_selection"]["interrupted"] and rec["rank_selection"]["ks"] == [1, 2]
    saved = load_result(res)
    assert saved.interrupted and saved.n_components == rec["rank_selection"]["best_k"]
    code, out, err = run(*argv, "--out", str(tmp_path / "r2.npz"))
    assert code == 143 and "interrupted     by SIGTERM while -k auto chose k: kept k=" in out


def test_a_first_signal_in_k_autos_first_rank_writes_nothing_and_aborts_nothing(
    tmp_path, monkeypatch
):
    import signal

    interrupt_rank(monkeypatch, 1, signal.SIGTERM)
    res = tmp_path / "r.npz"
    argv = ("factorize", ZOO, "-k", "auto", "--param", "n_init=1", "--out", str(res), "--json")
    code, out, err = run(*argv)
    assert code == 143 and not res.exists()
    assert "interrupted by SIGTERM before any result existed; nothing written" in err
    rec = json.loads(out)
    assert rec["interrupted"] and rec["aborted"] is False and rec["written"] is None


def test_k_auto_on_noise_says_no_rank_generalizes_and_shows_the_curve_with_v(tmp_path):
    from banmf.io import write_matrix

    rng = np.random.default_rng(1)
    write_matrix(rng.random((20, 30)) < 0.3, tmp_path / "noise.mtx")
    argv = ("factorize", str(tmp_path / "noise.mtx"), "-k", "auto", "--hold-out", "0.2")
    code, out, err = run(*argv, "--param", "n_init=2", "--max-iter", "200", "-v", "-q")
    assert code == 0, err
    assert "chosen k        1 (-k auto): no rank generalizes: none of k=1..4" in out
    assert "k chosen by     held-out error" in out
    method = next(line for line in out.splitlines() if line.startswith("method"))
    assert "s choosing k" in method
    curve = [line for line in out.splitlines() if line.startswith("  k=")]
    assert len(curve) == 4 and curve[0].endswith("*")
    assert "by the fit's predictor (the column majority)" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["factorize", "{few}", "-k", "auto"], "and the input has 15 observed ones; give -k a"),
        (["select-k", "{zeros}"], "pass --criteria mdl"),
        (["select-k", "{few}", "--criteria", "cv", "--folds", "2"], "pass --criteria mdl"),
        (["select-k", "{many}", "--folds", "9"], "pass --folds 6 or fewer"),
        (["select-k", "{few}", "--missing", "{all}"], "every cell of the input is unknown"),
        (["factorize", "{few}", "-k", "2", "--missing", "{all}"], "every cell of the input is"),
    ],
)
def test_cli_errors_name_options_not_parameters(tmp_path, argv, message):
    from banmf.io import write_matrix

    few = np.zeros((30, 30), dtype=bool)
    few[0, :15] = True
    many = np.zeros((30, 30), dtype=bool)
    many[:6, :10] = True
    files = {"few": few, "zeros": np.zeros((10, 8), bool), "many": many, "all": ~few | few}
    for name, M in files.items():
        write_matrix(M, tmp_path / f"{name}.mtx")
    code, out, err = run(*(a.format(**{n: tmp_path / f"{n}.mtx" for n in files}) for a in argv))
    assert code == 2 and message in err and out == "", err
    assert "n_components" not in err and "criteria=" not in err and "folds=" not in err
