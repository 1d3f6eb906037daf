"""The store on a real SQLite file: idempotent ingest, the newest outcome is current and every one is history,
summary columns, claims."""

from __future__ import annotations

import copy
import sqlite3

import pandas as pd
import pytest

from analysis.query import SUMMARY_COLUMNS, epochs_frame, summary_frame
from ddlio.store import Store
from experiments.run import failure_record
from helpers import point


def fake_result(spec, bandwidth=100.0, finished="2026-01-01T00:00:00Z"):
    """A result record with the shape the kernel writes (numbers made up; the store does not judge them)."""
    epoch = {
        "epoch": 0, "samples": 64, "bytes_read": 1024, "bytes_planned": 1024, "read_ops": 64, "meta_ops": 2,
        "os_read_bytes": 1024, "io_time_slowest_s": 0.5, "io_time_mean_s": 0.4, "bandwidth_mib_s": bandwidth,
        "iops": 128.0, "wall_time_s": 1.0, "compute_time_s": 0.0, "samples_per_s": 64.0, "au": 0.0,
        "lat_p50_us": 10.0, "lat_p90_us": 20.0, "lat_p99_us": float("nan"), "cache": "cold",
        "residency_before": 1.0, "residency_after": 0.0, "cache_note": "", "hist": [0, 64], "ranks": [],
    }
    totals = {k: v for k, v in epoch.items() if k not in ("epoch", "hist", "ranks", "cache_note")}
    return {
        "kind": "ddlio.result", "point_key": spec.point_key, "point": spec.to_dict(), "ranks": 1,
        "nodes": ["n1"], "hosts": ["h"], "mpi_library": "MPICH", "totals": totals, "epochs": [epoch],
        "env": {"host": "h", "os": "Linux", "packages": {"numpy": "2"}, "git": {"commit": "abc", "dirty": False}},
        "fs": {"type": "ext4"}, "layout": {"applicable": False}, "finished_utc": finished,
    }


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    """A new store: a SQLite file, and (marked postgres) a fresh database on the test PostgreSQL server."""
    db = request.getfixturevalue("pg_url") if request.param == "postgresql" else str(tmp_path / "r.db")
    s = Store(db)
    yield s
    s.engine.dispose()


def rows(store, sql):
    """The rows of ``sql`` on the store's own database (SQLite or PostgreSQL)."""
    from sqlalchemy import text

    with store.engine.connect() as c:
        return [tuple(r) for r in c.execute(text(sql))]


def test_result_is_stored_once(tmp_path, store):
    spec = point(tmp_path)
    rec = fake_result(spec)
    assert store.record(rec) is True
    assert store.record(copy.deepcopy(rec)) is False  # same record again: nothing changes
    assert store.is_done(spec.point_key)
    df = summary_frame(store)
    assert len(df) == 1 and list(df.columns) == SUMMARY_COLUMNS
    row = df.iloc[0]
    got = (row.status, row.format, row.bandwidth_mib_s, row.hosts, row.cache)
    assert got == ("completed", "hdf5", 100.0, 1, "cold")
    assert pd.isna(row.lat_p99_us)  # NaN stored as NULL
    assert len(epochs_frame(store)) == 1
    assert rows(store, "select count(*) from epochs") == [(1,)]
    assert rows(store, "select git_commit from environments") == [("abc",)]
    if store.engine.dialect.name == "sqlite":
        with sqlite3.connect(tmp_path / "r.db") as c:  # a real SQLite file anyone can open
            assert c.execute("select count(*) from epochs").fetchone() == (1,)


def test_failure_is_recorded_then_a_retry_replaces_it(tmp_path, store):
    spec = point(tmp_path)
    store.record_submitted(spec.to_dict(), "123", str(tmp_path))
    store.record({**failure_record(spec.to_dict(), "LaunchError: kernel step failed\nrank 1 crashed"),
                  "finished_utc": "2026-01-01T00:00:00Z"})
    df = summary_frame(store)
    assert df.iloc[0].status == "failed" and "rank 1 crashed" in df.iloc[0].error
    assert not store.is_done(spec.point_key)
    store.record(fake_result(spec, finished="2026-01-02T00:00:00Z"))
    df = summary_frame(store)
    assert df.iloc[0].status == "completed" and pd.isna(df.iloc[0].error)


