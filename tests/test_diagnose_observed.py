"""Observed runs in the store: Darshan logs imported with ``import-darshan`` are diagnosed beside the emulated
points, each with the ddlio workload that reproduces it as the next sweep; a run imported before the store kept the
diagnosis counts has them read again from its log. The findings only observed runs have (redundant reads, per-file
imbalance) fire and stay quiet on SYNTHETIC records (the counts of :mod:`analysis.diagnose.darshan`, written by
hand, for what no wheel log shows)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

darshan = pytest.importorskip("darshan", reason="pydarshan is not installed: pip install 'ddlio[darshan]'")

from analysis.__main__ import main as analysis_main  # noqa: E402
from analysis.diagnose import Level, diagnose_subject  # noqa: E402
from analysis.diagnose.sources import observed_subject  # noqa: E402

BASE = Path(darshan.__file__).parent
IOR = BASE / "examples/example_logs/ior_hdf5_example.darshan"
MACSIO = next(BASE.glob("examples/example_logs/shane_macsio*.darshan"))


def test_imported_logs_are_diagnosed_from_the_store_with_the_reproducing_sweep(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    assert analysis_main(["import-darshan", str(IOR), str(MACSIO), "--db", db]) == 0
    capsys.readouterr()
    assert analysis_main(["diagnose", "--db", db, "--format", "json", "--fail-on", "high"]) == 4
    data = {d["label"].split()[1]: d for d in json.loads(capsys.readouterr().out)}
    assert {d["kind"] for d in data.values()} == {"observed"}
    ior = {f["code"]: f for f in data["ior"]["findings"]}
    assert ior["misaligned"]["level"] == "high" and ior["misaligned"]["drishti"] == "P08"
    assert ior["straggler-time"]["counted"] == {"files": 1}
    repro = data["ior"]["reproduce"]
    assert "import-darshan" in repro and "--workload-out conf/workload/" in repro
    assert "python sweep.py workload=" in repro
    assert analysis_main(["diagnose", "--db", db, "--where", "ranks == 16"]) == 0
    text = capsys.readouterr().out
    assert "macsio" in text and "ior job" not in text and "measure the fix before you change your job" in text


def test_a_run_imported_before_the_counts_were_kept_is_read_again_from_its_log(tmp_path, capsys):
    db = tmp_path / "r.db"
    assert analysis_main(["import-darshan", str(IOR), "--db", str(db)]) == 0
    with sqlite3.connect(db) as c:  # as an older import stored it: no "diagnose" counts in the record
        (text,) = c.execute("select result from points").fetchone()
        rec = json.loads(text)
        rec.pop("diagnose")
        c.execute("update points set result = ?", (json.dumps(rec),))
    capsys.readouterr()
    assert analysis_main(["diagnose", "--db", str(db), "--fail-on", "high"]) == 4
    assert "HIGH misaligned: 55 of 59 requests" in capsys.readouterr().out


def synthetic(**counts) -> dict:
    """A SYNTHETIC observed record: what analysis.darshan_log reads, with hand-written diagnosis counts."""
    base = {"reads": 100, "writes": 0, "bytes_read": 1 << 20, "below_max_offset": 1 << 20, "files_read": ["/d/a"],
            "shared_files": [], "read_imbalance": {}, "write_imbalance": {}}
    return {"log": "/nonexistent/app.darshan", "ranks": 4, "access": "fpp", "posix_reads": 100,
            "posix_bytes_read": 1 << 20, "files": ["/d/a"], "diagnose": {**base, **counts}}


@pytest.mark.parametrize(("code", "loud", "quiet"), [
    ("redundant-reads", {"bytes_read": 3 << 20}, {"bytes_read": 1 << 20}),
    ("imbalance-reads", {"read_imbalance": {"/d/a": 0.9}}, {"read_imbalance": {"/d/a": 0.1}}),
    ("random-reads", {"random_reads": 5000, "reads": 6000}, {"random_reads": 10, "reads": 6000}),
])
def test_observed_only_findings_fire_and_stay_quiet(code, loud, quiet):
    fired = {f.code: f for f in diagnose_subject(observed_subject("darshan-x", "x", synthetic(**loud))).findings}
    calm = {f.code: f for f in diagnose_subject(observed_subject("darshan-y", "y", synthetic(**quiet))).findings}
    assert fired[code].level >= Level.WARN and calm[code].level == Level.OK
    assert fired[code].value > fired[code].threshold >= calm[code].value


def test_a_log_that_is_not_one_is_bad_input(tmp_path, capsys):
    bad = tmp_path / "notes.darshan"
    bad.write_text("not a log")
    assert analysis_main(["diagnose", "--log", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "is not a readable Darshan log" in err and len(err.strip().splitlines()) == 1
