"""Input that escapes (issue 37): a user's path in the command diagnose prints is quoted for the shell; a settings
file that is binary, recursive or a billion laughs, a row count past any store, a BLOB asked for as JSON and one
damaged record beside good ones each end in one line and the right exit status, the good records stored."""

from __future__ import annotations

import json
import shlex
import shutil
import sqlite3
from pathlib import Path

import pytest
from test_store import fake_result

from analysis.__main__ import main as analysis_main
from experiments.dataset import write_json_atomic
from experiments.run import failure_record
from helpers import point


def one_error_line(err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], lines[0]


def test_a_darshan_log_path_in_the_reproducing_command_is_quoted_for_the_shell(tmp_path, capsys):
    darshan = pytest.importorskip("darshan")
    ior = Path(darshan.__file__).parent / "examples/example_logs/ior_hdf5_example.darshan"
    hostile = tmp_path / "my logs; touch PWNED $(id)" / "it's.darshan"
    hostile.parent.mkdir()
    shutil.copy(ior, hostile)
    assert analysis_main(["diagnose", "--log", str(hostile), "--format", "json"]) == 0
    (diag,) = json.loads(capsys.readouterr().out)
    words = shlex.split(diag["reproduce"])
    assert words[:4] == ["python", "-m", "analysis", "import-darshan"] and words[4] == str(hostile)