def test_a_newer_failure_is_current_and_the_measurement_stays_in_the_history(tmp_path, store):
    spec = point(tmp_path)
    store.record(fake_result(spec, finished="2026-01-01T00:00:00Z"))
    assert store.record(failure_record(spec.to_dict(), "later failure")) is True
    row = summary_frame(store).iloc[0]
    assert row.status == "failed" and row.error == "later failure" and pd.isna(row.bandwidth_mib_s)
    assert len(epochs_frame(store)) == 0  # the current state has no figures: they are the history's
    history = store.history(spec.point_key)
    assert [h["status"] for h in history] == ["completed", "failed"]
    assert history[0]["bandwidth_mib_s"] == 100.0 and row.measurement_id == history[1]["id"]
    with store.session() as s:
        from ddlio.store import Measurement

        kept = s.get(Measurement, history[0]["id"]).record
    assert kept["totals"]["bandwidth_mib_s"] == 100.0 and kept["epochs"][0]["hist"] == [0, 64]


def test_an_older_failure_joins_the_history_only(tmp_path, store):
    """Ingesting an earlier attempt's failure.json after a later measurement: history, not the current state."""
    spec = point(tmp_path)
    store.record(fake_result(spec, finished="2026-01-02T00:00:00Z"))
    old = {**failure_record(spec.to_dict(), "an earlier failure"), "finished_utc": "2026-01-01T00:00:00Z"}
    assert store.record(old) is True
    assert store.record(copy.deepcopy(old)) is False
    assert summary_frame(store).iloc[0].status == "completed"
    assert [h["status"] for h in store.history(spec.point_key)] == ["completed", "failed"]


def test_a_newer_measurement_replaces_the_older(tmp_path, store):
    spec = point(tmp_path)
    store.record(fake_result(spec, 100.0, "2026-01-01T00:00:00Z"))
    store.record(fake_result(spec, 200.0, "2026-01-02T00:00:00Z"))
    assert summary_frame(store).bandwidth_mib_s.tolist() == [200.0]
    assert len(epochs_frame(store)) == 1  # epochs replaced, not appended


def test_summary_and_ingest_commands(tmp_path, analysis):
    from experiments.dataset import write_json_atomic

    spec = point(tmp_path)
    run = tmp_path / "runs" / spec.point_key
    run.mkdir(parents=True)
    write_json_atomic(run / "result.json", fake_result(spec))
    other = point(tmp_path, "format=npz")
    (tmp_path / "runs" / other.point_key).mkdir()
    write_json_atomic(tmp_path / "runs" / other.point_key / "failure.json", failure_record(other.to_dict(), "boom"))
    p = analysis("ingest", str(tmp_path / "runs"), "--db", str(tmp_path / "r.db"))
    assert p.returncode == 0 and "2 stored" in p.stdout, p.stderr
    p = analysis("ingest", str(tmp_path / "runs"), "--db", str(tmp_path / "r.db"))
    assert "0 stored, 2 already in the store" in p.stdout
    csv = analysis("summary", "--db", str(tmp_path / "r.db"), "--format", "csv")
    df = pd.read_csv(pd.io.common.StringIO(csv.stdout))
    assert sorted(df.status) == ["completed", "failed"]
    table = analysis("summary", "--db", str(tmp_path / "r.db"))
    assert "2 points: 1 completed, 1 failed" in table.stdout and "boom" in table.stdout
    missing = analysis("summary", "--db", str(tmp_path / "nope.db"))
    assert missing.returncode == 2 and "no results store" in missing.stderr
    assert not (tmp_path / "nope.db").exists()


def test_a_store_from_an_older_ddlio_gains_the_new_columns(tmp_path):
    """A results.db written before a column existed keeps working: the column is added, old rows keep NULL."""
    db = tmp_path / "old.db"
    Store(str(db))
    with sqlite3.connect(db) as c:  # make it look like an older store: drop two later columns
        c.execute("ALTER TABLE epochs DROP COLUMN os_read_bytes")
        c.execute("ALTER TABLE points DROP COLUMN max_rss_kib")
    spec = point(tmp_path)
    store = Store(str(db))
    assert store.record(fake_result(spec))
    with sqlite3.connect(db) as c:
        assert c.execute("select os_read_bytes from epochs").fetchone() == (1024,)
        cols = [r[1] for r in c.execute("pragma table_info(points)")]
    assert "max_rss_kib" in cols


