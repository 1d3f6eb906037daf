"""The analysis command line as a user meets it, through real subprocesses: ingest of a wrong path leaves no store,
no traceback ever reaches the terminal (a ddlio error exits 2, anything unexpected exits 1 in one line unless
DDLIO_TRACEBACK=1), Ctrl-C (a real SIGINT) exits 130 and a closed stdout pipe stays quiet."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from conftest import cli_env
from experiments.dataset import write_json_atomic
from experiments.run import failure_record
from helpers import point


def no_traceback(r: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) <= 12, r.stderr


@pytest.mark.parametrize("where", ["nonexistent", "a-file"])
def test_ingest_of_a_missing_path_or_a_file_names_it_and_creates_no_store(tmp_path, analysis, where):
    (tmp_path / "a-file").write_text("x")
    r = analysis("ingest", str(tmp_path / where))
    assert r.returncode == 2 and r.stderr.startswith(f"error: ingest: {tmp_path / where} "), r.stderr
    assert ("does not exist" if where == "nonexistent" else "is not a directory") in r.stderr
    no_traceback(r)
    assert not (tmp_path / "results.db").exists()


def test_ingest_of_a_folder_without_result_files_says_so_and_creates_no_store(tmp_path, analysis):
    (tmp_path / "runs" / "some-point").mkdir(parents=True)
    r = analysis("ingest", str(tmp_path / "runs"), "--db", str(tmp_path / "r.db"))
    assert r.returncode == 2, r.stderr
    assert "no result.json or failure.json below" in r.stderr and "store is left untouched" in r.stderr
    no_traceback(r)
    assert not (tmp_path / "r.db").exists()


def test_ingest_skips_files_that_are_not_ddlio_records_and_says_how_many(tmp_path, analysis):
    runs = tmp_path / "runs"
    (runs / "junk").mkdir(parents=True)
    (runs / "junk" / "result.json").write_text("[]")  # valid JSON, not a record
    r = analysis("ingest", str(runs), "--db", str(tmp_path / "r.db"))
    assert r.returncode == 2 and "none of the 1 result.json/failure.json files" in r.stderr, r.stderr
    assert not (tmp_path / "r.db").exists()
    spec = point(tmp_path)
    (runs / spec.point_key).mkdir()
    write_json_atomic(runs / spec.point_key / "failure.json", failure_record(spec.to_dict(), "boom"))
    r = analysis("ingest", str(runs), "--db", str(tmp_path / "r.db"))
    assert r.returncode == 0 and "1 stored" in r.stdout and "1 unreadable or not ddlio records, skipped" in r.stdout


def test_a_ddlio_error_is_one_line_and_exit_2(tmp_path, analysis):
    r = analysis("guidelines", "--db", str(tmp_path / "r.db"), "--bootstrap", "5")
    assert r.returncode == 2 and r.stderr.startswith("error: --bootstrap must be at least 100"), r.stderr
    no_traceback(r)


@pytest.mark.parametrize(("command", "said"), [
    (("report", "--out", "a-file/report.html"), "error: --out a-file/report.html: a-file is not a directory\n"),
    (("figures", "--out", "a-file"), "error: --out a-file exists and is not a directory: name a directory\n"),
    (("export", "--out", "a-file/points.csv"), "error: --out a-file/points.csv: a-file is not a directory\n")])
def test_an_output_path_in_the_way_is_bad_input_in_one_line(tmp_path, analysis, command, said):
    from ddlio.store import Store

    Store(str(tmp_path / "r.db"))
    (tmp_path / "a-file").write_text("x")
    r = analysis(*command, "--db", str(tmp_path / "r.db"))
    assert r.returncode == 2 and r.stderr == said, r.stderr


# A fake command (named so) registered at the process boundary: the real `main` of `python -m analysis` handling an
# exception nothing in ddlio expects. Nothing here can raise one on purpose that a future fix would not turn into a
# ddlio error.
FAKE = """
import sys, types
from analysis import __main__ as cli
fake = types.ModuleType("fake_command")
fake.setup_parser = lambda parser: None
def fake_main(args):
    print("partial output")
    raise RuntimeError("the disk said no\\nsecond line of the message")
fake.main = fake_main
sys.modules["fake_command"] = fake
cli.COMMANDS["fake"] = ("fake_command", "a fake command that fails unexpectedly")
sys.exit(cli.main(["fake"]))
"""


@pytest.mark.parametrize("show", [False, True])
def test_an_unexpected_error_is_one_line_and_exit_1_unless_the_traceback_is_asked_for(tmp_path, show):
    env = cli_env(tmp_path, **({"DDLIO_TRACEBACK": "1"} if show else {}))
    r = subprocess.run([sys.executable, "-c", FAKE], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1 and r.stdout == "partial output\n"
    if show:
        assert "Traceback (most recent call last)" in r.stderr and "RuntimeError: the disk said no" in r.stderr
    else:
        assert r.stderr == ("error: RuntimeError: the disk said no (set DDLIO_TRACEBACK=1 to see the traceback)\n")


def test_ctrl_c_prints_interrupted_and_exits_130(tmp_path):
    """A real SIGINT while ingest is blocked reading a result file that is a FIFO (no timing involved: the test
    opens the FIFO's other end, which returns only once the command has opened it)."""
    run = tmp_path / "runs" / "p"
    run.mkdir(parents=True)
    os.mkfifo(run / "result.json")
    env = cli_env(tmp_path)
    p = subprocess.Popen([sys.executable, "-m", "analysis", "ingest", str(tmp_path / "runs")], cwd=tmp_path,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with open(run / "result.json", "w"):  # blocks until the command opened the FIFO to read it
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 130 and err == "interrupted\n" and out == ""
    assert not (tmp_path / "results.db").exists()


def test_a_closed_stdout_pipe_stays_quiet(tmp_path):
    from ddlio.store import Store

    Store(str(tmp_path / "r.db"))
    r_fd, w_fd = os.pipe()
    os.close(r_fd)  # the reader is gone before the command writes a byte (as `| head -0`)
    try:
        p = subprocess.run([sys.executable, "-m", "analysis", "summary", "--db", str(tmp_path / "r.db"),
                            "--format", "csv"], cwd=tmp_path, env=cli_env(tmp_path), stdout=w_fd,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w_fd)
    assert p.returncode == 0 and p.stderr == ""