@pytest.mark.parametrize("name, content, words", [
    ("t.yaml", b"\x00\x01\xff\xfe binary", ["not UTF-8 text"]),
    ("t.json", b"{\"small_requests\": 0.1}\x00", ["NUL bytes"]),
    ("t.yaml", b"a: &a\n  b: *a\n", ["YAML aliases"]),  # a mapping that holds itself
    ("t.yaml", b"a: &a [1, 2]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: [*c, *c, *c, *c]\n",
     ["YAML aliases"]),  # a billion laughs, in small
    ("t.json", b"[" * 100_000 + b"]" * 100_000, ["nested too deeply"]),
    ("t.json", json.dumps({"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}}).encode(), ["unknown threshold"]),
])
def test_a_settings_file_that_is_binary_or_recursive_is_one_line_and_exit_2(tmp_path, capsys, name, content, words):
    cfg = tmp_path / name
    cfg.write_bytes(content)
    assert analysis_main(["diagnose", "--config", str(cfg), "--thresholds"]) == 2
    one_error_line(capsys.readouterr().err, f"--config {cfg}", *words)


def test_a_plain_yaml_settings_file_is_still_read(tmp_path, capsys):
    cfg = tmp_path / "t.yaml"
    cfg.write_text("small_requests: 0.25\n")
    assert analysis_main(["diagnose", "--config", str(cfg), "--thresholds"]) == 0
    assert "0.25" in capsys.readouterr().out


def _store_with_blob(tmp_path: Path) -> str:
    spec = point(tmp_path)
    run = tmp_path / "runs" / spec.point_key
    run.mkdir(parents=True)
    write_json_atomic(run / "result.json", fake_result(spec))
    db = str(tmp_path / "r.db")
    assert analysis_main(["ingest", str(tmp_path / "runs"), "--db", db]) == 0
    return db


@pytest.mark.parametrize("rows", ["1e20", "100000000000000000000", "0", "-3", "2.5", "many"])
def test_a_row_count_past_any_store_is_refused_in_one_line(tmp_path, capsys, rows):
    db = _store_with_blob(tmp_path)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        analysis_main(["query", "--db", db, "--max-rows", rows, "SELECT 1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{rows!r} is not a row count: give a whole number from 1 to" in err


def test_a_row_count_in_exponent_form_is_read(tmp_path, capsys):
    db = _store_with_blob(tmp_path)
    capsys.readouterr()
    assert analysis_main(["query", "--db", db, "--max-rows", "1e3", "--format", "csv", "SELECT 7 AS x"]) == 0
    assert capsys.readouterr().out.split() == ["x", "7"]


@pytest.mark.parametrize("fmt", ["json", "csv", "table"])
def test_a_blob_column_is_shown_as_hex_in_every_format(tmp_path, capsys, fmt):
    db = _store_with_blob(tmp_path)
    capsys.readouterr()
    assert analysis_main(["query", "--db", db, "--format", fmt,
                          "SELECT X'00FF10' AS b, randomblob(2) AS r, 'text' AS t, 1 AS b"]) == 0
    out = capsys.readouterr().out
    assert "X'00FF10'" in out and "text" in out
    if fmt == "json":
        (row,) = json.loads(out)
        assert row["t"] == "text" and row["r"].startswith("X'") and len(row["r"]) == 7
        assert row["b"] == "X'00FF10'" and row["b_2"] == 1  # a name given twice: JSON keys are unique


def test_one_damaged_record_beside_good_ones_is_named_and_the_good_ones_are_stored(tmp_path, capsys):
    runs = tmp_path / "runs"
    good = [point(tmp_path, f"format={f}") for f in ("hdf5", "npz", "npy")]
    for i, spec in enumerate(good):
        (runs / spec.point_key).mkdir(parents=True)
        rec = fake_result(spec) if i != 1 else failure_record(spec.to_dict(), "boom")
        write_json_atomic(runs / spec.point_key / ("result.json" if i != 1 else "failure.json"), rec)
    bad = point(tmp_path, "format=tfrecord")
    damaged = fake_result(bad)
    damaged["epochs"] = [{"epoch": 0}]  # a record cut short: an epoch without its figures
    (runs / "a-damaged").mkdir()
    write_json_atomic(runs / "a-damaged" / "result.json", damaged)  # sorted first: ingest went no further
    bare = fake_result(bad)
    del bare["totals"]
    (runs / "b-bare").mkdir()
    write_json_atomic(runs / "b-bare" / "result.json", bare)
    db = tmp_path / "r.db"
    assert analysis_main(["ingest", str(runs), "--db", str(db)]) == 1
    out, err = capsys.readouterr()
    assert "5 records found" in out and "3 stored" in out and "2 damaged, not stored" in out
    one_error_line(err, "2 damaged record(s) not stored", "a-damaged", "the other records are stored")
    with sqlite3.connect(db) as c:
        stored = dict(c.execute("select point_key, status from points").fetchall())
    assert {k: v for k, v in stored.items() if v != "submitted"} == {
        good[0].point_key: "completed", good[1].point_key: "failed", good[2].point_key: "completed"}
    assert analysis_main(["ingest", str(runs), "--db", str(db)]) == 1  # idempotent for the good ones
    assert "0 stored, 3 already in the store" in capsys.readouterr().out


PASSWORDS = ["s3cret", "p@ss@word", "a:b:c", "sl/ash/ed", "m@x:/ed@"]


@pytest.mark.parametrize("password", PASSWORDS)
def test_every_password_in_a_url_is_masked_whole(password):
    from ddlio.secrets import mask

    assert mask(f"db=postgresql://u:{password}@h:5432/d x") == "db=postgresql://u:***@h:5432/d x"
    assert mask(f'"db": "postgresql://u:{password}@h/d"') == '"db": "postgresql://u:***@h/d"'
    both = f"db=postgresql://u:{password}@h/d,postgresql://v:{password}@h2/d"  # a sweep over two stores
    assert mask(both) == "db=postgresql://u:***@h/d,postgresql://v:***@h2/d"
    assert mask("sqlite:////data/a:b@c.db") == "sqlite:////data/a:b@c.db"  # a path, not a password


@pytest.mark.parametrize("command", [["--cfg", "job"], ["--cfg", "hydra"], ["--info", "config"]])
def test_hydra_printing_the_config_shows_no_password(tmp_path, command):
    import subprocess
    import sys

    from conftest import ROOT, cli_env

    password = "p@ss/w:rd@x"
    r = subprocess.run([sys.executable, str(ROOT / "sweep.py"), *command, f"db=postgresql://u:{password}@h/d",
                        f"data_root={tmp_path / 'data'}"], cwd=tmp_path, env=cli_env(tmp_path),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "postgresql://u:***@h/d" in r.stdout + r.stderr
    for part in ("p@ss", "ss/w", "w:rd", "rd@x"):
        assert part not in r.stdout + r.stderr