def test_points_measured_at_the_same_time_count_each_other(tmp_path, store):
    store.begin_sweep("s1", ["sweep.py"], [], set())
    spans = {"hdf5": (0.0, 10.0), "npz": (5.0, 15.0), "tfrecord": (20.0, 30.0)}
    for fmt, (a, b) in spans.items():
        spec = point(tmp_path, f"format={fmt}")
        store.record_submitted(spec.to_dict(), "1", str(tmp_path))
        store.record({**fake_result(spec), "started_unix": a, "finished_unix": b, "result_id": fmt})
    got = dict(rows(store, "select format, overlapping from points"))
    assert got == {"hdf5": 1, "npz": 1, "tfrecord": 0}


def test_a_point_is_claimed_by_one_driver_at_a_time(tmp_path, store):
    spec = point(tmp_path)
    assert store.claim(spec.to_dict(), "a" * 32, "h1", 11) is True
    assert store.lookup(spec.point_key)["status"] == "claimed"  # the row exists before any job does
    assert store.claim(spec.to_dict(), "b" * 32, "h2", 22) is False  # held
    assert store.claim(spec.to_dict(), "b" * 32, "h2", 22, takeover="c" * 32) is False  # not the holder's token
    assert store.claim(spec.to_dict(), "b" * 32, "h2", 22, takeover="a" * 32) is True  # taken over from a
    row = store.lookup(spec.point_key)
    assert (row["claim_token"], row["claim_host"], row["claim_pid"]) == ("b" * 32, "h2", 22)
    store.release("a" * 32, spec.point_key)  # a no longer holds it: nothing changes
    assert store.lookup(spec.point_key)["claim_token"] == "b" * 32
    store.release("b" * 32)
    assert store.lookup(spec.point_key)["claim_token"] is None
    assert store.claim(spec.to_dict(), "a" * 32, "h1", 11) is True


def test_the_file_system_layer_is_stored_and_an_older_store_gains_it(tmp_path):
    """posix_* and amplification land in points and epochs; a store from before them upgrades (old rows NULL),
    and its points read as source=ddlio."""
    db = tmp_path / "old.db"
    old = point(tmp_path, "format=bin")
    Store(str(db)).record_submitted(old.to_dict(), "1", str(tmp_path))  # a point stored before the columns existed
    with sqlite3.connect(db) as c:
        for col in ("posix_reads", "posix_bytes_read", "posix_read_time_s", "posix_size_hist", "amplification",
                    "source"):
            c.execute(f"ALTER TABLE points DROP COLUMN {col}")
        for col in ("posix_reads", "posix_bytes_read", "posix_read_time_s", "posix_size_hist", "amplification"):
            c.execute(f"ALTER TABLE epochs DROP COLUMN {col}")
    store = Store(str(db))
    spec = point(tmp_path)
    rec = fake_result(spec)
    fs = {"posix_reads": 70, "posix_bytes_read": 3072, "posix_read_time_s": 0.25,
          "posix_size_hist": [0, 10, 60, 0, 0, 0, 0, 0, 0, 0], "amplification": 3.0}
    rec["totals"].update(fs)
    rec["epochs"][0].update(fs)
    assert store.record(rec)
    df = summary_frame(store).set_index("point_key")
    assert (df.loc[spec.point_key, ["posix_reads", "posix_bytes_read", "amplification"]].tolist()
            == [70, 3072, 3.0])
    assert df.loc[old.point_key, "source"] == df.loc[spec.point_key, "source"] == "ddlio"
    assert pd.isna(df.loc[old.point_key, "amplification"])
    with sqlite3.connect(db) as c:
        assert c.execute("select source from points where point_key = ?", (old.point_key,)).fetchone() == (None,)
    with sqlite3.connect(db) as c:
        assert c.execute("select posix_reads, posix_size_hist from epochs").fetchone() == (
            70, "[0, 10, 60, 0, 0, 0, 0, 0, 0, 0]")

