"""The bad-input and signal tour: every case a new user met, through the command line.

Each case is what a user typed and what they must see: a result that is right, or one line
on stderr and exit code 2; signals finish the best result so far (exit 130 / 143) and a second
one aborts without a partial file.
"""

import gzip
import io
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import banmf.engine.local as banmf_module
from banmf.cli import Progress, main
from banmf.datasets import data_dir
from banmf.engine import Driver
from banmf.io import load_result, read_matrix

ZOO = str(data_dir() / "zoo_101x15.mtx")
VOTES = str(data_dir() / "votes_232x16.mtx")


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def one_line_error(err: str, *needles: str) -> None:
    assert err.count("\n") == 1 and err.startswith("banmf: error: "), err
    assert "Traceback" not in err and "internal error" not in err, err
    for needle in needles:
        assert needle in err, err


@pytest.fixture
def no_fit(monkeypatch):
    """Fail the test if any estimator's fit starts: destinations are checked before the work."""
    import banmf.models._base as base

    def refuse(*args, **kwargs):
        raise AssertionError("the fit ran")

    monkeypatch.setattr(base.BaseFactorization, "_set_result", refuse)
    monkeypatch.setattr(Driver, "run_starts", refuse)


# -- silent wrong results and data loss ------------------------------------------------------


def test_out_equal_to_the_input_is_refused(tmp_path, no_fit):
    data = tmp_path / "zoo.npz"
    run("generate", data, "-n", "20", "-m", "10", "-k", "2")
    before = data.read_bytes()
    code, _, err = run("factorize", data, "-k", "2", "--out", data)
    assert code == 2 and data.read_bytes() == before
    one_line_error(err, "input")


@pytest.mark.parametrize("where", ["missing folder", "directory", "proc"])
def test_out_destinations_are_checked_before_the_fit(tmp_path, no_fit, where):
    target = {
        "missing folder": tmp_path / "nope" / "r.npz",
        "directory": tmp_path,
        "proc": "/proc/banmf-result.npz",
    }[where]
    if where == "directory":
        target = tmp_path / "d.npz"
        target.mkdir()
    code, _, err = run("factorize", ZOO, "-k", "2", "--out", target)
    assert code == 2
    one_line_error(err)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_out_into_a_read_only_folder_is_refused_before_the_fit(tmp_path, no_fit):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        code, _, err = run("factorize", ZOO, "-k", "2", "--out", folder / "r.npz")
    finally:
        folder.chmod(stat.S_IRWXU)
    assert code == 2
    one_line_error(err)


def test_generate_and_plot_check_their_destinations_first(tmp_path, no_fit):
    code, _, err = run("generate", tmp_path / "nope" / "x.mtx", "-n", "5", "-m", "5", "-k", "1")
    assert code == 2
    one_line_error(err, "no such folder")
    code, _, err = run(
        "generate",
        tmp_path / "x.mtx",
        "-n",
        "5",
        "-m",
        "5",
        "-k",
        "1",
        "--factors",
        tmp_path / "x.mtx",
    )
    assert code == 2 and not (tmp_path / "x.mtx").exists()
    one_line_error(err)


@pytest.mark.parametrize(
    "text, shape",
    [
        ("True,False\nFalse,True\nTRUE,true\n", (3, 2)),
        ("ant,1,0,1\nbee,0,1,1\n", (2, 3)),
        (",a,b\nant,1,0\nbee,0,1\n", (2, 2)),
    ],
)
def test_csv_cells_and_row_names_are_read_right(tmp_path, text, shape):
    path = tmp_path / "x.csv"
    path.write_text(text)
    code, out, err = run("info", path, "--json")
    assert code == 0, err
    assert json.loads(out)["shape"] == list(shape)


def test_a_blank_csv_cell_is_an_unknown_cell_and_a_bad_one_is_refused(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("1,0,1\n0,,1\n")
    code, out, err = run("info", path, "--json")
    assert code == 0 and json.loads(out)["unknown_cells"] == 1
    path.write_text("1,0,1\n0,x,1\n")
    code, _, err = run("info", path)
    assert code == 2
    one_line_error(err, "x.csv", "line 2")


@pytest.mark.parametrize("sep", [";", "\t"])
def test_csv_with_another_separator_is_read_or_named(tmp_path, sep):
    path = tmp_path / "x.csv"
    path.write_text(f"1{sep}0{sep}1\n0{sep}1{sep}1\n")
    code, out, err = run("info", path, "--json")
    if code == 0:
        assert json.loads(out)["shape"] == [2, 3]
    else:
        one_line_error(err, "x.csv")


@pytest.mark.parametrize("ext", ["dat", "mtx", "mtx.gz", "npz", "csv", "tsv"])
def test_generate_round_trips_shapes_and_evaluates_against_its_factors(tmp_path, ext):
    data, planted = tmp_path / f"x.{ext}", tmp_path / "planted.npz"
    # Density 0.05 over 30 columns at k=2: some trailing columns are empty.
    code, _, err = run(
        "generate",
        data,
        "-n",
        "20",
        "-m",
        "30",
        "-k",
        "2",
        "--density",
        "0.05",
        "--seed",
        "3",
        "--factors",
        planted,
    )
    assert code == 0, err
    assert read_matrix(data).shape == (20, 30)
    code, out, err = run("evaluate", data, planted, "--json")
    assert code == 0 and json.loads(out)["error"] == 0, err


def test_plot_and_evaluate_refuse_other_shapes_and_warn_on_other_files(tmp_path):
    res = tmp_path / "r.npz"
    assert run("factorize", ZOO, "-k", "2", "--max-iter", "10", "--out", res)[0] == 0
    code, _, err = run("plot", res, "--data", VOTES, "--out", tmp_path / "p.png")
    assert code == 2 and not (tmp_path / "p.png").exists()
    one_line_error(err, "factorizes a 101×15 matrix")
    other = tmp_path / "zoo_changed.mtx"
    X = read_matrix(ZOO).toarray()
    X[0, 0] = not X[0, 0]
    from banmf.io import write_matrix

    write_matrix(X, other)
    code, out, err = run("evaluate", other, res, "--json")
    assert code == 0 and json.loads(out)["error"] >= 0
    assert "banmf: warning:" in err and "sha256" in err and err.count("\n") == 1


# -- signals ---------------------------------------------------------------------------------


def send_at(monkeypatch, sig, *, start=1, event="iteration"):
    """Deliver ``sig`` to this process when start ``start`` first reports ``event``."""
    emit, sent = Progress.emit, []

    def emitting(self, record):
        emit(self, record)
        data = record.banmf
        if data["event"] == event and data["start"] == start and not sent:
            sent.append(True)
            os.kill(os.getpid(), sig)

    monkeypatch.setattr(Progress, "emit", emitting)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_in_a_later_start_keeps_the_best_so_far(tmp_path, monkeypatch, sig, code):
    send_at(monkeypatch, sig, start=4)  # the third random start: the columns start is the first
    res = tmp_path / "r.npz"
    got, out, err = run(
        "factorize", ZOO, "-k", "3", "--jobs", "1", "--param", "n_init=10", "--json", "--out", res
    )
    rec = json.loads(out)
    assert got == code and rec["interrupted"] and rec["signal"] == signal.Signals(sig).name
    assert rec["starts_run"] == 3 and rec["n_init"] == 10
    saved = load_result(res)
    assert saved.interrupted and saved.error == rec["error"]
    assert "finishing the best result so far" in err
    assert not list(tmp_path.glob(".*"))


@pytest.mark.parametrize("phase", ["threshold search", "per-factor thresholds", "polish"])
def test_ctrl_c_in_the_refinements_keeps_a_result(tmp_path, monkeypatch, phase):
    emit, sent = Progress.emit, []

    def emitting(self, record):
        emit(self, record)
        data = record.banmf
        # In a random start (the columns start, which runs first, has a polish too).
        if data["event"] == "phase" and data["phase"] == phase and "name" not in data:
            if not sent:
                sent.append(True)
                os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(Progress, "emit", emitting)
    res = tmp_path / "r.npz"
    code, out, err = run("factorize", ZOO, "-k", "3", "--jobs", "1", "--json", "--out", res)
    rec = json.loads(out)
    assert code == 130 and rec["interrupted"] and rec["starts_run"] == 1, err
    assert load_result(res).interrupted and "nothing written" not in err
    # The steps cut short are not reported as if they had run; a cut search runs again.
    assert phase not in rec["refinement"] and "grid" in rec["refinement"]


def test_a_second_signal_aborts_without_a_partial_file(tmp_path, monkeypatch):
    send_at(monkeypatch, signal.SIGTERM, start=1)
    real = banmf_module.threshold_factors

    def second(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(banmf_module, "threshold_factors", second)
    res = tmp_path / "r.npz"
    code, out, err = run("factorize", ZOO, "-k", "3", "--jobs", "1", "--json", "--out", res)
    assert code == 143 and not res.exists() and not list(tmp_path.iterdir())
    rec = json.loads(out)
    assert rec["aborted"] and rec["written"] is None
    assert "aborted by a second signal" in err


SCRIPT = textwrap.dedent("""
    import sys
    from banmf.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_real_signal_to_the_command_writes_the_best_result(tmp_path, sig, code):
    """A separate process, starts side by side, the signal from outside (a batch scheduler)."""
    data, res = tmp_path / "x.npz", tmp_path / "r.npz"
    assert (
        run(
            "generate",
            data,
            "-n",
            "3000",
            "-m",
            "400",
            "-k",
            "8",
            "--density",
            "0.2",
            "--noise",
            "0.05",
        )[0]
        == 0
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SCRIPT,
            "factorize",
            str(data),
            "-k",
            "8",
            "--jobs",
            "2",
            "--param",
            "n_init=4",
            "--param",
            "tol=none",
            "--max-iter",
            "100000",
            "--out",
            str(res),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Wait for the iterations (the progress line appears after 2 s of fitting).
    for line in proc.stderr:
        if "iteration" in line:
            break
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == code, err
    rec = json.loads(out)
    assert rec["interrupted"] and rec["signal"] == signal.Signals(sig).name
    saved = load_result(res)
    assert saved.interrupted and saved.W.shape == (3000, 8)


# -- hostile headers and unreadable results ---------------------------------------------------


@pytest.mark.parametrize("header", ["3000000000 5 3", "1000000000000 5 3", f"{10**23} 5 3"])
def test_huge_mtx_headers_are_refused_with_the_size(tmp_path, monkeypatch, header):
    monkeypatch.setenv("BANMF_MEMORY_LIMIT", "1G")
    path = tmp_path / "huge.mtx"
    path.write_text(f"%%MatrixMarket matrix coordinate pattern general\n{header}\n1 1\n2 2\n3 3\n")
    code, _, err = run("info", path)
    assert code == 2
    one_line_error(err, "huge.mtx")


def test_a_huge_fimi_item_id_and_a_huge_generate_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("BANMF_MEMORY_LIMIT", "1G")
    path = tmp_path / "t.dat"
    path.write_text("1 2 3\n99999999999\n")
    code, _, err = run("info", path)
    assert code == 2
    one_line_error(err)
    code, _, err = run(
        "generate",
        tmp_path / "g.mtx",
        "-n",
        "100000000",
        "-m",
        "100000000",
        "-k",
        "5",
        "--density",
        "0.3",
    )
    assert code == 2 and not (tmp_path / "g.mtx").exists()
    one_line_error(err)


@pytest.mark.parametrize("content", [b"garbage", b"PK\x03\x04 not really a zip", None])
def test_anything_but_a_result_is_not_a_banmf_result(tmp_path, content):
    path = tmp_path / "r.npz"
    if content is None:  # a matrix, not a result
        run("generate", path, "-n", "5", "-m", "5", "-k", "1")
    else:
        path.write_bytes(content)
    code, _, err = run("evaluate", ZOO, path)
    assert code == 2 and "allow_pickle" not in err
    one_line_error(err, "not a banmf result")
    code, _, err = run("evaluate", ZOO, ZOO)
    one_line_error(err, "not a banmf result")


# -- messages and options --------------------------------------------------------------------


def test_a_dense_mtx_value_is_named_plainly(tmp_path):
    path = tmp_path / "dense.mtx"
    path.write_text("%%MatrixMarket matrix array integer general\n2 2\n1\n0\n2\n1\n")
    code, _, err = run("info", path)
    assert code == 2
    one_line_error(err, "dense.mtx", "row 1, column 2")
    assert "np." not in err and "> 0" not in err and "row 0" not in err


@pytest.mark.parametrize(
    "param, hint",
    [
        ("n_components=3", "-k"),
        ("random_state=1", "--seed"),
        ("callback=print", "callback"),
        ("verbose=2", "-q"),
        ("max_iter=5", "--max-iter"),
        ("n_jobs=2", "--jobs"),
    ],
)
def test_params_with_an_option_of_their_own_are_refused(param, hint, no_fit):
    code, _, err = run("factorize", ZOO, "-k", "2", "--max-iter", "10", "--param", param)
    assert code == 2
    one_line_error(err, f"--param {param.split('=')[0]}", hint)


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["factorize", ZOO, "-k", "2", "--seed", "-1"], "--seed"),
        (["generate", "x.mtx", "-n", "0", "-m", "3", "-k", "1"], "-n"),
        (["generate", "x.mtx", "-n", "3", "-m", "3", "-k", "1", "--density", "1.5"], "--density"),
    ],
)
def test_bad_option_values_name_the_option(argv, needle, no_fit):
    code, _, err = run(*argv)
    assert code == 2
    one_line_error(err, needle)


def test_directories_and_extensionless_files(tmp_path):
    code, _, err = run("info", tmp_path)
    assert code == 2
    one_line_error(err, "is a directory")
    # Without an extension a Matrix Market file is known by its banner; anything else needs
    # --format.
    plain = tmp_path / "zoo"
    plain.write_bytes(Path(ZOO).read_bytes())
    code, out, _ = run("info", plain, "--json")
    assert code == 0 and json.loads(out)["shape"] == [101, 15]
    other = tmp_path / "baskets"
    other.write_text("1 2\n2 3\n")
    code, _, err = run("info", other)
    assert code == 2
    one_line_error(err, "--format")
    code, out, _ = run("info", other, "--format", "dat", "--json")
    assert code == 0 and json.loads(out)["shape"] == [2, 4]


def test_duplicate_entries_give_one_consistent_notice(tmp_path):
    mtx, dat = tmp_path / "d.mtx", tmp_path / "d.dat"
    mtx.write_text("%%MatrixMarket matrix coordinate pattern general\n2 2 3\n1 1\n1 1\n2 2\n")
    dat.write_text("0 0 1\n1\n")
    for path in (mtx, dat):
        code, _, err = run("info", path)
        assert code == 0
        lines = err.splitlines()
        assert (
            len(lines) == 1 and lines[0].startswith("banmf: warning: ") and "duplicate" in lines[0]
        ), err
        assert "UserWarning" not in err and ".py" not in err


def test_plot_formats_follow_the_extension(tmp_path):
    pytest.importorskip("matplotlib")
    res = tmp_path / "r.npz"
    run("factorize", ZOO, "-k", "2", "--max-iter", "10", "--out", res)
    code, _, err = run("plot", res, "--out", tmp_path / "p.jpg")
    assert code == 2 and not (tmp_path / "p.jpg").exists()
    one_line_error(err, ".png")
    code, _, err = run("plot", res, "--out", tmp_path / "p.svg")
    assert code == 0 and b"<svg" in (tmp_path / "p.svg").read_bytes()[:500]


def test_outputs_follow_the_umask_and_gzip_names_the_file(tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "x.mtx.gz"
        assert run("generate", path, "-n", "5", "-m", "5", "-k", "1")[0] == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    raw = path.read_bytes()
    assert b".tmp" not in raw[:200] and b"x.mtx" in raw[:200]
    with gzip.open(path, "rt") as fh:
        assert fh.readline().startswith("%%MatrixMarket")


def test_grammar_and_info_formatting():
    code, out, _ = run(
        "factorize",
        ZOO,
        "-k",
        "2",
        "--max-iter",
        "1",
        "--param",
        "n_init=1",
        "--param",
        "extra_starts=()",
        "--param",
        "combine=false",
    )
    assert code == 0 and "1 iteration," in out and "1 iterations" not in out and "start)" in out
    code, out, _ = run("info", VOTES)
    assert "232×16" in out and "[232, 16]" not in out
    density = next(line for line in out.splitlines() if line.startswith("density")).split()[-1]
    assert len(density) <= 7


def test_help_describes_every_option_and_its_default(capsys):
    from banmf.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name, sub in commands.items():
        for action in sub._actions:
            assert action.help, (name, action.option_strings or action.dest)
            if action.default not in (None, False, [], "==SUPPRESS==") and action.dest != "help":
                assert "default" in action.help, (name, action.dest)
    assert main(["generate", "--help"]) == 0
    assert "planted rank" in capsys.readouterr().out


def test_the_paper_configuration_lists_only_the_steps_that_ran():
    code, out, _ = run(
        "factorize",
        ZOO,
        "-k",
        "5",
        "--param",
        "n_init=1",
        "--param",
        "tol=none",
        "--param",
        "thresholds=global",
        "--param",
        "polish=false",
    )
    line = next(line for line in out.splitlines() if line.startswith("refinement"))
    assert code == 0 and "grid" in line and "polish" not in line and "per-factor" not in line


# -- the second tour: wrong results said as right, and messages ------------------------------


def test_a_hold_out_that_holds_out_nothing_is_refused():
    code, out, err = run("factorize", ZOO, "-k", "2", "--hold-out", "1e-9")
    assert code == 2 and out == "" and "holds out no cell of the 1515 observed cells" in err


def test_hold_out_lines_say_the_denominator_and_f1_when_no_one_is_held_out(tmp_path):
    code, out, _ = run("factorize", ZOO, "-k", "3", "--max-iter", "20", "--hold-out", "0.2")
    assert code == 0
    # 20 % of the 660 ones are held out: the relative error divides by the other 528.
    assert "relative error" in out and "(error / the 528 ones fitted, of 660)" in out
    # Only zeros are held out: there is no F1 of the ones to give.
    X = tmp_path / "sparse.mtx"
    X.write_text("%%MatrixMarket matrix coordinate pattern general\n40 40 1\n1 1\n")
    code, out, _ = run("factorize", str(X), "-k", "1", "--hold-out", "0.1", "--seed", "3")
    assert code == 0 and "F1 on the ones n/a, no ones held out" in out


def test_held_out_scores_of_no_ones_are_not_perfect():
    import numpy as np
    import scipy.sparse as sp

    from banmf.model_selection import held_out_scores

    X = np.zeros((3, 3), bool)
    X[0, 0] = True
    hidden = sp.csr_array(np.eye(3, dtype=bool)[::-1])  # the zeros (0,2), (1,1), (2,0)
    W, H = np.zeros((3, 1), bool), np.zeros((1, 3), bool)
    s = held_out_scores(X, W, H, hidden)
    assert s["ones"] == 0 and s["f1"] is None and s["recall"] is None
    assert s["precision"] is None and s["accuracy"] == 1.0
    W[2, 0] = H[0, 0] = True  # one wrong one predicted at (2, 0)
    s = held_out_scores(X, W, H, hidden)
    assert s["precision"] == 0.0 and s["f1"] is None and s["errors"] == 1


def test_a_mask_that_hides_every_one_is_said_and_all_unknown_is_refused(tmp_path):
    code, out, err = run("factorize", ZOO, "-k", "2", "--missing", ZOO, "--max-iter", "5")
    assert code == 0 and "hide all 660 ones of X: only zeros are observed" in err
    every = tmp_path / "every.mtx"
    cells = "\n".join(f"{i} {j}" for i in range(1, 102) for j in range(1, 16))
    every.write_text(f"%%MatrixMarket matrix coordinate pattern general\n101 15 1515\n{cells}\n")
    code, out, err = run("factorize", ZOO, "-k", "2", "--missing", str(every))
    assert (
        code == 2
        and "every cell of the input is unknown (the unknown cells cover all 101×15" in err
    )
    empty = tmp_path / "none.mtx"
    empty.write_text("%%MatrixMarket matrix coordinate pattern general\n101 15 0\n")
    code, out, err = run("factorize", ZOO, "-k", "2", "--observed", str(empty))
    assert (
        code == 2
        and "every cell of the input is unknown (--observed marks none of the 101×15 cells)" in err
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["select-k", ZOO, "--ks", "-1:2"], "argument --ks: expected positive ranks, got '-1:2'"),
        (["factorize", ZOO, "-k", "2", "--hold-out", "-.5"], "expected a number in (0, 1)"),
    ],
)
def test_option_values_that_start_with_a_dash_get_the_options_own_message(argv, message):
    code, _, err = run(*argv)
    assert code == 2 and message in err and "expected one argument" not in err


def test_generate_refuses_factors_onto_the_matrix_itself(tmp_path):
    out = str(tmp_path / "g.npz")
    code, _, err = run("generate", out, "-n", "8", "-m", "6", "-k", "2", "--factors", out)
    assert code == 2 and "--factors" in err and "is OUTPUT itself" in err and "input" not in err
    assert not (tmp_path / "g.npz").exists()


def test_ctrl_c_while_the_command_starts_says_so_without_a_traceback():
    # Ctrl-C while the arguments are parsed, before the command's own handling starts.
    script = (
        "import os, signal, sys; sys.argv = ['banmf', 'info', sys.argv[1]]\n"
        "from banmf.cli import main_entry\n"
        "import argparse\n"
        "real = argparse.ArgumentParser.parse_args\n"
        "def slow(self, *a, **k):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    return real(self, *a, **k)\n"
        "argparse.ArgumentParser.parse_args = slow\n"
        "main_entry()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, ZOO], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 130 and "Traceback" not in done.stderr
    assert "interrupted while starting; nothing written" in done.stderr


def test_importing_banmf_loads_no_numerical_library_until_a_name_is_used():
    script = (
        "import sys, banmf, banmf.cli\n"
        "assert 'numpy' not in sys.modules and 'numba' not in sys.modules, 'eager'\n"
        "assert banmf.BANMF.__name__ == 'BANMF' and banmf.io.read_matrix\n"
        "assert set(banmf.__all__) <= set(dir(banmf)) and banmf.__version__\n"
        "from banmf import *\n"
        # The functions, whichever of their modules was imported first.
        "from banmf import boolean_error\n"
        "import banmf.api, banmf.report.patterns, banmf.engine.polish\n"
        "from banmf import booleanize, patterns\n"
        "assert callable(booleanize) and callable(patterns) and callable(banmf.polish)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("k", ["10000", "1000000"])
def test_a_huge_k_is_capped_at_min_n_m_and_an_exact_start_ends_the_fit(k, monkeypatch):
    """Issue 30: -k 10000 on Zoo ran for minutes at 11.9 GB, -k 1000000 failed after 9 s."""
    code, out, err = run("factorize", ZOO, "-k", k, "--json")
    rec = json.loads(out)
    assert code == 0 and "exceeds min(n, m)=15" in err and "the fit uses 15" in err
    assert rec["error"] == 0 and rec["starts_run"] == 0  # the columns start alone
    assert (
        rec["n_starts"] == 1 and rec["n_components"] == 15 and rec["n_components_asked"] == int(k)
    )
    monkeypatch.setenv("BANMF_MEMORY_LIMIT", "100K")
    code, out, err = run("factorize", ZOO, "-k", k)
    assert code == 2 and "BANMF(n_components=15) on a 101×15 matrix needs about" in err
    assert "choose a smaller n_components" in err
